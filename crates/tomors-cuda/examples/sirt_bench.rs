//! SIRT on the GPU: `cargo run --release -p tomors-cuda --example sirt_bench
//! [n] [angles] [iterations]` (needs a GPU; defaults 512 512 10). ASTRA's
//! counterpart is `../shared/bench/astra/run.sh sirt --n 512 --angles 512
//! --iters 10` (SIRT3D_CUDA, wall time of `run(aid, 10)` / 10, after a
//! 2-iteration warm-up run, data uploaded and downloaded within the run).
//!
//! Prints, for an n³ volume from `angles` parallel projections of n bins
//! over π (random sinogram values in [0, 1), as ASTRA's script):
//! - the forward and back projection kernels alone on device-resident data
//!   (CUDA events, one warm-up, median of 5): seconds and GU/s
//!   (voxels × projections / s);
//! - SIRT (row/column-sum weights = ASTRA's SIRT, λ = 1, x ≥ 0): seconds per
//!   iteration of the device-resident loop and host to host (sinogram upload,
//!   weights, iterations, volume download: the whole call / iterations), with
//!   the per-kernel split from CUDA events.
//!
//! Both pairs: the matched Joseph pair and the voxel pair (Joseph forward,
//! FBP's voxel-driven back projection with the sweep or tensor kernel, as
//! ASTRA's `SIRT3D_CUDA` pairs its projectors); `TOMORS_BENCH_PAIRS`
//! selects the SIRT runs (default `joseph;sweep;tensor`),
//! `TOMORS_BENCH_VOXEL` the voxel kernels timed alone (default
//! `sweep;tensor`; shapes as `tensor@x2,y1,...`).
//!
//! Environment: `TOMORS_BENCH_SKIP_KERNELS=1` / `TOMORS_BENCH_SKIP_SIRT=1`
//! skip a part; `TOMORS_SIRT_SLAB`, `TOMORS_SIRT_SG`, `TOMORS_SIRT_BSG`,
//! `TOMORS_SIRT_AP`, `TOMORS_SIRT_QUAD` (0/1) set the SIRT's
//! `GpuSirtOptions`; `TOMORS_TRACE=1` prints the phases of each call.

use std::time::Instant;

use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, Weighting};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::runtime::Event;
use tomors_cuda::{
    sirt_cuda, CudaBackend, CudaJoseph, GpuSirtOptions, JosephTuning, OnQueue, VoxelKernel,
};

/// Deterministic values in [0, 1) from a seed (xorshift), in parallel chunks.
fn random01(len: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    let mut v = vec![0f32; len];
    v.par_chunks_mut(1 << 20)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut s = (seed ^ (c as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                | 1;
            for x in chunk {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *x = (s >> 40) as f32 / (1u64 << 24) as f32;
            }
        });
    v
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("sirt_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let n = args.first().copied().unwrap_or(512);
    let na = args.get(1).copied().unwrap_or(512);
    let iters = args.get(2).copied().unwrap_or(10);
    tomors_cuda::device_count()?;
    let be = CudaBackend::new(0)?;
    let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let gu = (n * n * n) as f64 * na as f64 * 1e-9;
    println!("sirt_bench: {n}³ volume, {na} projections of {n} bins over π, {iters} iterations");

    // Kernels alone, device resident, for each slice group and rays per
    // thread (`TOMORS_BENCH_SKIP_KERNELS=1`: SIRT only).
    if !std::env::var("TOMORS_BENCH_SKIP_KERNELS").is_ok_and(|v| v == "1") {
        let op = CudaJoseph::new(&be, &geom, &grid, 8)?;
        println!("device: {}", op.context().name);
        let vol = Array3::from_shape_vec((n, n, n), random01(n * n * n, 1))?;
        let sino = Array3::from_shape_vec((n, na, n), random01(n * na * n, 2))?;
        let (v, _) = op.upload_volume(vol.view())?;
        let mut vt2 = op.alloc_volume(n)?;
        let (e0, e1) = (Event::new(op.context())?, Event::new(op.context())?);
        let time = |op: &CudaJoseph,
                    f: &mut dyn FnMut() -> tomors_cuda::Result<()>|
         -> tomors_cuda::Result<f64> {
            f()?;
            let mut ts = Vec::new();
            for _ in 0..5 {
                e0.record(op.stream())?;
                f()?;
                e1.record(op.stream())?;
                e1.synchronize()?;
                ts.push(e0.elapsed_ms(&e1)? as f64 * 1e-3);
            }
            Ok(median(ts))
        };
        // The default Joseph pair, then the voxel pair's back projections
        // (Joseph's forward is the same kernel): the whole back projection
        // (de-interleave, pack, FBP kernel, interleave) on resident data.
        // `TOMORS_BENCH_VOXEL`: the voxel kernels timed here (`;`-separated
        // `sweep`, `tensor`, `sweep@SPEC`, `tensor@SPEC`; default
        // `sweep;tensor`).
        let mut variants = vec![None];
        for k in std::env::var("TOMORS_BENCH_VOXEL")
            .unwrap_or_else(|_| "sweep;tensor".into())
            .split(';')
            .filter(|k| !k.trim().is_empty())
        {
            variants.push(Some(VoxelKernel::parse(k)?));
        }
        for voxel in variants {
            let mut op = CudaJoseph::tuned(&be, &geom, &grid, &JosephTuning::default())?;
            op.set_voxel_back(voxel)?;
            // Device vectors belong to the projector (queue) that made them:
            // upload this variant's own copies (outside the timing).
            let (v, vt) = op.upload_volume(vol.view())?;
            let s = op.upload_sinograms(sino.view())?;
            let mut out_s = op.alloc_sinograms(n)?;
            let mut out_v = op.alloc_volume(n)?;
            if voxel.is_none() {
                let fp = time(&op, &mut || op.forward_dev(&v, &vt, &mut out_s))?;
                println!(
                    "bench forward projection (jp_forward, default tuning): {fp:.4} s, {:.1} GU/s",
                    gu / fp
                );
            }
            let bp = time(&op, &mut || op.back_dev(&s, &mut out_v))?;
            if matches!(voxel, Some(VoxelKernel::Sweep)) && !op.set_voxel_fused_pack(false) {
                let unfused = time(&op, &mut || op.back_dev(&s, &mut out_v))?;
                println!(
                    "bench back projection (voxel-driven, FBP sweep kernel, de-interleave + FBP's \
                     pack_sweep instead of jp_pack_sweep2): {unfused:.4} s, {:.1} GU/s",
                    gu / unfused
                );
                op.set_voxel_fused_pack(true);
            }
            let kind = match voxel {
                None => "jp_back_quad, exact transpose".to_string(),
                Some(k) => format!(
                    "voxel-driven, FBP {} kernel with its packing and the interleave",
                    k.name()
                ),
            };
            println!(
                "bench back projection ({kind}): {bp:.4} s, {:.1} GU/s",
                gu / bp
            );
        }
        let tr = time(&op, &mut || op.transpose_dev(&v, &mut vt2))?;
        drop((vol, sino));
        println!("bench transpose of the volume: {tr:.5} s");
    }

    if std::env::var("TOMORS_BENCH_SKIP_SIRT").is_ok_and(|v| v == "1") {
        return Ok(());
    }
    // SIRT host to host.
    let sino = Array3::from_shape_vec((n, na, n), random01(n * na * n, 3))?;
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: iters,
        relaxation: Some(1.0),
        constraint: Constraint::non_negative(),
        tolerance: None,
        // `TOMORS_SIRT_TRACK=0`: no residual history (as ASTRA's run),
        // which skips the forward projection after the last update.
        track_residual: std::env::var("TOMORS_SIRT_TRACK").map_or(true, |v| v != "0"),
    };
    let warm = IterativeOptions {
        iterations: 2,
        ..options
    };
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    let gpu = GpuSirtOptions {
        slab: env("TOMORS_SIRT_SLAB").unwrap_or(0),
        slice_group: env("TOMORS_SIRT_SG").unwrap_or(0),
        back_slice_group: env("TOMORS_SIRT_BSG").unwrap_or(0),
        rays_per_thread: env("TOMORS_SIRT_AP").unwrap_or(0),
        back_quad: env("TOMORS_SIRT_QUAD").map(|v| v == 1),
        ..GpuSirtOptions::default()
    };
    println!(
        "sirt options: slab {} (0: automatic), slice groups {}/{} (0: default), rays per \
         thread {} (0: default), 2×2 back {:?} (None: default)",
        gpu.slab, gpu.slice_group, gpu.back_slice_group, gpu.rays_per_thread, gpu.back_quad
    );
    // `TOMORS_BENCH_PAIRS` (`;`-separated `joseph`, or a voxel kernel as in
    // `TOMORS_BENCH_VOXEL`; default `joseph;sweep;tensor`): the matched pair
    // and the voxel pair with each FBP kernel, in this order.
    let pairs =
        std::env::var("TOMORS_BENCH_PAIRS").unwrap_or_else(|_| "joseph;sweep;tensor".into());
    for pair in pairs.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let voxel = match pair {
            "joseph" => None,
            k => Some(VoxelKernel::parse(k)?),
        };
        let gpu = GpuSirtOptions { voxel, ..gpu };
        println!("sirt pair: {pair}");
        sirt_cuda(&be, &geom, &grid, sino.view(), None, &warm, &gpu, &|_| true)?;
        for rep in 0..2 {
            let t = Instant::now();
            let (res, st) = sirt_cuda(
                &be,
                &geom,
                &grid,
                sino.view(),
                None,
                &options,
                &gpu,
                &|_| true,
            )?;
            let total = t.elapsed().as_secs_f64();
            let it = res.iterations as f64;
            println!(
            "bench sirt {pair} rep {rep}: {:.4} s/iteration device-resident loop, {:.4} s/iteration host to \
             host ({total:.3} s for {} iterations: setup+upload {:.3} s, loop {:.3} s, download {:.3} s, \
             free {:.3} s, in the call {:.3} s); \
             per iteration: forward {:.4} s ({:.1} GU/s), back {:.4} s ({:.1} GU/s), update+residual \
             {:.4} s; final relative residual {:.4e}; {} slab(s), {} forward projections",
            st.loop_s / it,
            total / it,
            res.iterations,
            st.setup_s,
            st.loop_s,
            st.download_s,
            st.free_s,
            st.total_s,
            st.forward_s / st.forward_count as f64,
            gu * st.forward_count as f64 / st.forward_s,
            st.back_s / it,
            gu * it / st.back_s,
            st.elementwise_s / it,
            res.residuals.last().copied().unwrap_or(f64::NAN),
            st.slabs,
            st.forward_count
        );
        }
    }
    Ok(())
}
