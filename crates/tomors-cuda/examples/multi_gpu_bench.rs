//! One GPU against several in one call, host to host, warm (library calls):
//!
//! - parallel FBP of N slices of N² from N angles (Ram-Lak, linear;
//!   `CudaBackend::fbp` vs `MultiCudaBackend::fbp`), default N = 2048;
//! - cone FDK of M³ from A projections of M² (SOD 2M, ODD M, unit pixels,
//!   voxel 0.55: the volume's shadow fills the detector;
//!   `CudaBackend::fdk_device` vs `MultiCudaBackend::fdk_multi`),
//!   default M = 1024, A = 1440;
//!
//! printing the times, the speed-ups and the relative L2 distance (and
//! largest difference) between the one-GPU and the several-GPU volumes.
//!
//! ```text
//! cargo run --release -p tomors-cuda --example multi_gpu_bench -- \
//!     [--fbp N] [--fdk M] [--angles A] [--devices 0,1] [--reps R]
//! ```
//!
//! `multi_gpu_bench --compare A.npy B.npy` compares two f32 volumes instead.
//! `--fbp 0` / `--fdk 0` skip a part; `--reps` timed FDK calls per side
//! (default 3; FBP: one timed call after a warm-up on full slabs). With one
//! device the several-GPU runs are skipped with a message.

use std::f64::consts::PI;
use std::time::Instant;

use ndarray::{s, Array3, ArrayView3, ArrayViewMut3, Axis};
use rayon::prelude::*;
use tomors_core::cone::{ConeGeometry, ConeVolume, FdkOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::{CudaBackend, CudaOptions, MultiCudaBackend};

type R<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    fbp: usize,
    fdk: usize,
    angles: usize,
    devices: Option<String>,
    reps: usize,
}

fn args() -> R<Args> {
    let mut a = Args {
        fbp: 2048,
        fdk: 1024,
        angles: 1440,
        devices: None,
        reps: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--fbp" => a.fbp = val()?.parse()?,
            "--fdk" => a.fdk = val()?.parse()?,
            "--angles" => a.angles = val()?.parse()?,
            "--devices" => a.devices = Some(val()?),
            "--reps" => a.reps = val()?.parse::<usize>()?.max(1),
            _ => return Err(format!("unknown argument {flag}").into()),
        }
    }
    Ok(a)
}

/// Deterministic pseudo-random values in [0.25, 1.25), in parallel.
fn fill(v: &mut [f32], seed: u64) {
    v.par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut s = seed ^ ((c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for x in chunk {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *x = 0.25 + (s >> 40) as f32 / (1u64 << 24) as f32;
            }
        });
}

/// A `[k][r][c]` array with every page touched (so no timed run pays the
/// first-touch page faults of its output).
fn touched(k: usize, r: usize, c: usize) -> Array3<f32> {
    let mut a = Array3::<f32>::zeros((k, r, c));
    a.as_slice_mut()
        .expect("contiguous")
        .par_chunks_mut(1 << 16)
        .for_each(|c| c.fill(1.0));
    a
}

/// Relative L2 distance of `b` from `a` and the largest |a − b| (f64 sums,
/// in parallel).
fn compare(a: ArrayView3<'_, f32>, b: ArrayView3<'_, f32>) -> (f64, f64) {
    let (a, b) = (
        a.as_slice().expect("contiguous"),
        b.as_slice().expect("contiguous"),
    );
    let (num, den, max) = a
        .par_chunks(1 << 16)
        .zip(b.par_chunks(1 << 16))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .fold((0f64, 0f64, 0f64), |(n, d, m), (&x, &y)| {
                    let e = x as f64 - y as f64;
                    (n + e * e, d + (x as f64).powi(2), m.max(e.abs()))
                })
        })
        .reduce(
            || (0.0, 0.0, 0.0),
            |p, q| (p.0 + q.0, p.1 + q.1, p.2.max(q.2)),
        );
    ((num / den.max(1e-300)).sqrt(), max)
}

/// Available host memory (bytes) from /proc/meminfo, if readable.
fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn gib(b: usize) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Wall time of one FBP after a warm-up on the first `warm` slices.
fn timed_fbp(
    backend: &dyn Backend,
    sino: ArrayView3<'_, f32>,
    warm: usize,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    out: ArrayViewMut3<'_, f32>,
) -> R<f64> {
    let (f, i) = (FilterSpec::default(), Interpolation::Linear);
    let w = sino.slice(s![..warm, .., ..]);
    let mut o = Array3::<f32>::zeros((warm, grid.ny, grid.nx));
    backend.fbp(w, geom, grid, &f, i, o.view_mut())?;
    let t = Instant::now();
    backend.fbp(sino, geom, grid, &f, i, out)?;
    Ok(t.elapsed().as_secs_f64())
}

fn fbp_part(n: usize, devices: &[usize]) -> R<()> {
    let bytes = n * n * n * 4;
    println!(
        "== FBP: {n} slices of {n}² from {n} angles, host to host (sinograms {:.1} GiB, volume {:.1} GiB)",
        gib(bytes),
        gib(bytes)
    );
    let geom = ParallelGeometry::new(uniform_angles(n, PI as f32), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let t = Instant::now();
    let mut sino = Array3::<f32>::zeros((n, n, n));
    fill(sino.as_slice_mut().expect("contiguous"), 7);
    let mut one = touched(n, n, n);
    println!("data made in {:.1} s", t.elapsed().as_secs_f64());
    let be = CudaBackend::with_options(devices[0], CudaOptions::default())?;
    let t1 = timed_fbp(&be, sino.view(), n.min(32), &geom, &grid, one.view_mut())?;
    println!("1 GPU  ({}): {t1:.3} s; {}", be.name(), be.last_stats());
    drop(be);
    if devices.len() < 2 {
        println!("skipping FBP on several GPUs: one device");
        return Ok(());
    }
    // The second volume, or (short of host memory) every 8th slice of the
    // first kept before it is overwritten.
    let full = mem_available().is_none_or(|m| (bytes as u64) * 5 / 4 < m);
    let kept = (!full).then(|| one.slice(s![..;8, .., ..]).to_owned());
    let (mut two, one) = if full {
        (touched(n, n, n), Some(one))
    } else {
        (one, None)
    };
    let multi = MultiCudaBackend::new(devices, CudaOptions::default())?;
    let warm = n.min(128 * devices.len());
    let t2 = timed_fbp(&multi, sino.view(), warm, &geom, &grid, two.view_mut())?;
    println!("{} GPUs ({}): {t2:.3} s", devices.len(), multi.name());
    for st in multi.last_stats() {
        println!("  {st}");
    }
    let (e, m) = match (&one, &kept) {
        (Some(o), _) => compare(o.view(), two.view()),
        (None, Some(k)) => compare(k.view(), two.slice(s![..;8, .., ..]).to_owned().view()),
        (None, None) => unreachable!("one of the two is kept"),
    };
    println!(
        "FBP speed-up {:.2}× on {} GPUs; {} GPUs vs 1: rel L2 {e:.3e}, max |diff| {m:.3e}{}",
        t1 / t2,
        devices.len(),
        devices.len(),
        if full { "" } else { " (every 8th slice)" }
    );
    Ok(())
}

fn fdk_part(n: usize, na: usize, devices: &[usize], reps: usize) -> R<()> {
    let g = ConeGeometry::new(
        (0..na)
            .map(|i| (2.0 * PI * i as f64 / na as f64) as f32)
            .collect(),
        2.0 * n as f64,
        n as f64,
        n,
        n,
        1.0,
        1.0,
    )?;
    let v = ConeVolume::new(n, n, n, 0.55)?;
    g.check_volume(&v)?;
    println!(
        "== FDK: {n}³ (voxel 0.55) from {na} projections of {n}² (SOD {}, ODD {}, cone angle {:.1}°), host to host \
         (projections {:.1} GiB, volume {:.1} GiB)",
        g.sod(),
        g.odd(),
        g.cone_angle().to_degrees(),
        gib(na * n * n * 4),
        gib(n * n * n * 4)
    );
    let t = Instant::now();
    let mut p = Array3::<f32>::zeros((na, n, n));
    fill(p.as_slice_mut().expect("contiguous"), 11);
    let mut one = touched(n, n, n);
    println!("data made in {:.1} s", t.elapsed().as_secs_f64());
    let opts = FdkOptions::default();
    let gu = (n * n * n * na) as f64 * 1e-9;
    let be = CudaBackend::with_options(devices[0], CudaOptions::default())?;
    let mut t1 = Vec::new();
    for rep in 0..=reps {
        let t = Instant::now();
        let st = be.fdk_device(p.view(), &g, &v, &opts, one.view_mut())?;
        let s = t.elapsed().as_secs_f64();
        let what = if rep == 0 { "warm-up" } else { "timed" };
        println!(
            "1 GPU  rep {rep} ({what}): {s:.3} s, {:.0} GU/s; {st}",
            gu / s
        );
        if rep > 0 {
            t1.push(s);
        }
    }
    drop(be);
    if devices.len() < 2 {
        println!("skipping FDK on several GPUs: one device");
        return Ok(());
    }
    let mut two = touched(n, n, n);
    let multi = MultiCudaBackend::new(devices, CudaOptions::default())?;
    let mut t2 = Vec::new();
    for rep in 0..=reps {
        let t = Instant::now();
        let parts = multi.fdk_multi(p.view(), &g, &v, &opts, two.view_mut())?;
        let s = t.elapsed().as_secs_f64();
        let what = if rep == 0 { "warm-up" } else { "timed" };
        println!(
            "{} GPUs rep {rep} ({what}): {s:.3} s, {:.0} GU/s",
            devices.len(),
            gu / s
        );
        for (part, st) in &parts {
            println!(
                "  device {} slices {:?}, detector rows {:?} ({} of {n}): {st}",
                devices[part.device],
                part.z,
                part.rows,
                part.rows.len()
            );
        }
        if rep > 0 {
            t2.push(s);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m1, m2) = (med(&mut t1), med(&mut t2));
    let (e, m) = compare(one.view(), two.view());
    let (e_mid, _) = compare(
        one.index_axis(Axis(0), n / 2).insert_axis(Axis(0)),
        two.index_axis(Axis(0), n / 2).insert_axis(Axis(0)),
    );
    println!(
        "FDK medians: 1 GPU {m1:.3} s, {} GPUs {m2:.3} s: speed-up {:.2}×; {} GPUs vs 1: rel L2 {e:.3e} \
         (central slice {e_mid:.3e}), max |diff| {m:.3e}",
        devices.len(),
        m1 / m2,
        devices.len()
    );
    Ok(())
}

/// The f32 values of a little-endian `<f4` .npy file (C order).
fn read_npy(path: &str) -> R<Vec<f32>> {
    let d = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if d.len() < 10 || &d[..6] != b"\x93NUMPY" {
        return Err(format!("{path}: not a .npy file").into());
    }
    let (hlen, at) = match d[6] {
        1 => (u16::from_le_bytes([d[8], d[9]]) as usize, 10),
        _ => (u32::from_le_bytes([d[8], d[9], d[10], d[11]]) as usize, 12),
    };
    let header = String::from_utf8_lossy(&d[at..at + hlen]);
    if !header.contains("<f4") || header.contains("'fortran_order': True") {
        return Err(format!("{path}: not a C-order <f4 array: {header}").into());
    }
    Ok(d[at + hlen..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// `--compare A B`: prints "A B: IDENTICAL" or the relative L2 distance of
/// B from A and the largest difference (what scripts/mpi-gpu-check.sh
/// prints, without NumPy).
fn compare_files(a: &str, b: &str) -> R<()> {
    let (x, y) = (read_npy(a)?, read_npy(b)?);
    if x.len() != y.len() {
        return Err(format!("{a} has {} values, {b} {}", x.len(), y.len()).into());
    }
    if x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()) {
        println!("{a} {b}: IDENTICAL");
        return Ok(());
    }
    let n = x.len();
    let (e, m) = compare(
        ArrayView3::from_shape((1, 1, n), &x)?,
        ArrayView3::from_shape((1, 1, n), &y)?,
    );
    println!("{a} {b} DIFFER: rel L2 {e:.3e} max {m:.3e}");
    Ok(())
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.len() == 4 && argv[1] == "--compare" {
        if let Err(e) = compare_files(&argv[2], &argv[3]) {
            eprintln!("multi_gpu_bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = (|| -> R<()> {
        let a = args()?;
        let available = tomors_cuda::device_count()?;
        let devices = tomors_cuda::parse_devices(a.devices.as_deref(), available)?;
        println!(
            "multi_gpu_bench: devices {devices:?} of {available}; host memory available {}",
            mem_available().map_or("unknown".into(), |m| format!(
                "{:.1} GiB",
                m as f64 / (1u64 << 30) as f64
            ))
        );
        if a.fdk > 0 {
            fdk_part(a.fdk, a.angles, &devices, a.reps)?;
        }
        if a.fbp > 0 {
            fbp_part(a.fbp, &devices)?;
        }
        Ok(())
    })() {
        eprintln!("multi_gpu_bench: {e}");
        std::process::exit(1);
    }
}
