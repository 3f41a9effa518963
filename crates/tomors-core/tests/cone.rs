//! Cone beam: geometry, exact phantom projections, Parker weights, and the
//! fast back projector against the f64 reference.

use std::f64::consts::PI;

use ndarray::{s, Array3};
use rand::{Rng, SeedableRng};
use tomors_core::cone::weights::{angular_weights, parker_gamma, parker_weight};
use tomors_core::cone::{
    backproject_cone, backproject_cone_reference, backproject_cone_with, fdk, project_cone,
    uniform_angles_inclusive, ConeGeometry, ConeVolume, FdkOptions, ScanMode,
};
use tomors_core::cpu::{CpuBackend, SimdChoice};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::{Ellipsoid, Phantom3d};
use tomors_core::{CoreError, ParallelGeometry};

fn rel_l2(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    let den: f64 = b.iter().map(|&y| (y as f64).powi(2)).sum();
    (num / den).sqrt()
}

fn ball(center: [f64; 3], radius: f64, value: f64) -> Ellipsoid {
    Ellipsoid {
        center,
        axes: [radius; 3],
        angle_rad: 0.0,
        value,
    }
}

#[test]
fn detector_points_source_and_projection_agree() {
    let g = ConeGeometry::new(
        uniform_angles(7, 2.0 * PI as f32),
        300.0,
        150.0,
        40,
        50,
        1.3,
        0.9,
    )
    .unwrap()
    .with_principal_point(22.3, 21.1)
    .unwrap();
    for i in 0..g.n_angles() {
        let src = g.source(i);
        for &(x, y, z) in &[(10.0, -5.0, 3.0), (-20.0, 17.0, -8.0), (0.0, 0.0, 0.0)] {
            let p = g.project_point(i, x, y, z).unwrap();
            let d = g.detector_point(i, p.col, p.row);
            // Source, point and detector point are collinear, point in between.
            let v1 = [x - src[0], y - src[1], z - src[2]];
            let v2 = [d[0] - src[0], d[1] - src[1], d[2] - src[2]];
            let cross = [
                v1[1] * v2[2] - v1[2] * v2[1],
                v1[2] * v2[0] - v1[0] * v2[2],
                v1[0] * v2[1] - v1[1] * v2[0],
            ];
            let n1 = (v1[0] * v1[0] + v1[1] * v1[1] + v1[2] * v1[2]).sqrt();
            let n2 = (v2[0] * v2[0] + v2[1] * v2[1] + v2[2] * v2[2]).sqrt();
            let sin = (cross[0].powi(2) + cross[1].powi(2) + cross[2].powi(2)).sqrt() / (n1 * n2);
            assert!(sin < 1e-12, "angle {i}: not collinear ({sin})");
            assert!(n1 < n2);
        }
        // The origin lands on the principal point; the detector is at ODD.
        let o = g.project_point(i, 0.0, 0.0, 0.0).unwrap();
        assert!((o.col - 22.3).abs() < 1e-12 && (o.row - 21.1).abs() < 1e-12);
        let c = g.detector_point(i, 22.3, 21.1);
        assert!(((c[0].powi(2) + c[1].powi(2)).sqrt() - 150.0).abs() < 1e-9);
    }
    // θ = 0: source at (0, −SOD), x grows with the column, z with the row.
    let g0 = ConeGeometry::new(vec![0.0, 1.0], 100.0, 100.0, 10, 10, 1.0, 1.0).unwrap();
    assert_eq!(g0.source(0), [0.0, -100.0, 0.0]);
    let p = g0.project_point(0, 1.0, 0.0, 1.0).unwrap();
    assert!((p.col - 6.5).abs() < 1e-12 && (p.row - 6.5).abs() < 1e-12);
    // A point nearer the source is magnified more.
    let q = g0.project_point(0, 1.0, -50.0, 0.0).unwrap();
    assert!((q.col - (4.5 + 4.0)).abs() < 1e-12);
}

#[test]
fn bad_geometry_gets_clear_errors() {
    let angles = uniform_angles(8, 2.0 * PI as f32);
    for (sod, odd) in [(0.0, 10.0), (10.0, 0.0), (-5.0, 10.0), (f64::NAN, 1.0)] {
        let e = ConeGeometry::new(angles.clone(), sod, odd, 16, 16, 1.0, 1.0).unwrap_err();
        assert!(matches!(e, CoreError::Geometry(_)), "{e}");
        assert!(e.to_string().contains("distance"), "{e}");
    }
    assert!(ConeGeometry::new(angles.clone(), 10.0, 10.0, 0, 16, 1.0, 1.0).is_err());
    assert!(ConeGeometry::new(angles.clone(), 10.0, 10.0, 16, 16, 0.0, 1.0).is_err());
    assert!(ConeGeometry::new(vec![0.0], 10.0, 10.0, 16, 16, 1.0, 1.0).is_err());
    let g = ConeGeometry::new(angles.clone(), 100.0, 100.0, 64, 64, 2.0, 2.0).unwrap();
    assert!(g.clone().with_principal_point(70.0, 10.0).is_err());

    // Source inside the volume: 200×200 voxels reach radius 141 > SOD.
    let big = ConeVolume::new(200, 200, 4, 1.0).unwrap();
    let e = g.check_volume(&big).unwrap_err();
    assert!(e.to_string().contains("source is inside the volume"), "{e}");

    // Detector too small: 60 voxels of 1 cast a shadow wider than 64 px of 2
    // at magnification 2 (60·2/(2·√(1 − 0.3²)) > 64) → columns; then rows.
    let wide = ConeVolume::new(64, 64, 8, 1.0).unwrap();
    let e = g.check_volume(&wide).unwrap_err();
    assert!(
        e.to_string().contains("too small") && e.to_string().contains("columns"),
        "{e}"
    );
    let tall = ConeVolume::new(40, 40, 60, 1.0).unwrap();
    let e = g.check_volume(&tall).unwrap_err();
    assert!(
        e.to_string().contains("too small") && e.to_string().contains("rows"),
        "{e}"
    );

    // The fitting volume passes, and a 1% larger voxel does not.
    let fit = g.fitting_volume(64, 64, 64).unwrap();
    g.check_volume(&fit).unwrap();
    let over = ConeVolume::new(64, 64, 64, fit.voxel_size * 1.01).unwrap();
    assert!(g.check_volume(&over).is_err());

    // fdk reports them too, as does a short scan over too small a range.
    let p = Array3::<f32>::zeros((8, 64, 64));
    assert!(fdk(
        &CpuBackend::new(),
        p.view(),
        &g,
        &big,
        &FdkOptions::default()
    )
    .is_err());
    let short = ConeGeometry::new(
        uniform_angles_inclusive(30, PI),
        100.0,
        100.0,
        64,
        64,
        2.0,
        2.0,
    )
    .unwrap();
    let e = angular_weights(&short, ScanMode::Short).unwrap_err();
    assert!(e.to_string().contains("short scan needs"), "{e}");
    let e = angular_weights(&short, ScanMode::Full).unwrap_err();
    assert!(e.to_string().contains("full scan needs"), "{e}");
    // Wrong projection shape.
    let p = Array3::<f32>::zeros((8, 63, 64));
    let e = fdk(
        &CpuBackend::new(),
        p.view(),
        &g,
        &fit,
        &FdkOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, CoreError::Shape(_)), "{e}");
}

/// With a distant source the cone-beam projection is the parallel-beam one:
/// same orientation, same values (checks `project_cone` against the exact
/// pixel-averaged parallel projections of `Phantom3d::project`).
#[test]
fn distant_source_gives_the_parallel_projections() {
    let (nr, nc) = (40, 48);
    let angles = uniform_angles(12, PI as f32);
    let phantom = Phantom3d::shepp_logan();
    let scale = 20.0;
    let cone = ConeGeometry::new(angles.clone(), 1e7, 1.0, nr, nc, 1.0, 1.0).unwrap();
    let par = ParallelGeometry::new(angles, nc).unwrap();
    let exact = phantom.project(&par, nr, 1.0, scale);
    let e3 = rel_l2(&project_cone(&phantom, &cone, scale, 3).unwrap(), &exact);
    let e8 = rel_l2(&project_cone(&phantom, &cone, scale, 8).unwrap(), &exact);
    println!("distant source vs parallel: rel L2 {e3:.2e} (3×3 rays), {e8:.2e} (8×8)");
    assert!(e3 < 1e-2, "{e3}");
    assert!(e8 < 0.5 * e3, "{e8} vs {e3}");
}

/// A small ball projects where `project_point` says its centre goes, and
/// FDK puts it back in its voxel.
#[test]
fn point_object_lands_where_the_geometry_says() {
    let n = 48;
    let g = ConeGeometry::new(
        uniform_angles(90, 2.0 * PI as f32),
        150.0,
        250.0,
        56,
        56,
        2.0,
        2.0,
    )
    .unwrap()
    .with_principal_point(28.0, 26.5)
    .unwrap();
    let vol = g.fitting_volume(n, n, n).unwrap();
    let vs = vol.voxel_size as f64;
    let (ix, iy, iz) = (33usize, 14usize, 37usize);
    let c = [vol.x(ix), vol.y(iy), vol.z(iz)];
    let phantom = Phantom3d::new(vec![ball(c, 2.5 * vs, 1.0)]);
    let proj = project_cone(&phantom, &g, 1.0, 12).unwrap();
    let mut worst = 0.0f64;
    for (i, p) in proj.outer_iter().enumerate() {
        let want = g.project_point(i, c[0], c[1], c[2]).unwrap();
        let (mut sw, mut sc, mut sr) = (0.0, 0.0, 0.0);
        for ((r, col), &v) in p.indexed_iter() {
            sw += v as f64;
            sc += v as f64 * col as f64;
            sr += v as f64 * r as f64;
        }
        let (mc, mr) = (sc / sw, sr / sw);
        worst = worst.max((mc - want.col).abs()).max((mr - want.row).abs());
        assert!(
            (mc - want.col).abs() < 0.02 && (mr - want.row).abs() < 0.02,
            "angle {i}: centroid ({mc:.3}, {mr:.3}), geometry ({:.3}, {:.3})",
            want.col,
            want.row
        );
    }
    println!("point object: centroid within {worst:.4} px of the geometry's position");
    let rec = fdk(
        &CpuBackend::new(),
        proj.view(),
        &g,
        &vol,
        &FdkOptions::default(),
    )
    .unwrap();
    // The centroid of the reconstructed ball (voxels above half its peak).
    let peak = rec.iter().fold(0.0f32, |m, &v| m.max(v));
    let (mut sw, mut sz, mut sy, mut sx) = (0.0, 0.0, 0.0, 0.0);
    for ((z, y, x), &v) in rec.indexed_iter() {
        if v > 0.5 * peak {
            let v = v as f64;
            sw += v;
            sz += v * z as f64;
            sy += v * y as f64;
            sx += v * x as f64;
        }
    }
    let got = (sz / sw, sy / sw, sx / sw);
    println!("point object: FDK centroid {got:.3?}, voxel ({iz}, {iy}, {ix})");
    assert!(
        (got.0 - iz as f64).abs() < 0.05
            && (got.1 - iy as f64).abs() < 0.05
            && (got.2 - ix as f64).abs() < 0.05,
        "{got:?}"
    );
    assert!((peak - 1.0).abs() < 0.1, "peak {peak}");
}

/// The Parker weights of the two measurements of one line add up to 1,
/// with conjugate rays found from this geometry's own source and detector.
#[test]
fn parker_weights_of_conjugate_rays_add_up_to_one() {
    let g = ConeGeometry::new(vec![0.0, 1.0], 300.0, 200.0, 8, 120, 2.0, 2.0).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for n in 0..400 {
        // The short scan itself, then over-scans (generalised weights).
        let delta = g.half_fan_angle() + [0.0, 0.05, 0.4, 1.0][n % 4];
        let theta: f64 = rng.gen_range(0.0..PI + 2.0 * delta);
        let col: f64 = rng.gen_range(0.0..119.0);
        let gamma_det = g.fan_angle(col);
        // The conjugate source angle, checked geometrically below.
        let theta2 = theta + PI - 2.0 * gamma_det;
        let g2 = ConeGeometry::new(
            vec![theta as f32, theta2 as f32],
            300.0,
            200.0,
            8,
            120,
            2.0,
            2.0,
        )
        .unwrap();
        let s0 = g2.source(0);
        let s1 = g2.source(1);
        // Source 0 seen from source 1 lands at the conjugate fan angle …
        let p2 = g2.project_point(1, s0[0], s0[1], 0.0).unwrap();
        assert!((g2.fan_angle(p2.col) + gamma_det).abs() < 1e-5); // f32 angles
                                                                  // … and the ray from source 0 through `col` passes through source 1.
        let far = g2.detector_point(0, col, 3.5);
        let (dx, dy) = (far[0] - s0[0], far[1] - s0[1]);
        let (ex, ey) = (s1[0] - s0[0], s1[1] - s0[1]);
        let sin = (dx * ey - dy * ex) / ((dx * dx + dy * dy).sqrt() * (ex * ex + ey * ey).sqrt());
        assert!(sin.abs() < 1e-6, "{sin}");
        let beta2 = theta2; // the first angle is 0
        if beta2 > PI + 2.0 * delta {
            // Measured only once in [0, π + 2δ]: weight 1.
            let w = parker_weight(theta, parker_gamma(&g, col), delta);
            let w_alt = parker_weight(
                theta - (PI + 2.0 * gamma_det),
                parker_gamma(&g, p2.col),
                delta,
            );
            assert!((w + w_alt - 1.0).abs() < 1e-5, "{w} + {w_alt}");
        } else {
            let w1 = parker_weight(theta, parker_gamma(&g, col), delta);
            let w2 = parker_weight(beta2, parker_gamma(&g, p2.col), delta);
            assert!(
                (w1 + w2 - 1.0).abs() < 1e-5,
                "θ {theta:.3} γ {gamma_det:.4}: {w1} + {w2}"
            );
        }
    }
}

/// Random projections, offset principal point, non-square detector pixels:
/// the fast back projector matches the f64 reference, for the whole volume
/// and for a slab, with rays that leave the detector at the top and bottom.
#[test]
fn fast_back_projector_matches_the_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (na, nr, nc) = (37, 29, 35);
    let g = ConeGeometry::new(
        uniform_angles(na, 2.0 * PI as f32),
        60.0,
        45.0,
        nr,
        nc,
        1.7,
        1.3,
    )
    .unwrap()
    .with_principal_point(17.8, 13.1)
    .unwrap();
    // Larger than the fitting volume, so rays leave the detector.
    let fit = g.fitting_volume(26, 22, 20).unwrap();
    let vol = ConeVolume::new(26, 22, 20, fit.voxel_size * 1.25).unwrap();
    let proj = Array3::from_shape_fn((na, nr, nc), |_| rng.gen_range(-1.0f32..1.0));
    let reference = backproject_cone_reference(proj.view(), &g, &vol, 0..vol.nz).unwrap();
    let mut fast = Array3::<f32>::zeros((vol.nz, vol.ny, vol.nx));
    backproject_cone(proj.view(), &g, &vol, 0..vol.nz, fast.view_mut()).unwrap();
    let e = rel_l2(&fast, &reference);
    println!("fast vs reference back projection: rel L2 {e:.2e}");
    assert!(e <= 1e-5, "{e}");
    // Voxels whose rays miss the detector somewhere are present.
    let edge = reference
        .slice(s![0, .., ..])
        .iter()
        .filter(|v| v.abs() > 0.0)
        .count();
    assert!(edge > 0);
    let mut slab = Array3::<f32>::zeros((7, vol.ny, vol.nx));
    backproject_cone(proj.view(), &g, &vol, 9..16, slab.view_mut()).unwrap();
    let e = rel_l2(&slab, &reference.slice(s![9..16, .., ..]).to_owned());
    assert!(e <= 1e-5, "slab: {e}");
    let reversed = std::ops::Range { start: 5, end: 4 };
    let bad = backproject_cone(proj.view(), &g, &vol, reversed, slab.view_mut());
    assert!(bad.is_err());
    // The portable build of the z loop (no AVX2) matches too.
    let mut portable = Array3::<f32>::zeros((vol.nz, vol.ny, vol.nx));
    backproject_cone_with(
        proj.view(),
        &g,
        &vol,
        0..vol.nz,
        portable.view_mut(),
        SimdChoice::Portable,
    )
    .unwrap();
    let e = rel_l2(&portable, &reference);
    assert!(e <= 1e-5, "portable: {e}");
}
