//! Small problems for the decomposition tests (ranks as threads).

#![allow(dead_code)]

use std::f64::consts::PI;
use std::path::Path;

use ndarray::{Array3, Axis};
use ndarray_npy::WriteNpyExt;
use tomors_core::cone::{project_cone, ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::{Phantom2d, Phantom3d};
use tomors_core::ParallelGeometry;

/// A cone-beam problem: geometry, volume, exact projections of the
/// Shepp–Logan phantom.
pub struct ConeProblem {
    pub g: ConeGeometry,
    pub v: ConeVolume,
    pub proj: Array3<f32>,
}

pub fn cone_problem(n: usize, n_angles: usize) -> ConeProblem {
    let g = ConeGeometry::new(
        uniform_angles(n_angles, 2.0 * PI as f32),
        3.0 * n as f64,
        3.0 * n as f64,
        n + 8,
        n + 8,
        2.0,
        2.0,
    )
    .unwrap();
    let v = ConeVolume::new(n, n, n, 1.0).unwrap();
    g.check_volume(&v).unwrap();
    let proj = project_cone(&Phantom3d::shepp_logan(), &g, n as f64 / 2.0, 1).unwrap();
    ConeProblem { g, v, proj }
}

/// Parallel-beam projections `[angle][row][col]` of `rows` slices of the
/// 2D Shepp–Logan phantom, scaled differently per row.
pub fn parallel_projections(n_angles: usize, rows: usize, bins: usize) -> Array3<f32> {
    let g = ParallelGeometry::new(uniform_angles(n_angles, PI as f32), bins).unwrap();
    let sino = Phantom2d::shepp_logan().project(&g, bins as f64 * 0.45);
    let mut p = Array3::zeros((n_angles, rows, bins));
    for r in 0..rows {
        let f = 1.0 + r as f32 * 0.1;
        p.index_axis_mut(Axis(1), r).assign(&sino.mapv(|v| v * f));
    }
    p
}

pub fn write_npy(path: &Path, a: &Array3<f32>) {
    let f = std::fs::File::create(path).unwrap();
    a.write_npy(std::io::BufWriter::new(f)).unwrap();
}

/// Relative L2 distance and largest absolute difference.
pub fn distance(a: &Array3<f32>, b: &Array3<f32>) -> (f64, f64) {
    assert_eq!(a.dim(), b.dim());
    let (mut d2, mut n2, mut max) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let d = f64::from(x) - f64::from(y);
        d2 += d * d;
        n2 += f64::from(y) * f64::from(y);
        max = max.max(d.abs());
    }
    ((d2 / n2).sqrt(), max)
}

/// Nothing under `dir` but the given names.
pub fn only_files(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(found, want, "files in {}", dir.display());
}
