//! The overlapped slab pipeline: upload, filter, back projection and download on three streams.

use super::*;

/// Times of the pipeline stages of the last `fbp`/`backproject` call.
#[derive(Clone, Debug, Default)]
pub struct PipelineStats {
    /// Slabs processed.
    pub slabs: usize,
    /// Slices processed.
    pub slices: usize,
    /// Slices per slab.
    pub slab_size: usize,
    /// Kernel configuration used.
    pub kernel: String,
    /// Host-to-device copies, summed (GPU time, ms).
    pub upload_ms: f64,
    /// Filtering (pad, FFT, multiply, inverse FFT), summed (GPU ms).
    pub filter_ms: f64,
    /// Packing into textures and back projection, summed (GPU ms).
    pub backproject_ms: f64,
    /// Device-to-host copies, summed (GPU ms).
    pub download_ms: f64,
    /// Host copies into pinned staging memory (ms).
    pub host_in_ms: f64,
    /// Host copies out of pinned staging memory (ms).
    pub host_out_ms: f64,
    /// Wall time of the whole call (ms).
    pub wall_ms: f64,
}

impl std::fmt::Display for PipelineStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slices in {} slabs of {} ({}): wall {:.1} ms; GPU upload {:.1}, filter {:.1}, \
             back projection {:.1}, download {:.1} ms; host copies in {:.1}, out {:.1} ms",
            self.slices,
            self.slabs,
            self.slab_size,
            self.kernel,
            self.wall_ms,
            self.upload_ms,
            self.filter_ms,
            self.backproject_ms,
            self.download_ms,
            self.host_in_ms,
            self.host_out_ms
        )
    }
}

impl Engine {
    /// Device bytes one slice needs in the pipeline.
    pub(super) fn bytes_per_slice(&self, job: &BpJob<'_>, filtered: bool) -> usize {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = na * n * 4;
        let out = job.grid.nx * job.grid.ny * 4;
        let (a, b) = if filtered {
            Self::fft_bytes(self.fft_variant, na, n)
        } else {
            (0, 0)
        };
        let tex = self.tex_layout(SliceMode::F32, 1, na, n).bytes;
        // The tensor kernel's entries (about a texel layout's size) alternate
        // between two buffers, so the next slab packs while one is read.
        let entries = match job.cfg.kernel {
            KernelKind::Tensor(_) => 2,
            _ => 1,
        };
        NBUF * (raw + out) + a + b + entries * tex
    }

    /// Slices per slab: the backend's slab option if set, else about 2 GB of
    /// device memory, a multiple of the slices per texel.
    pub fn slab_size(&self, job: &BpJob<'_>, filtered: bool, total: usize) -> usize {
        // Slabs are whole blocks' worth of slices: 8 for the wide kernel.
        let spt = job.cfg.slices_per_block();
        if self.slab_override > 0 {
            return self.slab_override.min(total.max(1));
        }
        if let KernelKind::Sweep(_) = job.cfg.kernel {
            // One block's worth of slices: every lane of a warp has its slices.
            return spt.min(total.max(1));
        }
        if let KernelKind::Tensor(_) = job.cfg.kernel {
            // Whole blocks' worth of slices, at least 64 (per-slab costs).
            return (64usize.div_ceil(spt) * spt).min(total.max(1));
        }
        let per = self.bytes_per_slice(job, filtered).max(1);
        // About 2 GB: 12 slices of 2048² from 2048 angles with three slabs
        // in flight (as 1.5 GB gave with two).
        let budget = 2_000_000_000usize;
        let mut s = (budget / per).clamp(1, 64);
        if spt > 4 && s >= spt / 2 {
            // Wide blocks: the nearest multiple (13 → 16 slices of 2048²).
            s = (s + spt / 2) / spt * spt;
        } else if s >= spt {
            s -= s % spt;
        }
        s.min(total.max(1))
    }

    pub(super) fn ensure_pipeline(
        &mut self,
        ss: usize,
        job: &BpJob<'_>,
        filtered: bool,
    ) -> Result<()> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = ss * na * n;
        let out = ss * job.grid.nx * job.grid.ny;
        for b in 0..NBUF {
            ensure(&mut self.raw[b], &self.ctx, raw * 4, "slab sinograms")?;
            ensure(&mut self.out[b], &self.ctx, out * 4, "slab slices")?;
            ensure_pinned(&mut self.pin_in[b], &self.ctx, raw)?;
            ensure_pinned(&mut self.pin_out[b], &self.ctx, out)?;
        }
        if filtered && self.gpu_fft {
            let rows = ss * na;
            let (a, b) = Self::fft_bytes(self.fft_variant, rows, n);
            ensure(&mut self.fft_a, &self.ctx, a, "FFT buffer")?;
            if b > 0 {
                ensure(&mut self.fft_b, &self.ctx, b, "FFT spectrum buffer")?;
            }
            let l = padded_len(n);
            match self.fft_variant {
                FftVariant::RealToComplex => {
                    self.plan(PlanKind::R2C, l, rows)?;
                    self.plan(PlanKind::C2R, l, rows)?;
                }
                FftVariant::ComplexPair => {
                    self.plan(PlanKind::C2C, l, rows.div_ceil(2))?;
                }
            }
        }
        let lay = self.tex_layout(job.cfg.mode, ss, na, n);
        ensure(&mut self.tex, &self.ctx, lay.bytes, "texture buffer")?;
        Ok(())
    }

    /// Runs the overlapped pipeline over `chunks` (pairs of sinogram slabs
    /// `[slice][angle][bin]` and output slabs `[slice][y][x]`): slabs of
    /// `ss` slices stream through upload → filter → back projection →
    /// download on three streams with double-buffered device memory and
    /// pinned staging buffers. Retries with smaller slabs on out-of-memory.
    #[allow(clippy::needless_range_loop)]
    pub fn run_pipeline(
        &mut self,
        chunks: Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)>,
        filter: Option<FilterJob>,
        job: &BpJob<'_>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.ctx.bind()?;
        let total: usize = chunks.iter().map(|c| c.0.shape()[0]).sum();
        let mut ss = self.slab_size(job, filter.is_some(), total);
        loop {
            match self.ensure_pipeline(ss, job, filter.is_some()) {
                Ok(()) => break,
                Err(e) if e.is_out_of_memory() && ss > 1 => {
                    tracing::warn!("{e}; retrying with slabs of {} slices", ss / 2);
                    self.free_buffers();
                    ss /= 2;
                }
                Err(e) => return Err(e),
            }
        }
        // CPU filtering when cuFFT is missing.
        let cpu_filter = match (&filter, self.gpu_fft) {
            (Some(f), false) => Some(RowFilter::new(&f.spec, job.geom.n_bins(), f.bin_width)?),
            _ => None,
        };
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let plane_out = job.grid.nx * job.grid.ny;
        let mut stats = PipelineStats {
            slab_size: ss,
            slices: total,
            kernel: job.cfg.to_string(),
            ..Default::default()
        };
        let ev = |ctx: &Arc<Context>| -> Result<[Event; NBUF]> {
            Ok([Event::new(ctx)?, Event::new(ctx)?, Event::new(ctx)?])
        };
        // Filtering on its own stream, overlapped with the previous slab's
        // back projection (the `serial_filter` option keeps it on the
        // compute stream, for comparisons).
        let overlap = self.gpu_fft && filter.is_some() && !self.serial_filter;
        // The tensor kernel's entries alternate between two buffers, so its
        // packing runs on the filtering stream too, hidden behind the
        // previous slab's back projection (other kernels pack on `comp`).
        let early_pack = overlap && matches!(job.cfg.kernel, KernelKind::Tensor(_));
        let packed = Event::new(&self.ctx)?;
        let (up0, up1, c0, c1, cb, c2, d0, d1) = (
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
        );
        // Split chunks into slabs.
        let mut slabs: Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)> = Vec::new();
        for (mut i, mut o) in chunks {
            while i.shape()[0] > 0 {
                let k = ss.min(i.shape()[0]);
                let (a, ri) = i.split_at(Axis(0), k);
                let (b, ro) = o.split_at(Axis(0), k);
                slabs.push((a, b));
                i = ri;
                o = ro;
            }
        }
        let ns = slabs.len();
        stats.slabs = ns;
        let mut pending: Vec<Option<(ArrayViewMut3<'_, f32>, usize)>> =
            (0..ns).map(|_| None).collect();
        let mut inputs: Vec<Option<ArrayView3<'_, f32>>> = Vec::with_capacity(ns);
        for (a, b) in slabs.into_iter() {
            inputs.push(Some(a));
            let k = b.shape()[0];
            pending[inputs.len() - 1] = Some((b, k));
        }
        // NBUF slabs in flight: the host waits for slab i − (NBUF − 1)'s
        // download only after queueing slab i, so its copies in and out
        // overlap the back projection of the two slabs before.
        for i in 0..ns + NBUF - 1 {
            if i < ns {
                let b = i % NBUF;
                let input = inputs[i].take().expect("each slab once");
                let k = input.shape()[0];
                if i >= NBUF {
                    up1[b].synchronize()?;
                }
                let th = Instant::now();
                {
                    let pin = self.pin_in[b].as_mut().expect("allocated");
                    let dst = &mut pin.as_mut_slice()[..k * na * n];
                    copy_in(&input, dst);
                    if let Some(f) = &cpu_filter {
                        let mut v = ndarray::ArrayViewMut2::from_shape((k * na, n), dst)
                            .map_err(|e| CudaError::Parameter(e.to_string()))?;
                        f.apply(v.view_mut())?;
                    }
                }
                stats.host_in_ms += th.elapsed().as_secs_f64() * 1e3;
                let raw = self.raw[b].as_ref().expect("allocated");
                if i >= NBUF {
                    self.up.wait(&c2[b])?;
                }
                up0[b].record(&self.up)?;
                // SAFETY: the pinned buffer is not touched until up1[b] completes.
                unsafe {
                    raw.upload_async(
                        0,
                        self.pin_in[b]
                            .as_ref()
                            .expect("allocated")
                            .as_slice()
                            .as_ptr() as *const u8,
                        k * na * n * 4,
                        &self.up,
                    )?;
                }
                up1[b].record(&self.up)?;
                self.comp.wait(&up1[b])?;
                if i >= NBUF {
                    self.comp.wait(&d1[b])?;
                }
                let (raw_ptr, out_ptr) =
                    (raw.ptr(), self.out[b].as_ref().expect("allocated").ptr());
                if overlap {
                    let f = filter.as_ref().expect("overlap needs a filter");
                    self.filt.wait(&up1[b])?;
                    if early_pack {
                        // This slab's entries buffer (two alternate) was
                        // read by the back projection of slab i − 2.
                        if i >= 2 {
                            self.filt.wait(&c2[(i - 2) % NBUF])?;
                        }
                    } else {
                        // The previous slab's packing has read the FFT buffer.
                        self.filt.wait(&packed)?;
                    }
                    c0[b].record(&self.filt)?;
                    // filter_rows (and, for the tensor kernel, its packing)
                    // work on `comp`: lend it the filtering stream.
                    std::mem::swap(&mut self.comp, &mut self.filt);
                    let r = self.filter_rows(raw_ptr, k * na, n, f, self.fft_variant);
                    let r = match r {
                        Ok(src) if early_pack => self
                            .bp_module(job.cfg, job.grid, job.geom, job.interp)
                            .and_then(|_| self.pack(src, k, na, n, job.cfg, job.interp))
                            .map(|t| (src, Some(t))),
                        Ok(src) => Ok((src, None)),
                        Err(e) => Err(e),
                    };
                    std::mem::swap(&mut self.comp, &mut self.filt);
                    let (src, early) = r?;
                    c1[b].record(&self.filt)?;
                    self.comp.wait(&c1[b])?;
                    cb[b].record(&self.comp)?;
                    let key = self.bp_module(job.cfg, job.grid, job.geom, job.interp)?;
                    let texs = match early {
                        Some(t) => t,
                        None => {
                            let t = self.pack(src, k, na, n, job.cfg, job.interp)?;
                            packed.record(&self.comp)?;
                            t
                        }
                    };
                    self.launch_bp(key, texs, out_ptr, k, job.scale, job.cfg)?;
                } else {
                    let fj = if self.gpu_fft { filter } else { None };
                    self.process_slab(
                        raw_ptr,
                        out_ptr,
                        k,
                        fj.as_ref(),
                        job,
                        Some((&c0[b], &c1[b])),
                    )?;
                }
                c2[b].record(&self.comp)?;
                self.down.wait(&c2[b])?;
                d0[b].record(&self.down)?;
                // SAFETY: the pinned buffer is read by the host only after d1[b] completes.
                unsafe {
                    self.out[b].as_ref().expect("allocated").download_async(
                        0,
                        self.pin_out[b]
                            .as_mut()
                            .expect("allocated")
                            .as_mut_slice()
                            .as_mut_ptr() as *mut u8,
                        k * plane_out * 4,
                        &self.down,
                    )?;
                }
                d1[b].record(&self.down)?;
            }
            if i >= NBUF - 1 {
                let j = i + 1 - NBUF;
                let b = j % NBUF;
                d1[b].synchronize()?;
                let (mut dst, k) = pending[j].take().expect("each slab once");
                let th = Instant::now();
                let src = &self.pin_out[b].as_ref().expect("allocated").as_slice()[..k * plane_out];
                copy_out(src, &mut dst);
                stats.host_out_ms += th.elapsed().as_secs_f64() * 1e3;
                stats.upload_ms += up0[b].elapsed_ms(&up1[b])? as f64;
                stats.filter_ms += c0[b].elapsed_ms(&c1[b])? as f64;
                stats.backproject_ms += if overlap {
                    cb[b].elapsed_ms(&c2[b])? as f64
                } else {
                    c1[b].elapsed_ms(&c2[b])? as f64
                };
                stats.download_ms += d0[b].elapsed_ms(&d1[b])? as f64;
            }
        }
        stats.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.stats = stats;
        Ok(())
    }
}

/// Slabs in flight in the pipeline (device and pinned buffers of each).
pub(crate) const NBUF: usize = 3;
