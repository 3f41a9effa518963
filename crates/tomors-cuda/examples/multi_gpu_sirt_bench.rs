//! SIRT on one and on two GPUs, host to host:
//! `cargo run --release -p tomors-cuda --example multi_gpu_sirt_bench --
//! [--scale S] [--parallel-iterations N] [--cone-iterations N]
//! [--only parallel|cone-voxel|cone-joseph] [--exchange host|peer|both]`
//! (needs a GPU; two for the two-GPU lines).
//!
//! Problems (sizes divided by `S`, default 1):
//! - parallel beam: SIRT of a 1024³ volume (1024 slices of 1024²) from 1024
//!   angles over π (`sirt_cuda` on device 0, `sirt_cuda_multi` on devices 0
//!   and 1: slabs of slices handed to the devices);
//! - cone beam: SIRT of a 512³ volume from 512 projections of 512² over 2π,
//!   cone angle 10° (`cone_sirt_cuda_with` on device 0,
//!   `cone_sirt_cuda_multi` on devices 0 and 1: one z-slab per device, the
//!   partial projections summed across the devices host-staged and
//!   peer-to-peer), voxel pair and Joseph pair.
//!
//! Row/column-sum weights, λ = 1, x ≥ 0, random data in [0, 1). Per line:
//! seconds per iteration host to host (the whole call — setup, uploads,
//! weights, iterations, download — divided by the iterations), the device
//! loop per iteration, the speed-up of two GPUs over one, and the relative
//! L2 distance of the two-GPU volume from the one-GPU volume.

mod common;

use std::time::Instant;

use common::{cone10, random01, rel_l2, sirt_options};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::IterativeOptions;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{
    cone_sirt_cuda_multi, cone_sirt_cuda_with, sirt_cuda, sirt_cuda_multi, ConeBackProjector,
    CudaBackend, CudaOptions, Exchange, GpuSirtOptions, MultiCudaBackend,
};

struct Args {
    scale: usize,
    par_iters: usize,
    cone_iters: usize,
    joseph_iters: usize,
    only: String,
    exchange: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        scale: 1,
        par_iters: 10,
        cone_iters: 10,
        joseph_iters: 3,
        only: String::new(),
        exchange: "both".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or(format!("{k} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "--scale" => a.scale = num(val()?)?.max(1),
            "--parallel-iterations" => a.par_iters = num(val()?)?.max(1),
            "--cone-iterations" => a.cone_iters = num(val()?)?.max(1),
            "--joseph-iterations" => a.joseph_iters = num(val()?)?.max(1),
            "--only" => a.only = val()?,
            "--exchange" => a.exchange = val()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("multi_gpu_sirt_bench: {e}");
        std::process::exit(1);
    }
}

fn options(iterations: usize) -> IterativeOptions {
    sirt_options(iterations, true)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse()?;
    let n_gpus = tomors_cuda::device_count()?;
    println!("GPUs: {n_gpus}; scale 1/{}", a.scale);
    let d0 = CudaBackend::new(0)?;
    let d1 = if n_gpus >= 2 {
        Some(CudaBackend::new(1)?)
    } else {
        println!("one GPU: the two-GPU lines are skipped");
        None
    };
    let progress = |_: &GpuIteration| true;
    let want = |name: &str| a.only.is_empty() || a.only == name;

    if want("parallel") {
        let n = 1024 / a.scale;
        let na = 1024 / a.scale;
        let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), n)?;
        let grid = SliceGrid::for_geometry(&geom);
        let t = Instant::now();
        let sino = Array3::from_shape_vec((n, na, n), random01(n * na * n, 7))?;
        println!(
            "parallel SIRT: {n} slices of {n}² from {na} angles, {} iterations (data made in {:.1} s)",
            a.par_iters,
            t.elapsed().as_secs_f64()
        );
        let opt = options(a.par_iters);
        let gpu = GpuSirtOptions::default();
        let t = Instant::now();
        let (one, st1) = sirt_cuda(&d0, &geom, &grid, sino.view(), None, &opt, &gpu, &progress)?;
        let h1 = t.elapsed().as_secs_f64() / one.iterations as f64;
        println!(
            "parallel 1 GPU: {h1:.4} s/iteration host to host ({} iterations, {} slabs, device \
             loop {:.4} s/iteration, setup {:.3} s, download {:.3} s)",
            one.iterations,
            st1.slabs,
            st1.loop_s / st1.iterations.max(1) as f64 * st1.slabs as f64,
            st1.setup_s,
            st1.download_s
        );
        if d1.is_some() {
            let multi = MultiCudaBackend::new(&[0, 1], CudaOptions::default())?;
            let t = Instant::now();
            let (two, st2) = sirt_cuda_multi(
                &multi,
                &geom,
                &grid,
                sino.view(),
                None,
                &opt,
                &gpu,
                &progress,
            )?;
            let h2 = t.elapsed().as_secs_f64() / two.iterations as f64;
            println!(
                "parallel 2 GPUs: {h2:.4} s/iteration host to host ({} slabs), speed-up {:.2}×, \
                 rel L2 vs 1 GPU {:.2e}",
                st2.slabs,
                h1 / h2,
                rel_l2(&two.x, &one.x)
            );
        }
    }

    let n = 512 / a.scale;
    let na = 512 / a.scale;
    let cone_wanted = want("cone-voxel") || want("cone-joseph");
    if cone_wanted {
        let (g, v, _, _) = cone10(n, na)?;
        let b = Array3::from_shape_vec((na, n, n), random01(na * n * n, 2))?;
        let exchanges: Vec<Exchange> = match a.exchange.as_str() {
            "host" => vec![Exchange::HostStaged],
            "peer" => vec![Exchange::Peer],
            _ => vec![Exchange::HostStaged, Exchange::Peer],
        };
        for (name, back, iters) in [
            ("cone-voxel", ConeBackProjector::Voxel, a.cone_iters),
            ("cone-joseph", ConeBackProjector::Joseph, a.joseph_iters),
        ] {
            if !want(name) {
                continue;
            }
            println!(
                "{name} SIRT: {n}³ from {na} projections of {n}², cone angle {:.2}°, {iters} iterations",
                g.cone_angle().to_degrees()
            );
            let opt = options(iters);
            let t = Instant::now();
            let (one, st1) =
                cone_sirt_cuda_with(&d0, &g, &v, b.view(), None, &opt, back, &progress)?;
            let h1 = t.elapsed().as_secs_f64() / one.iterations as f64;
            println!(
                "{name} 1 GPU: {h1:.4} s/iteration host to host (device loop {:.4} s/iteration, \
                 setup {:.3} s, download {:.3} s)",
                st1.loop_s / st1.iterations.max(1) as f64,
                st1.setup_s,
                st1.download_s
            );
            let Some(d1) = d1.as_ref() else { continue };
            for &ex in &exchanges {
                let t = Instant::now();
                let (two, st2) = cone_sirt_cuda_multi(
                    &[&d0, d1],
                    &g,
                    &v,
                    b.view(),
                    None,
                    &opt,
                    back,
                    ex,
                    &progress,
                )?;
                let h2 = t.elapsed().as_secs_f64() / two.iterations as f64;
                println!(
                    "{name} 2 GPUs ({ex:?}): {h2:.4} s/iteration host to host (device loop \
                     {:.4} s/iteration, setup {:.3} s, download {:.3} s), speed-up {:.2}×, rel \
                     L2 vs 1 GPU {:.2e}",
                    st2.loop_s / st2.iterations.max(1) as f64,
                    st2.setup_s,
                    st2.download_s,
                    h1 / h2,
                    rel_l2(&two.x, &one.x)
                );
            }
        }
    }
    Ok(())
}
