//! Times the Rust side of `tomors.recon(proj, theta)` (FBP on the CPU) on a
//! `.npy` file, for the Python-overhead measurement of docs/python.md:
//! the same slab loop as `tomors._native.fbp` (rows transposed into
//! sinograms 32 at a time, `Backend::fbp` on each), without Python, after
//! the same untimed warm-up call.
//!
//! `cargo run --release -p tomors-py --example fbp_timing -- proj.npy theta.npy REPS [cpu|cuda]`
//! (backend as `tomors.recon(..., backend=...)`: `cuda` opens every GPU,
//! as the binding does) prints, per repetition, the wall-clock time and the process's CPU time
//! (user + system, all threads, from /proc/self/stat) in seconds, and the
//! time of freeing the volume afterwards (not part of the call's time) and
//! the minor page faults of the call.
//! `TOMORS_TIMING=1` prints the same phase times as the binding on stderr.

use std::sync::Arc;
use std::time::Instant;

use ndarray::{s, Array1, Array3};
use ndarray_npy::read_npy;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{check_finite, projections_to_sinograms_into};
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(4..=5).contains(&args.len()) {
        eprintln!("usage: fbp_timing PROJ.npy THETA.npy REPS [cpu|cuda]");
        std::process::exit(2);
    }
    let proj: Array3<f32> = read_npy(&args[1]).expect("projections [angle][row][col] float32");
    let theta: Array1<f32> = read_npy(&args[2]).expect("angles float32");
    let theta = theta.to_vec();
    let reps: usize = args[3].parse().expect("REPS");
    let (backend, gpus): (Arc<dyn Backend>, Option<Arc<tomors_cuda::MultiCudaBackend>>) =
        match args.get(4).map(String::as_str) {
            None | Some("cpu") => (Arc::new(CpuBackend::new()), None),
            Some("cuda") => {
                let n = tomors_cuda::device_count().expect("a usable GPU");
                let list = tomors_cuda::parse_devices(None, n).expect("devices");
                let gpus = Arc::new(
                    tomors_cuda::MultiCudaBackend::new(&list, tomors_cuda::CudaOptions::default())
                        .expect("the CUDA backend"),
                );
                (gpus.clone(), Some(gpus))
            }
            Some(other) => {
                eprintln!("unknown backend '{other}' (use cpu or cuda)");
                std::process::exit(2);
            }
        };
    // One untimed call on the same data, as scripts/python_overhead.py makes
    // before timing `tomors.recon` (thread pool, FFT plans, GPU buffers and
    // kernels).
    run(backend.as_ref(), gpus.as_deref(), &proj, &theta);
    for _ in 0..reps {
        let (t, cpu, faults) = (Instant::now(), cpu_seconds(), minor_faults());
        let out = run(backend.as_ref(), gpus.as_deref(), &proj, &theta);
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
        let faults = minor_faults() - faults;
        std::hint::black_box(&out);
        // Freeing the volume, timed apart (a Python caller frees it when
        // its last reference goes, outside the call).
        let t = Instant::now();
        drop(out);
        println!(
            "{wall:.4} {cpu:.2} {:.4} {faults}",
            t.elapsed().as_secs_f64()
        );
    }
}

/// The slab loop of `tomors._native.fbp`: rows transposed into sinograms 32
/// at a time (into one reused buffer), `Backend::fbp` on each; with `TOMORS_TIMING` set, the same
/// phase times as the binding's on stderr.
fn run(
    backend: &dyn Backend,
    gpus: Option<&tomors_cuda::MultiCudaBackend>,
    proj: &Array3<f32>,
    theta: &[f32],
) -> Array3<f32> {
    let timing = std::env::var("TOMORS_TIMING").is_ok_and(|v| !v.is_empty() && v != "0");
    let t0 = Instant::now();
    let mut last = t0;
    let mut laps: Vec<(&str, f64)> = Vec::new();
    let mut lap = |name: &'static str| {
        if timing {
            let now = Instant::now();
            let dt = (now - last).as_secs_f64();
            last = now;
            match laps.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += dt,
                None => laps.push((name, dt)),
            }
        }
    };
    let (na, nr, nb) = proj.dim();
    check_finite(proj.view(), "the projections").expect("finite");
    lap("check_finite");
    let g = ParallelGeometry::new(theta.to_vec(), nb).expect("geometry");
    assert_eq!(g.n_angles(), na);
    let grid = SliceGrid::for_geometry(&g);
    lap("backend");
    let mut out = Array3::<f32>::zeros((nr, grid.ny, grid.nx));
    let mut buf = Array3::<f32>::zeros((32.min(nr), na, nb));
    lap("alloc");
    let mut stages = [0f64; 7];
    let mut start = 0;
    while start < nr {
        let end = (start + 32).min(nr);
        projections_to_sinograms_into(
            proj.view(),
            start..end,
            buf.slice_mut(s![..end - start, .., ..]),
        )
        .expect("sinograms");
        let sino = buf.slice(s![..end - start, .., ..]);
        lap("sinograms");
        backend
            .fbp(
                sino,
                &g,
                &grid,
                &FilterSpec::default(),
                Interpolation::Linear,
                out.slice_mut(s![start..end, .., ..]),
            )
            .expect("fbp");
        lap("backend.fbp");
        if let (true, Some(gpus)) = (timing, gpus) {
            for st in gpus.last_stats() {
                for (acc, v) in stages.iter_mut().zip([
                    st.wall_ms,
                    st.host_in_ms,
                    st.upload_ms,
                    st.filter_ms,
                    st.backproject_ms,
                    st.download_ms,
                    st.host_out_ms,
                ]) {
                    *acc += v;
                }
            }
        }
        start = end;
        lap("progress");
    }
    if timing {
        let laps: Vec<String> = laps.iter().map(|(n, t)| format!("{n} {t:.4}")).collect();
        let [wall, hin, up, filt, bp, down, hout] = stages;
        eprintln!(
            "rust timing fbp: total {:.4} s; {}; GPU pipeline (ms, summed over devices): wall \
             {wall:.1}, host in {hin:.1}, upload {up:.1}, filter {filt:.1}, back projection \
             {bp:.1}, download {down:.1}, host out {hout:.1}",
            t0.elapsed().as_secs_f64(),
            laps.join(", ")
        );
    }
    out
}

/// Minor page faults of this process so far (all threads), from
/// /proc/self/stat (first touches of fresh memory).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|r| r.1).unwrap_or("");
    // minflt is the 10th field, the 8th after the command name.
    rest.split_whitespace()
        .nth(7)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of this process (all threads) from /proc/self/stat,
/// in seconds (clock ticks of 1/100 s, the Linux default).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the
    // 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map(|r| r.1).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}
