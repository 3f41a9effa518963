//! Cone-beam (FDK) back projection on the GPU:
//! [`ConeBackend`] for [`CudaBackend`].
//!
//! Two kernels (`kernels/cone_backproject.cu`, chosen by [`ConeKernel`]):
//! `cone_bp_tex` (the default) reads the projections through pitched 2D
//! textures with hardware bilinear interpolation (border = zero; a few
//! projections stacked per texture with zero rows between them), `cone_bp`
//! with plain loads and manual f32 interpolation. Both are voxel-driven, one
//! thread per voxel column (x, y) and run of [`CONE_ZB`] slices held in
//! registers; the per-(x, y) terms of each projection (depth, `(SOD/U)²`,
//! detector column and column weights, row and row step) are computed once
//! in f64 and reused along z, where only the row moves (f32). `cone_bp`
//! matches
//! [`backproject_cone_reference`](tomors_core::cone::backproject_cone_reference)
//! to f32 rounding (relative L2 ≤ 1e-5, the CPU back projector's bound);
//! `cone_bp_tex` within the texture unit's 8-bit weights (≤ 2e-3).
//! Per-projection cos θ, sin θ (f64) live in constant memory, at most
//! [`CONE_MAX_ANGLES`] per launch. Projections that do not fit in device
//! memory beside the slab are uploaded in chunks of angles, each chunk
//! accumulated into the device slab.

use std::ffi::c_void;
use std::ops::Range;
use std::time::Instant;

use ndarray::{ArrayView3, ArrayViewMut3};
use tomors_core::cone::{ConeBackend, ConeGeometry, ConeVolume};
use tomors_core::CoreError;

use crate::backend::CudaBackend;
use crate::compile::cubin_cached;
use crate::driver::{launch, DeviceBuffer, Event, Module, TexFilter, TexFormat, Texture};
use crate::error::{CudaError, Result};

/// Source of the cone-beam back projector (`cone_bp`).
pub const CONE_BACKPROJECT_CU: &str = include_str!("../kernels/cone_backproject.cu");

/// Angles per launch (the constant arrays hold 2 × 8 bytes per angle: 32 KiB).
pub const CONE_MAX_ANGLES: usize = 2048;

/// Slices accumulated in registers per thread.
pub const CONE_ZB: usize = 16;

/// Rows of one stacked projection texture at most (f32 row coordinates
/// below 8192 keep 10 fractional bits, finer than the 8-bit weights).
const TEX_ROWS: usize = 8192;

/// How the cone-beam kernel reads the projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConeKernel {
    /// Plain loads and bilinear interpolation in f32 (`cone_bp`): equals the
    /// f64 reference to f32 rounding (relative L2 ≤ 1e-5; 9.4e-7 measured).
    Loads,
    /// Hardware bilinear interpolation through 2D textures (`cone_bp_tex`):
    /// one fetch per voxel and projection, 8-bit interpolation weights
    /// (relative L2 ≤ 2e-3 against the reference on smooth data; 4.9e-4
    /// measured). The default: 2.1× faster than [`ConeKernel::Loads`] on an
    /// H200 (see `docs/perf-notes.md`).
    #[default]
    Texture,
}

/// Times of one cone-beam back projection, host to host.
#[derive(Clone, Debug, Default)]
pub struct ConeStats {
    /// Angle chunks (uploads and launches).
    pub chunks: usize,
    /// Wall time of the projection uploads (s).
    pub upload_s: f64,
    /// Kernel time measured with events (s), all chunks.
    pub kernel_s: f64,
    /// Wall time of the slab download (s).
    pub download_s: f64,
    /// Wall time of the whole call (s).
    pub total_s: f64,
}

fn check_shapes(
    projections: &ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z_range: &Range<usize>,
    out_dim: (usize, usize, usize),
) -> Result<()> {
    let expected = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    if projections.dim() != expected {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, the geometry expects {:?} ([angle][row][col])",
            projections.dim(),
            expected
        ))
        .into());
    }
    if z_range.start >= z_range.end || z_range.end > volume.nz {
        return Err(CoreError::Shape(format!(
            "slices {}..{} are not a non-empty part of the volume's {} slices",
            z_range.start, z_range.end, volume.nz
        ))
        .into());
    }
    let want = (z_range.len(), volume.ny, volume.nx);
    if out_dim != want {
        return Err(CoreError::Shape(format!(
            "output is {out_dim:?}, expected {want:?} ([slice][y][x])"
        ))
        .into());
    }
    Ok(())
}

impl CudaBackend {
    /// The cone-beam kernel in use.
    pub fn cone_kernel(&self) -> ConeKernel {
        self.cone_kernel
    }

    /// Changes the cone-beam kernel.
    pub fn set_cone_kernel(&mut self, kernel: ConeKernel) {
        self.cone_kernel = kernel;
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
        mut out: ArrayViewMut3<'_, f32>,
        max_angles: usize,
    ) -> Result<ConeStats> {
        let t_all = Instant::now();
        check_shapes(&projections, geometry, volume, &z_range, out.dim())?;
        let (na, nr, nc) = projections.dim();
        let (nx, ny, nzs) = (volume.nx, volume.ny, z_range.len());
        let plane = nr * nc;
        for (name, v) in [("columns", nc), ("rows", nr), ("x", nx), ("y", ny)] {
            if v > i32::MAX as usize / 2 {
                return Err(CudaError::Parameter(format!("{v} {name} is too many")));
            }
        }
        let e = self.lock()?;
        let ctx = e.ctx.clone();
        let stream = &e.comp;
        ctx.bind()?;
        let defines = vec![
            ("MAXP".to_string(), CONE_MAX_ANGLES.to_string()),
            ("ZB".to_string(), CONE_ZB.to_string()),
        ];
        let (cubin, _) = cubin_cached(
            "cone_backproject",
            CONE_BACKPROJECT_CU,
            &defines,
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(&ctx, &cubin)?;
        let func = module.function("cone_bp")?;

        // Device slab, then as many angles as fit (keeping 256 MiB spare).
        let slab_bytes = nx * ny * nzs * 4;
        let slab = DeviceBuffer::new(&ctx, slab_bytes, "the cone-beam slab")?;
        let (free, _) = ctx.mem_info()?;
        let spare = 256usize << 20;
        // Texture layout: `tpg` projections per texture, each with a zero row
        // above, rows `pitch` floats apart, textures `gbytes` apart.
        let kernel = self.cone_kernel;
        let tpg = ((TEX_ROWS - 1) / (nr + 1)).max(1);
        let align = ctx.pitch_align.max(32);
        let pitch_bytes = (nc * 4).div_ceil(align) * align;
        let gbytes = ((tpg * (nr + 1) + 1) * pitch_bytes).div_ceil(512) * 512;
        if kernel == ConeKernel::Texture
            && (tpg * (nr + 1) + 1 > ctx.max_tex_height || nc > ctx.max_tex_width)
        {
            return Err(CudaError::Parameter(format!(
                "a {nr}×{nc} detector exceeds the device's 2D texture limits ({}×{})",
                ctx.max_tex_height, ctx.max_tex_width
            )));
        }
        let per_angle = match kernel {
            ConeKernel::Loads => plane * 4,
            ConeKernel::Texture => plane * 4 + gbytes.div_ceil(tpg),
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
        let tbuf = match kernel {
            ConeKernel::Loads => None,
            ConeKernel::Texture => {
                let b = DeviceBuffer::new(
                    &ctx,
                    chunk.div_ceil(tpg) * gbytes,
                    "cone-beam projection textures",
                )?;
                b.fill_bytes(0, stream)?;
                Some(b)
            }
        };
        let pack = module.function("cone_pack")?;
        let func_tex = module.function("cone_bp_tex")?;

        let owned;
        let host: &[f32] = match projections.as_slice() {
            Some(s) => s,
            None => {
                owned = projections.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        let trig: Vec<(f64, f64)> = geometry
            .angles()
            .iter()
            .map(|&a| (a as f64).cos())
            .zip(geometry.angles().iter().map(|&a| (a as f64).sin()))
            .collect();
        let mut stats = ConeStats::default();
        let (start, stop) = (Event::new(&ctx)?, Event::new(&ctx)?);
        let grid = (
            nx.div_ceil(16) as u32,
            ny.div_ceil(16) as u32,
            nzs.div_ceil(CONE_ZB) as u32,
        );
        let mut a0 = 0;
        while a0 < na {
            let a1 = (a0 + chunk).min(na);
            let t = Instant::now();
            stream.synchronize()?;
            pbuf.upload(&host[a0 * plane..a1 * plane])?;
            let cos: Vec<f64> = trig[a0..a1].iter().map(|t| t.0).collect();
            let sin: Vec<f64> = trig[a0..a1].iter().map(|t| t.1).collect();
            module.set_global("c_cos", &cos, stream)?;
            module.set_global("c_sin", &sin, stream)?;
            stats.upload_s += t.elapsed().as_secs_f64();
            let mut vp = slab.ptr();
            let (mut n, mut z, mut acc) = ((a1 - a0) as i32, nzs as i32, i32::from(a0 > 0));
            let (mut ix, mut iy, mut ic, mut ir) = (nx as i32, ny as i32, nc as i32, nr as i32);
            let mut tg = tpg as i32;
            let mut sod = geometry.sod();
            let mut sdd = geometry.sdd();
            let mut pu = geometry.pixel_u();
            let mut pv = geometry.pixel_v();
            let mut cc = geometry.center_col();
            let mut cr = geometry.center_row();
            let mut vox = volume.voxel_size as f64;
            let mut zf = volume.z(z_range.start);
            let mut textures = Vec::new();
            let mut pp = pbuf.ptr();
            let (f, name, mut params): (_, _, Vec<*mut c_void>) = match &tbuf {
                None => (
                    func,
                    "cone_bp",
                    vec![&mut pp as *mut _ as _, &mut vp as *mut _ as _],
                ),
                Some(tb) => {
                    // Pack the chunk into the stacked layout, then one texture per group.
                    let mut dst = tb.ptr();
                    let mut pitch = (pitch_bytes / 4) as i32;
                    let mut gf = (gbytes / 4) as i64;
                    let mut pk: Vec<*mut c_void> = vec![
                        &mut pp as *mut _ as _,
                        &mut dst as *mut _ as _,
                        &mut n as *mut _ as _,
                        &mut ir as *mut _ as _,
                        &mut ic as *mut _ as _,
                        &mut pitch as *mut _ as _,
                        &mut tg as *mut _ as _,
                        &mut gf as *mut _ as _,
                    ];
                    let blocks = ((a1 - a0) * plane).div_ceil(256).min(65_535 * 8) as u32;
                    // SAFETY: parameters match `cone_pack`; `pbuf` holds the
                    // chunk, `tbuf` its stacked layout (sized above).
                    unsafe {
                        launch(
                            pack,
                            "cone_pack",
                            (blocks, 1, 1),
                            (256, 1, 1),
                            0,
                            stream,
                            &mut pk,
                        )
                    }?;
                    let groups = (a1 - a0).div_ceil(tpg);
                    for gi in 0..groups {
                        textures.push(Texture::pitch2d(
                            &ctx,
                            tb.ptr() + (gi * gbytes) as u64,
                            nc,
                            tpg * (nr + 1) + 1,
                            pitch_bytes,
                            TexFormat::Float1,
                            TexFilter::Linear,
                        )?);
                    }
                    let handles: Vec<u64> = textures.iter().map(|t| t.raw).collect();
                    module.set_global("c_tex", &handles, stream)?;
                    (func_tex, "cone_bp_tex", vec![&mut vp as *mut _ as _])
                }
            };
            params.extend_from_slice(&[
                &mut n as *mut _ as _,
                &mut z as *mut _ as _,
                &mut acc as *mut _ as _,
            ]);
            if tbuf.is_some() {
                params.push(&mut tg as *mut _ as _);
            }
            params.extend_from_slice(&[
                &mut ix as *mut _ as _,
                &mut iy as *mut _ as _,
                &mut ic as *mut _ as _,
                &mut ir as *mut _ as _,
                &mut sod as *mut _ as _,
                &mut sdd as *mut _ as _,
                &mut pu as *mut _ as _,
                &mut pv as *mut _ as _,
                &mut cc as *mut _ as _,
                &mut cr as *mut _ as _,
                &mut vox as *mut _ as _,
                &mut zf as *mut _ as _,
            ]);
            start.record(stream)?;
            // SAFETY: the parameters match `cone_bp` / `cone_bp_tex` in order
            // and type; `pbuf` holds `n` projections of nr × nc floats, the
            // textures cover them, and `slab` holds nzs × ny × nx floats.
            unsafe { launch(f, name, grid, (256, 1, 1), 0, stream, &mut params) }.map_err(|e| {
                match e {
                    CudaError::Launch {
                        kernel,
                        dims,
                        message,
                    } => CudaError::Launch {
                        kernel,
                        dims: format!(
                            "{dims}; {nzs} slices of {nx}×{ny} from {} angles of {nr}×{nc}",
                            a1 - a0
                        ),
                        message,
                    },
                    e => e,
                }
            })?;
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
}
