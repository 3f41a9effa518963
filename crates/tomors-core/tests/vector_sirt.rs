//! SIRT (the existing algorithm, unchanged) on vector geometries: a
//! misaligned cone-beam scan, a helical scan and a laminography scan
//! reach a stated error against the phantom, and reconstructing the same
//! data with the ideal circular geometry (the misalignment, the helix or
//! the tilt ignored) is clearly worse: the geometry is used.
//!
//! Measured (20 iterations, whole-volume NRMSE against the phantom
//! rasterised with 3³ samples per voxel): misaligned cone 0.0444 (ideal
//! geometry 0.1426), helical 0.0559 (one circle: 0.1469), laminography
//! 0.0600 (no tilt: 0.1110). The bounds below are these plus about 25 %.

use std::f64::consts::PI;

use ndarray::{Array3, ArrayView3};
use tomors_core::iterative::{
    reconstruct_cone, Algorithm, Constraint, IterativeOptions, Weighting,
};
use tomors_core::metrics::nrmse;
use tomors_core::phantom::Phantom3d;
use tomors_core::vector::analytic::{project, rasterize};
use tomors_core::vector::{
    ConeScan, ParallelScan, Turn, VecGeometry, VecJosephProjector, VolumeGeometry,
};

/// NRMSE of a whole volume against the truth (range of the truth).
fn volume_nrmse(x: &Array3<f32>, truth: &Array3<f32>) -> f64 {
    let (nz, ny, nx) = truth.dim();
    let a = x.view().into_shape_with_order((nz * ny, nx)).unwrap();
    let b = truth.view().into_shape_with_order((nz * ny, nx)).unwrap();
    nrmse(a, b, None).unwrap()
}

/// SIRT (ASTRA's weights, non-negative) with Joseph's pair on `g`.
fn sirt(
    g: &VecGeometry,
    v: &VolumeGeometry,
    proj: ArrayView3<'_, f32>,
    iterations: usize,
) -> Array3<f32> {
    let p = VecJosephProjector::new(g, v).unwrap();
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations,
        constraint: Constraint::non_negative(),
        ..IterativeOptions::default()
    };
    reconstruct_cone(&p, proj, None, &options, &mut |_| true)
        .unwrap()
        .x
}

/// Reconstructs the exact projections of `phantom` on `real` with the
/// real geometry and with `ideal`; returns both errors.
fn compare(
    name: &str,
    phantom: &Phantom3d,
    scale: f64,
    real: &VecGeometry,
    ideal: &VecGeometry,
    v: &VolumeGeometry,
    iterations: usize,
) -> (f64, f64) {
    let truth = rasterize(phantom, scale, v, 3);
    let proj = project(phantom, scale, real).mapv(|x| x as f32);
    let e_real = volume_nrmse(&sirt(real, v, proj.view(), iterations), &truth);
    let e_ideal = volume_nrmse(&sirt(ideal, v, proj.view(), iterations), &truth);
    println!("{name}: NRMSE {e_real:.4} with the real geometry, {e_ideal:.4} with the ideal one");
    (e_real, e_ideal)
}

/// SIRT iterations of every case.
const ITERATIONS: usize = 20;

fn turn_angles(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64 * 2.0 * PI / n as f64).collect()
}

#[test]
fn sirt_on_a_misaligned_cone_scan() {
    let v = VolumeGeometry::new(24, 24, 24, 1.0).unwrap();
    let angles = turn_angles(30);
    let scan = ConeScan::new(60.0, 40.0, 32, 36, 1.5, 1.5);
    let real: VecGeometry = scan
        .detector_offset(3.0, -2.0)
        .detector_roll(0.05)
        .detector_pitch(0.1)
        .detector_yaw(0.05)
        .source_offset(2.0, 1.0)
        .axis_tilt(0.03, -0.02)
        .orbit(&angles)
        .unwrap()
        .into();
    let ideal: VecGeometry = scan.orbit(&angles).unwrap().into();
    let (e, e0) = compare(
        "misaligned cone",
        &Phantom3d::shepp_logan(),
        10.0,
        &real,
        &ideal,
        &v,
        ITERATIONS,
    );
    assert!(e < 0.055, "{e}");
    assert!(e0 > 1.5 * e, "ignoring the misalignment: {e0} vs {e}");
}

#[test]
fn sirt_on_a_helical_scan() {
    // A long object (the phantom stretched 1.8× along z) on a short
    // detector: two turns climbing 12 voxels per turn.
    let mut phantom = Phantom3d::shepp_logan();
    for e in &mut phantom.ellipsoids {
        e.center[2] *= 1.8;
        e.axes[2] *= 1.8;
    }
    let v = VolumeGeometry::new(24, 24, 32, 1.0).unwrap();
    let scan = ConeScan::new(60.0, 40.0, 16, 36, 1.5, 1.5);
    let n = 60;
    let real: VecGeometry = scan
        .helical(n, 2.0, 12.0, Turn::CounterClockwise)
        .unwrap()
        .into();
    // Ignored helix: the same angles on one circle at z = 0.
    let angles: Vec<f64> = (0..n).map(|i| 4.0 * PI * i as f64 / n as f64).collect();
    let ideal: VecGeometry = scan.orbit(&angles).unwrap().into();
    let (e, e0) = compare(
        "helical cone",
        &phantom,
        10.0,
        &real,
        &ideal,
        &v,
        ITERATIONS,
    );
    assert!(e < 0.07, "{e}");
    assert!(e0 > 1.5 * e, "ignoring the helix: {e0} vs {e}");
}

#[test]
fn sirt_on_a_laminography_scan() {
    // A flat sample (the phantom squashed to 0.3 of its height) in a thin
    // slab, parallel beam, the axis tilted 0.5 rad towards the beam.
    let mut phantom = Phantom3d::shepp_logan();
    for e in &mut phantom.ellipsoids {
        e.center[2] *= 0.3;
        e.axes[2] *= 0.3;
    }
    let v = VolumeGeometry::new(32, 32, 10, 1.0).unwrap();
    let scan = ParallelScan::new(24, 40, 1.0, 1.0);
    let angles = turn_angles(40);
    let real: VecGeometry = scan.laminography(0.5).orbit(&angles).unwrap().into();
    let ideal: VecGeometry = scan.orbit(&angles).unwrap().into();
    let (e, e0) = compare(
        "parallel laminography",
        &phantom,
        14.0,
        &real,
        &ideal,
        &v,
        ITERATIONS,
    );
    assert!(e < 0.075, "{e}");
    assert!(e0 > 1.5 * e, "ignoring the tilt: {e0} vs {e}");
}

/// The other methods of `iterative` run unchanged on the vector projector
/// (block views for SART / BLOCK-IT, single rays for ART, row norms for
/// Cimmino) and each lowers the error of the zero start on a small
/// misaligned helical scan; the voxel-driven pair runs SIRT too.
/// Measured NRMSE: SART 0.068, BLOCK-IT 0.062, Cimmino 0.068, ART 0.080,
/// SIRT with the voxel-driven pair 0.071; the zero start 0.180.
#[test]
fn block_and_ray_methods_run_on_vector_geometries() {
    let v = VolumeGeometry::new(16, 16, 16, 1.0).unwrap();
    let scan = ConeScan::new(50.0, 30.0, 16, 24, 1.5, 1.5)
        .detector_offset(2.0, 1.0)
        .detector_roll(0.05);
    let g: VecGeometry = scan.helical(24, 1.5, 6.0, Turn::Clockwise).unwrap().into();
    let phantom = Phantom3d::shepp_logan();
    let truth = rasterize(&phantom, 6.5, &v, 2);
    let proj = project(&phantom, 6.5, &g).mapv(|x| x as f32);
    let zero = volume_nrmse(&Array3::zeros(truth.dim()), &truth);
    let methods = [
        (
            "sart",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 1,
            },
            3,
        ),
        (
            "block-it",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 6,
            },
            4,
        ),
        ("cimmino", Algorithm::Sirt(Weighting::Cimmino), 10),
        (
            "art",
            Algorithm::Art {
                order: tomors_core::iterative::RayOrder::Sequential,
            },
            1,
        ),
    ];
    let p = VecJosephProjector::new(&g, &v).unwrap();
    for (name, algorithm, iterations) in methods {
        let options = IterativeOptions {
            algorithm,
            iterations,
            constraint: Constraint::non_negative(),
            ..IterativeOptions::default()
        };
        let x = reconstruct_cone(&p, proj.view(), None, &options, &mut |_| true)
            .unwrap()
            .x;
        let e = volume_nrmse(&x, &truth);
        println!("{name}: NRMSE {e:.4} (zero start {zero:.4})");
        assert!(e < 0.6 * zero, "{name}: {e} vs {zero}");
    }
    let voxel = tomors_core::vector::VecVoxelProjector::new(&g, &v).unwrap();
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 10,
        ..IterativeOptions::default()
    };
    let x = reconstruct_cone(&voxel, proj.view(), None, &options, &mut |_| true)
        .unwrap()
        .x;
    let e = volume_nrmse(&x, &truth);
    println!("sirt voxel-driven pair: NRMSE {e:.4} (zero start {zero:.4})");
    assert!(e < 0.6 * zero, "voxel pair: {e} vs {zero}");
}
