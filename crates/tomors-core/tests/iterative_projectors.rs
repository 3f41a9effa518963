//! Projectors of the iterative methods: adjointness of the matched pairs,
//! orientation, domain decomposition, agreement with exact projections and
//! with the FBP back projector.

mod common;

use common::{adjoint_error, assert_orientation, random};
use ndarray::{s, Array2, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::cpu::backproject_reference;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, projector, JosephProjector, LineProjector, Projector, ProjectorKind, Real, Region,
    VoxelDrivenProjector,
};
use tomors_core::phantom::{Ellipse, Phantom2d};
use tomors_core::{Interpolation, ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

/// Geometries with awkward features: per-projection centres, non-unit
/// pixels and bins, non-square grid, angles over a full turn including the
/// axis-aligned and diagonal ones.
fn awkward_cases() -> Vec<(ParallelGeometry, SliceGrid)> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut angles: Vec<f32> = (0..29).map(|_| rng.gen_range(0.0..2.0 * PI)).collect();
    angles.extend([0.0, PI / 2.0, PI / 4.0, PI, 3.0 * PI / 4.0]);
    let n = angles.len();
    let centers: Vec<f32> = (0..n).map(|_| rng.gen_range(17.0..23.0)).collect();
    let g1 = ParallelGeometry::new(angles.clone(), 41)
        .unwrap()
        .with_bin_width(1.3)
        .unwrap()
        .with_centers(centers)
        .unwrap();
    let grid1 = SliceGrid::with_pixel_size(37, 23, 0.7).unwrap();
    let g2 = ParallelGeometry::new(uniform_angles(16, PI), 32).unwrap();
    let grid2 = SliceGrid::new(32, 32).unwrap();
    let g3 = ParallelGeometry::new(angles, 24)
        .unwrap()
        .with_center(10.25)
        .unwrap();
    let grid3 = SliceGrid::with_pixel_size(19, 30, 1.6).unwrap();
    vec![(g1, grid1), (g2, grid2), (g3, grid3)]
}

#[test]
fn matched_pairs_are_adjoint_in_f64_and_f32() {
    for (i, (geometry, grid)) in awkward_cases().iter().enumerate() {
        for kind in [ProjectorKind::Joseph, ProjectorKind::Line] {
            let p64 = projector::<f64>(kind, geometry, grid, None).unwrap();
            let p32 = projector::<f32>(kind, geometry, grid, None).unwrap();
            assert!(p64.is_matched());
            let e64 = adjoint_error(p64.as_ref(), i as u64);
            let e32 = adjoint_error(p32.as_ref(), i as u64);
            println!("case {i} {kind:?}: f64 {e64:.2e}, f32 {e32:.2e}");
            assert!(e64 <= 1e-6, "{kind:?} case {i}: f64 adjointness {e64}");
            assert!(e32 <= 1e-4, "{kind:?} case {i}: f32 adjointness {e32}");
            // Restricted to a region, still adjoint.
            let region = Region {
                rows: grid.ny / 4..grid.ny - 2,
                cols: 3..grid.nx / 2 + 1,
            };
            let pr = projector::<f64>(kind, geometry, grid, Some(region)).unwrap();
            let er = adjoint_error(pr.as_ref(), 99);
            assert!(er <= 1e-6, "{kind:?} case {i}: region adjointness {er}");
        }
    }
}

#[test]
fn voxel_driven_pair_is_not_matched_but_close_to_the_transpose() {
    // A smooth sinogram (the projection of a disc): the voxel-driven back
    // projection is close to Joseph's transpose.
    let n = 64;
    let geometry = ParallelGeometry::new(uniform_angles(48, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let disc = Phantom2d::new(vec![Ellipse {
        center: (0.1, -0.05),
        axes: (0.6, 0.6),
        angle_rad: 0.0,
        value: 1.0,
    }]);
    let sino = disc.project(&geometry, n as f64 / 2.0);
    let angles = all_angles(48);
    let voxel = VoxelDrivenProjector::new(&geometry, &grid).unwrap();
    let joseph = JosephProjector::new(&geometry, &grid).unwrap();
    assert!(!Projector::<f32>::is_matched(&voxel));
    let mut bv = Array2::zeros((n, n));
    let mut bj = Array2::zeros((n, n));
    Projector::<f32>::back_slice(&voxel, sino.view(), &angles, bv.view_mut()).unwrap();
    Projector::<f32>::back_slice(&joseph, sino.view(), &angles, bj.view_mut()).unwrap();
    let diff = (&bv - &bj).mapv(|v| v * v).sum().sqrt() / bj.mapv(|v| v * v).sum().sqrt();
    println!("voxel-driven vs Joseph transpose: relative difference {diff:.4}");
    assert!(diff < 0.02, "{diff}");
}

#[test]
fn voxel_driven_back_projection_is_the_fbp_back_projector() {
    for (geometry, grid) in awkward_cases() {
        let mut rng = StdRng::seed_from_u64(3);
        let sino = random::<f32>((geometry.n_angles(), geometry.n_bins()), &mut rng);
        let p = VoxelDrivenProjector::new(&geometry, &grid).unwrap();
        let scale = (grid.pixel_size * grid.pixel_size / geometry.bin_width()) as f64;
        let reference = backproject_reference(sino.view(), &geometry, &grid, Interpolation::Linear)
            .mapv(|v| v as f64 * scale);
        let angles = all_angles(geometry.n_angles());
        // f32 fast path (multi-slice SIMD), f64 generic path.
        let mut b32 = Array2::<f32>::zeros((grid.ny, grid.nx));
        p.back_slice(sino.view(), &angles, b32.view_mut()).unwrap();
        let mut b64 = Array2::<f64>::zeros((grid.ny, grid.nx));
        p.back_slice(sino.mapv(|v| v as f64).view(), &angles, b64.view_mut())
            .unwrap();
        let norm = reference.mapv(|v| v * v).sum().sqrt();
        let e32 = (&b32.mapv(|v| v as f64) - &reference)
            .mapv(|v| v * v)
            .sum()
            .sqrt()
            / norm;
        let e64 = (&b64 - &reference).mapv(|v| v * v).sum().sqrt() / norm;
        assert!(e32 < 1e-5, "fast path vs reference {e32}");
        assert!(e64 < 1e-6, "generic path vs reference {e64}");
    }
}

#[test]
fn orientation_matches_the_geometry_convention() {
    // θ = 0: rays run along y, bin k sees column k; θ = π/2: bin k sees
    // row n − 1 − k (y up, row 0 at the top).
    for kind in [
        ProjectorKind::Joseph,
        ProjectorKind::Line,
        ProjectorKind::Voxel,
    ] {
        assert_orientation(kind, 1e-9);
    }
}

/// Splits the grid into uneven blocks and checks that the pieces' forward
/// projections sum to the whole and their back projections are the blocks
/// of the whole.
fn check_decomposition<T: Real>(
    kind: ProjectorKind,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    tol: f64,
) where
    VoxelDrivenProjector: Projector<T>,
{
    let mut rng = StdRng::seed_from_u64(11);
    let whole = projector::<T>(kind, geometry, grid, None).unwrap();
    let angles = all_angles(geometry.n_angles());
    let x = random::<T>((grid.ny, grid.nx), &mut rng);
    let y = random::<T>((angles.len(), geometry.n_bins()), &mut rng);
    let mut ax = Array2::from_elem((angles.len(), geometry.n_bins()), T::ZERO);
    whole
        .forward_slice(x.view(), &angles, ax.view_mut())
        .unwrap();
    let mut aty = Array2::from_elem((grid.ny, grid.nx), T::ZERO);
    whole.back_slice(y.view(), &angles, aty.view_mut()).unwrap();
    let row_cuts = [0, grid.ny / 3, grid.ny / 3 + 1, grid.ny];
    let col_cuts = [0, grid.nx / 2 + 3, grid.nx];
    let mut sum = Array2::<f64>::zeros(ax.dim());
    for r in row_cuts.windows(2).filter(|w| w[1] > w[0]) {
        for c in col_cuts.windows(2) {
            let region = Region {
                rows: r[0]..r[1],
                cols: c[0]..c[1],
            };
            let piece = projector::<T>(kind, geometry, grid, Some(region)).unwrap();
            let xb = x.slice(s![r[0]..r[1], c[0]..c[1]]).to_owned();
            let mut pb = Array2::from_elem(ax.dim(), T::ZERO);
            piece
                .forward_slice(xb.view(), &angles, pb.view_mut())
                .unwrap();
            sum += &pb.mapv(|v| v.to_f64());
            let mut bb = Array2::from_elem(xb.dim(), T::ZERO);
            piece.back_slice(y.view(), &angles, bb.view_mut()).unwrap();
            let expect = aty.slice(s![r[0]..r[1], c[0]..c[1]]);
            let num: f64 = bb
                .iter()
                .zip(expect.iter())
                .map(|(a, b)| (a.to_f64() - b.to_f64()).powi(2))
                .sum();
            let den: f64 = expect.iter().map(|b| b.to_f64().powi(2)).sum();
            assert!(
                (num / den.max(1e-300)).sqrt() <= tol,
                "{kind:?}: back projection of block {r:?}×{c:?}"
            );
        }
    }
    let ax = ax.mapv(|v| v.to_f64());
    let e = (&sum - &ax).mapv(|v| v * v).sum().sqrt() / ax.mapv(|v| v * v).sum().sqrt();
    println!("{kind:?}: pieces vs whole forward {e:.2e}");
    assert!(
        e <= tol,
        "{kind:?}: summed pieces differ from the whole by {e}"
    );
}

#[test]
fn restriction_to_sub_volumes_reproduces_the_whole() {
    for (geometry, grid) in awkward_cases() {
        for kind in [
            ProjectorKind::Joseph,
            ProjectorKind::Line,
            ProjectorKind::Voxel,
        ] {
            check_decomposition::<f64>(kind, &geometry, &grid, 1e-12);
            check_decomposition::<f32>(kind, &geometry, &grid, 2e-5);
        }
    }
}

#[test]
fn projections_of_a_disc_match_the_analytic_projection() {
    let n = 128;
    let geometry = ParallelGeometry::new(uniform_angles(30, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let disc = Phantom2d::new(vec![Ellipse {
        center: (0.12, -0.2),
        axes: (0.55, 0.55),
        angle_rad: 0.0,
        value: 1.0,
    }]);
    let scale = n as f64 / 2.0;
    let exact = disc.project(&geometry, scale);
    // The line integral through each bin centre (the projectors sample
    // there; the phantom's projection is a bin average, which differs
    // near the disc's edge where the profile has a square-root slope).
    let (r, cx, cy) = (0.55 * scale, 0.12 * scale, -0.2 * scale);
    let point = Array2::from_shape_fn(exact.dim(), |(a, k)| {
        let t = geometry.angles()[a] as f64;
        let s = k as f64 - geometry.center(a) as f64 - (cx * t.cos() + cy * t.sin());
        (2.0 * (r * r - s * s).max(0.0).sqrt()) as f32
    });
    let raster = disc.rasterize(&grid, scale, 8);
    let angles = all_angles(30);
    for kind in [ProjectorKind::Joseph, ProjectorKind::Line] {
        let p = projector::<f32>(kind, &geometry, &grid, None).unwrap();
        let mut sino = Array2::zeros(exact.dim());
        p.forward_slice(raster.view(), &angles, sino.view_mut())
            .unwrap();
        let e = (&sino - &exact).mapv(|v| (v as f64).powi(2)).sum().sqrt()
            / exact.mapv(|v| (v as f64).powi(2)).sum().sqrt();
        let peak = exact.iter().cloned().fold(0.0f32, f32::max);
        // Away from the shadow's edge (bin centres ≥ 2 pixels inside), where
        // sampling and averaging agree to second order.
        let worst =
            ndarray::Zip::from(&sino)
                .and(&point)
                .and(&exact)
                .fold(0.0f32, |m, &v, &p, &e| {
                    if p > 2.0 * (4.0 * r as f32).sqrt() {
                        m.max((v - e).abs())
                    } else {
                        m
                    }
                })
                / peak;
        println!("{kind:?}: relative L2 error {e:.2e} (bin averages), max error / peak inside {worst:.2e}");
        assert!(e < 5e-3, "{kind:?}: relative error {e}");
        assert!(worst < 2e-2, "{kind:?}: max error {worst}");
    }
}

#[test]
fn stacks_are_projected_slice_by_slice() {
    let geometry = ParallelGeometry::new(uniform_angles(10, PI), 20).unwrap();
    let grid = SliceGrid::new(18, 16).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let vol = ndarray::Array3::from_shape_fn((3, 16, 18), |_| rng.gen_range(0.0..1.0f32));
    let angles = all_angles(10);
    for kind in [
        ProjectorKind::Joseph,
        ProjectorKind::Line,
        ProjectorKind::Voxel,
    ] {
        let p = projector::<f32>(kind, &geometry, &grid, None).unwrap();
        let mut sino = ndarray::Array3::zeros((3, 10, 20));
        p.forward(vol.view(), &angles, sino.view_mut()).unwrap();
        let mut back = ndarray::Array3::zeros((3, 16, 18));
        p.back(sino.view(), &angles, back.view_mut()).unwrap();
        for z in 0..3 {
            let mut s1 = Array2::zeros((10, 20));
            p.forward_slice(vol.index_axis(Axis(0), z), &angles, s1.view_mut())
                .unwrap();
            assert_eq!(s1, sino.index_axis(Axis(0), z));
            let mut b1 = Array2::zeros((16, 18));
            p.back_slice(sino.index_axis(Axis(0), z), &angles, b1.view_mut())
                .unwrap();
            let d = (&b1 - &back.index_axis(Axis(0), z))
                .iter()
                .fold(0.0f32, |m, v| m.max(v.abs()));
            assert!(
                d <= 1e-4 * b1.iter().fold(0.0f32, |m, v| m.max(v.abs())),
                "{kind:?} slice {z}"
            );
        }
    }
}

#[test]
fn bad_shapes_and_indices_are_errors() {
    let geometry = ParallelGeometry::new(uniform_angles(4, PI), 8).unwrap();
    let grid = SliceGrid::new(8, 8).unwrap();
    let p = LineProjector::new(&geometry, &grid).unwrap();
    let x = Array2::<f64>::zeros((8, 7));
    let mut out = Array2::<f64>::zeros((4, 8));
    assert!(p
        .forward_slice(x.view(), &all_angles(4), out.view_mut())
        .is_err());
    let x = Array2::<f64>::zeros((8, 8));
    assert!(p
        .forward_slice(x.view(), &[0, 1, 2, 4], out.view_mut())
        .is_err());
    assert!(p.forward_slice(x.view(), &[0, 1], out.view_mut()).is_err());
    let y = Array2::<f64>::zeros((4, 9));
    let mut img = Array2::<f64>::zeros((8, 8));
    assert!(p
        .back_slice(y.view(), &all_angles(4), img.view_mut())
        .is_err());
    let bad = Region {
        rows: 2..9,
        cols: 0..8,
    };
    assert!(JosephProjector::with_region(&geometry, &grid, bad).is_err());
    let empty = Region {
        rows: 3..3,
        cols: 0..8,
    };
    assert!(VoxelDrivenProjector::with_region(&geometry, &grid, empty).is_err());
    assert!("sidon".parse::<ProjectorKind>().is_err());
    assert_eq!(
        "siddon".parse::<ProjectorKind>().unwrap(),
        ProjectorKind::Line
    );
}

#[test]
fn stack_projections_are_adjoint_and_match_single_slices() {
    // 11 slices: more than one group of the multi-slice transpose.
    let (geometry, grid) = awkward_cases().remove(0);
    let ns = 11;
    let mut rng = StdRng::seed_from_u64(21);
    let angles: Vec<usize> = (0..geometry.n_angles()).filter(|a| a % 4 != 2).collect();
    for kind in [ProjectorKind::Joseph, ProjectorKind::Line] {
        let p = projector::<f64>(kind, &geometry, &grid, None).unwrap();
        let x =
            ndarray::Array3::from_shape_fn((ns, grid.ny, grid.nx), |_| rng.gen_range(-1.0..1.0));
        let y = ndarray::Array3::from_shape_fn((ns, angles.len(), geometry.n_bins()), |_| {
            rng.gen_range(-1.0..1.0)
        });
        let mut ax = ndarray::Array3::zeros(y.dim());
        let mut aty = ndarray::Array3::zeros(x.dim());
        p.forward(x.view(), &angles, ax.view_mut()).unwrap();
        p.back(y.view(), &angles, aty.view_mut()).unwrap();
        let lhs = (&ax * &y).sum();
        let rhs = (&x * &aty).sum();
        let e = (lhs - rhs).abs() / ((&ax * &ax).sum().sqrt() * (&y * &y).sum().sqrt());
        assert!(e <= 1e-6, "{kind:?}: {e}");
        for z in [0, 7, 10] {
            let mut b1 = Array2::zeros((grid.ny, grid.nx));
            p.back_slice(y.index_axis(Axis(0), z), &angles, b1.view_mut())
                .unwrap();
            let d = (&b1 - &aty.index_axis(Axis(0), z))
                .iter()
                .fold(0.0f64, |m, v| m.max(v.abs()));
            assert!(d < 1e-12, "{kind:?} slice {z}: {d}");
        }
    }
}
