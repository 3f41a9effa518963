//! GPU tests of the download of SIRT's final iterate beside the forward
//! projection of its last iteration (the final residual's, when the
//! residual history is tracked): the volume a tracked run returns is the
//! same bits as that of an untracked run (which downloads after the loop),
//! with one slab and with several, parallel and cone beam; a run stopped
//! by its tolerance before the last iteration returns the iterate of the
//! iteration it stopped at. GPU tests skip with a printed reason when no GPU
//! is usable (and fail under `TOMORS_REQUIRE_GPU=1`).

mod common;

use std::f32::consts::PI;

use common::{gpu_or_skip, random};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, StopReason, Weighting};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{
    cone_sirt_cuda_opts, sirt_cuda, ConeBackProjector, ConeGpuOptions, GpuSirtOptions,
};

fn flat(a: &Array3<f32>) -> Vec<f32> {
    a.as_standard_layout().iter().copied().collect()
}

/// Positive random data in [0.1, 1.1).
fn data(dim: (usize, usize, usize), seed: u64) -> Array3<f32> {
    let v: Vec<f32> = random(dim.0 * dim.1 * dim.2, seed)
        .iter()
        .map(|r| 0.6 + 0.5 * r)
        .collect();
    Array3::from_shape_vec(dim, v).unwrap()
}

fn sirt(iterations: usize, track: bool, tolerance: Option<f64>) -> IterativeOptions {
    IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations,
        relaxation: None,
        constraint: Constraint::non_negative(),
        tolerance,
        track_residual: track,
    }
}

fn go() -> impl Fn(&GpuIteration) -> bool + Sync {
    |_: &GpuIteration| true
}

/// Parallel beam, one slab and three: tracked (early download) and
/// untracked (download after the loop) give the same bits; a run that its
/// tolerance stops early returns that iteration's iterate (the hook did not
/// run on a later one).
#[test]
fn parallel_early_download_is_the_final_iterate() {
    let Some(be) = gpu_or_skip("parallel_early_download_is_the_final_iterate") else {
        return;
    };
    let (ns, na, nb) = (19, 30, 48);
    let geom = ParallelGeometry::new(uniform_angles(na, PI), nb).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = data((ns, na, nb), 0x51E7);
    let run = |slab: usize, opt: &IterativeOptions| {
        sirt_cuda(
            &be,
            &geom,
            &grid,
            sino.view(),
            None,
            opt,
            &GpuSirtOptions {
                slab,
                ..GpuSirtOptions::default()
            },
            &go(),
        )
        .unwrap()
    };
    for slab in [0, 8] {
        let (tracked, st) = run(slab, &sirt(5, true, None));
        let (plain, su) = run(slab, &sirt(5, false, None));
        eprintln!(
            "slab {slab}: {} slab(s), tracked {} / untracked {} forward projections, \
             residuals {:?}",
            st.slabs, st.forward_count, su.forward_count, tracked.residuals
        );
        assert_eq!(tracked.iterations, 5);
        assert_eq!(tracked.residuals.len(), 5);
        assert!(plain.residuals.is_empty());
        assert!(st.forward_count > su.forward_count, "slab {slab}");
        assert!(flat(&tracked.x).iter().any(|&v| v != 0.0));
        assert_eq!(
            flat(&tracked.x),
            flat(&plain.x),
            "slab {slab}: tracked iterate"
        );
        // A tolerance between the 2nd and 3rd residuals stops after 3 of 5.
        let r = &tracked.residuals;
        assert!(r[2] < r[1], "slab {slab}: residuals {r:?}");
        let tol = 0.5 * (r[1] + r[2]);
        let (stopped, _) = run(slab, &sirt(5, true, Some(tol)));
        assert_eq!(stopped.stop, StopReason::Tolerance, "slab {slab}");
        assert_eq!(stopped.iterations, 3, "slab {slab}");
        let (three, _) = run(slab, &sirt(3, false, None));
        assert_eq!(
            flat(&stopped.x),
            flat(&three.x),
            "slab {slab}: stopped iterate"
        );
    }
}

/// Cone beam, the Joseph pair (deterministic back projection, so that the
/// bits repeat) and the voxel pair: tracked and untracked give the same
/// bits.
#[test]
fn cone_early_download_is_the_final_iterate() {
    let Some(be) = gpu_or_skip("cone_early_download_is_the_final_iterate") else {
        return;
    };
    let g = ConeGeometry::new(
        uniform_angles(16, 2.0 * std::f64::consts::PI as f32),
        60.0,
        30.0,
        18,
        20,
        1.2,
        1.1,
    )
    .unwrap();
    let v: ConeVolume = g.fitting_volume(16, 16, 14).unwrap();
    let b = data((g.n_angles(), g.n_rows(), g.n_cols()), 0xC0E);
    for (name, gpu) in [
        (
            "joseph pair (deterministic)",
            ConeGpuOptions {
                back: ConeBackProjector::Joseph,
                deterministic: true,
                ..ConeGpuOptions::default()
            },
        ),
        (
            "voxel pair",
            ConeGpuOptions {
                back: ConeBackProjector::Voxel,
                ..ConeGpuOptions::default()
            },
        ),
    ] {
        let run = |opt: &IterativeOptions| {
            cone_sirt_cuda_opts(&be, &g, &v, b.view(), None, opt, &gpu, &go()).unwrap()
        };
        let (tracked, st) = run(&sirt(4, true, None));
        let (plain, su) = run(&sirt(4, false, None));
        eprintln!(
            "{name}: tracked {} / untracked {} forward projections, residuals {:?}",
            st.forward_count, su.forward_count, tracked.residuals
        );
        assert_eq!(tracked.residuals.len(), 4);
        assert_eq!(st.forward_count, su.forward_count + 1, "{name}");
        assert!(flat(&tracked.x).iter().any(|&x| x != 0.0));
        assert_eq!(flat(&tracked.x), flat(&plain.x), "{name}: tracked iterate");
    }
}
