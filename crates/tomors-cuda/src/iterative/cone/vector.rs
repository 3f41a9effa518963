//! Element-wise kernels, reductions, weights and the power iteration of [`CudaConeJoseph`].

use super::*;

impl CudaConeJoseph {
    pub(super) fn fill(&self, a: &ConeDeviceArray, value: f32) -> Result<()> {
        let mut p = a.buf.ptr();
        let mut v = value;
        let mut n = a.len() as i64;
        self.launch(
            self.f.fill,
            "cj_fill",
            Self::elementwise_grid(a.len()),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut v as *mut _ as _,
                &mut n as *mut _ as _,
            ],
        )
    }

    /// `y *= c·w` element-wise (`w` of `y`'s length, or `c` alone).
    pub(super) fn scale(
        &self,
        y: &ConeDeviceArray,
        w: Option<&DeviceBuffer>,
        c: f32,
    ) -> Result<()> {
        let mut p = y.buf.ptr();
        let mut wp = w.map_or(0, |w| w.ptr());
        let mut cc = c;
        let mut n = y.len() as i64;
        self.launch(
            self.f.scale,
            "cj_scale",
            Self::elementwise_grid(y.len()),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut wp as *mut _ as _,
                &mut cc as *mut _ as _,
                &mut n as *mut _ as _,
            ],
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
        let mut p = y.buf.ptr();
        let mut part = self.partial.ptr();
        let mut n = y.len() as i64;
        self.launch(
            self.f.sqsum,
            "cj_sqsum",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut part as *mut _ as _,
                &mut n as *mut _ as _,
            ],
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
        let mut bp = b.buf.ptr();
        let mut rp = r.buf.ptr();
        let mut mp = m.map_or(0, |m| m.ptr());
        let mut part = self.partial.ptr();
        let mut n = r.len() as i64;
        self.launch(
            self.f.residual,
            "cj_residual",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &mut [
                &mut bp as *mut _ as _,
                &mut rp as *mut _ as _,
                &mut mp as *mut _ as _,
                &mut part as *mut _ as _,
                &mut n as *mut _ as _,
            ],
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
        let mut xp = x.buf.ptr();
        let mut gp = g.buf.ptr();
        let mut tp = t.map_or(0, |t| t.ptr());
        let mut l = lambda;
        let mut has_lo = i32::from(c.min.is_some());
        let mut lo = c.min.unwrap_or(0.0) as f32;
        let mut has_hi = i32::from(c.max.is_some());
        let mut hi = c.max.unwrap_or(0.0) as f32;
        let mut n = x.len() as i64;
        self.launch(
            self.f.update,
            "cj_update",
            Self::elementwise_grid(x.len()),
            (256, 1, 1),
            &mut [
                &mut xp as *mut _ as _,
                &mut gp as *mut _ as _,
                &mut tp as *mut _ as _,
                &mut l as *mut _ as _,
                &mut has_lo as *mut _ as _,
                &mut lo as *mut _ as _,
                &mut has_hi as *mut _ as _,
                &mut hi as *mut _ as _,
                &mut n as *mut _ as _,
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
            self.project(self.f.forward_sq, "cj_forward_sq", v.buf.ptr(), s.buf.ptr())?;
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
