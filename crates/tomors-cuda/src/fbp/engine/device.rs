//! FBP of projections or sinograms that already live on the device,
//! written to device memory: the pipeline's filter and back-projection
//! steps ([`Engine::process_slab`]) on slabs of the caller's buffers, with
//! no host staging. Projections (`[angle][row][bin]`) are reordered slab
//! by slab into sinograms on the device (`kernels/layout.cu`).

use super::*;

/// Source of the reordering kernel.
const LAYOUT_CU: &str = include_str!("../../../kernels/layout.cu");

/// How device-resident input is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceOrder {
    /// Sinograms `[slice][angle][bin]`.
    Sinograms,
    /// Projections `[angle][slice][bin]`.
    Projections,
}

impl Engine {
    /// Filters (with `filter`) and back-projects `slices` slices of the
    /// device buffer `src` (laid out as `order`) into `dst`
    /// (`[slice][y][x]`), slab by slab on the compute stream; waits for
    /// the device before returning. Retries with smaller slabs on
    /// out-of-memory.
    ///
    /// # Safety
    /// `src` must hold `slices × angles × bins` floats and `dst`
    /// `slices × ny × nx` floats of device memory on this engine's device.
    pub(crate) unsafe fn run_device(
        &mut self,
        src: u64,
        order: DeviceOrder,
        slices: usize,
        dst: u64,
        filter: Option<FilterJob>,
        job: &BpJob<'_>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.ctx.bind()?;
        if filter.is_some() && !self.gpu_fft {
            return Err(CudaError::Unavailable(
                "cuFFT could not be loaded: filtering device-resident data needs it".into(),
            ));
        }
        let permute = match order {
            DeviceOrder::Sinograms => None,
            DeviceOrder::Projections => {
                let c = &self.ctx;
                let (cubin, _) = cubin_cached("layout", LAYOUT_CU, &[], &c.name, c.cc, c.driver)?;
                let module = Module::load(c, &cubin)?;
                let f = module.function("proj_to_sino")?;
                Some((module, f))
            }
        };
        let mut ss = self.slab_size(job, filter.is_some(), slices);
        let mut stats = PipelineStats {
            slab_size: ss,
            slices,
            kernel: job.cfg.to_string(),
            ..Default::default()
        };
        let mut start = 0;
        while start < slices {
            let k = ss.min(slices - start);
            match self.device_slab(
                src,
                dst,
                (start, k, slices),
                permute.as_ref(),
                filter.as_ref(),
                job,
            ) {
                Ok(()) => {
                    start += k;
                    stats.slabs += 1;
                }
                Err(e) if e.is_out_of_memory() && ss > 1 => {
                    tracing::warn!("{e}; retrying with slabs of {} slices", ss / 2);
                    self.comp.synchronize()?;
                    self.free_buffers();
                    ss /= 2;
                    stats.slab_size = ss;
                }
                Err(e) => return Err(e),
            }
        }
        self.comp.synchronize()?;
        stats.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.stats = stats;
        Ok(())
    }

    /// Queues slab `start .. start + k` of the `rows` slices of
    /// [`Engine::run_device`].
    unsafe fn device_slab(
        &mut self,
        src: u64,
        dst: u64,
        (start, k, rows): (usize, usize, usize),
        permute: Option<&(Module, Function)>,
        filter: Option<&FilterJob>,
        job: &BpJob<'_>,
    ) -> Result<()> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let plane_out = job.grid.nx * job.grid.ny;
        let raw = match permute {
            None => src + (start * na * n * 4) as u64,
            Some((_, f)) => {
                let buf = ensure(
                    &mut self.raw[0],
                    &self.ctx,
                    k * na * n * 4,
                    "slab sinograms",
                )?;
                let total = k * na * n;
                let blocks = total.div_ceil(256).clamp(1, 1 << 20) as u32;
                let args: [Arg; 7] = [
                    src.into(),
                    buf.into(),
                    (na as i64).into(),
                    (rows as i64).into(),
                    (n as i64).into(),
                    (start as i64).into(),
                    (k as i64).into(),
                ];
                // SAFETY: the parameters of `proj_to_sino`; `src` holds
                // na × rows × n floats (the caller's contract), `buf` k × na × n.
                launch(
                    f,
                    "proj_to_sino",
                    (blocks, 1, 1),
                    (256, 1, 1),
                    0,
                    &self.comp,
                    &args,
                )?;
                buf
            }
        };
        let out = dst + (start * plane_out * 4) as u64;
        self.process_slab(raw, out, k, filter, job, None)
    }
}
