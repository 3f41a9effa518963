//! The vector geometries: ASTRA's conventions and conversions, validation
//! row by row, the volume box, and what each constructor (circular scans,
//! misalignments, helical, laminography) does to the rays.

use std::f64::consts::PI;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::cone::ConeGeometry;
use tomors_core::geometry::{uniform_angles, ParallelGeometry};
use tomors_core::vector::{
    ConeScan, ConeVecGeometry, ParallelScan, ParallelVecGeometry, RowDefect, Turn,
    VectorGeometryError, VolumeGeometry,
};
use tomors_core::CoreError;

fn close(a: [f64; 3], b: [f64; 3], tol: f64) -> bool {
    (0..3).all(|k| (a[k] - b[k]).abs() <= tol)
}

/// ASTRA 2.5's own conversion of a `cone` geometry (`astra.geom_2vec`,
/// docs/cone.md) and of `parallel3d` (`genPar3DProjections`): source
/// `SOD·(sin θ, −cos θ, 0)`, detector centre `ODD·(−sin θ, cos θ, 0)`,
/// `u = pixel_u·(cos θ, sin θ, 0)`, `v = (0, 0, pixel_v)`; parallel rays
/// `(−sin θ, cos θ, 0)` with the detector centred at the origin.
#[test]
fn circular_scans_give_astras_vectors() {
    let angles = [0.0f32, 0.3, 2.0, 4.5];
    let g = ConeGeometry::new(angles.to_vec(), 300.0, 150.0, 20, 30, 1.3, 0.9).unwrap();
    let rows = ConeVecGeometry::from_circular(&g).to_astra();
    for (row, &a) in rows.iter().zip(&angles) {
        let (s, c) = (a as f64).sin_cos();
        let want = [
            300.0 * s,
            -300.0 * c,
            0.0,
            -150.0 * s,
            150.0 * c,
            0.0,
            1.3 * c,
            1.3 * s,
            0.0,
            0.0,
            0.0,
            0.9,
        ];
        for k in 0..12 {
            assert!((row[k] - want[k]).abs() < 1e-12, "{a}: {row:?} vs {want:?}");
        }
    }
    let pg = ParallelGeometry::new(angles.to_vec(), 30).unwrap();
    let rows = ParallelVecGeometry::from_circular(&pg, 5, 1.0)
        .unwrap()
        .to_astra();
    for (row, &a) in rows.iter().zip(&angles) {
        let (s, c) = (a as f64).sin_cos();
        let want = [-s, c, 0.0, 0.0, 0.0, 0.0, c, s, 0.0, 0.0, 0.0, 1.0];
        for k in 0..12 {
            assert!((row[k] - want[k]).abs() < 1e-12, "{a}: {row:?} vs {want:?}");
        }
    }
}

/// The circular conversion keeps every source and pixel centre of the
/// circular geometry, principal point included.
#[test]
fn circular_cone_vectors_keep_the_sources_and_pixels() {
    let g = ConeGeometry::new(
        uniform_angles(7, 2.0 * PI as f32),
        80.0,
        40.0,
        9,
        12,
        1.1,
        1.4,
    )
    .unwrap()
    .with_principal_point(4.3, 5.2)
    .unwrap();
    let v = ConeVecGeometry::from_circular(&g);
    for i in 0..7 {
        assert!(close(v.projections()[i].source, g.source(i), 1e-12));
        for (r, c) in [(0.0, 0.0), (8.0, 11.0), (3.5, 6.25)] {
            let want = g.detector_point(i, c, r);
            assert!(
                close(v.pixel_center(i, r, c), want, 1e-12),
                "{i} ({r}, {c})"
            );
        }
        let p = [3.0, -2.0, 1.5];
        let a = g.project_point(i, p[0], p[1], p[2]).unwrap();
        let b = v.project_point(i, p).unwrap();
        assert!((a.col - b.col).abs() < 1e-10 && (a.row - b.row).abs() < 1e-10);
        assert!((a.depth - b.depth).abs() < 1e-10);
    }
}

#[test]
fn astra_rows_round_trip_and_flat_arrays_are_read_row_by_row() {
    let mut rng = StdRng::seed_from_u64(3);
    let g = ConeScan::new(50.0, 20.0, 8, 9, 1.0, 1.2)
        .detector_roll(0.1)
        .source_offset(1.0, -2.0)
        .orbit(&[0.0, 1.0, 2.5])
        .unwrap();
    let rows = g.to_astra();
    assert_eq!(ConeVecGeometry::from_astra(&rows, 8, 9).unwrap(), g);
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    assert_eq!(ConeVecGeometry::from_astra_flat(&flat, 8, 9).unwrap(), g);
    let e = ConeVecGeometry::from_astra_flat(&flat[..35], 8, 9).unwrap_err();
    assert_eq!(e, VectorGeometryError::RowLength { len: 35 });
    let p: Vec<[f64; 12]> = (0..4)
        .map(|_| {
            let mut r = [0.0; 12];
            r.iter_mut().for_each(|v| *v = rng.gen_range(-1.0..1.0));
            r
        })
        .collect();
    let pg = ParallelVecGeometry::from_astra(&p, 3, 4).unwrap();
    assert_eq!(pg.to_astra(), p);
    assert_eq!(pg.astra_type(), "parallel3d_vec");
    assert_eq!(g.astra_type(), "cone_vec");
}

/// Every degenerate row is refused with its index and what is wrong; the
/// core error carries the same one line.
#[test]
fn degenerate_rows_are_refused_with_the_row_index() {
    let good = [
        0.0, -50.0, 0.0, 0.0, 20.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    let cases: Vec<(usize, [f64; 12], &str)> = vec![
        (
            7,
            {
                let mut r = good;
                r[7] = f64::NAN;
                r
            },
            "uY = NaN is not finite",
        ),
        (
            0,
            {
                let mut r = good;
                r[2] = f64::INFINITY;
                r
            },
            "srcZ = inf is not finite",
        ),
        (
            3,
            {
                let mut r = good;
                r[6..9].copy_from_slice(&[0.0; 3]);
                r
            },
            "u (one detector column step) is zero",
        ),
        (
            4,
            {
                let mut r = good;
                r[9..12].copy_from_slice(&[0.0; 3]);
                r
            },
            "v (one detector row step) is zero",
        ),
        (
            5,
            {
                let mut r = good;
                r[9..12].copy_from_slice(&[2.0, 0.0, 0.0]);
                r
            },
            "u and v are parallel",
        ),
        (
            6,
            {
                let mut r = good;
                r[1] = 20.0;
                r[0] = 7.0;
                r
            },
            "the source lies in the detector plane",
        ),
    ];
    for (at, bad, msg) in cases {
        let mut rows = vec![good; 9];
        rows[at] = bad;
        let e = ConeVecGeometry::from_astra(&rows, 4, 4).unwrap_err();
        match &e {
            VectorGeometryError::Row { row, .. } => assert_eq!(*row, at),
            other => panic!("{other:?}"),
        }
        let text = e.to_string();
        assert!(text.starts_with(&format!("vector row {at}: ")), "{text}");
        assert!(text.contains(msg), "{text} lacks {msg}");
        let core: CoreError = e.into();
        assert!(
            core.to_string().contains(&format!("vector row {at}: ")),
            "{core}"
        );
    }
    let pgood = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let mut rows = vec![pgood; 3];
    rows[1][0..3].copy_from_slice(&[0.0; 3]);
    let e = ParallelVecGeometry::from_astra(&rows, 2, 2).unwrap_err();
    assert_eq!(
        e,
        VectorGeometryError::Row {
            row: 1,
            defect: RowDefect::ZeroRay
        }
    );
    rows[1][0..3].copy_from_slice(&[1.0, 0.0, 0.5]);
    let e = ParallelVecGeometry::from_astra(&rows, 2, 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        "vector row 1: the ray direction lies in the detector plane"
    );
    rows[1] = pgood;
    rows[2][3] = f64::NEG_INFINITY;
    let e = ParallelVecGeometry::from_astra(&rows, 2, 2).unwrap_err();
    assert!(e.to_string().starts_with("vector row 2: dX = -inf"), "{e}");
    assert_eq!(
        ParallelVecGeometry::from_astra(&[], 2, 2).unwrap_err(),
        VectorGeometryError::NoProjections
    );
    assert!(matches!(
        ParallelVecGeometry::from_astra(&[pgood], 0, 2).unwrap_err(),
        VectorGeometryError::EmptyDetector { .. }
    ));
}

#[test]
fn volume_box_places_voxels_as_documented_and_maps_to_astra() {
    let v = VolumeGeometry::with_voxels(4, 5, 6, [0.5, 2.0, 1.0], [10.0, -3.0, 2.0]).unwrap();
    // Row 0 at the largest y; x and z grow with the index.
    assert!((v.x(0) - (10.0 - 0.75)).abs() < 1e-12);
    assert!((v.y(0) - (-3.0 + 4.0)).abs() < 1e-12 && v.y(4) < v.y(0));
    assert!((v.z(5) - (2.0 + 2.5)).abs() < 1e-12);
    let w = v.astra_window();
    assert_eq!(w, [9.0, 11.0, -8.0, 2.0, -1.0, 5.0]);
    let a = VolumeGeometry::from_astra(4, 5, 6, w).unwrap();
    assert!(close(a.voxel, v.voxel, 1e-12) && close(a.center, v.center, 1e-12));
    let p = [9.3, 0.1, 4.2];
    assert!(close(v.to_world(v.to_index(p)), p, 1e-12));
    assert!(close(
        v.to_index([v.x(2), v.y(3), v.z(1)]),
        [2.0, 3.0, 1.0],
        1e-12
    ));
    assert!(VolumeGeometry::new(0, 3, 3, 1.0).is_err());
    assert!(VolumeGeometry::with_voxels(3, 3, 3, [1.0, -1.0, 1.0], [0.0; 3]).is_err());
    assert!(VolumeGeometry::from_astra(3, 3, 3, [0.0, 1.0, 2.0, 2.0, 0.0, 1.0]).is_err());
    assert!(VolumeGeometry::with_voxels(3, 3, 3, [1.0; 3], [f64::NAN, 0.0, 0.0]).is_err());
}

/// Every pixel centre projects back onto itself (cone and parallel, on a
/// random misaligned scan), and a sub-band of rows keeps its rays.
#[test]
fn pixels_project_back_onto_themselves() {
    let cone = ConeScan::new(40.0, 30.0, 6, 7, 1.2, 0.8)
        .detector_offset(1.5, -0.5)
        .detector_roll(0.2)
        .detector_pitch(-0.3)
        .detector_yaw(0.25)
        .source_offset(2.0, 1.0)
        .axis_tilt(0.05, -0.08)
        .orbit(&[0.1, 1.7, 4.0])
        .unwrap();
    let par = ParallelScan::new(6, 7, 1.2, 0.8)
        .detector_roll(0.2)
        .ray_tilt(0.3, -0.2)
        .orbit(&[0.1, 1.7, 4.0])
        .unwrap();
    for i in 0..3 {
        for (r, c) in [(0.0, 0.0), (5.0, 6.0), (2.5, 3.7)] {
            // A point on the ray between source and pixel.
            let s = cone.projections()[i].source;
            let q = cone.pixel_center(i, r, c);
            let p = [0, 1, 2].map(|k| 0.4 * s[k] + 0.6 * q[k]);
            let h = cone.project_point(i, p).unwrap();
            assert!(
                (h.col - c).abs() < 1e-10 && (h.row - r).abs() < 1e-10,
                "cone {i}"
            );
            let ray = par.projections()[i].ray;
            let q = par.pixel_center(i, r, c);
            let p = [
                q[0] - 3.0 * ray[0],
                q[1] - 3.0 * ray[1],
                q[2] - 3.0 * ray[2],
            ];
            let h = par.project_point(i, p).unwrap();
            assert!(
                (h.col - c).abs() < 1e-10 && (h.row - r).abs() < 1e-10,
                "parallel {i}"
            );
        }
    }
    let band = cone.detector_rows(2..5).unwrap();
    assert_eq!(band.n_rows(), 3);
    for i in 0..3 {
        assert!(close(
            band.pixel_center(i, 0.0, 4.0),
            cone.pixel_center(i, 2.0, 4.0),
            1e-12
        ));
        assert!(close(
            band.pixel_center(i, 2.0, 1.0),
            cone.pixel_center(i, 4.0, 1.0),
            1e-12
        ));
    }
    assert!(cone.detector_rows(4..7).is_err());
}

/// Offsets, roll, source offset: where the rotation axis and the origin
/// land on the detector.
#[test]
fn detector_misalignments_move_the_image_as_documented() {
    let (sod, odd, pu, pv) = (60.0, 40.0, 1.5, 1.25);
    let (nr, nc) = (21usize, 31usize);
    let (rc, cc) = ((nr as f64 - 1.0) / 2.0, (nc as f64 - 1.0) / 2.0);
    let m = (sod + odd) / sod;
    let ideal = ConeScan::new(sod, odd, nr, nc, pu, pv);
    // Offset: the origin lands du columns / dv rows the other way.
    let g = ideal.detector_offset(2.5, -1.5).orbit(&[0.0, 2.0]).unwrap();
    for i in 0..2 {
        let h = g.project_point(i, [0.0; 3]).unwrap();
        assert!((h.col - (cc - 2.5)).abs() < 1e-10 && (h.row - (rc + 1.5)).abs() < 1e-10);
    }
    // Roll φ: a point z up the axis lands at (z·M·sin φ/pu, z·M·cos φ/pv).
    let phi = 0.1;
    let g = ideal.detector_roll(phi).orbit(&[0.0, 1.0, 3.0]).unwrap();
    let z = 4.0;
    for i in 0..3 {
        let h = g.project_point(i, [0.0, 0.0, z]).unwrap();
        assert!((h.col - cc - z * m * phi.sin() / pu).abs() < 1e-10, "{h:?}");
        assert!((h.row - rc - z * m * phi.cos() / pv).abs() < 1e-10, "{h:?}");
    }
    // Pitch and yaw keep the centre pixel and turn v (pitch) or u (yaw)
    // out of the plane by the angle.
    let f = ideal.detector_pitch(0.2).frame().detector;
    assert!(close(f.u, [pu, 0.0, 0.0], 1e-12));
    assert!((f.v[2] / pv - 0.2f64.cos()).abs() < 1e-12 && f.v[1].abs() > 0.1);
    let f = ideal.detector_yaw(0.3).frame().detector;
    assert!(close(f.v, [0.0, 0.0, pv], 1e-12));
    assert!((f.u[0] / pu - 0.3f64.cos()).abs() < 1e-12 && f.u[1].abs() > 0.1);
    assert!(close(f.center, [0.0, odd, 0.0], 1e-12));
    // Source offset along u and v (world units).
    let s = ideal.source_offset(3.0, -2.0).frame().source;
    assert!(close(s, [3.0, -sod, -2.0], 1e-12));
}

/// A tilted axis, seen on a parallel-beam detector: a point z up the axis
/// lands at column offset z·sin φ/pu at every angle (the axis leans towards
/// +u), row offset z·cos φ/pv. Laminography: the rays meet the axis at
/// π/2 − tilt at every angle.
#[test]
fn axis_tilt_and_laminography_turn_the_axis_as_documented() {
    let angles: Vec<f64> = (0..8).map(|i| i as f64 * 0.8).collect();
    let phi = 0.07;
    let g = ParallelScan::new(11, 13, 0.9, 1.1)
        .axis_tilt(phi, 0.0)
        .orbit(&angles)
        .unwrap();
    let z = 3.0;
    for i in 0..angles.len() {
        let h = g.project_point(i, [0.0, 0.0, z]).unwrap();
        assert!(
            (h.col - 6.0 - z * phi.sin() / 0.9).abs() < 1e-10,
            "{i}: {h:?}"
        );
        assert!(
            (h.row - 5.0 - z * phi.cos() / 1.1).abs() < 1e-10,
            "{i}: {h:?}"
        );
    }
    // Towards the source: the top of the axis comes nearer the source.
    let c = ConeScan::new(50.0, 50.0, 11, 11, 1.0, 1.0).axis_tilt(0.0, 0.1);
    let top = [0.0, 0.0, 10.0];
    let s = c.frame().source;
    let d_top =
        ((top[0] - s[0]).powi(2) + (top[1] - s[1]).powi(2) + (top[2] - s[2]).powi(2)).sqrt();
    let d_bottom =
        ((top[0] - s[0]).powi(2) + (top[1] - s[1]).powi(2) + (-top[2] - s[2]).powi(2)).sqrt();
    assert!(d_top < d_bottom);
    for tilt in [0.0, 0.5, 1.0] {
        let g = ParallelScan::new(4, 4, 1.0, 1.0)
            .laminography(tilt)
            .orbit(&angles)
            .unwrap();
        for p in g.projections() {
            let r = p.ray;
            let cos = r[2].abs() / (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
            assert!((cos - f64::sin(tilt)).abs() < 1e-12, "tilt {tilt}: {r:?}");
        }
        let g = ConeScan::new(50.0, 50.0, 4, 4, 1.0, 1.0)
            .laminography(tilt)
            .orbit(&angles)
            .unwrap();
        for p in g.projections() {
            // The central ray (source → detector centre, through the origin)
            // meets the axis at π/2 − tilt.
            let d = p.detector.center;
            let s = p.source;
            let r = [d[0] - s[0], d[1] - s[1], d[2] - s[2]];
            let cos = r[2].abs() / (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
            assert!((cos - f64::sin(tilt)).abs() < 1e-12, "tilt {tilt}");
        }
    }
}

#[test]
fn helical_scans_climb_by_the_pitch_in_the_stated_direction() {
    let (n, turns, pitch) = (40usize, 2.0, 7.5);
    for turn in [Turn::CounterClockwise, Turn::Clockwise] {
        let g = ConeScan::new(60.0, 30.0, 5, 5, 1.0, 1.0)
            .helical(n, turns, pitch, turn)
            .unwrap();
        let sign = if turn == Turn::Clockwise { -1.0 } else { 1.0 };
        for (i, p) in g.projections().iter().enumerate() {
            let f = i as f64 / n as f64;
            let a = sign * 2.0 * PI * turns * f;
            let want = [60.0 * a.sin(), -60.0 * a.cos(), pitch * turns * (f - 0.5)];
            assert!(
                close(p.source, want, 1e-10),
                "{turn:?} {i}: {:?} vs {want:?}",
                p.source
            );
            assert!((p.detector.center[2] - want[2]).abs() < 1e-12);
        }
    }
    let s = ParallelScan::new(5, 5, 1.0, 1.0);
    assert!(s.helical(0, 1.0, 1.0, Turn::Clockwise).is_err());
    assert!(s.helical(10, 0.0, 1.0, Turn::Clockwise).is_err());
    assert!(s.helical(10, 1.0, f64::NAN, Turn::Clockwise).is_err());
    let e: CoreError = s
        .helical(10, -1.0, 1.0, Turn::Clockwise)
        .unwrap_err()
        .into();
    assert!(matches!(e, CoreError::Parameter(_)), "{e}");
}
