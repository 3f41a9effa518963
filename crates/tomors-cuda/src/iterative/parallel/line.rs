//! The line-length (Siddon) projector on the GPU: [`CudaJoseph`] switched
//! to the line model ([`CudaJoseph::set_line_model`]) runs the matched
//! pair of `kernels/line.cu` (two gathers, no atomics) instead of Joseph's
//! on the same interleaved stacks, block tables and vectors, so every
//! method that needs no single rays (SIRT, SART, BLOCK-IT) runs with it.
//!
//! The entry of ray `(a, k)` for pixel `p` is the ray's length inside the
//! pixel, a trapezoid in the ray's distance `d` from the pixel centre:
//! `(h/m)·clamp((h(m+n)/2 − d)/(h·n), 0, 1)` with `m = max(|sin|, |cos|)`,
//! `n = min(|sin|, |cos|)` — tomors-core's
//! [`LineProjector`](tomors_core::iterative::LineProjector). Both kernels
//! evaluate it by the same f64 operations (`lp_w` in the kernel file), so
//! the pair is an exact transpose, also where the trapezoid is steep (rays
//! a hair off the axes) and at exactly axis-aligned rays on pixel edges
//! (Siddon's midpoint rule: the pixel with the larger index).

use super::*;

/// Source of the line-length projector's kernels.
pub const LINE_CU: &str = include_str!("../../../kernels/line.cu");

/// The line model's kernels.
pub(crate) struct LineKernels {
    forward: Function,
    forward_sq: Function,
    back: Function,
    _module: Module,
}

impl CudaJoseph {
    /// Switches the projector to the line-length model (`true`; compiles
    /// its kernels) or back to Joseph's (`false`). ART and the
    /// block-parallel method (Joseph's ray batches) are not offered with
    /// the line model.
    ///
    /// Errors: compilation and driver errors.
    pub fn set_line_model(&mut self, on: bool) -> Result<()> {
        if !on {
            self.queue.stream().synchronize()?;
            self.line = None;
            return Ok(());
        }
        if self.line.is_some() {
            return Ok(());
        }
        let ctx = self.queue.context();
        ctx.bind()?;
        let (cubin, _) = cubin_cached("line", LINE_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        self.line = Some(LineKernels {
            forward: module.function("lp_forward")?,
            forward_sq: module.function("lp_forward_sq")?,
            back: module.function("lp_back")?,
            _module: module,
        });
        Ok(())
    }

    /// Whether the projector is the line-length model.
    pub fn is_line_model(&self) -> bool {
        self.line.is_some()
    }

    /// Queues the line model's forward projection of `slices` slices of
    /// the volume at `v` for the projections of `tables` into `out`.
    pub(super) fn line_forward_raw(
        &self,
        k: &LineKernels,
        (v, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
        squared: bool,
    ) -> Result<()> {
        let (f, name) = if squared {
            (&k.forward_sq, "lp_forward_sq")
        } else {
            (&k.forward, "lp_forward")
        };
        self.launch(
            KernelKind::Forward,
            f,
            name,
            (
                self.nb.div_ceil(128) as u32,
                tables.len as u32,
                slices.div_ceil(4) as u32,
            ),
            (128, 1, 1),
            &[
                v.into(),
                out.into(),
                tables.fp.ptr().into(),
                tables.bp.ptr().into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
                (tables.len as i32).into(),
                (self.nb as i32).into(),
            ],
        )
    }

    /// Queues the line model's back projection of `slices` sinograms at
    /// `sino` (the projections of `tables`) into the volume at `out`.
    pub(super) fn line_back_raw(
        &self,
        k: &LineKernels,
        (sino, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        self.launch(
            KernelKind::Back,
            &k.back,
            "lp_back",
            (
                self.nx.div_ceil(16) as u32,
                self.ny.div_ceil(16) as u32,
                slices.div_ceil(4) as u32,
            ),
            (256, 1, 1),
            &[
                sino.into(),
                out.into(),
                tables.bp.ptr().into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
                (tables.len as i32).into(),
                (self.nb as i32).into(),
            ],
        )
    }
}
