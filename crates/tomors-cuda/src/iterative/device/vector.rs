//! tomors-core's [`Vector`] for [`DeviceVec`]: one kernel of
//! `kernels/linalg.cu` per operation (the fused ones included), queued on
//! the vector's stream; only the reductions wait for the device.

use tomors_core::linalg::Vector;
use tomors_core::{CoreError, Result as CoreResult};

use super::{DeviceVec, KernelKind, Layout, Queue, THREADS};
use crate::error::Result;
use crate::runtime::{Arg, Function};

/// `(has, value)` of an optional bound, as the kernels take it.
fn bound(b: Option<f64>) -> (i32, f32) {
    (i32::from(b.is_some()), b.unwrap_or(0.0) as f32)
}

impl DeviceVec {
    /// Launches a grid-stride element-wise kernel over the stored floats.
    fn elementwise(&self, f: &Function, name: &str, args: &[Arg]) -> Result<()> {
        let n = self.layout.stored_len();
        // SAFETY: every caller passes the parameters of kernel `name` in
        // `kernels/linalg.cu`, with pointers to buffers of at least the
        // stored length of `self` (operands checked by `operand`).
        unsafe {
            self.queue.launch(
                KernelKind::Elementwise,
                f,
                name,
                Queue::grid(n),
                (THREADS, 1, 1),
                args,
            )
        }
    }

    fn n(&self) -> Arg {
        (self.layout.stored_len() as i64).into()
    }

    /// Sum of the partial results of reduction kernel `f` with `args`
    /// (the partial buffer, n, plane, ns appended).
    fn sum_reduce(&self, f: &Function, name: &str, args: &[Arg]) -> Result<f64> {
        let (plane, ns) = self.layout.mask();
        let n = self.n();
        let p = self.queue.reduce(f, name, |part| {
            let mut a = args.to_vec();
            a.extend([part.into(), n, plane.into(), ns.into()]);
            a
        })?;
        Ok(p.iter().sum())
    }

    /// `self ← 1/self` where `self > floor` (and `> 0`), else 0: the
    /// floored inverse with an absolute floor (a floor taken over several
    /// vectors, such as the slabs of a volume over devices or ranks).
    pub fn invert_above(&mut self, floor: f64) -> Result<()> {
        self.touched();
        let args = [self.buf.ptr().into(), floor.into(), self.n()];
        self.elementwise(&self.queue.f.invert, "dv_invert", &args)
    }

    /// `max(0, max of the elements)` (waits for the device).
    pub fn max_value(&self) -> Result<f64> {
        let (plane, ns) = self.layout.mask();
        let n = self.n();
        let p = self.queue.reduce(&self.queue.f.max, "dv_max", |part| {
            vec![
                self.buf.ptr().into(),
                part.into(),
                n,
                plane.into(),
                ns.into(),
            ]
        })?;
        Ok(p.iter().fold(0.0f64, |m, &v| m.max(v)))
    }

    fn residual_impl(&mut self, b: &Self, w: Option<&Self>, norm: bool) -> Result<f64> {
        self.check_same(b, "residual")?;
        let wper = match w {
            Some(w) => self.operand(w, "residual weights")?,
            None => 0,
        };
        let wp = w.map_or(0, |w| w.buf.ptr());
        self.touched();
        let base = [self.buf.ptr().into(), wp.into(), wper.into()];
        let bp: Arg = b.buf.ptr().into();
        if norm {
            let q = self.queue.clone();
            let a = [bp, base[0], base[1], base[2]];
            self.sum_reduce(&q.f.residual, "dv_residual", &a)
        } else {
            let (plane, ns) = self.layout.mask();
            let a = [
                bp,
                base[0],
                base[1],
                base[2],
                0u64.into(),
                self.n(),
                plane.into(),
                ns.into(),
            ];
            self.elementwise(&self.queue.f.residual, "dv_residual", &a)?;
            Ok(0.0)
        }
    }

    fn update_impl(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Result<()> {
        self.check_same(g, "update")?;
        let tper = match t {
            Some(t) => self.operand(t, "update weights")?,
            None => 0,
        };
        let tp = t.map_or(0, |t| t.buf.ptr());
        let (has_lo, lo) = bound(min);
        let (has_hi, hi) = bound(max);
        let l = lambda as f32;
        // A stack of images whose transposed copy exists: update both.
        if let (
            Layout::Stack {
                rows, cols, stored, ..
            },
            Some(xt),
        ) = (self.layout, self.shadow.buf.get())
        {
            let args: [Arg; 12] = [
                self.buf.ptr().into(),
                xt.ptr().into(),
                g.buf.ptr().into(),
                tp.into(),
                tper.into(),
                l.into(),
                has_lo.into(),
                lo.into(),
                has_hi.into(),
                hi.into(),
                (cols as i32).into(),
                (rows as i32).into(),
            ];
            // SAFETY: the parameters of `dv_update_t`; x, its copy and g
            // hold `stored` slices of rows × cols, t a plane or the same.
            unsafe {
                self.queue.launch(
                    KernelKind::Elementwise,
                    &self.queue.f.update_t,
                    "dv_update_t",
                    (
                        cols.div_ceil(32) as u32,
                        rows.div_ceil(32) as u32,
                        (stored / 4) as u32,
                    ),
                    (32, 8, 1),
                    &args,
                )?;
            }
            *self.shadow.fresh.get_mut() = true;
            return Ok(());
        }
        self.touched();
        let args = [
            self.buf.ptr().into(),
            g.buf.ptr().into(),
            tp.into(),
            tper.into(),
            l.into(),
            has_lo.into(),
            lo.into(),
            has_hi.into(),
            hi.into(),
            self.n(),
        ];
        self.elementwise(&self.queue.f.update, "dv_update", &args)
    }

    /// `self ← the rows `idx` (a device array of `nsel` i32 row indices)
    /// of `src`: rows of `row` floats, `src_rows` per quad (1 quad for a
    /// flat array or a plane).
    pub(crate) fn gather_rows(
        &mut self,
        src: &Self,
        idx: u64,
        nsel: usize,
        row: usize,
        src_rows: usize,
        quads: usize,
    ) -> Result<()> {
        if nsel * row * quads > self.layout.stored_len()
            || src_rows * row * quads > src.layout.stored_len()
        {
            return Err(CoreError::Shape(format!(
                "row selection of {nsel} rows from {:?} into {:?}",
                src.layout, self.layout
            ))
            .into());
        }
        self.touched();
        let args = [
            src.buf.ptr().into(),
            self.buf.ptr().into(),
            idx.into(),
            (nsel as i32).into(),
            (row as i64).into(),
            (src_rows as i32).into(),
            (quads as i32).into(),
        ];
        // SAFETY: the parameters of `dv_gather_rows`, sizes checked above.
        unsafe {
            self.queue.launch(
                KernelKind::Elementwise,
                &self.queue.f.gather_rows,
                "dv_gather_rows",
                Queue::grid(nsel * row * quads),
                (THREADS, 1, 1),
                &args,
            )
        }
    }
}

impl Vector for DeviceVec {
    type Elem = f32;

    fn len(&self) -> usize {
        self.layout.len()
    }

    fn zeros_like(&self) -> CoreResult<Self> {
        Ok(DeviceVec::zeros(
            &self.queue,
            self.layout,
            "a device vector",
        )?)
    }

    fn fill(&mut self, v: f64) -> CoreResult<()> {
        self.touched();
        let args = [self.buf.ptr().into(), (v as f32).into(), self.n()];
        Ok(self.elementwise(&self.queue.f.fill, "dv_fill", &args)?)
    }

    fn copy_from(&mut self, x: &Self) -> CoreResult<()> {
        self.check_same(x, "copy")?;
        self.touched();
        let args = [self.buf.ptr().into(), x.buf.ptr().into(), self.n()];
        Ok(self.elementwise(&self.queue.f.copy, "dv_copy", &args)?)
    }

    fn scale(&mut self, a: f64) -> CoreResult<()> {
        self.touched();
        let args = [self.buf.ptr().into(), (a as f32).into(), self.n()];
        Ok(self.elementwise(&self.queue.f.scale, "dv_scale", &args)?)
    }

    fn axpy(&mut self, a: f64, x: &Self) -> CoreResult<()> {
        let xper = self.operand(x, "axpy")?;
        self.touched();
        let args = [
            self.buf.ptr().into(),
            (a as f32).into(),
            x.buf.ptr().into(),
            xper.into(),
            self.n(),
        ];
        Ok(self.elementwise(&self.queue.f.axpy, "dv_axpy", &args)?)
    }

    fn mul_assign(&mut self, x: &Self) -> CoreResult<()> {
        let wper = self.operand(x, "element-wise product")?;
        self.touched();
        let args = [
            self.buf.ptr().into(),
            x.buf.ptr().into(),
            wper.into(),
            self.n(),
        ];
        Ok(self.elementwise(&self.queue.f.mul, "dv_mul", &args)?)
    }

    fn invert_floored(&mut self, rel_floor: f64) -> CoreResult<()> {
        let floor = self.max_value()? * rel_floor;
        self.touched();
        let args = [self.buf.ptr().into(), floor.into(), self.n()];
        Ok(self.elementwise(&self.queue.f.invert, "dv_invert", &args)?)
    }

    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> CoreResult<()> {
        if min.is_none() && max.is_none() {
            return Ok(());
        }
        self.touched();
        let (has_lo, lo) = bound(min);
        let (has_hi, hi) = bound(max);
        let args = [
            self.buf.ptr().into(),
            has_lo.into(),
            lo.into(),
            has_hi.into(),
            hi.into(),
            self.n(),
        ];
        Ok(self.elementwise(&self.queue.f.clip, "dv_clip", &args)?)
    }

    fn dot(&self, x: &Self) -> CoreResult<f64> {
        self.check_same(x, "dot")?;
        let args = [self.buf.ptr().into(), x.buf.ptr().into()];
        Ok(self.sum_reduce(&self.queue.f.dot, "dv_dot", &args)?)
    }

    fn norm_sq(&self) -> CoreResult<f64> {
        let args = [self.buf.ptr().into()];
        Ok(self.sum_reduce(&self.queue.f.sqsum, "dv_sqsum", &args)?)
    }

    fn all_finite(&self) -> CoreResult<bool> {
        let args = [self.buf.ptr().into()];
        Ok(self.sum_reduce(&self.queue.f.nonfinite, "dv_nonfinite", &args)? == 0.0)
    }

    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<()> {
        self.residual_impl(b, w, false)?;
        Ok(())
    }

    fn residual_weighted_norm_sq(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<f64> {
        Ok(self.residual_impl(b, w, true)?)
    }

    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> CoreResult<()> {
        Ok(self.update_impl(lambda, g, t, min, max)?)
    }
}
