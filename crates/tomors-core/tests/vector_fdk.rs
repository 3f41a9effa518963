//! FDK on cone-beam vector geometries: on a circular scan it is the
//! circular FDK; on a misaligned scan it uses each projection's vectors.

use std::f64::consts::PI;

use ndarray::Array3;
use tomors_core::cone::{fdk, project_cone, ConeGeometry, ConeVolume, FdkOptions};
use tomors_core::cpu::CpuBackend;
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::nrmse;
use tomors_core::phantom::Phantom3d;
use tomors_core::vector::analytic::{project, rasterize};
use tomors_core::vector::{fdk_vec, ConeScan, ConeVecGeometry, VecFdkOptions, VolumeGeometry};

fn rel(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    let (mut d, mut n) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        d += (*x as f64 - *y as f64).powi(2);
        n += (*y as f64).powi(2);
    }
    (d / n).sqrt()
}

fn volume_nrmse(x: &Array3<f32>, truth: &Array3<f32>) -> f64 {
    let (nz, ny, nx) = truth.dim();
    let a = x.view().into_shape_with_order((nz * ny, nx)).unwrap();
    let b = truth.view().into_shape_with_order((nz * ny, nx)).unwrap();
    nrmse(a, b, None).unwrap()
}

/// Off-centre principal point, non-square pixels, non-unit voxels: the
/// vector FDK of the circular scan equals `cone::fdk` (measured relative
/// L2 4.7·10⁻⁷).
#[test]
fn circular_vector_fdk_is_the_circular_fdk() {
    let g = ConeGeometry::new(
        uniform_angles(24, 2.0 * PI as f32),
        70.0,
        50.0,
        30,
        36,
        1.4,
        1.2,
    )
    .unwrap()
    .with_principal_point(18.6, 14.1)
    .unwrap();
    let v = ConeVolume::new(22, 20, 18, 0.9).unwrap();
    let proj = project_cone(&Phantom3d::shepp_logan(), &g, 8.0, 1).unwrap();
    let want = fdk(
        &CpuBackend::new(),
        proj.view(),
        &g,
        &v,
        &FdkOptions::default(),
    )
    .unwrap();
    let got = fdk_vec(
        &CpuBackend::new(),
        proj.view(),
        &ConeVecGeometry::from_circular(&g),
        &VolumeGeometry::from_cone_volume(&v),
        &VecFdkOptions::default(),
    )
    .unwrap();
    let e = rel(&got, &want);
    println!("vector FDK vs cone::fdk on a circular scan: relative L2 {e:.2e}");
    assert!(e <= 1e-5, "{e}");
}

/// A misaligned scan (detector offset and roll, source offset): FDK with
/// the real vectors reaches the stated error; FDK with the ideal circular
/// geometry is clearly worse. Measured: 0.0351 vs 0.1402.
#[test]
fn vector_fdk_corrects_a_misaligned_scan() {
    let v = VolumeGeometry::new(28, 28, 24, 1.0).unwrap();
    let angles: Vec<f64> = (0..90).map(|i| i as f64 * 2.0 * PI / 90.0).collect();
    let scan = ConeScan::new(80.0, 60.0, 40, 48, 1.5, 1.5);
    let real = scan
        .detector_offset(4.0, -3.0)
        .detector_roll(0.03)
        .source_offset(1.5, -1.0)
        .orbit(&angles)
        .unwrap();
    let ideal = scan.orbit(&angles).unwrap();
    let phantom = Phantom3d::shepp_logan();
    let scale = 11.0;
    let truth = rasterize(&phantom, scale, &v, 3);
    let proj = project(&phantom, scale, &real.clone().into()).mapv(|x| x as f32);
    let cpu = CpuBackend::new();
    let o = VecFdkOptions::default();
    let e = volume_nrmse(&fdk_vec(&cpu, proj.view(), &real, &v, &o).unwrap(), &truth);
    let e0 = volume_nrmse(&fdk_vec(&cpu, proj.view(), &ideal, &v, &o).unwrap(), &truth);
    println!(
        "misaligned cone FDK: NRMSE {e:.4} with the real vectors, {e0:.4} with the ideal ones"
    );
    assert!(e < 0.045, "{e}");
    assert!(e0 > 1.5 * e, "{e0} vs {e}");
    let bad = VecFdkOptions {
        angular_weights: Some(vec![1.0; 3]),
        ..VecFdkOptions::default()
    };
    assert!(fdk_vec(&cpu, proj.view(), &real, &v, &bad).is_err());
}
