//! Geometry shared by the padded `[angle][bin][slice]` entry layouts of the
//! line-sweep ([`crate::fbp::sweep`]) and tensor-core
//! ([`crate::fbp::tensor`]) kernels: the range of bin coordinates the pixels
//! of a grid rounded up to whole blocks take, and the largest bin span of a
//! block's pixels, both over all projections (in f64, as the kernels' stage
//! constants).

use tomors_core::{ParallelGeometry, SliceGrid};

use crate::fbp::kernels::projection_coefficients_f64;

/// The lowest and highest bin coordinate u = c0 + x·cx + y·cy of any pixel
/// of `grid` rounded up to whole blocks of `block` = (x, y) pixels, in any
/// projection (the corners of the rounded grid); `None` without projections.
pub fn coordinate_range(
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    block: (usize, usize),
) -> Option<(f64, f64)> {
    let c = projection_coefficients_f64(geom, grid);
    let n = geom.n_angles();
    if n == 0 {
        return None;
    }
    let (bx, by) = block;
    let xe = (grid.nx.div_ceil(bx) * bx) as f64 - 1.0;
    let ye = (grid.ny.div_ceil(by) * by) as f64 - 1.0;
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for i in 0..n {
        let (c0, cx, cy) = (c[i], c[n + i], c[2 * n + i]);
        for (x, y) in [(0.0, 0.0), (xe, 0.0), (0.0, ye), (xe, ye)] {
            let u = c0 + x * cx + y * cy;
            lo = lo.min(u);
            hi = hi.max(u);
        }
    }
    Some((lo, hi))
}

/// The largest span in bins, over the projections, of the coordinates of a
/// block of `block` = (x, y) pixels: (x − 1)·|cx| + (y − 1)·|cy|.
pub fn block_span(geom: &ParallelGeometry, grid: &SliceGrid, block: (usize, usize)) -> f64 {
    let c = projection_coefficients_f64(geom, grid);
    let n = geom.n_angles();
    let (bx, by) = block;
    (0..n)
        .map(|i| (bx as f64 - 1.0) * c[n + i].abs() + (by as f64 - 1.0) * c[2 * n + i].abs())
        .fold(0.0f64, f64::max)
}
