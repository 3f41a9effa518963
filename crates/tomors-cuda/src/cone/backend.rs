//! [`ConeBackend`] for [`CudaBackend`]: FDK back projection in chunks of angles.

use super::*;

impl CudaBackend {
    /// The cone-beam kernel in use.
    pub fn cone_kernel(&self) -> ConeKernel {
        self.ext.get::<ConeKernel>().copied().unwrap_or_default()
    }

    /// Changes the cone-beam kernel.
    pub fn set_cone_kernel(&mut self, kernel: ConeKernel) {
        self.ext.insert(kernel);
    }

    /// Cone-beam back projection (see [`ConeBackend::cone_backproject`])
    /// with at most `max_angles` projections resident on the device at once
    /// (0: as many as fit), returning the stage times.
    ///
    /// Errors: shapes that do not fit, a slab larger than device memory,
    /// driver, compilation and launch errors.
    pub fn cone_backproject_chunked(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_range: Range<usize>,
        out: ArrayViewMut3<'_, f32>,
        max_angles: usize,
    ) -> Result<ConeStats> {
        let rows = 0..geometry.n_rows();
        self.cone_backproject_rows(
            projections,
            geometry,
            rows,
            volume,
            z_range,
            out,
            max_angles,
        )
    }

    /// [`CudaBackend::cone_backproject_chunked`] from detector rows `rows`
    /// of `geometry` only (`projections`: `[angle][rows.len()][col]`), which
    /// must cover every voxel of `z_range` (see
    /// [`rows_for_slab`](tomors_core::cone::rows_for_slab)): the same values
    /// as from the whole detector (texture kernel; the plain-load kernel
    /// reads the whole detector only).
    ///
    /// Errors: as [`CudaBackend::cone_backproject_chunked`]; rows outside
    /// the detector.
    #[allow(clippy::too_many_arguments)]
    pub fn cone_backproject_rows(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        rows: Range<usize>,
        volume: &ConeVolume,
        z_range: Range<usize>,
        mut out: ArrayViewMut3<'_, f32>,
        max_angles: usize,
    ) -> Result<ConeStats> {
        let t_all = Instant::now();
        check_slab(&projections, geometry, &rows, volume, &z_range, out.dim())?;
        let (na, nr, nc) = projections.dim();
        let (nx, ny, nzs) = (volume.nx, volume.ny, z_range.len());
        let plane = nr * nc;
        check_extents(nr, nc, volume)?;
        let mut e = self.lock()?;
        let module = ConeModule::of(&mut e)?;
        let ctx = e.ctx.clone();
        let stream = &e.comp;
        ctx.bind()?;

        // Device slab, then as many angles as fit (keeping 256 MiB spare).
        let slab_bytes = nx * ny * nzs * 4;
        let slab = DeviceBuffer::new(&ctx, slab_bytes, "the cone-beam slab")?;
        let (free, _) = ctx.mem_info()?;
        let spare = 256usize << 20;
        let kernel = self.cone_kernel();
        let layout = match kernel {
            ConeKernel::Loads if nr != geometry.n_rows() => {
                return Err(CudaError::Parameter(
                    "the plain-load cone kernel reads the whole detector".into(),
                ))
            }
            ConeKernel::Loads => None,
            ConeKernel::Texture => Some(StackLayout::band(&ctx, geometry.n_rows(), nr, nc)?),
        };
        let per_angle = match &layout {
            None => plane * 4,
            Some(l) => plane * 4 + l.gbytes.div_ceil(l.tpg),
        };
        let fit = free.saturating_sub(spare) / per_angle.max(1);
        let mut chunk = fit.min(na).min(CONE_MAX_ANGLES);
        if max_angles > 0 {
            chunk = chunk.min(max_angles);
        }
        if chunk == 0 {
            return Err(CudaError::OutOfMemory {
                what: "holding one cone-beam projection beside the slab".into(),
                bytes: plane * 4,
            });
        }
        let pbuf = DeviceBuffer::new(&ctx, chunk * plane * 4, "cone-beam projections")?;
        let tbuf = match &layout {
            None => None,
            Some(l) => {
                let b = DeviceBuffer::new(&ctx, l.bytes(chunk), "cone-beam projection textures")?;
                b.fill_bytes(0, stream)?;
                Some(b)
            }
        };

        let owned;
        let host: &[f32] = match projections.as_slice() {
            Some(s) => s,
            None => {
                owned = projections.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        let mut stats = ConeStats::default();
        let (start, stop) = (Event::new(&ctx)?, Event::new(&ctx)?);
        let mut a0 = 0;
        while a0 < na {
            let a1 = (a0 + chunk).min(na);
            let t = Instant::now();
            stream.synchronize()?;
            pbuf.upload(&host[a0 * plane..a1 * plane])?;
            module.set_angles(&geometry.angles()[a0..a1], stream)?;
            stats.upload_s += t.elapsed().as_secs_f64();
            let mut _textures = Vec::new();
            let source = match (&tbuf, &layout) {
                (Some(tb), Some(l)) => {
                    module.pack(
                        stream,
                        pbuf.ptr(),
                        nc,
                        false,
                        tb.ptr(),
                        0,
                        a1 - a0,
                        nr,
                        nc,
                        l,
                    )?;
                    _textures = l.bind(&ctx, &module, tb.ptr(), a1 - a0, stream)?;
                    BpSource::Textures(l.tpg)
                }
                _ => BpSource::Loads(pbuf.ptr()),
            };
            start.record(stream)?;
            module.backproject(
                stream,
                source,
                &rows,
                slab.ptr(),
                geometry,
                volume,
                z_range.start,
                nzs,
                a1 - a0,
                a0 > 0,
            )?;
            stop.record(stream)?;
            stop.synchronize()?;
            stats.kernel_s += start.elapsed_ms(&stop)? as f64 * 1e-3;
            stats.chunks += 1;
            a0 = a1;
        }
        let t = Instant::now();
        stream.synchronize()?;
        match out.as_slice_mut() {
            Some(dst) => slab.download(dst)?,
            None => {
                let mut tmp = vec![0f32; nx * ny * nzs];
                slab.download(&mut tmp)?;
                out.iter_mut().zip(tmp).for_each(|(o, v)| *o = v);
            }
        }
        stats.download_s = t.elapsed().as_secs_f64();
        stats.total_s = t_all.elapsed().as_secs_f64();
        Ok(stats)
    }
}

/// Rejects detectors and volumes whose extents overflow the kernels' `int`s.
pub(crate) fn check_extents(nr: usize, nc: usize, volume: &ConeVolume) -> Result<()> {
    for (name, v) in [
        ("columns", nc),
        ("rows", nr),
        ("x", volume.nx),
        ("y", volume.ny),
    ] {
        if v > i32::MAX as usize / 2 {
            return Err(CudaError::Parameter(format!("{v} {name} is too many")));
        }
    }
    Ok(())
}

impl ConeBackend for CudaBackend {
    fn cone_backproject(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_range: Range<usize>,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.cone_backproject_chunked(projections, geometry, volume, z_range, out, 0)
            .map(|_| ())
            .map_err(CoreError::from)
    }

    fn fdk_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.fdk_device(projections, geometry, volume, options, out)
            .map(|_| ())
    }

    fn prepare_fdk(
        &self,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
    ) -> tomors_core::Result<()> {
        self.prepare_fdk_device(geometry, volume, options)
    }

    fn fdk_slab_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        rows: Range<usize>,
        volume: &ConeVolume,
        z: Range<usize>,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.fdk_slab_device(projections, geometry, rows, volume, z, options, out)
            .map(|_| ())
    }
}
