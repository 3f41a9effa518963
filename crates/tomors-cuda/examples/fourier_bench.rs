//! Benchmark and accuracy check of the GPU gridding (fourier) method.
//!
//! ```text
//! fourier_bench [--sizes 512,1024,2048] [--slices 256] [--width 6] [--reps 3]
//!               [--host pageable|pinned|both] [--gather warp,point] [--widths 4,6]
//!               [--configs warp:4,point:6] [--disc 2048] [--shepp 2048] [--cpu-size 512]
//!               [--register-gb 8]
//! ```
//! - speed: for each size n (bins = angles = slice side, angles over π), a
//!   warm-up on 2 slices (compilation, plans, buffers), then `reps` timed
//!   host-to-host reconstructions of `slices` pseudo-random sinograms from
//!   pageable memory into pageable memory (wall clock around the library
//!   call), with the stage times; the median is reported with the time
//!   scaled to 2048 slices; `--host pinned` puts input and output in
//!   page-locked host memory (copied by DMA without staging);
//! - `--disc n`: tomocupy's disc test (a centred uniform disc of radius
//!   0.4 n, analytic point-sampled sinogram, n angles, RMS of value − 1 inside
//!   0.75 r), for the fourier method at W = 4, 5, 6 and the direct FBP (CPU,
//!   f32, linear);
//! - `--shepp n`: exact modified Shepp–Logan projections, NRMSE inside the
//!   0.45 disc of fourier and direct (CPU f32) vs the rasterised phantom and
//!   of fourier vs direct, plus the RMS difference over the phantom's range;
//! - `--cpu-size n`: CPU time of the fourier method on 8 slices of n²;
//! - `--register-gb g`: time of page-locking g GB of touched pageable memory
//!   in place (`cuMemHostRegister`), whole and in slab-sized pieces.

use std::time::Instant;

use ndarray::{s, Array2, Array3, Axis};
use rayon::prelude::*;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::fourier::{fourier_sinograms, FourierOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::fourier::GatherKind;
use tomors_cuda::CudaFourier;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fill(v: &mut [f32], seed: u64) {
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(c, ch)| {
        let mut s = (seed ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        for x in ch {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *x = (s >> 40) as f32 / (1u64 << 24) as f32;
        }
    });
}

/// Median (the lower middle value for an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[(v.len() - 1) / 2]
}

fn geometry(n: usize) -> ParallelGeometry {
    ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n).unwrap()
}

/// The gather named `point` or (anything else) `warp`.
fn gather_kind(name: &str) -> GatherKind {
    match name {
        "point" => GatherKind::Point,
        _ => GatherKind::Warp,
    }
}

/// One (gather, width) configuration of the speed runs.
#[derive(Clone, Copy)]
struct Config {
    gather: GatherKind,
    width: usize,
}

fn speed(
    gpu: &CudaFourier,
    n: usize,
    slices: usize,
    reps: usize,
    configs: &[Config],
    pinned: bool,
) {
    let geom = geometry(n);
    let grid = SliceGrid::for_geometry(&geom);
    let len = slices * n * n;
    let t = Instant::now();
    let (mut pin_in, mut pin_out, mut vec_in, mut vec_out);
    let (sino_buf, out_buf): (&mut [f32], &mut [f32]) = if pinned {
        pin_in = gpu.pinned(len).unwrap();
        pin_out = gpu.pinned(len).unwrap();
        (pin_in.as_mut_slice(), pin_out.as_mut_slice())
    } else {
        vec_in = vec![0f32; len];
        vec_out = vec![0f32; len];
        (&mut vec_in[..], &mut vec_out[..])
    };
    fill(sino_buf, 7);
    out_buf.par_iter_mut().for_each(|v| *v = 0.0);
    let host = if pinned { "page-locked" } else { "pageable" };
    println!(
        "  n={n}: {host} input and output of {slices} slices ready in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let sino = ndarray::ArrayView3::from_shape((slices, n, n), &*sino_buf).unwrap();
    let mut out = ndarray::ArrayViewMut3::from_shape((slices, n, n), out_buf).unwrap();
    let mut first: Option<(String, Array3<f32>)> = None;
    for c in configs {
        let opts = FourierOptions {
            width: c.width,
            ..FourierOptions::default()
        };
        gpu.set_gather(c.gather).unwrap();
        let t = Instant::now();
        gpu.reconstruct(
            sino.slice(s![..2, .., ..]),
            &geom,
            &grid,
            &opts,
            out.slice_mut(s![..2, .., ..]),
        )
        .unwrap();
        let name = format!("{:?} gather W={}", c.gather, c.width).to_lowercase();
        println!(
            "  n={n} {name}: warm-up (2 slices, compile/plans) {:.3} s",
            t.elapsed().as_secs_f64()
        );
        let (mut times, mut gpu_ms) = (Vec::new(), Vec::new());
        for r in 0..reps {
            let t = Instant::now();
            gpu.reconstruct(sino.view(), &geom, &grid, &opts, out.view_mut())
                .unwrap();
            let w = t.elapsed().as_secs_f64();
            let st = gpu.last_stats();
            times.push(w);
            gpu_ms.push(st.fft_ms + st.gather_ms + st.ifft_ms);
            println!("  n={n} {name} rep {r}: {w:.4} s host to host; {st}");
        }
        // The first two slices of each configuration against the first
        // configuration's (random data: any indexing or race shows here).
        let head = out.slice(s![..2.min(slices), .., ..]).to_owned();
        match &first {
            None => first = Some((name.clone(), head)),
            Some((n0, f)) => {
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for (a, b) in head.iter().zip(f.iter()) {
                    num += ((a - b) as f64).powi(2);
                    den += (*b as f64).powi(2);
                }
                println!(
                    "  n={n} {name}: first 2 slices vs {n0}: relative L2 {:.3e}",
                    (num / den).sqrt()
                );
            }
        }
        let m = median(times);
        let g = median(gpu_ms) / 1e3;
        let gu = (n * n * n * slices) as f64 / m / 1e9;
        println!(
            "RESULT fourier {name} n={n} angles={n} slices={slices} {host} arrays: median {m:.4} s host to host \
             ({gu:.0} GU/s-equivalent; {:.3} s scaled to 2048 slices); GPU compute (FFTs, gather; events) {g:.4} s \
             ({:.3} s scaled to 2048 slices)",
            m * 2048.0 / slices as f64,
            g * 2048.0 / slices as f64
        );
    }
}

/// tomocupy's disc: radius 0.4 n, mu = 1/r, p(s) = 2 mu sqrt(r² − s²) at s = k − n/2.
fn disc(n: usize, k: usize) -> (ParallelGeometry, Array3<f32>, f64) {
    let r = 0.4 * n as f64;
    let mu = 1.0 / r;
    let geom = geometry(n).with_center(n as f32 / 2.0).unwrap();
    let row: Vec<f32> = (0..n)
        .map(|i| {
            let s = i as f64 - n as f64 / 2.0;
            (2.0 * mu * (r * r - s * s).max(0.0).sqrt()) as f32
        })
        .collect();
    let sino = Array3::from_shape_fn((k, n, n), |(_, _, b)| row[b]);
    (geom, sino, mu)
}

fn disc_rms(rec: &Array2<f32>, mu: f64) -> (f64, f64) {
    let n = rec.nrows();
    let r = 0.4 * n as f64;
    let c = n as f64 / 2.0 - 0.5;
    let (mut s2, mut mx, mut cnt) = (0.0f64, 0.0f64, 0usize);
    for ((iy, ix), &v) in rec.indexed_iter() {
        let (dx, dy) = (ix as f64 - c, iy as f64 - c);
        if (dx * dx + dy * dy).sqrt() < 0.75 * r {
            let e = v as f64 / mu - 1.0;
            s2 += e * e;
            mx = mx.max(e.abs());
            cnt += 1;
        }
    }
    ((s2 / cnt as f64).sqrt(), mx)
}

fn disc_test(gpu: &CudaFourier, n: usize) {
    gpu.set_gather(GatherKind::default()).unwrap();
    let (geom, sino, mu) = disc(n, 2);
    let grid = SliceGrid::for_geometry(&geom);
    for w in [4, 5, 6, 7] {
        let opts = FourierOptions {
            width: w,
            ..FourierOptions::default()
        };
        let mut out = Array3::<f32>::zeros((2, n, n));
        gpu.reconstruct(sino.view(), &geom, &grid, &opts, out.view_mut())
            .unwrap();
        let (rms, mx) = disc_rms(&out.index_axis(Axis(0), 0).to_owned(), mu);
        let (rms1, _) = disc_rms(&out.index_axis(Axis(0), 1).to_owned(), mu);
        println!("RESULT disc n={n} fourier W={w} (GPU): interior RMS error {rms:.3e} (imag slice {rms1:.3e}), max {mx:.3e}");
    }
    let t = Instant::now();
    let d = fbp_sinograms(
        &CpuBackend::new(),
        sino.slice(s![..1, .., ..]),
        &geom,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    let (rms, mx) = disc_rms(&d.index_axis(Axis(0), 0).to_owned(), mu);
    println!("RESULT disc n={n} direct FBP (CPU f32, linear, ram-lak): interior RMS error {rms:.3e}, max {mx:.3e} ({:.1} s)", t.elapsed().as_secs_f64());
}

fn shepp_test(gpu: &CudaFourier, n: usize) {
    gpu.set_gather(GatherKind::default()).unwrap();
    let geom = geometry(n);
    let grid = SliceGrid::for_geometry(&geom);
    let ph = Phantom2d::shepp_logan();
    let scale = n as f64 / 2.0;
    let p = ph.project(&geom, scale);
    let sino = ndarray::stack(Axis(0), &[p.view(), p.view()]).unwrap();
    let reference = ph.rasterize(&grid, scale, 4);
    let t = Instant::now();
    let d = fbp_sinograms(
        &CpuBackend::new(),
        sino.slice(s![..1, .., ..]),
        &geom,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    println!(
        "  direct CPU FBP of 1 slice of {n}²: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let d = d.index_axis(Axis(0), 0).to_owned();
    let mask = disc_mask(n, n, 0.45);
    let e_d = nrmse(d.view(), reference.view(), Some(&mask)).unwrap();
    for w in [4, 5, 6] {
        let opts = FourierOptions {
            width: w,
            ..FourierOptions::default()
        };
        let mut out = Array3::<f32>::zeros((2, n, n));
        gpu.reconstruct(sino.view(), &geom, &grid, &opts, out.view_mut())
            .unwrap();
        let f = out.index_axis(Axis(0), 0).to_owned();
        let e_f = nrmse(f.view(), reference.view(), Some(&mask)).unwrap();
        let e_fd = nrmse(f.view(), d.view(), Some(&mask)).unwrap();
        println!(
            "RESULT shepp-logan n={n} angles={n} W={w}: NRMSE vs phantom (0.45 disc): fourier {e_f:.4e}, direct {e_d:.4e}; fourier vs direct {e_fd:.4e}"
        );
    }
}

fn cpu_time(n: usize, opts: &FourierOptions) {
    let geom = geometry(n);
    let grid = SliceGrid::for_geometry(&geom);
    let mut sino = Array3::<f32>::zeros((8, n, n));
    fill(sino.as_slice_mut().unwrap(), 3);
    let t = Instant::now();
    let _ = fourier_sinograms(sino.view(), &geom, &grid, opts).unwrap();
    let f = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let _ = fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &geom,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    let d = t.elapsed().as_secs_f64();
    println!(
        "RESULT cpu n={n} 8 slices ({} threads): fourier W={} {f:.3} s, direct FBP {d:.3} s",
        rayon::current_num_threads(),
        opts.width
    );
}

/// Time of page-locking an already-touched pageable array in place
/// (`cuMemHostRegister`, the alternative to staging copies) and of
/// releasing it, whole and in slab-sized pieces.
fn register_test(gb: f64) {
    use cudarc::driver::sys;
    let ctx = tomors_cuda::runtime::Context::new(0).unwrap();
    ctx.bind().unwrap();
    let len = (gb * 1e9 / 4.0) as usize;
    let mut v = vec![0.0f32; len];
    fill(&mut v, 5);
    let bytes = len * 4;
    let reg = |p: *mut f32, b: usize| -> (f64, f64) {
        let t = Instant::now();
        // SAFETY: p..p+b lies in `v`, alive and not moved; unregistered below.
        let r = unsafe { sys::cuMemHostRegister_v2(p as *mut std::ffi::c_void, b, 0) };
        let tr = t.elapsed().as_secs_f64();
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuMemHostRegister: {r:?}");
        let t = Instant::now();
        // SAFETY: registered just above.
        let r = unsafe { sys::cuMemHostUnregister(p as *mut std::ffi::c_void) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuMemHostUnregister: {r:?}");
        (tr, t.elapsed().as_secs_f64())
    };
    let (r, u) = reg(v.as_mut_ptr(), bytes);
    println!(
        "RESULT register {gb} GB whole: register {r:.3} s ({:.1} GB/s), unregister {u:.3} s",
        gb / r
    );
    let chunk = 14 * 2048 * 2048;
    let (mut rs, mut us, mut n) = (0.0, 0.0, 0);
    for c in v.chunks_mut(chunk) {
        let (r, u) = reg(c.as_mut_ptr(), c.len() * 4);
        rs += r;
        us += u;
        n += 1;
    }
    println!(
        "RESULT register {gb} GB in {n} pieces of {} MB: register {rs:.3} s ({:.1} GB/s), unregister {us:.3} s",
        chunk * 4 / 1_000_000,
        gb / rs
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: String = arg(&args, "--sizes", "512,1024,2048".to_string());
    let slices: usize = arg(&args, "--slices", 256);
    let reps: usize = arg(&args, "--reps", 3);
    let width: usize = arg(&args, "--width", tomors_core::fourier::DEFAULT_WIDTH);
    let disc_n: usize = arg(&args, "--disc", 0);
    let shepp_n: usize = arg(&args, "--shepp", 0);
    let cpu_n: usize = arg(&args, "--cpu-size", 0);
    let mode: String = arg(&args, "--host", "pageable".to_string());
    let gpu = CudaFourier::new(0).unwrap_or_else(|e| {
        eprintln!("fourier_bench: {e}");
        std::process::exit(1)
    });
    let gathers: String = arg(&args, "--gather", "warp".to_string());
    let widths: String = arg(&args, "--widths", width.to_string());
    let mut configs = Vec::new();
    for g in gathers.split(',') {
        for w in widths
            .split(',')
            .filter_map(|w| w.trim().parse::<usize>().ok())
        {
            let gather = gather_kind(g.trim());
            configs.push(Config { gather, width: w });
        }
    }
    let explicit: String = arg(&args, "--configs", String::new());
    if !explicit.is_empty() {
        configs = explicit
            .split(',')
            .filter_map(|c| {
                let (g, w) = c.split_once(':')?;
                let gather = gather_kind(g);
                Some(Config {
                    gather,
                    width: w.parse().ok()?,
                })
            })
            .collect();
    }
    println!("device {}", gpu.name());
    let opts = FourierOptions {
        width,
        ..FourierOptions::default()
    };
    for n in sizes
        .split(',')
        .filter_map(|v| v.trim().parse::<usize>().ok())
    {
        for pinned in [false, true] {
            if mode == "both" || (mode == "pinned") == pinned {
                speed(&gpu, n, slices, reps, &configs, pinned);
            }
        }
    }
    let reg_gb: f64 = arg(&args, "--register-gb", 0.0);
    if reg_gb > 0.0 {
        register_test(reg_gb);
    }
    if disc_n > 0 {
        disc_test(&gpu, disc_n);
    }
    if shepp_n > 0 {
        shepp_test(&gpu, shepp_n);
    }
    if cpu_n > 0 {
        cpu_time(cpu_n, &opts);
    }
}
