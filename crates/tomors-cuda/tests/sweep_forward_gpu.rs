//! GPU tests of the line-sweep forward and back projections of Joseph's
//! parallel-beam projector (`CudaJoseph::set_sweep_forward`,
//! `set_sweep_back`, `kernels/joseph_sweep.cu`): against tomors-core's f64
//! `JosephProjector` (relative L2 ≤ 1e-5, ALU arithmetic) and `jp_forward` /
//! `jp_back` on fresh random zero-mean data, every value written (poisoned
//! outputs), stacks of 5, 11 and 133 slices (one group of 128 slices padded,
//! and two groups), three geometries (bins narrower than the pixels:
//! neighbouring rays share their left pixel, and the back sweep is refused:
//! hats wider than a bin; wider bins: rays skip one); the swept pair is
//! adjoint; SIRT with the sweeps equals SIRT without.
//! GPU tests skip with a printed reason when no GPU is usable (and fail
//! under `TOMORS_REQUIRE_GPU=1`).

mod common;

use common::joseph::{cases, cpu_back, cpu_forward};
use common::{flat, gpu_or_skip, random, rel_l2};
use ndarray::Array3;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, JosephProjector, Weighting};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{sirt_cuda, CudaJoseph, GpuSirtOptions};

/// The sweep forward projection against the CPU's f64 and `jp_forward`,
/// on poisoned outputs; adjointness with the back projection.
#[test]
fn sweep_forward_matches_the_cpu_and_jp_forward() {
    let Some(be) = gpu_or_skip("sweep_forward_matches_the_cpu_and_jp_forward") else {
        return;
    };
    let seed = common::test_seed();
    for (name, geom, grid) in cases(seed) {
        let cpu = JosephProjector::new(&geom, &grid).unwrap();
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let mut plain = CudaJoseph::new(&be, &geom, &grid, 8).unwrap();
        let mut gpu = CudaJoseph::new(&be, &geom, &grid, 8).unwrap();
        assert!(gpu.set_sweep_forward(true).unwrap());
        assert!(!plain.set_sweep_forward(false).unwrap());
        // Bins narrower than the pixels: hats wider than one bin.
        let narrow = name.starts_with("bins 0.6");
        assert_eq!(gpu.set_sweep_back(true).unwrap(), !narrow, "{name}");
        assert!(gpu.sweep_forward());
        for ns in [5, 11, 133] {
            let x = Array3::from_shape_vec(
                (ns, grid.ny, grid.nx),
                random(ns * grid.ny * grid.nx, seed ^ ns as u64),
            )
            .unwrap();
            let want = cpu_forward(&cpu, &x);
            let mut got = Array3::<f32>::from_elem((ns, na, nb), f32::NAN);
            gpu.forward(x.view(), got.view_mut()).unwrap();
            assert!(
                got.iter().all(|v| v.is_finite()),
                "{name}, {ns} slices: unwritten values"
            );
            let mut old = Array3::<f32>::from_elem((ns, na, nb), f32::NAN);
            plain.forward(x.view(), old.view_mut()).unwrap();
            let ec = rel_l2(&flat(&got), &flat(&want));
            let eo = rel_l2(&flat(&got), &flat(&old));
            eprintln!(
                "{name}, {ns} slices: sweep forward vs CPU f64 rel L2 {ec:.2e}, vs jp_forward \
                 {eo:.2e}"
            );
            assert!(ec <= 1e-5, "{name}, {ns} slices: vs CPU {ec:.3e}");
            assert!(eo <= 1e-6, "{name}, {ns} slices: vs jp_forward {eo:.3e}");
            let y =
                Array3::from_shape_vec((ns, na, nb), random(ns * na * nb, seed ^ (ns as u64 + 77)))
                    .unwrap();
            let want = cpu_back(&cpu, &y);
            let mut got = Array3::<f32>::from_elem((ns, grid.ny, grid.nx), f32::NAN);
            gpu.back(y.view(), got.view_mut()).unwrap();
            assert!(
                got.iter().all(|v| v.is_finite()),
                "{name}, {ns} slices: unwritten back values"
            );
            let mut old = Array3::<f32>::from_elem((ns, grid.ny, grid.nx), f32::NAN);
            plain.back(y.view(), old.view_mut()).unwrap();
            let ec = rel_l2(&flat(&got), &flat(&want));
            let eo = rel_l2(&flat(&got), &flat(&old));
            eprintln!(
                "{name}, {ns} slices: back (sweep {}) vs CPU f64 rel L2 {ec:.2e}, vs jp_back \
                 {eo:.2e}",
                gpu.sweep_back()
            );
            assert!(ec <= 1e-5, "{name}, {ns} slices: back vs CPU {ec:.3e}");
            assert!(eo <= 5e-6, "{name}, {ns} slices: back vs jp_back {eo:.3e}");
        }
        // Adjointness with the back projection (f32 results).
        let ns = 5;
        let x = Array3::from_shape_vec(
            (ns, grid.ny, grid.nx),
            random(ns * grid.ny * grid.nx, seed ^ 11),
        )
        .unwrap();
        let y = Array3::from_shape_vec((ns, na, nb), random(ns * na * nb, seed ^ 13)).unwrap();
        let mut ax = Array3::<f32>::zeros((ns, na, nb));
        gpu.forward(x.view(), ax.view_mut()).unwrap();
        let mut aty = Array3::<f32>::zeros((ns, grid.ny, grid.nx));
        gpu.back(y.view(), aty.view_mut()).unwrap();
        let dot = |a: &Array3<f32>, b: &Array3<f32>| -> f64 {
            a.iter().zip(b).map(|(&u, &v)| u as f64 * v as f64).sum()
        };
        let norm = |a: &Array3<f32>| dot(a, a).sqrt();
        let gap = (dot(&ax, &y) - dot(&x, &aty)).abs() / (norm(&ax) * norm(&y));
        eprintln!("{name}: sweep forward, adjointness gap {gap:.2e}");
        assert!(gap <= 1e-4, "{name}: gap {gap:.3e}");
    }
}

/// SIRT with the sweep forward and back projections equals SIRT with
/// `jp_forward` and `jp_back_quad` (the same operator to f32 rounding), one
/// slab and three.
#[test]
fn sirt_with_the_sweep_forward_matches() {
    let Some(be) = gpu_or_skip("sirt_with_the_sweep_forward_matches") else {
        return;
    };
    let seed = common::test_seed();
    let (name, geom, grid) = cases(seed).remove(0);
    let ns = 19;
    let (na, nb) = (geom.n_angles(), geom.n_bins());
    let sino = Array3::from_shape_vec(
        (ns, na, nb),
        random(ns * na * nb, seed ^ 5)
            .iter()
            .map(|v| 0.6 + 0.5 * v)
            .collect(),
    )
    .unwrap();
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 6,
        relaxation: None,
        constraint: Constraint::non_negative(),
        tolerance: None,
        track_residual: true,
    };
    for slab in [0, 8] {
        let run = |sweep: bool| {
            sirt_cuda(
                &be,
                &geom,
                &grid,
                sino.view(),
                None,
                &options,
                &GpuSirtOptions {
                    slab,
                    sweep_forward: sweep,
                    sweep_back: sweep,
                    ..GpuSirtOptions::default()
                },
                &|_: &GpuIteration| true,
            )
            .unwrap()
            .0
        };
        let (s, p) = (run(true), run(false));
        let e = rel_l2(&flat(&s.x), &flat(&p.x));
        let er = s
            .residuals
            .iter()
            .zip(&p.residuals)
            .map(|(a, b)| (a - b).abs() / b)
            .fold(0.0, f64::max);
        eprintln!("{name}, slab {slab}: SIRT with the sweeps vs without: rel L2 {e:.2e}, residuals {er:.2e}");
        assert!(e <= 1e-5, "slab {slab}: {e:.3e}");
        assert!(er <= 1e-5, "slab {slab}: residuals {er:.3e}");
    }
}
