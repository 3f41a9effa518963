//! FDK on the device, host to host: [`CudaBackend::fdk_device`], the
//! CUDA backend's [`ConeBackend::fdk_into`](tomors_core::cone::ConeBackend::fdk_into);
//! device to device: [`CudaBackend::fdk_foreign`].
//!
//! The projections go up once and stay on the device:
//!
//! 1. angle chunks are copied (in parallel) into pinned staging buffers and
//!    uploaded on the upload stream, two chunks in flight, while the compute
//!    stream weights the previous chunk (`fdk_weight`: cosine × angular
//!    weight, with a check for non-finite values), ramp-filters its rows
//!    with cuFFT (the FBP filter stage) and packs them into the stacked
//!    texture layout of all angles (`cone_pack`);
//! 2. the volume is back projected in slabs of z (`cone_bp_tex`, every
//!    angle in one launch) into two device slab buffers, each downloaded on
//!    the download stream into pinned memory and copied into the output by
//!    the host while the next slab is computed.
//!
//! The same arithmetic as [`fdk_by_steps`] with the texture kernel, so the
//! two agree to the texture unit's 8-bit interpolation weights. The steps
//! path runs instead (with a log line) when the plain-load kernel is
//! chosen, cuFFT is missing, there are more than [`CONE_MAX_ANGLES`]
//! angles, or the filtered projections do not fit in device memory.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{s, ArrayView3, ArrayViewMut3};
use tomors_core::cone::weights::{angular_weights, cosine_weights, ScanMode};
use tomors_core::cone::{
    check_slab, fdk_by_steps, fdk_slab_by_steps, ConeGeometry, ConeVolume, FdkOptions,
};
use tomors_core::CoreError;

use crate::cone::fdk_common::{
    events, filter_job, summed_ms, ChunkEvents, FdkStats, FdkWeights, CHUNK_FLOATS, SLAB_FLOATS,
    SPARE_BYTES,
};
use crate::cone::fdk_fold::{prepare_fold, run_fold, FdkFold, FoldState};
use crate::cone::fold::FoldLayout;
use crate::cone::{check_extents, BpSource, ConeKernel, ConeModule, StackLayout, CONE_MAX_ANGLES};
use crate::error::{CudaError, Result};
use crate::fbp::engine::{copy_in, copy_out, Engine};
use crate::fbp::CudaBackend;
use crate::runtime::{ensure, ensure_pinned};
use crate::runtime::{DeviceBuffer, ForeignDevicePtr};

/// The angles per upload chunk set by [`CudaBackend::set_fdk_chunk`]
/// (kept in the backend's extensions; 0 = automatic).
#[derive(Clone, Copy, Debug)]
struct FdkChunk(usize);

impl CudaBackend {
    /// Sets the projections per upload chunk of [`CudaBackend::fdk_device`]
    /// (0: about 32 MiB of projections, the default).
    pub fn set_fdk_chunk(&mut self, angles: usize) {
        self.ext.insert(FdkChunk(angles));
    }

    /// Sets how [`CudaBackend::fdk_device`] uses the folded kernel and the
    /// overlapped pipeline (see [`FdkFold`]; enabled by default).
    pub fn set_fdk_fold(&mut self, fold: FdkFold) {
        self.ext.insert(fold);
    }

    /// The folded-pipeline settings in use.
    pub fn fdk_fold(&self) -> FdkFold {
        self.ext.get::<FdkFold>().copied().unwrap_or_default()
    }

    /// FDK of `projections` (`[angle][row][col]`) into `out` (`[z][y][x]`
    /// of `volume`) with the projections resident on the device (see the
    /// module documentation), returning the stage times. Slabs of
    /// `options.slab` slices (0: about 64 MiB each). `fdk` and
    /// [`ConeBackend::fdk_into`](tomors_core::cone::ConeBackend::fdk_into)
    /// call this.
    ///
    /// Errors: shapes that do not fit, non-finite projections, a bad
    /// filter or scan, driver, compilation and launch errors.
    pub fn fdk_device(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<FdkStats> {
        let rows = 0..geometry.n_rows();
        self.fdk_slab_device(
            projections,
            geometry,
            rows,
            volume,
            0..volume.nz,
            options,
            out,
        )
    }

    /// Prepares [`CudaBackend::fdk_device`] of `volume` from projections
    /// of `geometry` before the projections exist: loads (or compiles) the
    /// kernels, allocates the device, pinned and volume buffers and plans
    /// the FFTs, so that a caller can overlap this with reading the data
    /// (the CLI does). The call itself then reuses all of it. Nothing is
    /// prepared for the paths that do not need it (host steps); an
    /// out-of-memory here only frees what it took (the call then chooses
    /// its path as usual).
    ///
    /// Errors: driver, compilation and FFT-planning errors.
    pub fn prepare_fdk_device(
        &self,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
    ) -> tomors_core::Result<()> {
        let na = geometry.n_angles();
        if self.cone_kernel() == ConeKernel::Loads
            || !self.gpu_filtering()
            || na > CONE_MAX_ANGLES
            || na == 0
        {
            return Ok(());
        }
        options.filter.validate()?;
        let fold = self.fdk_fold();
        let chunk = self.ext.get::<FdkChunk>().map_or(0, |c| c.0);
        let mut e = self.lock()?;
        let layout = match fold.enabled && fold.shape.is_valid() {
            true => FoldLayout::new(&e.ctx, geometry, na, fold.half),
            false => None,
        };
        // The host weights of the call (kept in the engine; a geometry the
        // call will refuse is left for the call to report).
        let rows = 0..geometry.n_rows();
        let host = HostWeights::of(&mut e, geometry, options.scan, &rows).ok();
        let weights = host.as_ref().map(|w| (&w.angular[..], &w.cosine[..]));
        let r = match layout {
            Some(l) => match prepare_fold(
                &mut e,
                (&fold, chunk),
                &l,
                geometry,
                volume,
                options,
                weights,
            ) {
                Err(err) if err.is_out_of_memory() => {
                    e.ext.remove::<FoldState>();
                    e.free_buffers();
                    Ok(())
                }
                r => r,
            },
            None => ConeModule::of(&mut e).map(|_| ()),
        };
        r.map_err(CoreError::from)
    }

    /// [`CudaBackend::fdk_device`] of slices `z` of `volume` (into `out`,
    /// `[z.len()][y][x]`) from detector rows `rows` of `geometry` only
    /// (`projections`: `[angle][rows.len()][col]`, rows that cover every
    /// voxel of the slab, as [`rows_for_slab`](tomors_core::cone::rows_for_slab)'s).
    /// The texture coordinates are the whole detector's, so when `z.start`
    /// is a multiple of [`fdk_slab_slices`] the slab equals the same slices
    /// of the whole-volume FDK (to the filter's rounding, which may differ
    /// with the rows' batching); the steps path (see the module
    /// documentation) uses the rows' own geometry instead.
    ///
    /// Errors: as [`CudaBackend::fdk_device`]; rows outside the detector.
    #[allow(clippy::too_many_arguments)]
    pub fn fdk_slab_device(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        rows: Range<usize>,
        volume: &ConeVolume,
        z: Range<usize>,
        options: &FdkOptions,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<FdkStats> {
        let t0 = Instant::now();
        check_slab(&projections, geometry, &rows, volume, &z, out.dim())?;
        if projections.is_empty() {
            return Err(CoreError::Data("the projections are empty".into()));
        }
        options.filter.validate()?;
        check_extents(geometry.n_rows(), geometry.n_cols(), volume)?;
        let whole = rows.len() == geometry.n_rows() && z.len() == volume.nz;
        let steps = |why: String, out: ArrayViewMut3<'_, f32>| -> tomors_core::Result<FdkStats> {
            tracing::info!("FDK on the GPU in host steps: {why}");
            if whole {
                fdk_by_steps(self, projections, geometry, volume, options, out)?;
            } else {
                let (r, zz) = (rows.clone(), z.clone());
                fdk_slab_by_steps(self, projections, geometry, r, volume, zz, options, out)?;
            }
            Ok(FdkStats {
                total_s: t0.elapsed().as_secs_f64(),
                ..FdkStats::default()
            })
        };
        if self.cone_kernel() == ConeKernel::Loads {
            return steps("the plain-load kernel was chosen".into(), out);
        }
        let na = geometry.n_angles();
        if na > CONE_MAX_ANGLES {
            return steps(
                format!("{na} angles, more than {CONE_MAX_ANGLES} per launch"),
                out,
            );
        }
        if !self.gpu_filtering() {
            return steps("cuFFT is missing".into(), out);
        }
        let host = {
            let mut e = self.lock()?;
            HostWeights::of(&mut e, geometry, options.scan, &rows)?
        };
        let zs = fdk_slab_slices(volume, options.slab);
        let fold = self.fdk_fold();
        let weights = (&host.angular[..], &host.cosine[..]);
        let result = {
            let mut e = self.lock()?;
            let layout = match whole && fold.enabled && fold.shape.is_valid() {
                true => FoldLayout::new(&e.ctx, geometry, na, fold.half),
                false => None,
            };
            let folded = match layout {
                Some(layout) => {
                    let r = run_fold(
                        &mut e,
                        (&fold, self.ext.get::<FdkChunk>().map_or(0, |c| c.0)),
                        &layout,
                        projections,
                        geometry,
                        volume,
                        options,
                        weights,
                        out.view_mut(),
                    );
                    match r {
                        Err(err) if err.is_out_of_memory() => {
                            tracing::info!("FDK without the folded pipeline: {err}");
                            e.ext.remove::<FoldState>();
                            e.free_buffers();
                            None
                        }
                        r => Some(r),
                    }
                }
                None => None,
            };
            let r = match folded {
                Some(r) => r,
                None => run(
                    &mut e,
                    (self.ext.get::<FdkChunk>().map_or(0, |c| c.0), zs),
                    Src::Host(projections),
                    geometry,
                    (&rows, &z),
                    volume,
                    options,
                    weights,
                    Dst::Host(out.view_mut()),
                ),
            };
            if matches!(&r, Err(err) if err.is_out_of_memory()) {
                e.free_buffers();
            }
            r
        };
        match result {
            Ok(Some(mut stats)) => {
                let total = t0.elapsed().as_secs_f64();
                if stats.folded {
                    // The folded pipeline's total is its own wall time.
                    stats.prep_ms = (total - stats.total_s).max(0.0) * 1e3;
                }
                stats.total_s = total;
                tracing::debug!("FDK on the device: {stats}");
                Ok(stats)
            }
            Ok(None) => Err(non_finite(&projections, rows.start)),
            Err(err) if err.is_out_of_memory() => steps(err.to_string(), out),
            Err(err) => Err(err.into()),
        }
    }
}

impl CudaBackend {
    /// FDK of projections that already live in device memory (CuPy, Numba,
    /// PyTorch arrays handed over by pointer): `input` holds C-contiguous
    /// float32 `[angle][row][col]` of `geometry` on this backend's device;
    /// the volume `[z][y][x]` of `volume` is returned in a new device
    /// buffer. The pipeline of [`CudaBackend::fdk_device`] with its angle
    /// chunks copied on the device and its slabs back projected in place:
    /// neither the projections nor the volume pass through host memory (the
    /// weights, a few KiB, go up; the finiteness flag, 8 bytes, comes down).
    /// Equal to [`CudaBackend::fdk_device`] on the same data.
    ///
    /// Work runs on this backend's streams and has completed when the call
    /// returns; the caller orders it after the producer of `input` (e.g.
    /// with [`wait_foreign_stream`](crate::runtime::wait_foreign_stream)).
    ///
    /// Errors: `input` of another size or on another device; the cases
    /// [`CudaBackend::fdk_device`] hands to its host-steps path (the
    /// plain-load kernel chosen, more than [`CONE_MAX_ANGLES`] angles, cuFFT
    /// missing, too little device memory), which device data cannot take;
    /// non-finite projections; a bad filter, scan or volume; driver errors.
    pub fn fdk_foreign(
        &self,
        input: &ForeignDevicePtr,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
    ) -> Result<DeviceBuffer> {
        let dim = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
        let want = dim.0 * dim.1 * dim.2 * 4;
        if input.bytes() != want {
            return Err(CudaError::Parameter(format!(
                "device input of {} bytes for {} projections of {} × {} ({want} bytes)",
                input.bytes(),
                dim.0,
                dim.1,
                dim.2
            )));
        }
        options.filter.validate()?;
        check_extents(dim.1, dim.2, volume)?;
        let unavailable = |why: String| {
            Err(CudaError::Unavailable(format!(
                "FDK of device-resident projections needs {why}"
            )))
        };
        if self.cone_kernel() == ConeKernel::Loads {
            return unavailable("the texture kernel (the plain-load kernel was chosen)".into());
        }
        if dim.0 > CONE_MAX_ANGLES {
            return unavailable(format!(
                "at most {CONE_MAX_ANGLES} angles (got {}); pass host arrays",
                dim.0
            ));
        }
        if !self.gpu_filtering() {
            return unavailable("cuFFT, which could not be loaded".into());
        }
        let angular = angular_weights(geometry, options.scan)?;
        let cosine = cosine_weights(geometry).as_standard_layout().into_owned();
        let zs = fdk_slab_slices(volume, options.slab);
        let mut e = self.lock()?;
        if input.ordinal() != e.ctx.ordinal {
            return Err(CudaError::Parameter(format!(
                "the input lives on device {} but this backend runs on device {}",
                input.ordinal(),
                e.ctx.ordinal
            )));
        }
        let out = DeviceBuffer::new(
            &e.ctx,
            volume.nz * volume.ny * volume.nx * 4,
            "the reconstructed volume",
        )?;
        let (rows, z) = (0..dim.1, 0..volume.nz);
        let r = run(
            &mut e,
            (self.ext.get::<FdkChunk>().map_or(0, |c| c.0), zs),
            Src::Device(input.ptr(), dim),
            geometry,
            (&rows, &z),
            volume,
            options,
            (
                angular.as_slice().expect("standard layout"),
                cosine.as_slice().expect("standard layout"),
            ),
            Dst::Device(out.ptr()),
        );
        if matches!(&r, Err(err) if err.is_out_of_memory()) {
            e.free_buffers();
        }
        match r? {
            Some(_) => Ok(out),
            None => {
                Err(CoreError::Data("the projections contain a non-finite value".into()).into())
            }
        }
    }
}

/// Slices per back-projected and downloaded slab of [`CudaBackend::fdk_device`]
/// on `volume` with `FdkOptions::slab` = `slab`: `slab` itself, or (0) about
/// 64 MiB, whole runs of the kernel's z block. Slabs of the whole-volume FDK
/// start at multiples of it; a slab of the volume that does too
/// ([`CudaBackend::fdk_slab_device`]) gets the same values.
pub fn fdk_slab_slices(volume: &ConeVolume, slab: usize) -> usize {
    let (nz, plane_out) = (volume.nz.max(1), (volume.nx * volume.ny).max(1));
    match slab {
        0 => {
            let zs = (SLAB_FLOATS / plane_out).clamp(1, nz);
            if zs >= crate::cone::CONE_ZB {
                zs - zs % crate::cone::CONE_ZB
            } else {
                zs
            }
        }
        s => s.min(nz),
    }
}

/// The error for the first non-finite projection value.
fn non_finite(projections: &ArrayView3<'_, f32>, row0: usize) -> CoreError {
    match projections.indexed_iter().find(|(_, v)| !v.is_finite()) {
        Some(((a, r, c), v)) => CoreError::Data(format!(
            "the projections contain a non-finite value ({v}) at {:?}",
            (a, r + row0, c)
        )),
        None => CoreError::Data("the projections contain a non-finite value".into()),
    }
}

/// The FDK weights on the host of the last geometry (angular
/// `[angle][col]`, cosine `[row][col]` of detector rows `rows`), kept in the
/// engine: a repeated reconstruction of the same scan skips computing them.
struct HostWeights {
    geometry: ConeGeometry,
    scan: ScanMode,
    rows: Range<usize>,
    angular: Vec<f32>,
    cosine: Vec<f32>,
}

impl HostWeights {
    /// The weights for `geometry`, `scan` and `rows`, computed unless the
    /// engine holds them already.
    fn of(
        e: &mut Engine,
        geometry: &ConeGeometry,
        scan: ScanMode,
        rows: &Range<usize>,
    ) -> tomors_core::Result<Arc<Self>> {
        if let Some(w) = e.ext.get::<Arc<HostWeights>>() {
            if w.scan == scan && w.rows == *rows && w.geometry == *geometry {
                return Ok(w.clone());
            }
        }
        let angular = angular_weights(geometry, scan)?;
        let cosine = cosine_weights(geometry)
            .slice(s![rows.clone(), ..])
            .to_owned();
        let w = Arc::new(Self {
            geometry: geometry.clone(),
            scan,
            rows: rows.clone(),
            angular: angular.iter().copied().collect(),
            cosine: cosine.iter().copied().collect(),
        });
        e.ext.insert(w.clone());
        Ok(w)
    }
}

/// Where the projections of [`run`] come from.
enum Src<'a> {
    /// Host memory `[angle][row][col]`, staged through pinned buffers.
    Host(ArrayView3<'a, f32>),
    /// Device memory at this address of this device, `(angles, rows,
    /// cols)` C-contiguous, copied chunk by chunk on the device.
    Device(u64, (usize, usize, usize)),
}

impl Src<'_> {
    fn dim(&self) -> (usize, usize, usize) {
        match self {
            Src::Host(p) => p.dim(),
            Src::Device(_, d) => *d,
        }
    }
}

/// Where the volume of [`run`] goes.
enum Dst<'a> {
    /// Host memory `[z][y][x]`, through device slabs and pinned buffers.
    Host(ArrayViewMut3<'a, f32>),
    /// Device memory at this address (the slices of `z`, C order),
    /// back projected in place.
    Device(u64),
}

/// The device pipeline with `chunk` angles per upload (0: automatic) and
/// `zs` slices per download, for slices `z` from detector rows `rows`
/// (`src` holds those rows); `Ok(None)` when a projection value is
/// not finite.
#[allow(clippy::too_many_arguments)]
fn run(
    e: &mut Engine,
    (chunk, zs): (usize, usize),
    src: Src<'_>,
    geometry: &ConeGeometry,
    (rows, z): (&Range<usize>, &Range<usize>),
    volume: &ConeVolume,
    options: &FdkOptions,
    (angular, cosine): (&[f32], &[f32]),
    mut dst: Dst<'_>,
) -> Result<Option<FdkStats>> {
    let ctx = e.ctx.clone();
    ctx.bind()?;
    let module = ConeModule::of(e)?;
    let (na, nr, nc) = src.dim();
    let (nx, ny) = (volume.nx, volume.ny);
    let (plane, plane_out) = (nr * nc, nx * ny);
    let layout = StackLayout::band(&ctx, geometry.n_rows(), nr, nc)?;
    let (host_in, host_out) = (matches!(src, Src::Host(_)), matches!(dst, Dst::Host(_)));

    // Chunks of angles of about CHUNK_FLOATS, of equal size but the last;
    // slabs of zs slices from z.start.
    let ca0 = match chunk {
        0 => CHUNK_FLOATS / plane,
        c => c,
    }
    .clamp(1, na);
    let nchunks = na.div_ceil(ca0);
    let ca = na.div_ceil(nchunks);
    let zs = zs.clamp(1, z.len());
    let nslabs = z.len().div_ceil(zs);
    let (fft_bytes, fft_spec) = Engine::fft_bytes(e.fft_variant, ca * nr, nc);
    let slab_bytes = if host_out { 2 * zs * plane_out * 4 } else { 0 };
    let need = layout.bytes(na)
        + 2 * ca * plane * 4
        + fft_bytes
        + fft_spec
        + slab_bytes
        + (plane + na * nc) * 4;
    let (free, _) = ctx.mem_info()?;
    if need + SPARE_BYTES > free {
        e.free_buffers();
        let (free, _) = ctx.mem_info()?;
        if need + SPARE_BYTES > free {
            return Err(CudaError::OutOfMemory {
                what: format!(
                    "FDK's {na} filtered projections and buffers beside {free} free bytes"
                ),
                bytes: need,
            });
        }
    }
    let tex = ensure(
        &mut e.stack_tex,
        &ctx,
        layout.bytes(na),
        "FDK projection textures",
    )?;
    let mut raw = [0u64; 2];
    for (b, ptr) in raw.iter_mut().enumerate() {
        *ptr = ensure(&mut e.raw[b], &ctx, ca * plane * 4, "FDK projection chunk")?;
        if host_in {
            ensure_pinned(&mut e.pin_in[b], &ctx, ca * plane)?;
        }
        if host_out {
            ensure(&mut e.out[b], &ctx, zs * plane_out * 4, "FDK slab")?;
            ensure_pinned(&mut e.pin_out[b], &ctx, zs * plane_out)?;
        }
    }
    let weights = FdkWeights::upload(&ctx, (angular, cosine), &e.comp)?;
    e.stack_tex
        .as_ref()
        .expect("allocated")
        .fill_bytes(0, &e.comp)?;
    module.set_angles(geometry.angles(), &e.comp)?;
    let textures = layout.bind(&ctx, &module, tex, na, &e.comp)?;
    let job = filter_job(geometry, options);
    let events = |n: usize| events(&ctx, n);
    let ce = ChunkEvents::new(&ctx, nchunks)?;
    let (up0, up1, c0, c1) = (&ce.up0, &ce.up1, &ce.c0, &ce.c1);
    let mut stats = FdkStats {
        on_device: true,
        chunks: nchunks,
        slabs: nslabs,
        ..FdkStats::default()
    };

    // 1. Upload (or copy on the device), weight, filter and pack, chunk by chunk.
    for i in 0..nchunks {
        let b = i % 2;
        let (a0, a1) = (i * ca, ((i + 1) * ca).min(na));
        let k = a1 - a0;
        if i >= 2 {
            up1[i - 2].synchronize()?;
        }
        if let Src::Host(projections) = &src {
            let th = Instant::now();
            let pin = e.pin_in[b].as_mut().expect("allocated");
            copy_in(
                &projections.slice(s![a0..a1, .., ..]),
                &mut pin.as_mut_slice()[..k * plane],
            );
            stats.host_in_s += th.elapsed().as_secs_f64();
        }
        if i >= 2 {
            e.up.wait(&c1[i - 2])?;
        }
        up0[i].record(&e.up)?;
        let chunk_buf = e.raw[b].as_ref().expect("allocated");
        match &src {
            // SAFETY: the pinned buffer is not written again before up1[i]
            // completes (waited for two chunks later).
            Src::Host(_) => unsafe {
                chunk_buf.upload_async(
                    0,
                    e.pin_in[b].as_ref().expect("allocated").as_slice().as_ptr() as *const u8,
                    k * plane * 4,
                    &e.up,
                )?;
            },
            // SAFETY: the caller's na × plane floats at `ptr` on this
            // device (checked by `fdk_foreign`); angles a0..a1 lie inside.
            Src::Device(ptr, _) => unsafe {
                chunk_buf.copy_from_device_async(
                    0,
                    ptr + (a0 * plane * 4) as u64,
                    k * plane * 4,
                    &e.up,
                )?;
            },
        }
        up1[i].record(&e.up)?;
        e.comp.wait(&up1[i])?;
        c0[i].record(&e.comp)?;
        let (rows, stride, pair) =
            weights.weight_and_filter(e, &module, raw[b], (a0, k), (nr, nc), &job)?;
        module.pack(&e.comp, rows, stride, pair, tex, a0, k, nr, nc, &layout)?;
        c1[i].record(&e.comp)?;
    }
    c1[nchunks - 1].synchronize()?;
    if !weights.all_finite()? {
        return Ok(None);
    }

    // 2. Back project slab by slab; download and copy out the previous one
    // (or back project straight into the caller's device memory).
    let (bp0, bp1, d0, d1) = (
        events(nslabs)?,
        events(nslabs)?,
        events(nslabs)?,
        events(nslabs)?,
    );
    // Slab j: slices z0..z1 of the volume, z0 - z.start.. of the output.
    let slab_range = |j: usize| (z.start + j * zs, (z.start + (j + 1) * zs).min(z.end));
    for j in 0..=nslabs {
        if j < nslabs {
            let b = j % 2;
            let (z0, z1) = slab_range(j);
            let target = match &dst {
                Dst::Host(_) => e.out[b].as_ref().expect("allocated").ptr(),
                Dst::Device(ptr) => ptr + ((z0 - z.start) * plane_out * 4) as u64,
            };
            if j >= 2 && host_out {
                e.comp.wait(&d1[j - 2])?;
            }
            bp0[j].record(&e.comp)?;
            module.backproject(
                &e.comp,
                BpSource::Textures(layout.tpg),
                rows,
                target,
                geometry,
                volume,
                z0,
                z1 - z0,
                na,
                false,
            )?;
            bp1[j].record(&e.comp)?;
            if host_out {
                e.down.wait(&bp1[j])?;
                d0[j].record(&e.down)?;
                // SAFETY: the host reads the pinned buffer only after d1[j]
                // completes, and refills it only after copying it out.
                unsafe {
                    e.out[b].as_ref().expect("allocated").download_async(
                        0,
                        e.pin_out[b]
                            .as_mut()
                            .expect("allocated")
                            .as_mut_slice()
                            .as_mut_ptr() as *mut u8,
                        (z1 - z0) * plane_out * 4,
                        &e.down,
                    )?;
                }
                d1[j].record(&e.down)?;
            }
        }
        if j >= 1 {
            if let Dst::Host(out) = &mut dst {
                let p = j - 1;
                let (z0, z1) = slab_range(p);
                d1[p].synchronize()?;
                let th = Instant::now();
                let src = &e.pin_out[p % 2].as_ref().expect("allocated").as_slice()
                    [..(z1 - z0) * plane_out];
                copy_out(
                    src,
                    &mut out.slice_mut(s![z0 - z.start..z1 - z.start, .., ..]),
                );
                stats.host_out_s += th.elapsed().as_secs_f64();
            }
        }
    }
    e.comp.synchronize()?;
    drop(textures);
    ce.add_to(&mut stats)?;
    stats.backproject_ms = summed_ms(&bp0, &bp1)?;
    if host_out {
        stats.download_ms = summed_ms(&d0, &d1)?;
    }
    Ok(Some(stats))
}
