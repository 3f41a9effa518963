//! ART and the block-parallel method on [`JosephStackOp`]: the rays of a
//! projection in batches whose pixel sets are disjoint
//! ([`RayBatches`](tomors_core::linalg::RayBatches)), projected and
//! updated on the device by `kernels/art.cu` (one thread per ray and quad
//! of slices, no atomics), so tomors-core's
//! [`solve`](tomors_core::iterative::solve) runs ART (Kaczmarz) and the
//! block-parallel method resident on the device.
//!
//! The ray of bin `k` of projection `a` is at `q0 + k·qk + t·qs` on line
//! `t` and touches the pixels `⌊q⌋` and `⌊q⌋ + 1` there; two rays `s` bins
//! apart are `s·|qk|` apart on every line, so with
//! `s = ⌈2.001/|qk|⌉` (2 pixels, plus a margin above the fixed-point
//! stepping's error of at most 2⁻¹⁴ pixel per ray) their pixel sets are
//! disjoint. Batch `β` of projection `a` holds the bins `β, β + s, …`.

use std::sync::OnceLock;

use tomors_core::linalg::RayBatches;
use tomors_core::Result as CoreResult;

use super::*;

/// Source of the ART kernels of the parallel-beam Joseph projector.
pub const ART_CU: &str = include_str!("../../../kernels/art.cu");

/// Smallest distance (pixels, along a line) of two rays of one batch.
const MIN_SEPARATION: f64 = 2.001;

/// The ART kernels (compiled on first use).
pub(crate) struct ArtKernels {
    forward: Function,
    update: Function,
    _module: Module,
}

/// The lazily compiled ART kernels of a projector.
pub(crate) type ArtCell = OnceLock<ArtKernels>;

/// `f32` bounds of the kernels (`∓∞` for an absent side).
pub(crate) fn f32_bounds(min: Option<f64>, max: Option<f64>) -> (f32, f32) {
    (
        min.map_or(f32::NEG_INFINITY, |v| v as f32),
        max.map_or(f32::INFINITY, |v| v as f32),
    )
}

impl CudaJoseph {
    fn art_kernels(&self) -> Result<&ArtKernels> {
        if let Some(k) = self.art.get() {
            return Ok(k);
        }
        let ctx = self.queue.context();
        ctx.bind()?;
        let (cubin, _) = cubin_cached("art", ART_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        let k = ArtKernels {
            forward: module.function("jp_art_forward")?,
            update: module.function("jp_art_update")?,
            _module: module,
        };
        let _ = self.art.set(k);
        self.art
            .get()
            .ok_or_else(|| CudaError::Parameter("the ART kernels did not load".into()))
    }

    /// Bins between two rays of one ART batch of projection `a` (at most
    /// the number of bins; [`joseph_art_strides`]).
    pub fn art_stride(&self, a: usize) -> usize {
        self.fp_host
            .get(a)
            .map_or(1, |f| stride_of(f.qk(), self.nb))
    }
}

/// `⌈MIN_SEPARATION/|qk|⌉`, at most `nb` (every ray its own batch).
fn stride_of(qk: f64, nb: usize) -> usize {
    let s = (MIN_SEPARATION / qk.abs()).ceil();
    if s.is_finite() && s >= 1.0 {
        (s as usize).min(nb.max(1))
    } else {
        nb.max(1)
    }
}

/// The stride of the ART batches of every projection of `geometry` on
/// `grid` (bins between two rays of a batch), as
/// [`CudaJoseph::art_stride`] gives it; no GPU needed.
pub fn joseph_art_strides(geometry: &ParallelGeometry, grid: &SliceGrid) -> Vec<usize> {
    let (fp, _, _) = angle_tables(geometry, grid);
    fp.iter()
        .map(|f| stride_of(f.qk(), geometry.n_bins()))
        .collect()
}

impl JosephStackOp<'_> {
    /// Checks the projection and batch indices; returns the stride.
    fn check_batch(&self, a: usize, batch: usize) -> Result<usize> {
        let p = self.proj;
        if a >= p.na {
            return Err(CoreError::Parameter(format!(
                "projection index {a} out of range (the geometry has {})",
                p.na
            ))
            .into());
        }
        let s = p.art_stride(a);
        if batch >= s {
            return Err(CudaError::Parameter(format!(
                "ray batch {batch} of projection {a} out of range (it has {s})"
            )));
        }
        Ok(s)
    }

    /// Queues an ART kernel over the rays of batch `batch` of projection `a`.
    fn launch_batch(
        &self,
        update: bool,
        (a, batch, s): (usize, usize, usize),
        (src, dst): (u64, u64),
        extra: &[Arg],
    ) -> Result<()> {
        let p = self.proj;
        let k = p.art_kernels()?;
        let rays = (p.nb - batch).div_ceil(s);
        let quads = self.slices.div_ceil(4);
        let mut args: Vec<Arg> = vec![
            src.into(),
            dst.into(),
            p.blocks.full().fp.ptr().into(),
            (a as i32).into(),
            (p.nx as i32).into(),
            (p.ny as i32).into(),
            (p.nb as i32).into(),
            (batch as i32).into(),
            (s as i32).into(),
        ];
        args.extend_from_slice(extra);
        let (kind, f, name) = if update {
            (KernelKind::Back, &k.update, "jp_art_update")
        } else {
            (KernelKind::Forward, &k.forward, "jp_art_forward")
        };
        p.launch(
            kind,
            f,
            name,
            (rays.div_ceil(128) as u32, quads as u32, 1),
            (128, 1, 1),
            &args,
        )
    }

    fn art_forward(&self, x: &DeviceVec, a: usize, batch: usize, y: &mut DeviceVec) -> Result<()> {
        let s = self.check_batch(a, batch)?;
        self.check_domain(x, "the volume")?;
        self.check_range(y, 1, "the projection")?;
        y.touched();
        let ptrs = (x.buffer().ptr(), y.buffer().ptr());
        self.launch_batch(false, (a, batch, s), ptrs, &[])
    }

    #[allow(clippy::too_many_arguments)]
    fn art_update(
        &self,
        r: &DeviceVec,
        a: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut DeviceVec,
    ) -> Result<()> {
        let s = self.check_batch(a, batch)?;
        self.check_range(r, 1, "the residual")?;
        self.check_domain(x, "the volume")?;
        // The transposed copy, if any, is stale now.
        x.touched();
        let (lo, hi) = f32_bounds(min, max);
        let ptrs = (r.buffer().ptr(), x.buffer().ptr());
        let extra = [(lambda as f32).into(), lo.into(), hi.into()];
        self.launch_batch(true, (a, batch, s), ptrs, &extra)
    }
}

impl RayBatches<DeviceVec, DeviceVec> for JosephStackOp<'_> {
    fn batches(&self, angle: usize) -> usize {
        self.proj.art_stride(angle)
    }

    fn forward_batch(
        &self,
        x: &DeviceVec,
        angle: usize,
        batch: usize,
        y: &mut DeviceVec,
    ) -> CoreResult<()> {
        Ok(self.art_forward(x, angle, batch, y)?)
    }

    fn update_batch(
        &self,
        r: &DeviceVec,
        angle: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut DeviceVec,
    ) -> CoreResult<()> {
        Ok(self.art_update(r, angle, batch, lambda, min, max, x)?)
    }
}
