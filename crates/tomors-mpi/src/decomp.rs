//! What the two domain decompositions of the cone-beam iterative methods
//! share ([`crate::dist_op`] on the CPU, [`crate::gpu_op`] on each rank's
//! GPU):
//!
//! - [`Slab`], the domain: this rank's z-slab of the volume, a vector of the
//!   *whole* volume — element-wise operations act on the slab, reductions
//!   (dot products, norms, the maximum that floors the weights, finiteness)
//!   are taken over every rank. The slab is a host array or a device vector
//!   ([`Part`]);
//! - [`SumStats`]: the count, size and time of the sums of partial
//!   projections over the ranks, logged by [`log_sums`];
//! - [`rank_slab`], [`slab_result`]: a rank's slices, and its part of the
//!   result.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ndarray::Array3;
use tomors_core::iterative::{IterativeResult, SolveReport};
use tomors_core::linalg::Vector;
use tomors_core::Result;
use tomors_cuda::DeviceVec;

use crate::comm::Comm;
use crate::split::split_rows;

/// A rank's part of a slab vector: a [`Vector`] that also gives the two
/// halves of [`Vector::invert_floored`], so the floor can come from the
/// maximum over every rank.
pub trait Part: Vector<Elem = f32> {
    /// `max(0, the largest element)` of this part.
    fn max_value(&self) -> Result<f64>;
    /// Each element `v ← 1/v` where `v > floor` and `v > 0`, else 0.
    fn invert_above(&mut self, floor: f64) -> Result<()>;
}

impl Part for Array3<f32> {
    fn max_value(&self) -> Result<f64> {
        Ok(self.iter().fold(0.0f64, |m, &v| m.max(f64::from(v))))
    }
    fn invert_above(&mut self, floor: f64) -> Result<()> {
        self.mapv_inplace(|v| {
            let d = f64::from(v);
            (if d > floor && d > 0.0 { 1.0 / d } else { 0.0 }) as f32
        });
        Ok(())
    }
}

impl Part for DeviceVec {
    fn max_value(&self) -> Result<f64> {
        Ok(DeviceVec::max_value(self)?)
    }
    fn invert_above(&mut self, floor: f64) -> Result<()> {
        Ok(DeviceVec::invert_above(self, floor)?)
    }
}

/// This rank's slab of a volume split into z-slabs over the ranks of
/// `comm`, as a vector of the whole volume (see the module documentation).
pub struct Slab<'c, V> {
    /// The slab's values (a host array `[1][z·y][x]`, or a device vector
    /// `[z][y][x]`).
    pub x: V,
    comm: &'c dyn Comm,
    /// Elements of the whole volume.
    total: usize,
}

impl<'c, V> Slab<'c, V> {
    /// The slab `x` of a volume of `total` elements split over `comm`.
    pub fn new(x: V, comm: &'c dyn Comm, total: usize) -> Self {
        Self { x, comm, total }
    }

    fn like(&self, x: V) -> Self {
        Self::new(x, self.comm, self.total)
    }

    fn sum(&self, v: f64) -> f64 {
        let mut b = [v];
        self.comm.allreduce_sum_f64(&mut b);
        b[0]
    }
}

impl<V: Part> Vector for Slab<'_, V> {
    type Elem = f32;
    fn len(&self) -> usize {
        self.total
    }
    fn zeros_like(&self) -> Result<Self> {
        Ok(self.like(self.x.zeros_like()?))
    }
    fn fill(&mut self, v: f64) -> Result<()> {
        self.x.fill(v)
    }
    fn copy_from(&mut self, x: &Self) -> Result<()> {
        self.x.copy_from(&x.x)
    }
    fn scale(&mut self, a: f64) -> Result<()> {
        self.x.scale(a)
    }
    fn axpy(&mut self, a: f64, x: &Self) -> Result<()> {
        self.x.axpy(a, &x.x)
    }
    fn mul_assign(&mut self, x: &Self) -> Result<()> {
        self.x.mul_assign(&x.x)
    }
    /// The floor from the maximum over every rank, so a slab's weights are
    /// floored as the whole volume's are.
    fn invert_floored(&mut self, rel_floor: f64) -> Result<()> {
        let floor = self.comm.allreduce_max_f64(self.x.max_value()?) * rel_floor;
        self.x.invert_above(floor)
    }
    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> Result<()> {
        self.x.clip(min, max)
    }
    fn dot(&self, x: &Self) -> Result<f64> {
        Ok(self.sum(self.x.dot(&x.x)?))
    }
    fn norm_sq(&self) -> Result<f64> {
        Ok(self.sum(self.x.norm_sq()?))
    }
    fn all_finite(&self) -> Result<bool> {
        let local = u64::from(self.x.all_finite()?);
        Ok(self.comm.allreduce_min_u64(local) == 1)
    }
    /// Element-wise: the part's own (fused on a device).
    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> Result<()> {
        self.x.residual_weighted(&b.x, w.map(|w| &w.x))
    }
    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Result<()> {
        self.x
            .update_clipped(lambda, &g.x, t.map(|t| &t.x), min, max)
    }
}

/// The sums of partial projections over the ranks an operator has done:
/// how many, the values summed, the time spent in them.
#[derive(Default)]
pub struct SumStats([AtomicU64; 3]);

impl SumStats {
    /// Records one sum of `values` values that began at `start`.
    pub fn record(&self, values: usize, start: Instant) {
        self.0[0].fetch_add(1, Ordering::Relaxed);
        self.0[1].fetch_add(values as u64, Ordering::Relaxed);
        self.0[2].fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// `(sums, bytes summed per rank, seconds)`.
    pub fn get(&self) -> (u64, u64, f64) {
        (
            self.0[0].load(Ordering::Relaxed),
            4 * self.0[1].load(Ordering::Relaxed),
            self.0[2].load(Ordering::Relaxed) as f64 * 1e-9,
        )
    }
}

/// This rank's slices of a volume of `nz` slices split into z-slabs over
/// the ranks of `comm`; an error when there are more ranks than slices.
pub fn rank_slab(comm: &dyn Comm, nz: usize) -> anyhow::Result<Range<usize>> {
    let z = split_rows(&(0..nz), comm.size(), comm.rank());
    if z.is_empty() {
        anyhow::bail!(
            "{} ranks for {nz} slices: at most one rank per slice",
            comm.size()
        );
    }
    Ok(z)
}

/// Logs on rank 0 the time iterating since `start` and the sums of partial
/// projections `stats` (`(sums, bytes, seconds)`, [`SumStats::get`]): `who`
/// names rank 0's device (e.g. `" (GPU 0)"`), `how` says how the sums
/// travel (e.g. `", through host memory"`).
pub fn log_sums(comm: &dyn Comm, start: Instant, stats: (u64, u64, f64), who: &str, how: &str) {
    let (sums, bytes, seconds) = stats;
    if comm.rank() == 0 {
        tracing::info!(
            "rank 0{who}: {:.3} s iterating, of which {seconds:.3} s in {sums} sums of partial projections over the ranks ({:.1} MiB each{how})",
            start.elapsed().as_secs_f64(),
            bytes as f64 / sums.max(1) as f64 / (1 << 20) as f64
        );
    }
}

/// This rank's part of the result: its slab `x` (`[z][y][x]`) and the
/// solver's `report`.
pub fn slab_result(report: SolveReport, x: Array3<f32>) -> IterativeResult<f32> {
    IterativeResult {
        x,
        residuals: report.residuals,
        iterations: report.iterations,
        relaxation: report.relaxation,
        stop: report.stop,
    }
}
