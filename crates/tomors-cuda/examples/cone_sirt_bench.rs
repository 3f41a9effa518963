//! Cone-beam Joseph projector and SIRT on the GPU:
//! `cargo run --release -p tomors-cuda --example cone_sirt_bench [n]
//! [angles] [iterations] [reps]` (needs a GPU; defaults 256 360 5 3; 0
//! iterations: the projectors only).
//!
//! Geometry: an n³ volume (fitted to the detector) from `angles`
//! projections over 2π on an n × n detector of unit pixels, cone angle 10°
//! (SDD = (n/2)/tan 5°, SOD = SDD/1.463), random projection values in
//! [0, 1). ASTRA's counterpart (same geometry, SIRT3D_CUDA and the
//! FP3D/BP3D kernels on GPU-resident data) is `scripts/astra_cone_sirt.py`.
//!
//! Prints one line per measurement:
//! - forward and back projection alone on device-resident data (CUDA
//!   events, one warm-up, median of `reps`): seconds and GU/s
//!   (voxels × projections / s);
//!   The back projections: Joseph's transpose (merged and plain atomics)
//!   and the voxel-driven one (`ConeBackProjector::Voxel`: weight and
//!   pack, then FDK's texture kernel), and the voxel pair's forward (a 3D
//!   texture of the volume; folded and unfolded);
//! - SIRT (row/column-sum weights = ASTRA's SIRT, λ = 1, x ≥ 0) with the
//!   matched Joseph pair and with the voxel pair (Joseph forward, voxel
//!   back: unmatched, as ASTRA's SIRT3D_CUDA): seconds per iteration of the
//!   device-resident loop, the kernel split, and host to host (the whole
//!   call / iterations). `TOMORS_SIRT_PAIRS=voxel` (or `joseph`) runs one
//!   pair only.

mod common;

use common::{cone10, median, random01, sirt_options, usize_args};
use ndarray::Array3;
use tomors_core::iterative::IterativeOptions;
use tomors_cuda::runtime::Event;
use tomors_cuda::{cone_sirt_cuda_with, ConeBackProjector, CudaBackend, CudaConeJoseph, OnQueue};

fn main() {
    if let Err(e) = run() {
        eprintln!("cone_sirt_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = usize_args()?;
    let n = args.first().copied().unwrap_or(256);
    let na = args.get(1).copied().unwrap_or(360);
    let iters = args.get(2).copied().unwrap_or(5);
    let reps = args.get(3).copied().unwrap_or(3).max(1);
    let (g, v, sod, sdd) = cone10(n, na)?;
    println!(
        "geometry: {n}³ volume (voxel {:.6}), {na} projections of {n}², SOD {sod:.3}, ODD {:.3}, \
         cone angle {:.2}°",
        v.voxel_size,
        sdd - sod,
        g.cone_angle().to_degrees()
    );
    let be = CudaBackend::new(0)?;
    let gu = (n * n * n) as f64 * na as f64 / 1e9;
    let b = Array3::from_shape_vec((na, n, n), random01(na * n * n, 2))?;
    // `TOMORS_BENCH_SKIP_KERNELS=1`: SIRT only.
    if !std::env::var("TOMORS_BENCH_SKIP_KERNELS").is_ok_and(|v| v == "1") {
        let t = std::time::Instant::now();
        let mut op = CudaConeJoseph::new(&be, &g, &v)?;
        println!(
            "projector setup (module load/compile): {:.3} s",
            t.elapsed().as_secs_f64()
        );
        let x = Array3::from_shape_vec((n, n, n), random01(n * n * n, 1))?;
        let xd = op.upload_volume(x.view())?;
        let bd = op.upload_projections(b.view())?;
        let mut pd = op.alloc_projections()?;
        let mut vd = op.alloc_volume()?;
        let (e0, e1) = (Event::new(op.context())?, Event::new(op.context())?);
        let time = |op: &CudaConeJoseph,
                    f: &mut dyn FnMut(&CudaConeJoseph) -> tomors_cuda::Result<()>|
         -> tomors_cuda::Result<f64> {
            f(op)?;
            op.stream().synchronize()?;
            let mut ts = Vec::new();
            for _ in 0..reps {
                e0.record(op.stream())?;
                f(op)?;
                e1.record(op.stream())?;
                e1.synchronize()?;
                ts.push(e0.elapsed_ms(&e1)? as f64 * 1e-3);
            }
            Ok(median(ts))
        };
        let tf = time(&op, &mut |op| op.forward_dev(&xd, &mut pd))?;
        println!(
            "forward: {tf:.4} s, {:.1} GU/s (n {n}, angles {na})",
            gu / tf
        );
        let default = op.merged_back();
        for merged in [default, !default] {
            op.set_merged_back(merged);
            let tb = time(&op, &mut |op| op.back_dev(&bd, &mut vd))?;
            println!(
                "back{}: {tb:.4} s, {:.1} GU/s (n {n}, angles {na})",
                if merged { " (merged)" } else { " (plain)" },
                gu / tb
            );
        }
        drop((op, xd, bd, pd, vd));
        let t = std::time::Instant::now();
        let vop = CudaConeJoseph::with_back(&be, &g, &v, ConeBackProjector::Voxel)?;
        println!(
            "voxel projector setup (module load/compile, textures): {:.3} s",
            t.elapsed().as_secs_f64()
        );
        // Device vectors belong to the projector (queue) that made them.
        let xd = vop.upload_volume(x.view())?;
        let bd = vop.upload_projections(b.view())?;
        let mut pd = vop.alloc_projections()?;
        let mut vd = vop.alloc_volume()?;
        // The folded kernels (the default where the geometry allows) and the
        // unfolded ones, on the same data.
        let mut vop = vop;
        let fold_default = vop.folded().0;
        for fold in [fold_default, !fold_default] {
            vop.set_fold(fold)?;
            let (ff, fb) = vop.folded();
            let tb = time(&vop, &mut |op| op.back_dev(&bd, &mut vd))?;
            println!(
                "back (voxel, folded {fb}): {tb:.4} s, {:.1} GU/s (n {n}, angles {na})",
                gu / tb
            );
            let tf = time(&vop, &mut |op| op.forward_dev(&xd, &mut pd))?;
            println!(
                "forward (voxel pair, texture {}, folded {ff}): {tf:.4} s, {:.1} GU/s (n {n}, \
                 angles {na})",
                vop.texture_forward(),
                gu / tf
            );
            let tr = time(&vop, &mut |op| op.row_sums(false).map(drop))?;
            println!("row sums (host to host, folded {ff}): {tr:.4} s");
        }
        drop((xd, bd, pd, vd, vop));
    }
    if iters == 0 {
        return Ok(());
    }

    // `TOMORS_SIRT_TRACK=0`: no residual history (as ASTRA's run), which
    // skips the forward projection after the last update.
    let track = std::env::var("TOMORS_SIRT_TRACK").map_or(true, |v| v != "0");
    let options = sirt_options(iters, track);
    let progress = |_: &tomors_cuda::iterative::GpuIteration| true;
    let only = std::env::var("TOMORS_SIRT_PAIRS").unwrap_or_default();
    for back in [ConeBackProjector::Joseph, ConeBackProjector::Voxel] {
        let name = match back {
            ConeBackProjector::Joseph => "joseph",
            ConeBackProjector::Voxel => "voxel",
        };
        if !only.is_empty() && only != name {
            continue;
        }
        // One warm-up call of 2 iterations first (as ASTRA's script does),
        // then 2 timed calls.
        let warm = IterativeOptions {
            iterations: 2,
            ..options
        };
        cone_sirt_cuda_with(&be, &g, &v, b.view(), None, &warm, back, &progress)?;
        for rep in 0..2 {
            let t = std::time::Instant::now();
            let (res, st) =
                cone_sirt_cuda_with(&be, &g, &v, b.view(), None, &options, back, &progress)?;
            let wall = t.elapsed().as_secs_f64();
            let it = res.iterations.max(1) as f64;
            println!(
                "sirt ({} pair{}) rep {rep}: {:.4} s/iteration device loop (forward {:.4}, back {:.4}, \
                 element-wise {:.4} s per iteration), {:.4} s/iteration host to host (setup {:.3} s, \
                 download {:.3} s, total {:.3} s, {} iterations, {} forward projections; wall \
                 time of the call {:.4} s per iteration), last residual {:.4e}",
                name,
                match back {
                    ConeBackProjector::Joseph => ", merged back",
                    ConeBackProjector::Voxel => "",
                },
                st.loop_s / it,
                st.forward_s / st.forward_count.max(1) as f64,
                st.back_s / it,
                st.elementwise_s / it,
                st.total_s / it,
                st.setup_s,
                st.download_s,
                st.total_s,
                res.iterations,
                st.forward_count,
                wall / it,
                res.residuals.last().copied().unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}
