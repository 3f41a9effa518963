//! The fast multi-slice CPU back projector agrees with the scalar f64
//! reference for every interpolation, slice count and grid shape.

use ndarray::{s, Array3};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tomors_core::cpu::{backproject_reference, CpuBackend};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, Interpolation, ParallelGeometry, SliceGrid};

fn random_sinograms(ns: usize, na: usize, nb: usize, seed: u64) -> Array3<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    Array3::from_shape_fn((ns, na, nb), |_| rng.gen_range(-1.0f32..1.0))
}

fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den).sqrt()
}

/// Runs the fast path on `ns` slices and compares each with the reference.
fn compare(ns: usize, geometry: &ParallelGeometry, grid: &SliceGrid, interp: Interpolation) -> f64 {
    let sino = random_sinograms(
        ns,
        geometry.n_angles(),
        geometry.n_bins(),
        ns as u64 * 7 + 1,
    );
    let mut out = Array3::from_elem((ns, grid.ny, grid.nx), f32::NAN);
    CpuBackend::new()
        .backproject(sino.view(), geometry, grid, interp, 0.5, out.view_mut())
        .unwrap();
    let mut worst = 0.0f64;
    for z in 0..ns {
        let reference = backproject_reference(sino.slice(s![z, .., ..]), geometry, grid, interp);
        let fast: Vec<f32> = out.slice(s![z, .., ..]).iter().map(|v| v * 2.0).collect();
        assert!(
            fast.iter().all(|v| v.is_finite()),
            "slice {z} has unwritten pixels"
        );
        worst = worst.max(rel_l2(&fast, reference.as_slice().unwrap()));
    }
    worst
}

#[test]
fn linear_matches_reference_for_any_slice_count() {
    let geometry = ParallelGeometry::new(uniform_angles(45, std::f32::consts::PI), 40).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    for ns in [1, 2, 3, 8, 9, 17] {
        let err = compare(ns, &geometry, &grid, Interpolation::Linear);
        assert!(err < 1e-5, "{ns} slices: rel L2 {err}");
    }
}

/// A slice's back projection is the same bits whatever slices share its
/// pass (alone, in a group of 8 or 16 lanes, in a partial group): split
/// into slabs differently — by the memory budget, or over MPI ranks — the
/// volume does not change.
#[test]
fn a_slice_does_not_depend_on_its_neighbours() {
    let geometry = ParallelGeometry::new(uniform_angles(45, std::f32::consts::PI), 53).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let sino = random_sinograms(17, 45, 53, 5);
    for interp in [Interpolation::Linear, Interpolation::Nearest] {
        let run = |z: std::ops::Range<usize>| {
            let mut out = Array3::zeros((z.len(), grid.ny, grid.nx));
            CpuBackend::new()
                .backproject(
                    sino.slice(s![z, .., ..]),
                    &geometry,
                    &grid,
                    interp,
                    0.5,
                    out.view_mut(),
                )
                .unwrap();
            out
        };
        let all = run(0..17);
        for z in [0..1, 4..5, 16..17, 3..6, 8..17, 0..9] {
            let part = run(z.clone());
            assert_eq!(part, all.slice(s![z.clone(), .., ..]), "{interp:?} {z:?}");
        }
    }
}

#[test]
fn nearest_matches_reference() {
    // Angles and centre chosen off the half-bin ties, where f32 and f64 may
    // legitimately round to different bins.
    let angles: Vec<f32> = (0..37).map(|i| 0.013 + i as f32 * 0.0851).collect();
    let geometry = ParallelGeometry::new(angles, 33)
        .unwrap()
        .with_center(16.137)
        .unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    for ns in [1, 5, 8] {
        let err = compare(ns, &geometry, &grid, Interpolation::Nearest);
        assert!(err < 1e-5, "{ns} slices: rel L2 {err}");
    }
}

#[test]
fn non_square_grids_off_centre_axes_and_large_grids_are_exact_at_the_edges() {
    // A grid much larger than the detector: most rays miss, and the edges
    // must read zeros exactly like the reference.
    let geometry = ParallelGeometry::new(uniform_angles(30, std::f32::consts::PI), 24)
        .unwrap()
        .with_center(9.3)
        .unwrap();
    for grid in [
        SliceGrid::new(70, 13).unwrap(),
        SliceGrid::new(5, 90).unwrap(),
        SliceGrid::with_pixel_size(37, 41, 0.63).unwrap(),
        SliceGrid::with_pixel_size(20, 20, 2.5).unwrap(),
    ] {
        for interp in [Interpolation::Linear, Interpolation::Nearest] {
            let err = compare(3, &geometry, &grid, interp);
            assert!(err < 1e-5, "{grid:?} {interp}: rel L2 {err}");
        }
    }
}

#[test]
fn per_projection_centres_and_bin_width() {
    let n_angles = 50;
    let centres: Vec<f32> = (0..n_angles)
        .map(|i| 20.0 + (i as f32 * 0.37).sin() * 1.7)
        .collect();
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, 2.0 * std::f32::consts::PI), 41)
        .unwrap()
        .with_centers(centres)
        .unwrap()
        .with_bin_width(0.8)
        .unwrap();
    let grid = SliceGrid::with_pixel_size(36, 36, 0.8).unwrap();
    let err = compare(8, &geometry, &grid, Interpolation::Linear);
    assert!(err < 1e-5, "rel L2 {err}");
}

#[test]
fn a_point_lands_where_the_geometry_says() {
    // One non-zero bin per projection at the detector position of world
    // point (x0, y0): its back projection peaks at that point.
    let n = 64;
    let angles = uniform_angles(90, std::f32::consts::PI);
    let geometry = ParallelGeometry::new(angles.clone(), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let (x0, y0) = (10.0f32, 20.0f32); // right of and above the centre
    let mut sino = Array3::<f32>::zeros((1, angles.len(), n));
    for (a, &t) in angles.iter().enumerate() {
        let u = geometry.center(a) + x0 * t.cos() + y0 * t.sin();
        sino[[0, a, u.round() as usize]] = 1.0;
    }
    let mut out = Array3::<f32>::zeros((1, n, n));
    CpuBackend::new()
        .backproject(
            sino.view(),
            &geometry,
            &grid,
            Interpolation::Linear,
            1.0,
            out.view_mut(),
        )
        .unwrap();
    let (mut best, mut at) = (f32::MIN, (0, 0));
    for ((_, iy, ix), &v) in out.indexed_iter() {
        if v > best {
            best = v;
            at = (iy, ix);
        }
    }
    // Column of x0 = 10 is 31.5 + 10; row of y0 = 20 (up) is 31.5 − 20.
    assert!((at.1 as f32 - 41.5).abs() <= 1.0, "peak column {}", at.1);
    assert!((at.0 as f32 - 11.5).abs() <= 1.0, "peak row {}", at.0);
}

#[test]
fn shape_mismatches_are_errors() {
    let geometry = ParallelGeometry::new(uniform_angles(10, 3.0), 16).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let sino = Array3::<f32>::zeros((2, 9, 16));
    let mut out = Array3::<f32>::zeros((2, 16, 16));
    let err = CpuBackend::new().backproject(
        sino.view(),
        &geometry,
        &grid,
        Interpolation::Linear,
        1.0,
        out.view_mut(),
    );
    assert!(err.is_err());
}
