//! Parallel-beam Joseph fixtures of the GPU tests (shared by
//! `iterative_gpu` and `sweep_forward_gpu`): angles with the special
//! directions, the geometries that exercise the conventions, the f64 CPU
//! projector applied to whole stacks.

use ndarray::{Array3, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{all_angles, JosephProjector, Projector};
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};

use super::random;

pub const PI: f32 = std::f32::consts::PI;

/// Angles over [0, π) that include the special directions 0, π/4, π/2,
/// 3π/4 (ties between row and column stepping, steps parallel to the grid)
/// and irregular ones in between.
pub fn test_angles(seed: u64) -> Vec<f32> {
    let mut a: Vec<f32> = vec![0.0, PI / 4.0, PI / 2.0, 3.0 * PI / 4.0, PI - 1e-3];
    let r = random(36, seed);
    a.extend(r.iter().map(|v| (v + 1.0) * 0.5 * PI));
    a
}

/// Geometries exercising the conventions: off-centre per-projection axis
/// positions, bins narrower and wider than the pixels, a non-square grid
/// larger than the detector covers.
pub fn cases(seed: u64) -> Vec<(String, ParallelGeometry, SliceGrid)> {
    let na = test_angles(seed).len();
    let centers: Vec<f32> = random(na, seed ^ 7)
        .iter()
        .map(|v| 22.0 + 3.0 * v)
        .collect();
    vec![
        (
            "unit bins, per-projection centres".into(),
            ParallelGeometry::new(test_angles(seed), 45)
                .unwrap()
                .with_centers(centers)
                .unwrap(),
            SliceGrid::new(37, 29).unwrap(),
        ),
        (
            "bins 0.6 of the pixel (3 bins per hat)".into(),
            ParallelGeometry::new(test_angles(seed), 61)
                .unwrap()
                .with_bin_width(0.6)
                .unwrap()
                .with_center(31.7)
                .unwrap(),
            SliceGrid::with_pixel_size(33, 40, 1.0).unwrap(),
        ),
        (
            "bins 1.7 wide, pixels 1.3".into(),
            ParallelGeometry::new(test_angles(seed), 40)
                .unwrap()
                .with_bin_width(1.7)
                .unwrap(),
            SliceGrid::with_pixel_size(48, 45, 1.3).unwrap(),
        ),
    ]
}

pub fn cpu_forward(p: &JosephProjector, x: &Array3<f32>) -> Array3<f32> {
    let x64 = x.mapv(|v| v as f64);
    let (ns, _, _) = x.dim();
    let na = Projector::<f64>::n_angles(p);
    let nb = Projector::<f64>::n_bins(p);
    let mut out = Array3::<f64>::zeros((ns, na, nb));
    p.forward(x64.view(), &all_angles(na), out.view_mut())
        .unwrap();
    out.mapv(|v| v as f32)
}

pub fn cpu_back(p: &JosephProjector, y: &Array3<f32>) -> Array3<f32> {
    let y64 = y.mapv(|v| v as f64);
    let ns = y.len_of(Axis(0));
    let (ny, nx) = Projector::<f64>::image_dim(p);
    let na = Projector::<f64>::n_angles(p);
    let mut out = Array3::<f64>::zeros((ns, ny, nx));
    p.back(y64.view(), &all_angles(na), out.view_mut()).unwrap();
    out.mapv(|v| v as f32)
}

/// A Shepp–Logan of `n`² from `na` exact projections over π, three slices
/// (the second scaled by 0.5, the third shifted by 0.1, so they differ).
pub fn shepp(n: usize, na: usize) -> (ParallelGeometry, SliceGrid, Array3<f32>) {
    let geom = ParallelGeometry::new(uniform_angles(na, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let s = Phantom2d::shepp_logan().project(&geom, n as f64 / 2.0);
    let mut sino = Array3::<f32>::zeros((3, na, n));
    sino.index_axis_mut(Axis(0), 0).assign(&s);
    sino.index_axis_mut(Axis(0), 1).assign(&s.mapv(|v| 0.5 * v));
    sino.index_axis_mut(Axis(0), 2).assign(&s.mapv(|v| v + 0.1));
    (geom, grid, sino)
}
