//! The per-projection constant tables of the parallel-beam Joseph kernels.

use super::*;
use crate::runtime::DeviceBuffer;

/// Per-projection constants of `jp_forward` (layout of `FpAngle`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct FpAngle {
    q0: f64,
    qk: f64,
    qs: f64,
    dfix: i64,
    len: f32,
    transposed: i32,
}

impl FpAngle {
    /// Change of a ray's position along a line per bin (pixels).
    pub(super) fn qk(&self) -> f64 {
        self.qk
    }
}

/// Most rays (projections) per thread of `jp_forward` (`AP` in the kernel).
pub(super) const AP: usize = 4;

/// Slices per back-projection thread by default.
pub(super) const DEFAULT_BACK_GROUP: usize = 16;

/// Whether `jp_forward` uses two threads per ray by default.
pub(super) const DEFAULT_PAIR: bool = true;

/// Whether `jp_back_quad` (2×2 pixels per thread) is used where possible
/// by default (SIRT: 2940 against 2772 GU/s for `jp_back` with 16 slices,
/// H200, 512³ from 512 angles, `docs/runs/2026-11-27-h200-sirtfast-run1.txt`).
pub(super) const DEFAULT_QUAD: bool = true;

/// Slices per `jp_back_quad` thread by default (8: 2940 GU/s, 16: 2785,
/// 4: 2479 in the same run).
pub(super) const DEFAULT_QUAD_BACK_GROUP: usize = 8;

/// Projections per unrolled step of `jp_back` (`BPU` in the kernel).
pub(super) const DEFAULT_BPU: usize = 2;

/// A group of up to [`AP`] projections of one stepping direction, processed
/// together by `jp_forward` (layout of `FpGroup`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct FpGroup {
    idx: [i32; AP],
    count: i32,
    transposed: i32,
}

/// Groups of neighbouring projections (sorted by stepping direction and
/// angle modulo π, `keys`) of `fp` for `jp_forward`, with indices into `fp`.
pub(super) fn angle_groups(keys: &[f64], fp: &[FpAngle], per: usize) -> Vec<FpGroup> {
    let mut order: Vec<usize> = (0..fp.len()).collect();
    order.sort_by(|&a, &b| {
        fp[a]
            .transposed
            .cmp(&fp[b].transposed)
            .then(keys[a].total_cmp(&keys[b]))
    });
    let mut groups = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let flag = fp[order[i]].transposed;
        let mut g = FpGroup {
            idx: [order[i] as i32; AP],
            count: 0,
            transposed: flag,
        };
        while i < order.len() && (g.count as usize) < per && fp[order[i]].transposed == flag {
            g.idx[g.count as usize] = order[i] as i32;
            g.count += 1;
            i += 1;
        }
        groups.push(g);
    }
    groups
}

/// The device tables of the kernels for one block of projections (any
/// subset, any order): the forward and back constants of its projections
/// in block order, the forward groups (indices into the block), and the
/// projection indices (for selecting the block's rows).
pub(crate) struct BlockTables {
    pub(super) fp: DeviceBuffer,
    pub(super) groups: DeviceBuffer,
    pub(super) n_groups: usize,
    pub(super) bp: DeviceBuffer,
    pub(super) idx: DeviceBuffer,
    /// Projections in the block.
    pub(super) len: usize,
}

impl BlockTables {
    /// The tables of the projections `angles` (valid indices into `fp`,
    /// `bp`, `keys`, non-empty), uploaded on `queue`.
    pub(super) fn new(
        queue: &Queue,
        angles: &[usize],
        fp: &[FpAngle],
        bp: &[BpAngle],
        keys: &[f64],
        per: usize,
    ) -> Result<Self> {
        let fp_b: Vec<FpAngle> = angles.iter().map(|&a| fp[a]).collect();
        let bp_b: Vec<BpAngle> = angles.iter().map(|&a| bp[a]).collect();
        let keys_b: Vec<f64> = angles.iter().map(|&a| keys[a]).collect();
        let idx: Vec<i32> = angles.iter().map(|&a| a as i32).collect();
        let groups = angle_groups(&keys_b, &fp_b, per);
        Ok(Self {
            fp: queue.upload_small(&fp_b, "forward constants")?,
            groups: queue.upload_small(&groups, "forward groups")?,
            n_groups: groups.len(),
            bp: queue.upload_small(&bp_b, "back constants")?,
            idx: queue.upload_small(&idx, "projection indices")?,
            len: angles.len(),
        })
    }
}

/// Per-projection constants of `jp_back` (layout of `BpAngle`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct BpAngle {
    c0: f64,
    cx: f64,
    cy: f64,
    sigma: f32,
    len: f32,
}

/// The constants of both kernels for `geometry` on `grid`, in f64, and the
/// number of extra bins the gather needs on each side.
pub(super) fn angle_tables(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
) -> (Vec<FpAngle>, Vec<BpAngle>, usize) {
    let h = grid.pixel_size as f64;
    let bw = geometry.bin_width() as f64;
    let cxg = (grid.nx as f64 - 1.0) * 0.5;
    let cyg = (grid.ny as f64 - 1.0) * 0.5;
    let mut fp = Vec::with_capacity(geometry.n_angles());
    let mut bp = Vec::with_capacity(geometry.n_angles());
    let mut extra = 0usize;
    for (i, &a) in geometry.angles().iter().enumerate() {
        let (sin, cos) = (a as f64).sin_cos();
        let c = geometry.center(i) as f64;
        let m = sin.abs().max(cos.abs());
        let f = if sin.abs() >= cos.abs() {
            // Column stepping: on column ix the ray of bin k is at row
            // r = cy + c·bw/(sin h) − cx·dr − k·bw/(sin h) + ix·dr.
            let dr = cos / sin;
            FpAngle {
                q0: cyg + c * bw / (sin * h) - cxg * dr,
                qk: -bw / (sin * h),
                qs: dr,
                dfix: (dr * 4294967296.0).round() as i64,
                len: (h / sin.abs()) as f32,
                transposed: 1,
            }
        } else {
            // Row stepping: on row iy the ray is at column
            // q = cx − c·bw/(cos h) − cy·dq + k·bw/(cos h) + iy·dq.
            let dq = sin / cos;
            FpAngle {
                q0: cxg - c * bw / (cos * h) - cyg * dq,
                qk: bw / (cos * h),
                qs: dq,
                dfix: (dq * 4294967296.0).round() as i64,
                len: (h / cos.abs()) as f32,
                transposed: 0,
            }
        };
        fp.push(f);
        let sigma = bw / (h * m);
        extra = extra.max(((1.0 / sigma).ceil() as usize).saturating_sub(1));
        bp.push(BpAngle {
            c0: c + (-cxg * h * cos + cyg * h * sin) / bw,
            cx: h * cos / bw,
            cy: -h * sin / bw,
            sigma: sigma as f32,
            len: (h / m) as f32,
        });
    }
    (fp, bp, extra)
}
