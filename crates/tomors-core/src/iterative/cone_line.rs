//! The line-length (Siddon) projector for cone beam: each voxel is weighted
//! by the exact length of the ray's path through it.
//!
//! In voxel-index coordinates the ray is clipped to the box (faces at
//! `lo − ½` and `hi − ½`), split at every crossing with an interior voxel
//! plane (crossings of the three axes merged in order, as Amanatides and
//! Woo traverse a grid), and each piece is credited to the voxel holding
//! its midpoint. Every crossing time is computed by one formula,
//! `(k − ½ − o)/d`, whatever the box, so the pieces of a partition of the
//! volume reproduce the whole.

use super::cone_rays::{
    cone_ray_projector, matched_cone_projector, ConeRays, ConeTracer, VolumeBox,
};
use super::operator::floor_i64;
use super::real::Real;
use crate::cone::{ConeGeometry, ConeVolume};
use crate::error::Result;

cone_ray_projector!(
    /// The cone-beam line-length projector (matched pair).
    ConeLineProjector
);

/// Parameter `t` where the ray crosses plane `k − ½` of an axis.
#[inline(always)]
fn crossing(k: i64, o: f64, d: f64) -> f64 {
    (k as f64 - 0.5 - o) / d
}

impl ConeTracer for ConeLineProjector {
    fn rays(&self) -> &ConeRays {
        &self.rays
    }

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
        let (lo, hi) = (clip.lo(), clip.hi());
        // Parameter interval inside the box (t ≥ 0: in front of the source).
        let (mut t0, mut t1) = (0.0f64, f64::INFINITY);
        for i in 0..3 {
            let (l, u) = (lo[i] as i64, hi[i] as i64);
            if d[i] == 0.0 {
                if o[i] < l as f64 - 0.5 || o[i] >= u as f64 - 0.5 {
                    return;
                }
                continue;
            }
            let (ta, tb) = (crossing(l, o[i], d[i]), crossing(u, o[i], d[i]));
            t0 = t0.max(ta.min(tb));
            t1 = t1.min(ta.max(tb));
        }
        if t0.partial_cmp(&t1) != Some(std::cmp::Ordering::Less) {
            return;
        }
        // Next interior plane of each axis after t0.
        let mut next_k = [0i64; 3];
        let mut next_t = [f64::INFINITY; 3];
        for i in 0..3 {
            if d[i] == 0.0 {
                continue;
            }
            let (l, u) = (lo[i] as i64, hi[i] as i64);
            let p = o[i] + t0 * d[i];
            let mut k;
            if d[i] > 0.0 {
                k = floor_i64(p + 0.5) + 1;
                while k - 1 > l && crossing(k - 1, o[i], d[i]) > t0 {
                    k -= 1;
                }
                while k < u && crossing(k, o[i], d[i]) <= t0 {
                    k += 1;
                }
                if k > l && k < u {
                    next_t[i] = crossing(k, o[i], d[i]);
                }
            } else {
                k = floor_i64(p + 0.5);
                while k + 1 < u && crossing(k + 1, o[i], d[i]) > t0 {
                    k += 1;
                }
                while k > l && crossing(k, o[i], d[i]) <= t0 {
                    k -= 1;
                }
                if k > l && k < u {
                    next_t[i] = crossing(k, o[i], d[i]);
                }
            }
            next_k[i] = k;
        }
        let scale = h * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        let mut t = t0;
        let mut v = [0usize; 3];
        loop {
            let tn = next_t[0].min(next_t[1]).min(next_t[2]).min(t1);
            if tn > t {
                let tm = 0.5 * (t + tn);
                for i in 0..3 {
                    let c = floor_i64(o[i] + tm * d[i] + 0.5);
                    v[i] = c.clamp(lo[i] as i64, hi[i] as i64 - 1) as usize;
                }
                visit(self.rays.flat(v), (tn - t) * scale);
            }
            if tn >= t1 {
                break;
            }
            for i in 0..3 {
                if next_t[i] == tn {
                    let (l, u) = (lo[i] as i64, hi[i] as i64);
                    next_k[i] += if d[i] > 0.0 { 1 } else { -1 };
                    let k = next_k[i];
                    next_t[i] = if k > l && k < u {
                        crossing(k, o[i], d[i])
                    } else {
                        f64::INFINITY
                    };
                }
            }
            t = tn;
        }
    }
}

matched_cone_projector!(ConeLineProjector, "line");
