//! Element-wise kernels, reductions, weights and the power iteration of [`CudaJoseph`].

use super::*;

impl CudaJoseph {
    pub(super) fn fill(&self, buf: &DeviceStack, value: f32) -> Result<()> {
        let p = buf.buf.ptr();
        let v = value;
        let n = buf.len() as i64;
        self.launch(
            &self.f.fill,
            "jp_fill",
            Self::elementwise_grid(buf.len()),
            (256, 1, 1),
            &[p.into(), v.into(), n.into()],
        )
    }

    /// `y *= c·w[element]` with `w` per pixel or per ray (or `c` alone).
    pub(super) fn scale(&self, y: &DeviceStack, w: Option<&DeviceBuffer>, c: f32) -> Result<()> {
        let p = y.buf.ptr();
        let wp = w.map_or(0, |w| w.ptr());
        let cc = c;
        let n = y.len() as i64;
        let per = (y.rows * y.cols) as i64;
        self.launch(
            &self.f.scale,
            "jp_scale",
            Self::elementwise_grid(y.len()),
            (256, 1, 1),
            &[p.into(), wp.into(), cc.into(), n.into(), per.into()],
        )
    }

    /// Sums the partial sums of the last reduction (waits for the stream).
    pub(super) fn partial_sum(&self) -> Result<f64> {
        let mut p = vec![0f64; RED_BLOCKS];
        self.get(&self.partial, &mut p)?;
        Ok(p.iter().sum())
    }

    /// `Σ y²` over the real slices (waits for the stream).
    pub(super) fn sq_norm(&self, y: &DeviceStack) -> Result<f64> {
        let p = y.buf.ptr();
        let part = self.partial.ptr();
        let n = y.len() as i64;
        let per = (y.rows * y.cols) as i64;
        let ns = y.slices as i32;
        self.launch(
            &self.f.sqsum,
            "jp_sqsum",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &[p.into(), part.into(), n.into(), per.into(), ns.into()],
        )?;
        self.partial_sum()
    }

    /// `r ← M·(b − r)` in place, queueing the partial sums of `‖b − r‖²`.
    pub(super) fn residual(
        &self,
        b: &DeviceStack,
        r: &DeviceStack,
        m: Option<&DeviceBuffer>,
    ) -> Result<()> {
        let bp = b.buf.ptr();
        let rp = r.buf.ptr();
        let mp = m.map_or(0, |m| m.ptr());
        let part = self.partial.ptr();
        let n = r.len() as i64;
        let per = (r.rows * r.cols) as i64;
        let ns = r.slices as i32;
        self.launch(
            &self.f.residual,
            "jp_residual",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &[
                bp.into(),
                rp.into(),
                mp.into(),
                part.into(),
                n.into(),
                per.into(),
                ns.into(),
            ],
        )
    }

    /// `x ← P_C(x + λ·T·g)`, also writing the transposed copy `xt`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update(
        &self,
        x: &DeviceStack,
        xt: &DeviceStack,
        g: &DeviceStack,
        t: Option<&DeviceBuffer>,
        lambda: f32,
        clamp: &Constraint,
    ) -> Result<()> {
        let xp = x.buf.ptr();
        let xtp = xt.buf.ptr();
        let gp = g.buf.ptr();
        let tp = t.map_or(0, |t| t.ptr());
        let l = lambda;
        let has_lo = i32::from(clamp.min.is_some());
        let lo = clamp.min.unwrap_or(0.0) as f32;
        let has_hi = i32::from(clamp.max.is_some());
        let hi = clamp.max.unwrap_or(0.0) as f32;
        let (nx, ny) = (self.nx as i32, self.ny as i32);
        self.launch(
            &self.f.update,
            "jp_update",
            (
                self.nx.div_ceil(32) as u32,
                self.ny.div_ceil(32) as u32,
                x.quads() as u32,
            ),
            (32, 8, 1),
            &[
                xp.into(),
                xtp.into(),
                gp.into(),
                tp.into(),
                l.into(),
                has_lo.into(),
                lo.into(),
                has_hi.into(),
                hi.into(),
                nx.into(),
                ny.into(),
            ],
        )
    }

    /// Row sums `A·1` (`[angle][bin]`), or the squared row norms `‖a_i‖²`.
    pub fn row_sums(&self, squared: bool) -> Result<Array2<f32>> {
        let v = self.alloc_volume(1)?;
        let vt = self.alloc_volume(1)?;
        self.fill(&v, 1.0)?;
        self.fill(&vt, 1.0)?;
        let s = self.alloc_sinograms(1)?;
        self.forward_impl(&v, &vt, &s, squared)?;
        Ok(self.download(&s)?.index_axis_move(Axis(0), 0))
    }

    /// Column sums `Aᵀ·1` (`[y][x]`).
    pub fn column_sums(&self) -> Result<Array2<f32>> {
        let s = self.alloc_sinograms(1)?;
        self.fill(&s, 1.0)?;
        let mut v = self.alloc_volume(1)?;
        self.back_dev(&s, &mut v)?;
        Ok(self.download(&v)?.index_axis_move(Axis(0), 0))
    }

    /// Uploads a small host array (weights) into a new device buffer.
    pub(super) fn upload_weights(&self, w: &Array2<f32>, what: &str) -> Result<DeviceBuffer> {
        let data = w.as_standard_layout();
        let data = data.as_slice().expect("standard layout");
        let buf = DeviceBuffer::new(&self.ctx, data.len() * 4, what)?;
        self.put(&buf, data)?;
        Ok(buf)
    }

    /// `M` and `T` of `weighting` on the device (`None` = identity).
    pub(super) fn weights(
        &self,
        weighting: Weighting,
    ) -> Result<(Option<DeviceBuffer>, Option<DeviceBuffer>)> {
        Ok(match weighting {
            Weighting::Landweber => (None, None),
            Weighting::Cimmino => {
                let mut m = self.row_sums(true)?;
                invert(m.as_slice_mut().expect("standard layout"));
                (Some(self.upload_weights(&m, "row weights")?), None)
            }
            Weighting::RowColumnSums => {
                let mut m = self.row_sums(false)?;
                invert(m.as_slice_mut().expect("standard layout"));
                let mut t = self.column_sums()?;
                invert(t.as_slice_mut().expect("standard layout"));
                (
                    Some(self.upload_weights(&m, "row weights")?),
                    Some(self.upload_weights(&t, "column weights")?),
                )
            }
        })
    }

    /// Spectral radius of `T·Aᵀ·M·A` by power iteration from the all-ones
    /// image (as tomors-core's
    /// [`spectral_radius`](tomors_core::iterative::spectral_radius)), on the
    /// device.
    pub fn spectral_radius(&self, weighting: Weighting, max_iterations: usize) -> Result<f64> {
        let (m, t) = self.weights(weighting)?;
        self.power_iteration(m.as_ref(), t.as_ref(), max_iterations)
    }

    pub(super) fn power_iteration(
        &self,
        m: Option<&DeviceBuffer>,
        t: Option<&DeviceBuffer>,
        max_iterations: usize,
    ) -> Result<f64> {
        let v = self.alloc_volume(1)?;
        let mut vt = self.alloc_volume(1)?;
        let mut w = self.alloc_volume(1)?;
        let mut s = self.alloc_sinograms(1)?;
        self.fill(&v, 1.0)?;
        let mut norm_v = ((self.nx * self.ny) as f64).sqrt();
        let mut rho = 0.0f64;
        let mut cur = v;
        for _ in 0..max_iterations.max(1) {
            self.transpose_dev(&cur, &mut vt)?;
            self.forward_dev(&cur, &vt, &mut s)?;
            if m.is_some() {
                self.scale(&s, m, 1.0)?;
            }
            self.back_dev(&s, &mut w)?;
            if t.is_some() {
                self.scale(&w, t, 1.0)?;
            }
            let norm_w = self.sq_norm(&w)?.sqrt();
            let new = norm_w / norm_v;
            if !new.is_finite() {
                return Err(CoreError::Data("power iteration diverged".into()).into());
            }
            if norm_w == 0.0 {
                return Ok(0.0);
            }
            self.scale(&w, None, (1.0 / norm_w) as f32)?;
            std::mem::swap(&mut cur, &mut w);
            norm_v = 1.0;
            let done = (new - rho).abs() <= 1e-4 * new;
            rho = new;
            if done {
                break;
            }
        }
        Ok(rho)
    }
}
