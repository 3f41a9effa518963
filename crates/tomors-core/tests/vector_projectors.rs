//! The projectors of the vector geometries: adjointness of the matched
//! pair on random misaligned, helical and laminography geometries (cone
//! and parallel, f64 and f32), equality with the circular projectors on
//! circular scans, single rays, domain decomposition, and the unmatched
//! voxel-driven pair.

mod common;

use std::f64::consts::PI;

use common::{adjoint_error, random};
use ndarray::{s, Array2, Array3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::{uniform_angles, ParallelGeometry, SliceGrid};
use tomors_core::iterative::{
    all_angles, ConeJosephProjector, ConeVoxelProjector, JosephProjector, Projector, VolumeBox,
};
use tomors_core::vector::{
    ConeScan, ConeVecGeometry, ParallelScan, ParallelVecGeometry, Turn, VecGeometry,
    VecJosephProjector, VecVoxelProjector, VolumeGeometry,
};

/// Relative L2 difference ‖a − b‖/‖b‖ in f64.
fn rel<T: tomors_core::iterative::Real>(a: &Array2<T>, b: &Array2<T>) -> f64 {
    let (mut d, mut n) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        d += (x.to_f64() - y.to_f64()).powi(2);
        n += y.to_f64().powi(2);
    }
    (d / n).sqrt()
}

fn random_angles(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.gen_range(0.0..2.0 * PI)).collect()
}

/// An off-centre, anisotropic volume box.
fn odd_volume() -> VolumeGeometry {
    VolumeGeometry::with_voxels(11, 9, 7, [0.9, 1.1, 1.3], [0.7, -0.4, 0.5]).unwrap()
}

/// Cone-beam geometries: random misalignments of every kind, a helical
/// scan, a laminography scan (rays steeper than 45°: z-dominant steps).
fn cone_cases() -> Vec<(String, VecGeometry)> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut r = |a: f64| rng.gen_range(-a..a);
    let misaligned = ConeScan::new(40.0, 25.0, 13, 17, 1.2, 1.4)
        .detector_offset(r(2.0), r(2.0))
        .detector_roll(r(0.2))
        .detector_pitch(r(0.2))
        .detector_yaw(r(0.2))
        .source_offset(r(3.0), r(3.0))
        .axis_tilt(r(0.1), r(0.1));
    let mut rng = StdRng::seed_from_u64(8);
    let misaligned = misaligned.orbit(&random_angles(&mut rng, 9)).unwrap();
    let helical = ConeScan::new(40.0, 25.0, 13, 17, 1.2, 1.4)
        .helical(10, 1.5, 6.0, Turn::Clockwise)
        .unwrap();
    let lamino = ConeScan::new(30.0, 30.0, 16, 16, 1.5, 1.5)
        .laminography(0.9)
        .orbit(
            &uniform_angles(7, 2.0 * PI as f32)
                .iter()
                .map(|&a| a as f64)
                .collect::<Vec<_>>(),
        )
        .unwrap();
    vec![
        ("cone misaligned".into(), misaligned.into()),
        ("cone helical".into(), helical.into()),
        ("cone laminography".into(), lamino.into()),
    ]
}

fn parallel_cases() -> Vec<(String, VecGeometry)> {
    let mut rng = StdRng::seed_from_u64(9);
    let angles = random_angles(&mut rng, 8);
    let mut r = |a: f64| rng.gen_range(-a..a);
    let misaligned = ParallelScan::new(10, 15, 1.1, 0.9)
        .detector_offset(r(2.0), r(2.0))
        .detector_roll(r(0.3))
        .detector_pitch(r(0.3))
        .detector_yaw(r(0.3))
        .ray_tilt(r(0.2), r(0.2))
        .axis_tilt(r(0.1), r(0.1))
        .orbit(&angles)
        .unwrap();
    let helical = ParallelScan::new(10, 15, 1.1, 0.9)
        .helical(9, 2.0, 3.0, Turn::CounterClockwise)
        .unwrap();
    let lamino = ParallelScan::new(12, 14, 1.0, 1.0)
        .laminography(1.1)
        .orbit(&angles)
        .unwrap();
    vec![
        ("parallel misaligned".into(), misaligned.into()),
        ("parallel helical".into(), helical.into()),
        ("parallel laminography".into(), lamino.into()),
    ]
}

#[test]
fn matched_pair_is_adjoint_on_random_vector_geometries() {
    let v = odd_volume();
    let sub = VolumeBox {
        z: 1..6,
        y: 2..9,
        x: 0..7,
    };
    for (i, (name, g)) in cone_cases().into_iter().chain(parallel_cases()).enumerate() {
        let p = VecJosephProjector::new(&g, &v).unwrap();
        let e64 = adjoint_error::<f64>(&p, i as u64);
        let e32 = adjoint_error::<f32>(&p, i as u64);
        let pb = VecJosephProjector::with_box(&g, &v, sub.clone()).unwrap();
        let eb = adjoint_error::<f64>(&pb, 50 + i as u64);
        println!("{name}: adjointness f64 {e64:.2e}, f32 {e32:.2e}, box {eb:.2e}");
        assert!(e64 <= 1e-12, "{name}: f64 {e64}");
        assert!(e32 <= 1e-5, "{name}: f32 {e32}");
        assert!(eb <= 1e-12, "{name}: box {eb}");
    }
}

/// The vector projector on a circular cone-beam scan is the circular
/// projector: an off-centre principal point, non-square pixels, a
/// non-cubic volume of non-unit voxels.
#[test]
fn circular_cone_vectors_give_the_circular_projector() {
    let mut rng = StdRng::seed_from_u64(11);
    let mut angles: Vec<f32> = (0..9)
        .map(|_| rng.gen_range(0.0..2.0 * PI as f32))
        .collect();
    angles.extend([0.0, PI as f32 / 2.0, PI as f32]);
    let g = ConeGeometry::new(angles, 60.0, 35.0, 21, 27, 1.3, 1.7)
        .unwrap()
        .with_principal_point(14.2, 9.6)
        .unwrap();
    let v = ConeVolume::new(17, 13, 11, 0.8).unwrap();
    let circ = ConeJosephProjector::new(&g, &v).unwrap();
    let vg: VecGeometry = ConeVecGeometry::from_circular(&g).into();
    let vv = VolumeGeometry::from_cone_volume(&v);
    let vec = VecJosephProjector::new(&vg, &vv).unwrap();
    let angles = all_angles(g.n_angles());
    let nb = g.n_rows() * g.n_cols();
    let x = random::<f32>((v.nz * v.ny, v.nx), &mut rng);
    let y = random::<f32>((g.n_angles(), nb), &mut rng);
    let (mut a1, mut a2) = (
        Array2::zeros((g.n_angles(), nb)),
        Array2::zeros((g.n_angles(), nb)),
    );
    circ.forward_slice(x.view(), &angles, a1.view_mut())
        .unwrap();
    vec.forward_slice(x.view(), &angles, a2.view_mut()).unwrap();
    let (mut b1, mut b2) = (Array2::zeros(x.dim()), Array2::zeros(x.dim()));
    circ.back_slice(y.view(), &angles, b1.view_mut()).unwrap();
    vec.back_slice(y.view(), &angles, b2.view_mut()).unwrap();
    let (ef, eb) = (rel(&a2, &a1), rel(&b2, &b1));
    println!("circular cone: forward {ef:.2e}, back {eb:.2e} (relative L2, f32)");
    assert!(ef <= 1e-5 && eb <= 1e-5, "forward {ef}, back {eb}");
    // The voxel-driven back projections agree too (f64 path).
    let cv = ConeVoxelProjector::new(&g, &v).unwrap();
    let vv2 = VecVoxelProjector::new(&vg, &vv).unwrap();
    let y64 = y.mapv(|v| v as f64);
    let (mut c1, mut c2) = (Array2::zeros(x.dim()), Array2::zeros(x.dim()));
    cv.back_slice(y64.view(), &angles, c1.view_mut()).unwrap();
    vv2.back_slice(y64.view(), &angles, c2.view_mut()).unwrap();
    let ev = rel(&c2, &c1);
    println!("circular cone voxel-driven back projection: {ev:.2e} (f64)");
    assert!(ev <= 1e-9, "voxel-driven {ev}");
}

/// The vector projector on a circular parallel-beam scan is the
/// slice-by-slice Joseph projector, with per-projection axis positions
/// and a non-unit bin width.
#[test]
fn circular_parallel_vectors_give_the_slice_projector() {
    let (n, nz, na) = (15usize, 6usize, 10usize);
    let mut rng = StdRng::seed_from_u64(12);
    let centers: Vec<f32> = (0..na).map(|_| rng.gen_range(6.0..8.0)).collect();
    let g = ParallelGeometry::new(uniform_angles(na, PI as f32), n)
        .unwrap()
        .with_bin_width(1.25)
        .unwrap()
        .with_centers(centers)
        .unwrap();
    let grid = SliceGrid::with_pixel_size(13, 11, 1.1).unwrap();
    let slices = JosephProjector::new(&g, &grid).unwrap();
    let vg: VecGeometry = ParallelVecGeometry::from_circular(&g, nz, 0.7)
        .unwrap()
        .into();
    let vv = VolumeGeometry::from_slices(&grid, nz, 0.7).unwrap();
    let vec = VecJosephProjector::new(&vg, &vv).unwrap();
    let angles = all_angles(na);
    let vol = Array3::from_shape_fn((nz, grid.ny, grid.nx), |_| rng.gen_range(-1.0f32..1.0));
    let mut sinos = Array3::zeros((nz, na, n));
    Projector::<f32>::forward(&slices, vol.view(), &angles, sinos.view_mut()).unwrap();
    let flat = vol
        .view()
        .into_shape_with_order((nz * grid.ny, grid.nx))
        .unwrap();
    let mut proj = Array2::zeros((na, nz * n));
    vec.forward_slice(flat, &angles, proj.view_mut()).unwrap();
    // [slice][angle][bin] → [angle][row·col].
    let want = sinos
        .permuted_axes([1, 0, 2])
        .as_standard_layout()
        .into_shape_with_order((na, nz * n))
        .unwrap()
        .to_owned();
    let ef = rel(&proj, &want);
    let y = Array3::from_shape_fn((nz, na, n), |_| rng.gen_range(-1.0f32..1.0));
    let mut back = Array3::zeros((nz, grid.ny, grid.nx));
    Projector::<f32>::back(&slices, y.view(), &angles, back.view_mut()).unwrap();
    let y2 = y
        .permuted_axes([1, 0, 2])
        .as_standard_layout()
        .into_shape_with_order((na, nz * n))
        .unwrap()
        .to_owned();
    let mut b2 = Array2::zeros((nz * grid.ny, grid.nx));
    vec.back_slice(y2.view(), &angles, b2.view_mut()).unwrap();
    let b1 = back.into_shape_with_order((nz * grid.ny, grid.nx)).unwrap();
    let eb = rel(&b2, &b1);
    println!("circular parallel: forward {ef:.2e}, back {eb:.2e} (relative L2, f32)");
    assert!(ef <= 1e-5 && eb <= 1e-5, "forward {ef}, back {eb}");
}

#[test]
fn trace_ray_is_the_row_of_the_forward_operator() {
    let v = odd_volume();
    let mut rng = StdRng::seed_from_u64(5);
    for (name, g) in cone_cases().into_iter().chain(parallel_cases()) {
        let p = VecJosephProjector::new(&g, &v).unwrap();
        let na = Projector::<f64>::n_angles(&p);
        let nb = Projector::<f64>::n_bins(&p);
        let x = random::<f64>(Projector::<f64>::image_dim(&p), &mut rng);
        let xs = x.as_slice().unwrap();
        let mut ax = Array2::zeros((na, nb));
        p.forward_slice(x.view(), &all_angles(na), ax.view_mut())
            .unwrap();
        let mut nonzero = 0;
        for _ in 0..40 {
            let (a, k) = (rng.gen_range(0..na), rng.gen_range(0..nb));
            let mut sum = 0.0;
            Projector::<f64>::trace_ray(&p, a, k, &mut |i, w| sum += xs[i] * w);
            nonzero += (sum != 0.0) as usize;
            assert!(
                (sum - ax[[a, k]]).abs() <= 1e-12 * (1.0 + sum.abs()),
                "{name} ray ({a}, {k}): {sum} vs {}",
                ax[[a, k]]
            );
        }
        assert!(nonzero > 5, "{name}: only {nonzero} rays hit the volume");
    }
}

/// Forward projections of the boxes of a partition sum to the whole; back
/// projections of the boxes are the pieces of the whole.
#[test]
fn boxes_of_a_partition_reproduce_the_whole() {
    let v = odd_volume();
    for (name, g) in cone_cases().into_iter().chain(parallel_cases()) {
        let whole = VecJosephProjector::new(&g, &v).unwrap();
        let na = g.n_projections();
        let nb = g.n_rows() * g.n_cols();
        let mut rng = StdRng::seed_from_u64(21);
        let vol = Array3::from_shape_fn((v.nz, v.ny, v.nx), |_| rng.gen_range(0.0..1.0));
        let sino = random::<f64>((na, nb), &mut rng);
        let angles = all_angles(na);
        let flat = vol
            .view()
            .into_shape_with_order((v.nz * v.ny, v.nx))
            .unwrap();
        let mut ax = Array2::<f64>::zeros((na, nb));
        whole.forward_slice(flat, &angles, ax.view_mut()).unwrap();
        let mut bt = Array2::zeros((v.nz * v.ny, v.nx));
        whole
            .back_slice(sino.view(), &angles, bt.view_mut())
            .unwrap();
        let bt = bt.into_shape_with_order((v.nz, v.ny, v.nx)).unwrap();
        let mut sum = Array2::<f64>::zeros(ax.dim());
        for z in [0..3, 3..v.nz] {
            for x in [0..5, 5..v.nx] {
                let b = VolumeBox {
                    z: z.clone(),
                    y: 0..v.ny,
                    x: x.clone(),
                };
                let p = VecJosephProjector::with_box(&g, &v, b).unwrap();
                let part = vol.slice(s![z.clone(), .., x.clone()]).to_owned();
                let (pz, py, px) = part.dim();
                let part = part.into_shape_with_order((pz * py, px)).unwrap();
                let mut a = Array2::zeros(ax.dim());
                p.forward_slice(part.view(), &angles, a.view_mut()).unwrap();
                sum += &a;
                let mut back = Array2::zeros((pz * py, px));
                p.back_slice(sino.view(), &angles, back.view_mut()).unwrap();
                let back = back.into_shape_with_order((pz, py, px)).unwrap();
                let want = bt.slice(s![z.clone(), .., x.clone()]);
                let err = (&back - &want).iter().fold(0.0f64, |m, d| m.max(d.abs()));
                assert!(
                    err <= 1e-12 * (1.0 + want.iter().fold(0.0f64, |m, v| m.max(v.abs()))),
                    "{name}: box back projection differs by {err}"
                );
            }
        }
        let err = (&sum - &ax).iter().fold(0.0f64, |m, d| m.max(d.abs()));
        let scale = ax.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(
            scale > 0.0 && err <= 1e-12 * scale,
            "{name}: partition forward {err} of {scale}"
        );
    }
}

/// The voxel-driven back projection has the scale of Joseph's transpose
/// (cone and parallel, misaligned), and its forward projection is Joseph's.
#[test]
fn voxel_driven_pair_is_close_to_the_transpose() {
    let v = VolumeGeometry::with_voxels(20, 18, 16, [1.0, 1.1, 0.9], [0.5, 0.0, -0.3]).unwrap();
    let angles: Vec<f64> = (0..24).map(|i| i as f64 * 2.0 * PI / 24.0).collect();
    let cone: VecGeometry = ConeScan::new(60.0, 30.0, 30, 34, 1.4, 1.3)
        .detector_offset(1.3, -0.8)
        .detector_roll(0.05)
        .detector_pitch(0.1)
        .orbit(&angles)
        .unwrap()
        .into();
    let par: VecGeometry = ParallelScan::new(22, 30, 1.0, 1.0)
        .detector_roll(0.05)
        .ray_tilt(0.15, 0.1)
        .orbit(&angles)
        .unwrap()
        .into();
    let blob = tomors_core::phantom::Phantom3d::new(vec![tomors_core::phantom::Ellipsoid {
        center: [0.05, 0.1, 0.0],
        axes: [0.6, 0.5, 0.55],
        angle_rad: 0.3,
        value: 1.0,
    }]);
    for (name, g) in [("cone", cone), ("parallel", par)] {
        let proj = tomors_core::vector::analytic::project(&blob, 8.0, &g).mapv(|v| v as f32);
        let na = g.n_projections();
        let sino = proj
            .view()
            .into_shape_with_order((na, g.n_rows() * g.n_cols()))
            .unwrap();
        let voxel = VecVoxelProjector::new(&g, &v).unwrap();
        let joseph = VecJosephProjector::new(&g, &v).unwrap();
        assert!(!Projector::<f32>::is_matched(&voxel));
        let angles = all_angles(na);
        let dim = (v.nz * v.ny, v.nx);
        let (mut bv, mut bj) = (Array2::zeros(dim), Array2::zeros(dim));
        voxel.back_slice(sino, &angles, bv.view_mut()).unwrap();
        joseph.back_slice(sino, &angles, bj.view_mut()).unwrap();
        let diff: f64 = rel::<f32>(&bv, &bj);
        let ratio = (&bv * &bj).sum() as f64 / (&bj * &bj).sum() as f64;
        println!("{name}: voxel-driven vs Joseph transpose: relative difference {diff:.4}, fitted scale {ratio:.4}");
        assert!((ratio - 1.0).abs() < 0.01, "{name}: {ratio}");
        assert!(diff < 0.05, "{name}: {diff}");
        let x = Array2::from_elem(dim, 1.0f32);
        let (mut a, mut b) = (
            Array2::zeros((na, sino.ncols())),
            Array2::zeros((na, sino.ncols())),
        );
        voxel
            .forward_slice(x.view(), &angles, a.view_mut())
            .unwrap();
        joseph
            .forward_slice(x.view(), &angles, b.view_mut())
            .unwrap();
        assert_eq!(a, b);
    }
}

/// A volume that reaches behind a source is refused, naming the
/// projection.
#[test]
fn a_source_inside_or_beside_the_volume_is_refused() {
    let mut angles = vec![0.0, 1.0, 2.0];
    angles.push(3.0);
    let scan = ConeScan::new(40.0, 20.0, 10, 10, 1.0, 1.0);
    let mut g = scan.orbit(&angles).unwrap().to_astra();
    // Projection 2's source moved next to the volume.
    g[2][0] = 3.0;
    g[2][1] = -1.0;
    let g: VecGeometry = ConeVecGeometry::from_astra(&g, 10, 10).unwrap().into();
    let v = VolumeGeometry::new(8, 8, 8, 1.0).unwrap();
    let e = VecJosephProjector::new(&g, &v).unwrap_err().to_string();
    assert!(e.starts_with("vector row 2:"), "{e}");
    assert!(e.contains("inside or beside the volume"), "{e}");
}

/// The detector window a box's rays can fall in holds every ray that
/// visits a voxel of the box (the culling of the forward and back drivers
/// and of future slab splits never drops a ray).
#[test]
fn pixels_reaching_a_box_hold_every_ray_that_visits_it() {
    let v = odd_volume();
    let boxes = [
        VolumeBox {
            z: 0..2,
            y: 0..9,
            x: 0..11,
        },
        VolumeBox {
            z: 3..5,
            y: 2..6,
            x: 4..9,
        },
        VolumeBox {
            z: 6..7,
            y: 8..9,
            x: 10..11,
        },
    ];
    for (name, g) in cone_cases().into_iter().chain(parallel_cases()) {
        let whole = VecJosephProjector::new(&g, &v).unwrap();
        let nc = g.n_cols();
        for b in &boxes {
            let part = VecJosephProjector::with_box(&g, &v, b.clone()).unwrap();
            let mut seen = 0;
            for a in 0..g.n_projections() {
                let (rows, cols) = whole.pixels_reaching(a, b);
                for k in 0..g.n_rows() * nc {
                    let mut hit = false;
                    Projector::<f64>::trace_ray(&part, a, k, &mut |_, w| hit |= w > 0.0);
                    if hit {
                        seen += 1;
                        assert!(
                            rows.contains(&(k / nc)) && cols.contains(&(k % nc)),
                            "{name}: box {b:?}, projection {a}: pixel ({}, {}) outside {rows:?} × {cols:?}",
                            k / nc,
                            k % nc
                        );
                    }
                }
            }
            assert!(seen > 0, "{name}: no ray visits {b:?}");
        }
    }
}
