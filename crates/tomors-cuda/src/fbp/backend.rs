//! The CUDA implementation of [`tomors_core::Backend`] on one device.

use std::sync::Mutex;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};
use tomors_core::{Backend, CoreError, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::engine::{BpJob, Engine, FilterJob, PipelineStats};
use crate::fbp::fft::FftVariant;
use crate::fbp::kernels::KernelChoice;

/// Slices from which `Auto` (without a tuned choice) takes the tensor-core
/// kernel for linear interpolation: one block's worth
/// ([`TensorParams::tuned`](crate::fbp::tensor::TensorParams::tuned)
/// reconstructs 64 slices per block; below, most of its work would be on
/// empty slices).
pub const AUTO_TENSOR_MIN_SLICES: usize = 64;

/// Options of a CUDA backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaOptions {
    /// Back-projection kernel.
    pub kernel: KernelChoice,
    /// FFT variant used for filtering.
    pub fft: FftVariant,
    /// Slices per pipeline slab (0 = automatic, about 2 GB of device memory).
    pub slab: usize,
    /// Filter each slab on the compute stream instead of on its own stream
    /// overlapped with the previous slab's back projection (for comparisons;
    /// the default, `false`, overlaps).
    pub serial_filter: bool,
    /// Texture storage.
    pub storage: crate::fbp::engine::TexStorage,
    /// The gather of the fourier method (`Backend::fourier`): per warp (the
    /// default, fastest) or per point (the CPU reference's formulation);
    /// both add in a fixed order (the same bits on every run).
    pub fourier_gather: crate::fourier::GatherKind,
}

/// The CUDA backend on one device.
pub struct CudaBackend {
    engine: Mutex<Engine>,
    name: String,
    options: CudaOptions,
    /// Settings of the layers above (the cone-beam kernel, FDK's angle chunk).
    pub(crate) ext: crate::fbp::extensions::Extensions,
    /// This device's entries of the tuning cache (read once at creation).
    tuned: crate::fbp::tuning::TuningCache,
    /// Device ordinal.
    ordinal: usize,
    /// The gridding (fourier) method's state on this device, made on first use.
    fourier: Mutex<Option<std::sync::Arc<crate::fourier::CudaFourier>>>,
}

impl CudaBackend {
    /// Opens device `ordinal` with the default options: compiles (or loads
    /// from the cache) the filtering kernels and checks cuFFT.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, CudaOptions::default())
    }

    /// Opens device `ordinal` with `options`.
    pub fn with_options(ordinal: usize, options: CudaOptions) -> Result<Self> {
        let mut engine = Engine::new(ordinal)?;
        engine.fft_variant = options.fft;
        engine.slab_override = options.slab;
        engine.serial_filter = options.serial_filter;
        engine.tex_storage = options.storage;
        let name = format!("cuda:{} {}", ordinal, engine.ctx.name);
        let tuned = load_tuning(&engine.ctx.name, engine.ctx.driver);
        Ok(Self {
            engine: Mutex::new(engine),
            name,
            options,
            ext: Default::default(),
            tuned,
            ordinal,
            fourier: Mutex::new(None),
        })
    }

    /// The options in use.
    pub fn options(&self) -> CudaOptions {
        self.options
    }

    /// Changes the kernel.
    pub fn set_kernel(&mut self, kernel: KernelChoice) {
        self.options.kernel = kernel;
    }

    /// Changes the texture storage.
    pub fn set_storage(&mut self, storage: crate::fbp::engine::TexStorage) {
        self.options.storage = storage;
        if let Ok(mut e) = self.engine.lock() {
            e.tex_storage = storage;
        }
    }

    /// Changes the FFT variant.
    pub fn set_fft(&mut self, fft: FftVariant) {
        self.options.fft = fft;
        if let Ok(mut e) = self.engine.lock() {
            e.fft_variant = fft;
        }
    }

    /// For tests: compiles the hybrid `alu` kernels with counters of the
    /// blocks that take the texture path and the cache path (a `#define`,
    /// so the kernels run without them otherwise); see
    /// [`CudaBackend::path_counts`].
    pub fn set_count_paths(&mut self, on: bool) {
        if let Ok(mut e) = self.engine.lock() {
            e.count_paths = on;
        }
    }

    /// The blocks of hybrid `alu` launches that took the texture path and
    /// the cache path since the last call (with [`CudaBackend::set_count_paths`]).
    pub fn path_counts(&self) -> Result<(u64, u64)> {
        self.lock()?.path_counts()
    }

    /// Whether filtering runs on the GPU (cuFFT was found); otherwise on the CPU.
    pub fn gpu_filtering(&self) -> bool {
        self.engine.lock().map(|e| e.gpu_fft).unwrap_or(false)
    }

    /// Stage times of the last `fbp` / `backproject` call.
    pub fn last_stats(&self) -> PipelineStats {
        self.engine
            .lock()
            .map(|e| e.stats.clone())
            .unwrap_or_default()
    }

    /// The configuration a slab of `slices` slices runs with: the fixed
    /// kernel, or for `Auto` the tuning cache's fastest exact choice for
    /// this device, driver, interpolation and slice class, else the
    /// default ([`KernelChoice::resolve`]).
    pub fn kernel_for(
        &self,
        slices: usize,
        interp: Interpolation,
    ) -> crate::fbp::kernels::BpConfig {
        match self.options.kernel {
            KernelChoice::Auto => {
                let (device, driver) = self
                    .engine
                    .lock()
                    .map(|e| (e.ctx.name.clone(), e.ctx.driver))
                    .unwrap_or_default();
                self.tuned
                    .best(&device, driver, interp, slices)
                    .map(|e| e.config)
                    .unwrap_or_else(|| KernelChoice::Auto.resolve(slices))
            }
            k => k.resolve(slices),
        }
    }

    /// The configuration a job of `slices` slices on `geom` and `grid` runs
    /// with: [`CudaBackend::kernel_for`], except that under `Auto` without
    /// a tuned choice a linear job of at least
    /// [`AUTO_TENSOR_MIN_SLICES`] slices takes the tensor-core kernel
    /// ([`TensorParams::tuned`](crate::fbp::tensor::TensorParams::tuned);
    /// exact, and measured faster than the cache and line-sweep kernels,
    /// `docs/perf-notes.md`) where it can run (compute capability 8.0 on,
    /// pixels up to ≈ 1.17 bins), and that a tuned tensor choice it cannot
    /// run falls back to the default.
    ///
    /// A tensor-core shape with bulk staging runs with per-thread staging
    /// below compute capability 9.0 ([`TensorParams::for_device`](crate::fbp::tensor::TensorParams::for_device);
    /// the same arithmetic).
    pub fn kernel_for_job(
        &self,
        slices: usize,
        interp: Interpolation,
        geom: &ParallelGeometry,
        grid: &SliceGrid,
    ) -> crate::fbp::kernels::BpConfig {
        use crate::fbp::kernels::{BpConfig, KernelKind};
        let cfg = self.job_config(slices, interp, geom, grid);
        let cc = self.engine.lock().map(|e| e.ctx.cc).unwrap_or_default();
        match cfg.kernel {
            KernelKind::Tensor(p) => BpConfig {
                kernel: KernelKind::Tensor(p.for_device(cc)),
                ..cfg
            },
            _ => cfg,
        }
    }

    /// [`CudaBackend::kernel_for_job`] before the device adaptation.
    fn job_config(
        &self,
        slices: usize,
        interp: Interpolation,
        geom: &ParallelGeometry,
        grid: &SliceGrid,
    ) -> crate::fbp::kernels::BpConfig {
        use crate::fbp::kernels::{BpConfig, KernelKind, SliceMode};
        if self.options.kernel != KernelChoice::Auto {
            return self.kernel_for(slices, interp);
        }
        let (device, driver, cc) = self
            .engine
            .lock()
            .map(|e| (e.ctx.name.clone(), e.ctx.driver, e.ctx.cc))
            .unwrap_or_default();
        let tensor_ok = crate::fbp::tensor::check_device(cc).is_ok()
            && crate::fbp::tensor::check_geometry(geom, grid).is_ok();
        let default = KernelChoice::Auto.resolve(slices);
        match self.tuned.best(&device, driver, interp, slices) {
            Some(e) if matches!(e.config.kernel, KernelKind::Tensor(_)) && !tensor_ok => default,
            Some(e) => e.config,
            None if tensor_ok
                && interp == Interpolation::Linear
                && slices >= AUTO_TENSOR_MIN_SLICES =>
            {
                BpConfig {
                    kernel: KernelKind::Tensor(crate::fbp::tensor::TensorParams::tuned()),
                    mode: SliceMode::F32,
                }
            }
            None => default,
        }
    }

    /// The gridding (fourier) method on this device (its kernels compiled
    /// or loaded on the first call).
    pub fn fourier_engine(&self) -> Result<std::sync::Arc<crate::fourier::CudaFourier>> {
        let mut slot = self
            .fourier
            .lock()
            .map_err(|_| CudaError::Parameter("a previous call on this device panicked".into()))?;
        if slot.is_none() {
            let f = crate::fourier::CudaFourier::new(self.ordinal)?;
            f.set_gather(self.options.fourier_gather)?;
            *slot = Some(std::sync::Arc::new(f));
        }
        Ok(slot.as_ref().expect("just made").clone())
    }

    /// Compiles the back-projection modules of `jobs` for `geom` on `grid`
    /// in parallel into the kernel cache, so that the calls that follow
    /// only load them (tests and tools that run many configurations).
    ///
    /// Errors: invalid parameters or compilation errors.
    pub fn precompile(
        &self,
        jobs: &[(crate::fbp::kernels::BpConfig, Interpolation)],
        geom: &ParallelGeometry,
        grid: &SliceGrid,
    ) -> Result<()> {
        use rayon::prelude::*;
        let (name, cc, driver, min_blocks, map) = {
            let e = self.lock()?;
            (
                e.ctx.name.clone(),
                e.ctx.cc,
                e.ctx.driver,
                e.min_blocks,
                e.standard_map,
            )
        };
        jobs.par_iter()
            .map(|&(cfg, interp)| {
                if let crate::fbp::kernels::KernelKind::Tensor(p) = cfg.kernel {
                    crate::fbp::tensor::check_device(cc)?;
                    crate::fbp::tensor::check_bulk(p, cc)?;
                }
                let (defines, _, _) =
                    crate::fbp::engine::module_defines(cfg, grid, geom, interp, min_blocks, map)?;
                let (module, src) = crate::fbp::engine::module_source(cfg);
                crate::runtime::compile::cubin_cached(module, src, &defines, &name, cc, driver)
                    .map(|_| ())
            })
            .collect()
    }

    pub(crate) fn lock(&self) -> Result<std::sync::MutexGuard<'_, Engine>> {
        self.engine
            .lock()
            .map_err(|_| CudaError::Parameter("a previous call on this device panicked".into()))
    }

    /// Runs the pipeline over `chunks` on this device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_chunks(
        &self,
        chunks: Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        filter: Option<FilterJob>,
        interpolation: Interpolation,
        scale: f32,
        slices_hint: usize,
    ) -> Result<()> {
        let cfg = self.kernel_for_job(slices_hint, interpolation, geometry, grid);
        cfg.check(interpolation)?;
        let job = BpJob {
            geom: geometry,
            grid,
            interp: interpolation,
            scale,
            cfg,
        };
        self.lock()?.run_pipeline(chunks, filter, &job)
    }
}

/// The tuning-cache entries of one device and driver (none when the file
/// is missing or unreadable: a warning, never an error).
fn load_tuning(device: &str, driver: i32) -> crate::fbp::tuning::TuningCache {
    let Some(path) = crate::fbp::tuning::TuningCache::default_path() else {
        return Default::default();
    };
    match crate::fbp::tuning::TuningCache::load(&path) {
        Ok(mut c) => {
            c.entries
                .retain(|e| e.device == device && e.driver == driver);
            if !c.entries.is_empty() {
                tracing::debug!(
                    "{}: {} tuned kernel choices",
                    path.display(),
                    c.entries.len()
                );
            }
            c
        }
        Err(e) => {
            tracing::warn!("{e}; using the default kernels");
            Default::default()
        }
    }
}

pub(super) fn validate(
    sinograms: &ArrayView3<'_, f32>,
    out: &ArrayViewMut3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
) -> Result<()> {
    Ok(tomors_core::backend::check_backprojection_shapes(
        sinograms.dim(),
        out.dim(),
        geometry,
        grid,
    )?)
}

impl Backend for CudaBackend {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn filter(
        &self,
        mut sinograms: ArrayViewMut3<'_, f32>,
        filter: &FilterSpec,
        bin_width: f32,
    ) -> tomors_core::Result<()> {
        filter.validate()?;
        let (s, a, n) = sinograms.dim();
        if s * a == 0 || n == 0 {
            return Ok(());
        }
        let job = FilterJob {
            spec: *filter,
            bin_width,
        };
        let mut e = self.lock()?;
        for mut slice in sinograms.axis_iter_mut(Axis(0)) {
            e.filter_host(slice.view_mut(), &job)?;
        }
        Ok(())
    }

    fn backproject(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        interpolation: Interpolation,
        scale: f32,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        validate(&sinograms, &out, geometry, grid)?;
        let k = sinograms.shape()[0];
        if k == 0 {
            return Ok(());
        }
        self.run_chunks(
            vec![(sinograms, out)],
            geometry,
            grid,
            None,
            interpolation,
            scale,
            k,
        )
        .map_err(CoreError::from)
    }

    fn fbp(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        filter: &FilterSpec,
        interpolation: Interpolation,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        filter.validate()?;
        validate(&sinograms, &out, geometry, grid)?;
        let k = sinograms.shape()[0];
        if k == 0 {
            return Ok(());
        }
        let f = FilterJob {
            spec: *filter,
            bin_width: geometry.bin_width(),
        };
        self.run_chunks(
            vec![(sinograms, out)],
            geometry,
            grid,
            Some(f),
            interpolation,
            geometry.fbp_weight(),
            k,
        )
        .map_err(CoreError::from)
    }

    fn fourier(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        options: &tomors_core::fourier::FourierOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.fourier_engine()
            .and_then(|f| f.reconstruct(sinograms, geometry, grid, options, out))
            .map_err(CoreError::from)
    }
}
