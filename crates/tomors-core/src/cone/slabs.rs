//! The volume in z-slabs, each reconstructed from the detector rows its
//! voxels project to: what several GPUs of one host ([`split_slabs`] per
//! device) and several MPI ranks share, and FDK of one slab
//! ([`fdk_slab_by_steps`], the default of
//! [`ConeBackend::fdk_slab_into`](super::ConeBackend::fdk_slab_into)).

use std::ops::Range;

use ndarray::{ArrayView3, ArrayViewMut3};

use super::fdk::{fdk_filter, ConeBackend, FdkOptions};
use super::geometry::{ConeGeometry, ConeVolume};
use crate::error::{CoreError, Result};

/// Detector rows whose pixels the voxels of slices `z` project to at some
/// angle, plus two rows each side for the bilinear interpolation (three
/// after the last, for the upper tap). All rows when a corner of the slab
/// (grown by one voxel) is not in front of the source at some angle.
///
/// The extreme rows of a box lie at its corners: the row of a point is
/// `center_row + z·m/pixel_v` with the magnification `m = SDD / depth`
/// extreme where the depth (linear in x, y) is, at a corner.
pub fn rows_for_slab(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z: &Range<usize>,
) -> Range<usize> {
    let n_rows = geometry.n_rows();
    if z.is_empty() || z.end > volume.nz {
        return 0..n_rows;
    }
    let h = f64::from(volume.voxel_size);
    let (x0, x1) = (volume.x(0) - h, volume.x(volume.nx - 1) + h);
    let (y0, y1) = (volume.y(0) + h, volume.y(volume.ny - 1) - h);
    let (z0, z1) = (volume.z(z.start) - h, volume.z(z.end - 1) + h);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..geometry.n_angles() {
        for x in [x0, x1] {
            for y in [y0, y1] {
                for zz in [z0, z1] {
                    match geometry.project_point(i, x, y, zz) {
                        Some(p) if p.row.is_finite() => {
                            lo = lo.min(p.row);
                            hi = hi.max(p.row);
                        }
                        _ => return 0..n_rows,
                    }
                }
            }
        }
    }
    let n = n_rows as f64;
    let first = (lo.floor() - 2.0).clamp(0.0, n) as usize;
    let end = (hi.ceil() + 3.0).clamp(0.0, n) as usize;
    let first = first.min(n_rows.saturating_sub(1));
    first..end.max(first + 1).min(n_rows)
}

/// `0..n` in at most `parts` consecutive non-empty ranges of nearly equal
/// length whose inner boundaries are multiples of `align` (≥ 1); fewer
/// ranges when `n` has fewer than `parts` blocks of `align`.
pub fn split_slabs(n: usize, parts: usize, align: usize) -> Vec<Range<usize>> {
    let align = align.max(1);
    let blocks = n.div_ceil(align);
    let parts = parts.clamp(1, blocks.max(1));
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 1..=parts {
        // Boundary i: the nearest multiple of `align` to i·n/parts.
        let end = if i == parts {
            n
        } else {
            let ideal = (i * n) as f64 / parts as f64;
            ((ideal / align as f64).round() as usize * align).min(n)
        };
        if end > start {
            out.push(start..end);
            start = end;
        }
    }
    out
}

/// FDK of slices `z` of `volume` from detector rows `rows` only:
/// `projections` holds those rows (`[angle][rows.len()][col]`) of the
/// projections of `geometry` (the whole detector); `out` is
/// `[z.len()][y][x]`. [`fdk_filter`] and
/// [`ConeBackend::cone_backproject`] on the geometry of the rows
/// ([`ConeGeometry::detector_rows`]). When `rows` comes from
/// [`rows_for_slab`], the result equals the slab of the whole FDK up to
/// rounding.
///
/// Errors: rows outside the detector, shapes that do not fit, the
/// backend's errors.
#[allow(clippy::too_many_arguments)]
pub fn fdk_slab_by_steps<B: ConeBackend + ?Sized>(
    backend: &B,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    rows: Range<usize>,
    volume: &ConeVolume,
    z: Range<usize>,
    options: &FdkOptions,
    out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    check_slab(&projections, geometry, &rows, volume, &z, out.dim())?;
    let sub = geometry.detector_rows(rows)?;
    let q = fdk_filter(backend, projections, &sub, options)?;
    backend.cone_backproject(q.view(), &sub, volume, z, out)
}

/// Checks the shapes of one slab's FDK (see [`fdk_slab_by_steps`]).
pub fn check_slab(
    projections: &ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    rows: &Range<usize>,
    volume: &ConeVolume,
    z: &Range<usize>,
    out_dim: (usize, usize, usize),
) -> Result<()> {
    if rows.is_empty() || rows.end > geometry.n_rows() {
        return Err(CoreError::Geometry(format!(
            "detector rows {rows:?} are empty or outside the detector's {} rows",
            geometry.n_rows()
        )));
    }
    let expected = (geometry.n_angles(), rows.len(), geometry.n_cols());
    if projections.dim() != expected {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, rows {rows:?} of the geometry are {expected:?} ([angle][row][col])",
            projections.dim()
        )));
    }
    if z.is_empty() || z.end > volume.nz {
        return Err(CoreError::Shape(format!(
            "slices {z:?} are not a non-empty part of the volume's {} slices",
            volume.nz
        )));
    }
    let want = (z.len(), volume.ny, volume.nx);
    if out_dim != want {
        return Err(CoreError::Shape(format!(
            "output is {out_dim:?}, expected {want:?} ([slice][y][x])"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cone::{fdk, project_cone};
    use crate::cpu::CpuBackend;
    use crate::phantom::Phantom3d;
    use ndarray::{s, Array3};

    fn geometry(n: usize, na: usize) -> (ConeGeometry, ConeVolume) {
        let angles: Vec<f32> = (0..na)
            .map(|i| (2.0 * std::f64::consts::PI * i as f64 / na as f64) as f32)
            .collect();
        // A wide cone (SOD 3 n): the slab's rows are a real part of the detector.
        let g = ConeGeometry::new(angles, 3.0 * n as f64, 1.5 * n as f64, n, n, 1.0, 1.0).unwrap();
        let v = ConeVolume::new(n, n, n, 0.6).unwrap();
        (g, v)
    }

    #[test]
    fn split_slabs_is_balanced_aligned_and_covers() {
        assert_eq!(split_slabs(1024, 2, 16), vec![0..512, 512..1024]);
        assert_eq!(split_slabs(100, 3, 16), vec![0..32, 32..64, 64..100]);
        assert_eq!(split_slabs(10, 4, 16), vec![0..10]);
        assert_eq!(split_slabs(7, 3, 1), vec![0..2, 2..5, 5..7]);
        assert_eq!(split_slabs(0, 2, 4), Vec::<Range<usize>>::new());
        for (n, p, a) in [(1000, 3, 16), (33, 4, 1), (64, 8, 16), (513, 2, 8)] {
            let s = split_slabs(n, p, a);
            assert_eq!(s.first().unwrap().start, 0);
            assert_eq!(s.last().unwrap().end, n);
            for w in s.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!(w[0].end % a, 0, "{n} {p} {a}: {s:?}");
            }
            let (lo, hi) = (
                s.iter().map(|r| r.len()).min().unwrap(),
                s.iter().map(|r| r.len()).max().unwrap(),
            );
            assert!(hi - lo <= a, "{n} {p} {a}: {s:?}");
        }
    }

    /// Every voxel of a slab projects, at every angle, to rows whose both
    /// bilinear taps lie inside the slab's rows (and not on their edges).
    #[test]
    fn slab_rows_cover_every_voxel() {
        let (g, v) = geometry(24, 16);
        for z in split_slabs(v.nz, 3, 1) {
            let rows = rows_for_slab(&g, &v, &z);
            assert!(
                rows.len() < g.n_rows(),
                "{z:?}: {rows:?} is the whole detector"
            );
            for iz in z.clone() {
                for iy in 0..v.ny {
                    for ix in 0..v.nx {
                        for a in 0..g.n_angles() {
                            let p = g.project_point(a, v.x(ix), v.y(iy), v.z(iz)).unwrap();
                            let r = p.row.floor();
                            if r + 1.0 < 0.0 || r > g.n_rows() as f64 {
                                continue; // off the detector: reads zeros
                            }
                            let (lo, hi) = (r.max(0.0) as usize, (r + 1.0) as usize);
                            assert!(
                                lo > rows.start || rows.start == 0,
                                "{z:?} {rows:?}: row {}",
                                p.row
                            );
                            assert!(
                                hi + 1 < rows.end || rows.end == g.n_rows(),
                                "{z:?} {rows:?}: row {}",
                                p.row
                            );
                        }
                    }
                }
            }
        }
    }

    /// FDK slab by slab from each slab's rows equals the whole FDK (CPU).
    #[test]
    fn fdk_of_slabs_from_their_rows_equals_the_whole() {
        let (g, v) = geometry(24, 32);
        let phantom = Phantom3d::shepp_logan();
        let p = project_cone(&phantom, &g, v.nx as f64 * 0.6 * 0.45, 2).unwrap();
        let cpu = CpuBackend::new();
        let opts = FdkOptions::default();
        let whole = fdk(&cpu, p.view(), &g, &v, &opts).unwrap();
        let mut parts = Array3::<f32>::zeros(whole.dim());
        for z in split_slabs(v.nz, 3, 1) {
            let rows = rows_for_slab(&g, &v, &z);
            fdk_slab_by_steps(
                &cpu,
                p.slice(s![.., rows.clone(), ..]),
                &g,
                rows,
                &v,
                z.clone(),
                &opts,
                parts.slice_mut(s![z, .., ..]),
            )
            .unwrap();
        }
        let (mut num, mut den) = (0f64, 0f64);
        for (a, b) in parts.iter().zip(&whole) {
            num += (*a as f64 - *b as f64).powi(2);
            den += (*b as f64).powi(2);
        }
        let e = (num / den).sqrt();
        // Measured 0 to f32 rounding; the shifted row origin moves only the
        // last bits of the row coordinates.
        assert!(e < 1e-5, "{e}");
    }

    #[test]
    fn bad_slabs_are_errors() {
        let (g, v) = geometry(8, 4);
        let p = Array3::<f32>::zeros((4, 3, 8));
        let mut out = Array3::<f32>::zeros((2, 8, 8));
        let cpu = CpuBackend::new();
        let o = FdkOptions::default();
        assert!(fdk_slab_by_steps(&cpu, p.view(), &g, 0..4, &v, 0..2, &o, out.view_mut()).is_err());
        assert!(fdk_slab_by_steps(&cpu, p.view(), &g, 6..9, &v, 0..2, &o, out.view_mut()).is_err());
        assert!(fdk_slab_by_steps(&cpu, p.view(), &g, 0..3, &v, 7..9, &o, out.view_mut()).is_err());
    }
}
