//! Filtering on the device: padding, batched cuFFT, the filter response.

use super::*;

impl Engine {
    pub(super) fn row_grid(len: usize, rows: usize) -> (u32, u32, u32) {
        let gy = rows.clamp(1, 65535);
        (
            len.div_ceil(256) as u32,
            gy as u32,
            rows.div_ceil(gy).max(1) as u32,
        )
    }

    // ---------------------------------------------------------------- filtering

    pub(super) fn plan(&mut self, kind: PlanKind, len: usize, batch: usize) -> Result<&Plan> {
        let key = (kind, len, batch);
        if !self.plans.contains_key(&key) {
            self.ctx.bind()?;
            let p = Plan::new(kind, len, batch)?;
            self.plans.insert(key, p);
        }
        Ok(&self.plans[&key])
    }

    pub(super) fn upload_response(
        &mut self,
        spec: &FilterSpec,
        n: usize,
        bw: f32,
    ) -> Result<(u64, usize)> {
        let l = padded_len(n);
        let resp = spec.frequency_response(l, bw);
        let bytes: Vec<u8> = resp.iter().flat_map(|v| v.to_le_bytes()).collect();
        let key = (fnv1a64(&bytes), l);
        let ptr = ensure(&mut self.resp, &self.ctx, bytes.len(), "filter response")?;
        if self.resp_key != Some(key) {
            self.comp.synchronize()?;
            self.resp.as_ref().expect("allocated").upload(&resp)?;
            self.resp_key = Some(key);
        }
        Ok((ptr, l))
    }

    /// Bytes of FFT work memory for `rows` rows of `n` bins.
    pub fn fft_bytes(variant: FftVariant, rows: usize, n: usize) -> (usize, usize) {
        let l = padded_len(n);
        match variant {
            FftVariant::RealToComplex => (rows * l * 4, rows * (l / 2 + 1) * 8),
            FftVariant::ComplexPair => (rows.div_ceil(2) * l * 8, 0),
        }
    }

    /// Filters `rows` rows of `n` bins at `src` (row stride `n`) on the
    /// compute stream. Returns where the filtered rows are: (pointer, row
    /// stride in floats, paired layout).
    pub(crate) fn filter_rows(
        &mut self,
        src: u64,
        rows: usize,
        n: usize,
        job: &FilterJob,
        variant: FftVariant,
    ) -> Result<(u64, i64, i32)> {
        let (resp, l) = self.upload_response(&job.spec, n, job.bin_width)?;
        let (a_bytes, b_bytes) = Self::fft_bytes(variant, rows, n);
        let a = ensure(&mut self.fft_a, &self.ctx, a_bytes, "FFT buffer")?;
        let edge = i32::from(job.spec.padding == Padding::Edge);
        // Both variants pad the rows into buffer `a` with the same kernel
        // signature: real rows (R2C) or two rows per complex row (pair).
        let (pad, pad_name, padded_rows) = match variant {
            FftVariant::RealToComplex => (&self.filters.pad_real, "pad_real", rows),
            FftVariant::ComplexPair => (&self.filters.pad_pair, "pad_pair", rows.div_ceil(2)),
        };
        let (src_v, stride, a_v) = (src, n as i64, a);
        let (n_i, l_i, rows_i, edge_v) = (n as i32, l as i32, rows as i64, edge);
        // SAFETY: parameter types match pad_real / pad_pair.
        unsafe {
            let p = [
                src_v.into(),
                stride.into(),
                a_v.into(),
                n_i.into(),
                l_i.into(),
                rows_i.into(),
                edge_v.into(),
            ];
            launch(
                pad,
                pad_name,
                Self::row_grid(l, padded_rows),
                (256, 1, 1),
                0,
                &self.comp,
                &p,
            )?;
        }
        let comp = &self.comp as *const Stream;
        match variant {
            FftVariant::RealToComplex => {
                let b = ensure(&mut self.fft_b, &self.ctx, b_bytes, "FFT spectrum buffer")?;
                let f = l / 2 + 1;
                // SAFETY: the buffers hold `rows` rows of the planned layout;
                // `comp` outlives the call (it is a field of self).
                unsafe {
                    self.plan(PlanKind::R2C, l, rows)?
                        .exec(a, b, true, &*comp)?;
                }
                let mul = &self.filters.mul_half;
                self.multiply_spectrum(mul, "mul_half_spectrum", b, resp, f, rows)?;
                // SAFETY: as above.
                unsafe {
                    self.plan(PlanKind::C2R, l, rows)?
                        .exec(b, a, false, &*comp)?;
                }
                Ok((a, l as i64, 0))
            }
            FftVariant::ComplexPair => {
                let pairs = padded_rows;
                // SAFETY: in-place C2C over `pairs` rows of `l` complex values.
                unsafe {
                    self.plan(PlanKind::C2C, l, pairs)?
                        .exec(a, a, true, &*comp)?;
                }
                let mul = &self.filters.mul_full;
                self.multiply_spectrum(mul, "mul_full_spectrum", a, resp, l, pairs)?;
                // SAFETY: as above.
                unsafe {
                    self.plan(PlanKind::C2C, l, pairs)?
                        .exec(a, a, false, &*comp)?;
                }
                Ok((a, 2 * l as i64, 1))
            }
        }
    }

    /// Multiplies `rows` spectra of `width` complex values at `spectrum` by
    /// the filter response at `resp` (mul_half_spectrum / mul_full_spectrum,
    /// which share their signature), on the compute stream.
    pub(super) fn multiply_spectrum(
        &self,
        kernel: &Function,
        name: &str,
        spectrum: u64,
        resp: u64,
        width: usize,
        rows: usize,
    ) -> Result<()> {
        let (spec_v, resp_v) = (spectrum, resp);
        let (width_i, rows_i) = (width as i32, rows as i64);
        // SAFETY: parameter types match mul_half_spectrum / mul_full_spectrum.
        unsafe {
            let p = [spec_v.into(), resp_v.into(), width_i.into(), rows_i.into()];
            launch(
                kernel,
                name,
                Self::row_grid(width, rows),
                (256, 1, 1),
                0,
                &self.comp,
                &p,
            )
        }
    }

    /// Filters `rows` (each of `n` bins) in place on the GPU (synchronous).
    pub fn filter_host(
        &mut self,
        mut data: ndarray::ArrayViewMut2<'_, f32>,
        job: &FilterJob,
    ) -> Result<()> {
        let (rows, n) = data.dim();
        if rows == 0 {
            return Ok(());
        }
        if !self.gpu_fft {
            RowFilter::new(&job.spec, n, job.bin_width)?.apply(data)?;
            return Ok(());
        }
        self.ctx.bind()?;
        let l = padded_len(n);
        let per_row = n * 8 + l * 16;
        let chunk = (1_000_000_000 / per_row).clamp(2, 65535);
        for mut part in data.axis_chunks_iter_mut(Axis(0), chunk) {
            let r = part.nrows();
            let host: Vec<f32> = part.iter().copied().collect();
            let src = ensure(&mut self.raw[0], &self.ctx, r * n * 4, "filter rows")?;
            let dst = ensure(&mut self.out[0], &self.ctx, r * n * 4, "filtered rows")?;
            self.comp.synchronize()?;
            self.raw[0].as_ref().expect("allocated").upload(&host)?;
            let (s, rs, pair) = self.filter_rows(src, r, n, job, self.fft_variant)?;
            let d = dst;
            let plane = (r * n) as i64;
            let (pitch, n_i, na_i, ns_i) = (n as i32, n as i32, r as i32, 1i32);
            if r > 65535 {
                return Err(CudaError::Parameter("filter chunk too tall".into()));
            }
            // SAFETY: parameter types match pack1 (one "slice" of r rows).
            unsafe {
                let p = [
                    s.into(),
                    rs.into(),
                    pair.into(),
                    d.into(),
                    plane.into(),
                    pitch.into(),
                    n_i.into(),
                    na_i.into(),
                    ns_i.into(),
                ];
                launch(
                    &self.filters.pack1,
                    "pack1",
                    (n.div_ceil(256) as u32, r as u32, 1),
                    (256, 1, 1),
                    0,
                    &self.comp,
                    &p,
                )?;
            }
            self.comp.synchronize()?;
            let mut res = vec![0f32; r * n];
            self.out[0]
                .as_ref()
                .expect("allocated")
                .download(&mut res)?;
            for (d, v) in part.iter_mut().zip(res) {
                *d = v;
            }
        }
        Ok(())
    }

    // --------------------------------------------------------- benchmark hooks
}
