//! Element-wise kernels, reductions, weights and the power iteration of [`CudaConeJoseph`].

use super::*;

impl CudaConeJoseph {
    pub(super) fn fill(&self, a: &ConeDeviceArray, value: f32) -> Result<()> {
        let p = a.buf.ptr();
        let v = value;
        let n = a.len() as i64;
        self.launch(
            &self.f.fill,
            "cj_fill",
            Self::elementwise_grid(a.len()),
            (256, 1, 1),
            &[p.into(), v.into(), n.into()],
        )
    }

    /// `y *= c·w` element-wise (`w` of `y`'s length, or `c` alone).
    pub(super) fn scale(
        &self,
        y: &ConeDeviceArray,
        w: Option<&DeviceBuffer>,
        c: f32,
    ) -> Result<()> {
        let p = y.buf.ptr();
        let wp = w.map_or(0, |w| w.ptr());
        let cc = c;
        let n = y.len() as i64;
        self.launch(
            &self.f.scale,
            "cj_scale",
            Self::elementwise_grid(y.len()),
            (256, 1, 1),
            &[p.into(), wp.into(), cc.into(), n.into()],
        )
    }

    /// Sums the partial sums of the last reduction (waits for the stream).
    pub(super) fn partial_sum(&self) -> Result<f64> {
        let mut p = vec![0f64; RED_BLOCKS];
        self.ctx.bind()?;
        // SAFETY: `p` stays borrowed until the stream has been synchronised.
        unsafe {
            self.partial.download_async(
                0,
                p.as_mut_ptr() as *mut u8,
                RED_BLOCKS * 8,
                &self.stream,
            )?;
        }
        self.stream.synchronize()?;
        Ok(p.iter().sum())
    }

    /// `Σ y²` (waits for the stream).
    pub(super) fn sq_norm(&self, y: &ConeDeviceArray) -> Result<f64> {
        let p = y.buf.ptr();
        let part = self.partial.ptr();
        let n = y.len() as i64;
        self.launch(
            &self.f.sqsum,
            "cj_sqsum",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &[p.into(), part.into(), n.into()],
        )?;
        self.partial_sum()
    }

    /// `r ← M·(b − r)` in place, queueing the partial sums of `‖b − r‖²`.
    pub(super) fn residual(
        &self,
        b: &ConeDeviceArray,
        r: &ConeDeviceArray,
        m: Option<&DeviceBuffer>,
    ) -> Result<()> {
        let bp = b.buf.ptr();
        let rp = r.buf.ptr();
        let mp = m.map_or(0, |m| m.ptr());
        let part = self.partial.ptr();
        let n = r.len() as i64;
        self.launch(
            &self.f.residual,
            "cj_residual",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &[bp.into(), rp.into(), mp.into(), part.into(), n.into()],
        )
    }

    /// `x ← P_C(x + λ·T·g)`.
    pub(super) fn update(
        &self,
        x: &ConeDeviceArray,
        g: &ConeDeviceArray,
        t: Option<&DeviceBuffer>,
        lambda: f32,
        c: &Constraint,
    ) -> Result<()> {
        let xp = x.buf.ptr();
        let gp = g.buf.ptr();
        let tp = t.map_or(0, |t| t.ptr());
        let l = lambda;
        let has_lo = i32::from(c.min.is_some());
        let lo = c.min.unwrap_or(0.0) as f32;
        let has_hi = i32::from(c.max.is_some());
        let hi = c.max.unwrap_or(0.0) as f32;
        let n = x.len() as i64;
        self.launch(
            &self.f.update,
            "cj_update",
            Self::elementwise_grid(x.len()),
            (256, 1, 1),
            &[
                xp.into(),
                gp.into(),
                tp.into(),
                l.into(),
                has_lo.into(),
                lo.into(),
                has_hi.into(),
                hi.into(),
                n.into(),
            ],
        )
    }

    /// Row sums `A·1` (`[angle][row][col]`), or the squared row norms
    /// `‖a_i‖²`.
    pub fn row_sums(&self, squared: bool) -> Result<Array3<f32>> {
        let v = self.alloc_volume()?;
        self.fill(&v, 1.0)?;
        let mut s = self.alloc_projections()?;
        if squared {
            self.project(
                &self.f.forward_sq,
                "cj_forward_sq",
                v.buf.ptr(),
                s.buf.ptr(),
            )?;
        } else {
            self.forward_dev(&v, &mut s)?;
        }
        self.download(&s)
    }

    /// Column sums `Aᵀ·1` (`[z][y][x]`; `B·1` with the voxel back
    /// projection).
    pub fn column_sums(&self) -> Result<Array3<f32>> {
        let s = self.alloc_projections()?;
        self.fill(&s, 1.0)?;
        let mut v = self.alloc_volume()?;
        self.back_dev(&s, &mut v)?;
        self.download(&v)
    }

    pub(super) fn upload_weights(&self, mut w: Array3<f32>, what: &str) -> Result<DeviceBuffer> {
        let data = w.as_slice_mut().expect("standard layout");
        invert(data);
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
            Weighting::Cimmino => (
                Some(self.upload_weights(self.row_sums(true)?, "row weights")?),
                None,
            ),
            Weighting::RowColumnSums => (
                Some(self.upload_weights(self.row_sums(false)?, "row weights")?),
                Some(self.upload_weights(self.column_sums()?, "column weights")?),
            ),
        })
    }

    /// Spectral radius of `T·Aᵀ·M·A` by power iteration from the all-ones
    /// volume (as tomors-core's
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
        let mut cur = self.alloc_volume()?;
        let mut w = self.alloc_volume()?;
        let mut s = self.alloc_projections()?;
        self.fill(&cur, 1.0)?;
        let mut norm_v = (cur.len() as f64).sqrt();
        let mut rho = 0.0f64;
        for _ in 0..max_iterations.max(1) {
            self.forward_dev(&cur, &mut s)?;
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
