//! Iterative reconstruction over several GPUs: cone beam by z-slabs
//! (`CudaConeSlabs`, `cone_sirt_cuda_multi`: one slab per device, the
//! partial projections summed across devices, host-staged or peer-to-peer)
//! and parallel beam by slabs of slices (`sirt_cuda_multi`).
//!
//! - On any GPU: the slab operator with two and three slabs on the *same*
//!   device (the decomposition and both exchanges run, only the devices
//!   are shared) against the whole-volume operator and SIRT on one device.
//! - On two GPUs: the same on devices 0 and 1, and parallel SIRT on two
//!   devices against one. With fewer than two GPUs these skip with a
//!   printed reason (also under `TOMORS_REQUIRE_GPU=1`, which makes them
//!   fail only where two GPUs exist and the results differ).

mod common;

use std::f64::consts::PI;

use common::{
    fixed_options, flat, gpu_or_skip, gpu_required, max_rel, no_progress, random, rel_l2,
};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, Weighting};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::{
    cone_sirt_cuda_multi, cone_sirt_cuda_opts, sirt_cuda, sirt_cuda_multi, ConeBackProjector,
    ConeGpuOptions, CudaBackend, CudaConeJoseph, CudaConeSlabs, CudaOptions, Exchange,
    GpuSirtOptions, MultiCudaBackend,
};

/// A small cone: 40 projections of 24 × 32 onto a fitted 24 × 24 × 20
/// volume, and the projections of two balls (exact Joseph projections on
/// the GPU's whole-volume operator).
fn cone_problem(be: &CudaBackend) -> (ConeGeometry, ConeVolume, Array3<f32>) {
    let g = ConeGeometry::new(
        uniform_angles(40, 2.0 * PI as f32),
        80.0,
        40.0,
        24,
        32,
        1.0,
        1.0,
    )
    .unwrap();
    let v = g.fitting_volume(24, 24, 20).unwrap();
    let x = Array3::from_shape_fn((v.nz, v.ny, v.nx), |(z, y, x)| {
        let (fx, fy, fz) = (
            x as f64 / v.nx as f64 - 0.5,
            y as f64 / v.ny as f64 - 0.5,
            z as f64 / v.nz as f64 - 0.5,
        );
        let r1 = fx * fx + fy * fy + fz * fz;
        let r2 = (fx - 0.1).powi(2) + (fy + 0.15).powi(2) + (fz - 0.1).powi(2);
        (if r1 < 0.16 { 1.0f32 } else { 0.0 }) + (if r2 < 0.02 { 0.5 } else { 0.0 })
    });
    let b = CudaConeJoseph::new(be, &g, &v)
        .unwrap()
        .forward(x.view())
        .unwrap();
    (g, v, b)
}

/// The methods compared: SIRT (row/column sums, x ≥ 0), Landweber and
/// Cimmino with their default relaxation (power iteration over the
/// slabs), SART-type BLOCK-IT (blocks of 10 projections, Joseph pair only).
fn methods(back: ConeBackProjector) -> Vec<(&'static str, IterativeOptions)> {
    let opt =
        |algorithm, relaxation, constraint| fixed_options(algorithm, 6, relaxation, constraint);
    let mut m = vec![
        (
            "sirt",
            opt(
                Algorithm::Sirt(Weighting::RowColumnSums),
                Some(1.0),
                Constraint::non_negative(),
            ),
        ),
        (
            "landweber",
            opt(
                Algorithm::Sirt(Weighting::Landweber),
                None,
                Constraint::none(),
            ),
        ),
        (
            "cimmino",
            opt(
                Algorithm::Sirt(Weighting::Cimmino),
                None,
                Constraint::none(),
            ),
        ),
    ];
    if back == ConeBackProjector::Joseph {
        m.push((
            "block-it",
            opt(
                Algorithm::BlockSequential {
                    weighting: Weighting::RowColumnSums,
                    projections_per_block: 10,
                },
                Some(1.0),
                Constraint::non_negative(),
            ),
        ));
    }
    m
}

/// Cone SIRT-type methods on `devs` (one slab each) against one device,
/// both exchanges and both pairs; returns the worst relative L2 distance.
/// Bounds on the volume after 6 iterations: 2e-6 for the Joseph pair
/// (measured on two H200s ≤ 2.2e-7), 1e-5 for the voxel pair (texture
/// fetches at coordinates rounded from the slab's origin, see
/// `cone_slab_gpu.rs`; measured ≤ 1.5e-6); the default relaxation to 1e-5
/// (measured ≤ 1.8e-7).
fn cone_multi_vs_one(label: &str, devs: &[&CudaBackend]) -> f64 {
    let (g, v, b) = cone_problem(devs[0]);
    let mut worst = 0f64;
    for back in [ConeBackProjector::Joseph, ConeBackProjector::Voxel] {
        let bound = match back {
            ConeBackProjector::Joseph => 2e-6,
            ConeBackProjector::Voxel => 1e-5,
        };
        for (name, options) in methods(back) {
            // The slabs run the unfolded kernels; so does the reference
            // (the folded ones are compared with them in
            // cone_fold_iterative_gpu).
            let gpu = ConeGpuOptions {
                back,
                unfolded: true,
                ..ConeGpuOptions::default()
            };
            let (one, _) = cone_sirt_cuda_opts(
                devs[0],
                &g,
                &v,
                b.view(),
                None,
                &options,
                &gpu,
                &no_progress(),
            )
            .unwrap();
            for exchange in [Exchange::HostStaged, Exchange::Peer] {
                let (many, stats) = cone_sirt_cuda_multi(
                    devs,
                    &g,
                    &v,
                    b.view(),
                    None,
                    &options,
                    back,
                    exchange,
                    &no_progress(),
                )
                .unwrap();
                let e = rel_l2(&flat(&many.x), &flat(&one.x));
                let lam = (many.relaxation - one.relaxation).abs() / one.relaxation;
                let er = max_rel(&many.residuals, &one.residuals);
                eprintln!(
                    "{label}: {back:?} {name}, {exchange:?}: volume rel L2 {e:.2e}, λ {lam:.1e}, \
                     residuals {er:.1e} (last {:.3e}); {:.4} s/iteration",
                    many.residuals.last().copied().unwrap_or(f64::NAN),
                    stats.loop_s / stats.iterations.max(1) as f64
                );
                assert_eq!(many.iterations, one.iterations);
                assert!(
                    e <= bound,
                    "{label}: {back:?} {name} {exchange:?}: rel L2 {e:.3e}"
                );
                assert!(er <= bound * 10.0, "{label}: {name}: residuals {er:.3e}");
                assert!(lam <= 1e-5, "{label}: {name}: relaxation {lam:.3e}");
                worst = worst.max(e);
            }
        }
    }
    worst
}

/// The slab operator over `devs`: its forward projection equals the whole
/// volume's and its back projection's slabs the whole back projection's
/// (2e-6; measured ≤ 7.6e-7), and it is adjoint (1e-4) with both
/// exchanges; with two devices both copies of the sum are equal bit for
/// bit.
fn slab_operator_vs_whole(label: &str, devs: &[&CudaBackend]) {
    let (g, v, _) = cone_problem(devs[0]);
    let seed = common::test_seed();
    let x = Array3::from_shape_vec((v.nz, v.ny, v.nx), random(v.len(), seed)).unwrap();
    let y = Array3::from_shape_vec(
        (g.n_angles(), g.n_rows(), g.n_cols()),
        random(g.n_angles() * g.n_rows() * g.n_cols(), seed ^ 1),
    )
    .unwrap();
    let whole = CudaConeJoseph::new(devs[0], &g, &v).unwrap();
    let wf = whole.forward(x.view()).unwrap();
    let wb = whole.back(y.view()).unwrap();
    for exchange in [Exchange::HostStaged, Exchange::Peer] {
        let op = CudaConeSlabs::new(devs, &g, &v, ConeBackProjector::Joseph, exchange).unwrap();
        let all: Vec<usize> = (0..g.n_angles()).collect();
        let xd = op.upload_volume(x.view()).unwrap();
        let yd = op.upload_projections(y.view()).unwrap();
        let mut fd = op.range_zeros(&all).unwrap();
        op.forward(&xd, &all, &mut fd).unwrap();
        let mut bd = op.domain_zeros().unwrap();
        op.backward(&yd, &all, &mut bd).unwrap();
        // Every copy of the forward projection is the sum.
        let copies: Vec<Array3<f32>> = fd
            .parts()
            .iter()
            .zip(op.slabs())
            .map(|(p, s)| s.download(p).unwrap())
            .collect();
        let f = &copies[0];
        let ef = rel_l2(&flat(f), &flat(&wf));
        let eb = rel_l2(&flat(&op.download_volume(&bd).unwrap()), &flat(&wb));
        let ec = copies
            .iter()
            .map(|c| rel_l2(&flat(c), &flat(f)))
            .fold(0.0, f64::max);
        let gap = (fd.dot(&yd).unwrap() - xd.dot(&bd).unwrap()).abs()
            / (fd.norm_sq().unwrap().sqrt() * yd.norm_sq().unwrap().sqrt());
        eprintln!(
            "{label}, {exchange:?} (peer access {}): forward vs whole {ef:.2e}, back vs whole \
             {eb:.2e}, copies differ by {ec:.1e}, adjointness gap {gap:.2e}, {:?}",
            op.peer_access(),
            op.exchange_stats()
        );
        assert!(ef <= 2e-6, "{label} {exchange:?}: forward rel L2 {ef:.3e}");
        assert!(eb <= 2e-6, "{label} {exchange:?}: back rel L2 {eb:.3e}");
        assert!(gap <= 1e-4, "{label} {exchange:?}: gap {gap:.3e}");
        if devs.len() == 2 {
            assert_eq!(ec, 0.0, "{label}: the two copies of the sum differ");
        } else {
            assert!(ec <= 1e-6, "{label}: copies differ by {ec:.3e}");
        }
    }
}

/// Two and three slabs on one device (runs on any GPU): the decomposition
/// and both exchanges against the whole volume.
#[test]
fn cone_slabs_on_one_device_match_the_whole_volume() {
    let Some(be) = gpu_or_skip("cone_slabs_on_one_device_match_the_whole_volume") else {
        return;
    };
    slab_operator_vs_whole("2 slabs on device 0", &[&be, &be]);
    slab_operator_vs_whole("3 slabs on device 0", &[&be, &be, &be]);
    let w = cone_multi_vs_one("2 slabs on device 0", &[&be, &be]);
    eprintln!("2 slabs on device 0: worst volume rel L2 {w:.2e}");
}

/// Devices 0 and 1, or `None` (printed reason) with fewer than two GPUs.
fn two_gpus(test: &str) -> Option<(CudaBackend, CudaBackend)> {
    let n = match tomors_cuda::device_count() {
        Ok(n) => n,
        Err(e) if gpu_required() => panic!("{test}: TOMORS_REQUIRE_GPU=1 but no GPU: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            return None;
        }
    };
    if n < 2 {
        eprintln!("skipping {test}: {n} GPU(s), the test needs 2");
        return None;
    }
    Some((CudaBackend::new(0).unwrap(), CudaBackend::new(1).unwrap()))
}

/// Cone SIRT-type methods on devices 0 and 1 against device 0 alone.
#[test]
fn cone_sirt_on_two_gpus_matches_one() {
    let Some((d0, d1)) = two_gpus("cone_sirt_on_two_gpus_matches_one") else {
        return;
    };
    slab_operator_vs_whole("devices 0 and 1", &[&d0, &d1]);
    let w = cone_multi_vs_one("devices 0 and 1", &[&d0, &d1]);
    eprintln!("devices 0 and 1: worst volume rel L2 {w:.2e}");
}

/// Parallel-beam SIRT and BLOCK-IT by slabs of slices on devices 0 and 1
/// against device 0 alone: slices are independent and each is computed by
/// the same kernels, so the volumes agree to the order of the additions
/// (bound 1e-6; measured 0 where the slice groups coincide).
#[test]
fn parallel_sirt_on_two_gpus_matches_one() {
    let Some((d0, _d1)) = two_gpus("parallel_sirt_on_two_gpus_matches_one") else {
        return;
    };
    let multi = MultiCudaBackend::new(&[0, 1], CudaOptions::default()).unwrap();
    let geom = ParallelGeometry::new(uniform_angles(60, PI as f32), 48).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let ns = 20;
    let sino = Array3::from_shape_vec(
        (ns, 60, 48),
        random(ns * 60 * 48, 3)
            .into_iter()
            .map(|v| v + 1.0)
            .collect(),
    )
    .unwrap();
    for (name, algorithm) in [
        ("sirt", Algorithm::Sirt(Weighting::RowColumnSums)),
        (
            "block-it",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 12,
            },
        ),
    ] {
        let options = fixed_options(algorithm, 5, Some(1.0), Constraint::non_negative());
        // Slabs of 8 slices: 3 slabs, handed round-robin (2 to device 0).
        let gpu = GpuSirtOptions {
            slab: 8,
            ..GpuSirtOptions::default()
        };
        let (one, _) = sirt_cuda(
            &d0,
            &geom,
            &grid,
            sino.view(),
            None,
            &options,
            &gpu,
            &no_progress(),
        )
        .unwrap();
        let (two, stats) = sirt_cuda_multi(
            &multi,
            &geom,
            &grid,
            sino.view(),
            None,
            &options,
            &gpu,
            &no_progress(),
        )
        .unwrap();
        let e = rel_l2(&flat(&two.x), &flat(&one.x));
        eprintln!(
            "parallel {name}: 2 GPUs vs 1 rel L2 {e:.2e} ({} slabs); residuals {:?} vs {:?}",
            stats.slabs, two.residuals, one.residuals
        );
        assert!(e <= 1e-6, "parallel {name}: rel L2 {e:.3e}");
    }
}
