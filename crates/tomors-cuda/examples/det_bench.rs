//! The cost of the deterministic cone-beam back projection (issue 16):
//! `cargo run --release -p tomors-cuda --example det_bench [n] [angles]
//! [iterations] [reps]` (needs a GPU; defaults 256 360 5 5).
//!
//! Geometry as `cone_sirt_bench` (an n³ volume from `angles` projections of
//! n², cone angle 10°, random projection values in [0, 1)). Prints, for the
//! Joseph pair's back projection on device-resident data (CUDA events, one
//! warm-up, median of `reps`): the default (float atomics, merged), the
//! plain float atomics, and the deterministic mode (64-bit fixed-point
//! integer atomics); whether two back projections of each mode gave the
//! same bits; and SIRT (row/column sums, λ = 1, x ≥ 0) per iteration host
//! to host (the whole call / iterations) in the default and the
//! deterministic mode.

mod common;

use common::{cone10, median, random01_serial as random01, sirt_options, usize_args};
use ndarray::Array3;
use tomors_cuda::runtime::Event;
use tomors_cuda::{cone_sirt_cuda_opts, ConeGpuOptions, CudaBackend, CudaConeJoseph, OnQueue};

fn main() {
    if let Err(e) = run() {
        eprintln!("det_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = usize_args()?;
    let n = args.first().copied().unwrap_or(256);
    let na = args.get(1).copied().unwrap_or(360);
    let iters = args.get(2).copied().unwrap_or(5);
    let reps = args.get(3).copied().unwrap_or(5).max(1);
    let (g, v, _, _) = cone10(n, na)?;
    println!("geometry: {n}³ volume, {na} projections of {n}², cone angle 10°");
    let be = CudaBackend::new(0)?;
    let gu = (n * n * n) as f64 * na as f64 / 1e9;
    let mut op = CudaConeJoseph::new(&be, &g, &v)?;
    let b = Array3::from_shape_vec((na, n, n), random01(na * n * n, 2))?;
    let bd = op.upload_projections(b.view())?;
    let mut vd = op.alloc_volume()?;
    let (e0, e1) = (Event::new(op.context())?, Event::new(op.context())?);
    for (name, merged, det) in [
        ("default (float atomics, merged)", true, false),
        ("plain float atomics", false, false),
        ("deterministic (fixed-point integer atomics)", false, true),
    ] {
        op.set_merged_back(merged);
        op.set_deterministic(det)?;
        op.back_dev(&bd, &mut vd)?;
        op.stream().synchronize()?;
        let first = op.download(&vd)?;
        let mut ts = Vec::new();
        for _ in 0..reps {
            e0.record(op.stream())?;
            op.back_dev(&bd, &mut vd)?;
            e1.record(op.stream())?;
            e1.synchronize()?;
            ts.push(e0.elapsed_ms(&e1)? as f64 * 1e-3);
        }
        let last = op.download(&vd)?;
        let same = first
            .iter()
            .zip(last.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        let t = median(ts);
        println!(
            "back {name}: {t:.4} s, {:.1} GU/s (n {n}, angles {na}); two runs bit-identical: {same}",
            gu / t
        );
    }
    drop((op, bd, vd));
    if iters == 0 {
        return Ok(());
    }
    let options = sirt_options(iters, true);
    let mut results = Vec::new();
    for det in [false, true, true] {
        let gpu = ConeGpuOptions {
            deterministic: det,
            ..ConeGpuOptions::default()
        };
        let t = std::time::Instant::now();
        let (res, st) =
            cone_sirt_cuda_opts(&be, &g, &v, b.view(), None, &options, &gpu, &|_| true)?;
        let wall = t.elapsed().as_secs_f64();
        let it = res.iterations.max(1) as f64;
        println!(
            "sirt (joseph pair, {}): {:.4} s/iteration host to host ({wall:.3} s for {} iterations), \
             device loop {:.4} s/iteration (back {:.4} s/iteration), last residual {:.6e}",
            if det { "deterministic" } else { "default" },
            wall / it,
            res.iterations,
            st.loop_s / it,
            st.back_s / it,
            res.residuals.last().copied().unwrap_or(f64::NAN)
        );
        results.push(res.x);
    }
    let same = results[1]
        .iter()
        .zip(results[2].iter())
        .all(|(a, b)| a.to_bits() == b.to_bits());
    let diff = results[0]
        .iter()
        .zip(results[1].iter())
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!(
        "sirt: two deterministic runs bit-identical: {same}; default vs deterministic: {diff} of {} \
         voxels differ in their bits",
        results[0].len()
    );
    Ok(())
}
