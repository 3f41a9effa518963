//! Joseph's projector for cone beam, and its exact transpose.
//!
//! Each ray runs from the source to the centre of a detector pixel. In
//! voxel-index coordinates the projector steps along the axis on which the
//! ray's direction is largest (x or y for the usual cone angles, z for rays
//! steeper than 45°): one step per voxel plane. At each step it
//! interpolates bilinearly between the four voxel centres around the ray in
//! the other two axes and weights the value by the length of one step,
//! `h·|d|/|d_a|` (`h` the voxel side). Voxels outside the volume (or the
//! projector's [`VolumeBox`]) read as zero and receive nothing: virtual zero
//! padding, no padded copy. The transpose visits the same (voxel, weight)
//! pairs and scatters.

use super::cone_rays::{
    cone_ray_projector, matched_cone_projector, ConeRays, ConeTracer, VolumeBox,
};
use super::joseph::step_range;
use super::operator::floor_i64;
use super::real::Real;
use crate::cone::{ConeGeometry, ConeVolume};
use crate::error::Result;

cone_ray_projector!(
    /// Joseph's cone-beam projector (matched pair).
    ConeJosephProjector
);

impl ConeTracer for ConeJosephProjector {
    fn rays(&self) -> &ConeRays {
        &self.rays
    }

    #[inline]
    fn trace<F: FnMut(usize, f64)>(
        &self,
        a: usize,
        row: usize,
        col: usize,
        clip: &VolumeBox,
        mut visit: F,
    ) {
        let (o, d) = self.rays.ray(a, row, col);
        let h = self.rays.volume.voxel_size as f64;
        // Dominant axis `ax`, the other two `bx`, `cx`.
        let ax = if d[0].abs() >= d[1].abs() {
            if d[0].abs() >= d[2].abs() {
                0
            } else {
                2
            }
        } else if d[1].abs() >= d[2].abs() {
            1
        } else {
            2
        };
        let (bx, cx) = match ax {
            0 => (1, 2),
            1 => (0, 2),
            _ => (0, 1),
        };
        if d[ax] == 0.0 {
            return;
        }
        let db = d[bx] / d[ax];
        let dc = d[cx] / d[ax];
        // Coordinates where the ray meets plane `i` of the dominant axis.
        let b_at0 = o[bx] - o[ax] * db;
        let c_at0 = o[cx] - o[ax] * dc;
        let len = h * (1.0 + db * db + dc * dc).sqrt();
        let (lo, hi) = (clip.lo(), clip.hi());
        let (l1, h1) = step_range(
            b_at0,
            db,
            lo[bx] as f64 - 1.0,
            hi[bx] as f64,
            lo[ax],
            hi[ax],
        );
        let (l2, h2) = step_range(
            c_at0,
            dc,
            lo[cx] as f64 - 1.0,
            hi[cx] as f64,
            lo[ax],
            hi[ax],
        );
        let (first, end) = (l1.max(l2), h1.min(h2));
        let inb = |v: i64| v >= lo[bx] as i64 && v < hi[bx] as i64;
        let inc = |v: i64| v >= lo[cx] as i64 && v < hi[cx] as i64;
        // Flat index within the region: Σ (p_k − region_lo_k)·stride_k.
        let st = self.rays.strides();
        let rlo = self.rays.region.lo();
        let (sa, sb, sc) = (st[ax], st[bx], st[cx]);
        let base = -((rlo[0] * st[0] + rlo[1] * st[1] + rlo[2] * st[2]) as i64);
        for i in first..end {
            let pb = b_at0 + i as f64 * db;
            let pc = c_at0 + i as f64 * dc;
            let b0 = floor_i64(pb);
            let c0 = floor_i64(pc);
            let wb = pb - b0 as f64;
            let wc = pc - c0 as f64;
            let k = (base + (i * sa) as i64 + b0 * sb as i64 + c0 * sc as i64) as usize;
            if inb(b0) && inb(b0 + 1) && inc(c0) && inc(c0 + 1) {
                // Interior: all four neighbours inside (zero weights are
                // visited too; they add nothing).
                let (l0, l1) = (len * (1.0 - wb), len * wb);
                visit(k, l0 * (1.0 - wc));
                visit(k + sb, l1 * (1.0 - wc));
                visit(k + sc, l0 * wc);
                visit(k + sb + sc, l1 * wc);
                continue;
            }
            for (db_, wbb) in [(0i64, 1.0 - wb), (1, wb)] {
                if wbb <= 0.0 || !inb(b0 + db_) {
                    continue;
                }
                for (dc_, wcc) in [(0i64, 1.0 - wc), (1, wc)] {
                    if wcc <= 0.0 || !inc(c0 + dc_) {
                        continue;
                    }
                    let kk = k as i64 + db_ * sb as i64 + dc_ * sc as i64;
                    visit(kk as usize, len * wbb * wcc);
                }
            }
        }
    }
}

matched_cone_projector!(ConeJosephProjector, "joseph");
