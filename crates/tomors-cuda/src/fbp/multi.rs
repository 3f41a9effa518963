//! Several devices sharing the slabs round-robin: [`MultiCudaBackend`].

use ndarray::{ArrayView3, ArrayViewMut3, Axis};
use tomors_core::{Backend, CoreError, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

use super::backend::{validate, CudaBackend, CudaOptions};
use super::engine::{FilterJob, PipelineStats};
use crate::error::{CudaError, Result};

/// Several devices: slabs of [`MultiCudaBackend::chunk`] slices are handed
/// out round-robin, each device runs its own overlapped pipeline in its own
/// thread.
pub struct MultiCudaBackend {
    devices: Vec<CudaBackend>,
    /// Slices per chunk handed to one device.
    pub chunk: usize,
}

impl MultiCudaBackend {
    /// Opens the given device ordinals (at least one), all at once (one
    /// thread each: context creation and kernel loading overlap).
    pub fn new(ordinals: &[usize], options: CudaOptions) -> Result<Self> {
        if ordinals.is_empty() {
            return Err(CudaError::Parameter("no CUDA device selected".into()));
        }
        let devices = std::thread::scope(|s| {
            let handles: Vec<_> = ordinals
                .iter()
                .map(|&o| s.spawn(move || CudaBackend::with_options(o, options)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CudaError::Parameter("opening a device panicked".into()))
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(Self { devices, chunk: 64 })
    }

    /// The devices.
    pub fn devices(&self) -> &[CudaBackend] {
        &self.devices
    }

    /// Stage times of the last call on each device.
    pub fn last_stats(&self) -> Vec<PipelineStats> {
        self.devices.iter().map(|d| d.last_stats()).collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        filter: Option<FilterJob>,
        interpolation: Interpolation,
        scale: f32,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        validate(&sinograms, &out, geometry, grid)?;
        let k = sinograms.shape()[0];
        if k == 0 {
            return Ok(());
        }
        let d = self.devices.len();
        let chunk = self.chunk.max(1).min(k.div_ceil(d)).max(1);
        let mut per_dev: Vec<Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)>> =
            (0..d).map(|_| Vec::new()).collect();
        for (i, (a, b)) in sinograms
            .axis_chunks_iter(Axis(0), chunk)
            .zip(out.axis_chunks_iter_mut(Axis(0), chunk))
            .enumerate()
        {
            per_dev[i % d].push((a, b));
        }
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .devices
                .iter()
                .zip(per_dev)
                .map(|(dev, chunks)| {
                    s.spawn(move || {
                        if chunks.is_empty() {
                            return Ok(());
                        }
                        dev.run_chunks(chunks, geometry, grid, filter, interpolation, scale, chunk)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CudaError::Parameter("a device thread panicked".into()))
                    })
                })
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}

impl Backend for MultiCudaBackend {
    fn name(&self) -> String {
        let names: Vec<String> = self.devices.iter().map(|d| d.name()).collect();
        names.join(" + ")
    }

    fn filter(
        &self,
        mut sinograms: ArrayViewMut3<'_, f32>,
        filter: &FilterSpec,
        bin_width: f32,
    ) -> tomors_core::Result<()> {
        let d = self.devices.len();
        let k = sinograms.shape()[0];
        if k == 0 {
            return Ok(());
        }
        let chunk = k.div_ceil(d);
        let results: Vec<tomors_core::Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .devices
                .iter()
                .zip(sinograms.axis_chunks_iter_mut(Axis(0), chunk))
                .map(|(dev, part)| s.spawn(move || dev.filter(part, filter, bin_width)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CoreError::from(CudaError::Parameter(
                            "a device thread panicked".into(),
                        )))
                    })
                })
                .collect()
        });
        results
            .into_iter()
            .collect::<tomors_core::Result<Vec<()>>>()
            .map(|_| ())
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
        self.run(sinograms, geometry, grid, None, interpolation, scale, out)
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
        let f = FilterJob {
            spec: *filter,
            bin_width: geometry.bin_width(),
        };
        self.run(
            sinograms,
            geometry,
            grid,
            Some(f),
            interpolation,
            geometry.fbp_weight(),
            out,
        )
        .map_err(CoreError::from)
    }

    /// The gridding method with the slices split into one contiguous,
    /// even-sized part per device.
    fn fourier(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        options: &tomors_core::fourier::FourierOptions,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        validate(&sinograms, &out, geometry, grid)?;
        let k = sinograms.shape()[0];
        if k == 0 {
            return Ok(());
        }
        let part = k.div_ceil(2 * self.devices.len()) * 2;
        let results: Vec<tomors_core::Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .devices
                .iter()
                .zip(
                    sinograms
                        .axis_chunks_iter(Axis(0), part)
                        .zip(out.axis_chunks_iter_mut(Axis(0), part)),
                )
                .map(|(dev, (a, b))| s.spawn(move || dev.fourier(a, geometry, grid, options, b)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CoreError::from(CudaError::Parameter(
                            "a device thread panicked".into(),
                        )))
                    })
                })
                .collect()
        });
        results
            .into_iter()
            .collect::<tomors_core::Result<Vec<()>>>()
            .map(|_| ())
    }
}
