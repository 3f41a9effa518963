//! Iterative cone-beam reconstruction on the GPU: Joseph's cone-beam
//! projector and its exact transpose as CUDA kernels ([`CudaConeJoseph`]),
//! and SIRT with the whole iteration resident on the device
//! ([`cone_sirt_cuda`]).
//!
//! - The operator is tomors-core's
//!   [`ConeJosephProjector`] on
//!   the whole volume: the ray of detector pixel `(row, col)` runs from the
//!   source to the pixel centre; in voxel-index coordinates it steps along
//!   the dominant axis of its direction (one step per voxel plane), with
//!   bilinear interpolation in the other two axes and the weight
//!   `h·√(1 + db² + dc²)` (the step length) times the bilinear weights;
//!   voxels outside the volume read as zero.
//! - Forward (`cj_forward`, `kernels/cone_joseph.cu`): one thread per ray
//!   (32 neighbouring columns of one detector row per warp, one projection
//!   per grid layer), gathering. The ray is set up in f64 with the CPU's
//!   operations (no fused multiply-add, so the same dominant axis at exact
//!   ties); the positions along it are stepped in f32 from the volume's
//!   middle plane, so the weights are the CPU's to f32 rounding.
//! - Back (`cj_back`): the exact transpose, walking the same rays with the
//!   same arithmetic and scattering `y·w` into the volume with `atomicAdd`
//!   (the output is zeroed first). It visits exactly the (voxel, weight)
//!   pairs of the forward projection, so the pair is matched to f32
//!   rounding; the order of the additions, and so the last bits of the
//!   result, may differ between runs. By default (`cj_back_merged`) the 32
//!   rays of a warp (a tile of 8 detector columns × 4 rows) step together
//!   and the equal voxels of neighbouring rays are added in one atomic,
//!   found by warp shuffles: the `c0 + 1` taps of a ray with the `c0` taps
//!   of the ray one row below, then the `b0 + 1` tap of a ray with the `b0`
//!   tap of the ray one column to the right (neighbouring rays pass about
//!   one voxel apart, so these coincide most of the time);
//!   [`CudaConeJoseph::set_merged_back`] selects the plain scatter
//!   (`cj_back`).
//! - SIRT: `x ← P_C(x + λ·T·Aᵀ·M·(b − A·x))` with the weightings of
//!   [`Weighting`] (row/column sums = ASTRA's SIRT, Cimmino, Landweber);
//!   the projections are uploaded once and the volume downloaded once; per
//!   iteration one back projection, one update, one forward projection and
//!   one residual kernel (`M·(b − A·x)` and the partial sums of
//!   `‖b − A·x‖²`, read back for the residual history). The whole volume
//!   and all projections live on one device (no slabs).
//! - The voxel-driven back projection ([`ConeBackProjector::Voxel`]): the
//!   unmatched fast pair of tomors-core's
//!   [`ConeVoxelProjector`](tomors_core::iterative::ConeVoxelProjector)
//!   (Joseph forward, `B ≈ Aᵀ`), through the FDK back-projection kernel
//!   (`cone_bp_tex`, `kernels/cone_backproject.cu`). Per back projection
//!   one kernel (`cj_weight_pack`) weights the projections per detector
//!   pixel by `√(SDD² + u² + v²)·h³·SDD/(pu·pv·SOD²)` and writes them into
//!   the stacked texture layout (allocated once, beside the SIRT state),
//!   then one launch back projects every angle into the whole device
//!   volume: `Σ_θ (SOD/U)²·p̃_θ(col, row)` with hardware bilinear
//!   interpolation (8-bit weights), so the operator is the CPU's f32 voxel
//!   back projection to the texture unit's rounding. At most
//!   [`CONE_MAX_ANGLES`] angles. The voxel pair's forward projection reads
//!   the volume through a 3D texture by default (`cj_forward_tex`: the
//!   volume is copied into a 3D array before each forward projection, then
//!   Joseph's rays and steps with one trilinear fetch per step at the
//!   step's exact position, i.e. Joseph's bilinear interpolation with 8-bit
//!   weights); [`CudaConeJoseph::set_texture_forward`] or
//!   `TOMORS_CONE_FORWARD=loads` selects Joseph's exact loads.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ndarray::{Array3, ArrayView3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{
    ray_frames, ConeJosephProjector, Constraint, IterativeOptions, IterativeResult, StopReason,
    Weighting,
};
use tomors_core::CoreError;

use crate::backend::CudaBackend;
use crate::compile::cubin_cached;
use crate::cone::{check_extents, BpSource, ConeModule, StackLayout, CONE_MAX_ANGLES};
use crate::driver::{
    launch, Array3d, Context, DeviceBuffer, Event, Function, Module, PinnedBuffer, Stream,
    TexFilter, Texture,
};
use crate::error::{CudaError, Result};
use crate::iterative::{
    check_options, clamp, download_staged, find_non_finite, invert, upload_staged, GpuIteration,
    SirtStats, POWER_ITERATIONS, RED_BLOCKS,
};

/// Source of the cone-beam Joseph projector and SIRT kernels.
pub const CONE_JOSEPH_CU: &str = include_str!("../kernels/cone_joseph.cu");

/// Device memory kept free beside the SIRT state.
const SPARE_BYTES: usize = 256 << 20;

/// Threads per block of the projectors by default: 32 columns × 8 rows.
const BLOCK: (u32, u32, u32) = (32, 8, 1);

/// Threads per block of the projectors: `TOMORS_CONE_BLOCK=COLSxROWS` (at
/// most 256 threads; for benchmarks), else [`BLOCK`].
fn block_shape() -> (u32, u32, u32) {
    std::env::var("TOMORS_CONE_BLOCK")
        .ok()
        .and_then(|v| {
            let (w, h) = v.split_once('x')?;
            let (w, h): (u32, u32) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
            (w >= 1 && h >= 1 && w * h <= 256).then_some((w, h, 1))
        })
        .unwrap_or(BLOCK)
}

/// A flat `f32` array on the device: a `[z][y][x]` volume or
/// `[angle][row][col]` projections of a [`CudaConeJoseph`].
pub struct ConeDeviceArray {
    buf: DeviceBuffer,
    dim: (usize, usize, usize),
}

impl ConeDeviceArray {
    /// The shape: `(nz, ny, nx)` of a volume, `(angles, rows, cols)` of
    /// projections.
    pub fn dim(&self) -> (usize, usize, usize) {
        self.dim
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.dim.0 * self.dim.1 * self.dim.2
    }

    /// Whether the array has no element (never for one made here).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }
}

struct Fns {
    forward: Function,
    forward_sq: Function,
    back: Function,
    back_merged: Function,
    residual: Function,
    sqsum: Function,
    scale: Function,
    fill: Function,
    update: Function,
    weight_pack: Function,
    forward_tex: Function,
}

/// The back projection of [`CudaConeJoseph`] and [`cone_sirt_cuda_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConeBackProjector {
    /// Joseph's exact transpose (`cj_back_merged` / `cj_back`, atomics):
    /// the matched pair, tomors-core's
    /// [`ConeJosephProjector`].
    #[default]
    Joseph,
    /// The voxel-driven back projection of tomors-core's
    /// [`ConeVoxelProjector`](tomors_core::iterative::ConeVoxelProjector)
    /// (FDK's back projector with per-pixel weights and its scale;
    /// textures): the fast unmatched pair, as ASTRA's SIRT3D_CUDA.
    Voxel,
}

/// The device state of the voxel-driven back projection: its own module
/// (angles and texture handles in constant memory), the stacked texture
/// layout of all angles and the per-pixel weights. Fields drop in order:
/// the textures before their buffer.
struct VoxelBack {
    /// The volume as a 3D texture for the texture forward projection
    /// (`None`: Joseph's loads).
    vol_tex: Option<(Texture, Array3d)>,
    textures: Vec<Texture>,
    module: ConeModule,
    layout: StackLayout,
    tex: DeviceBuffer,
    weights: DeviceBuffer,
    geometry: ConeGeometry,
}

/// `√(SDD² + u² + v²)·h³·SDD/(pu·pv·SOD²)` of every detector pixel
/// (`[row][col]`): the voxel back projection's per-pixel weight and scale
/// (tomors-core's `ConeVoxelProjector` f32 path, folded together).
fn voxel_weights(geometry: &ConeGeometry, volume: &ConeVolume) -> Vec<f32> {
    let g = geometry;
    let (nc, nr) = (g.n_cols(), g.n_rows());
    let (pu, pv, sdd, sod) = (g.pixel_u(), g.pixel_v(), g.sdd(), g.sod());
    let h = volume.voxel_size as f64;
    let k = h * h * h * sdd / (pu * pv) / (sod * sod);
    (0..nr * nc)
        .map(|i| {
            let u = ((i % nc) as f64 - g.center_col()) * pu;
            let w = ((i / nc) as f64 - g.center_row()) * pv;
            ((sdd * sdd + u * u + w * w).sqrt() * k) as f32
        })
        .collect()
}

/// Bytes of the voxel pair's state beyond the SIRT state: the stacked
/// textures (about one set of projections), the weights and the volume's
/// 3D texture copy.
fn voxel_bytes(geometry: &ConeGeometry, volume: &ConeVolume) -> usize {
    let (na, nr, nc) = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    na * (nr + 1) * (nc * 4).div_ceil(512) * 512 + nr * nc * 4 + volume.len() * 4
}

/// Whether the voxel pair projects forward through a 3D texture of the
/// volume (`cj_forward_tex`; the default) rather than with Joseph's loads
/// (`TOMORS_CONE_FORWARD=loads`).
fn texture_forward_default() -> bool {
    std::env::var("TOMORS_CONE_FORWARD").map_or(true, |v| v != "loads")
}

impl VoxelBack {
    fn new(
        ctx: &Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        stream: &Stream,
    ) -> Result<Self> {
        let (na, nr, nc) = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
        if na > CONE_MAX_ANGLES {
            return Err(CudaError::Parameter(format!(
                "{na} projections: the GPU voxel back projection handles at most \
                 {CONE_MAX_ANGLES}"
            )));
        }
        check_extents(nr, nc, volume)?;
        let module = ConeModule::load(ctx)?;
        let layout = StackLayout::new(ctx, nr, nc)?;
        let tex = DeviceBuffer::new(ctx, layout.bytes(na), "voxel back projection textures")?;
        tex.fill_bytes(0, stream)?;
        module.set_angles(geometry.angles(), stream)?;
        let textures = layout.bind(ctx, &module, tex.ptr(), na, stream)?;
        let w = voxel_weights(geometry, volume);
        let weights = DeviceBuffer::new(ctx, w.len() * 4, "voxel back projection weights")?;
        weights.upload(&w)?;
        let vol_tex = if texture_forward_default() {
            let arr = Array3d::new(ctx, volume.nx, volume.ny, volume.nz)?;
            let t = Texture::array3d(ctx, &arr, TexFilter::Linear)?;
            Some((t, arr))
        } else {
            None
        };
        stream.synchronize()?;
        Ok(Self {
            vol_tex,
            textures,
            module,
            layout,
            tex,
            weights,
            geometry: geometry.clone(),
        })
    }
}

/// Joseph's cone-beam projector on one GPU for a circular cone-beam
/// geometry and a volume: forward and exact back projection of
/// device-resident arrays ([`ConeDeviceArray`]) and host convenience
/// methods ([`CudaConeJoseph::forward`], [`CudaConeJoseph::back`]). Its
/// kernels run in order on its own stream.
pub struct CudaConeJoseph {
    ctx: Arc<Context>,
    stream: Stream,
    _module: Module,
    f: Fns,
    volume: ConeVolume,
    na: usize,
    nr: usize,
    nc: usize,
    frames: DeviceBuffer,
    partial: DeviceBuffer,
    pins: Mutex<Vec<PinnedBuffer>>,
    block: (u32, u32, u32),
    merged: bool,
    voxel: Option<VoxelBack>,
}

/// Detector columns of the warp tile of the merged back projection:
/// `TOMORS_CONE_WARP_COLS` (4, 8, 16 or 32; for benchmarks), else 8 (tiles
/// of 8 × 4 rays).
fn warp_cols() -> usize {
    std::env::var("TOMORS_CONE_WARP_COLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| [4, 8, 16, 32].contains(v))
        .unwrap_or(8)
}

/// Checks that the sizes fit the kernels' 32-bit indices and grid limits.
fn check_sizes(geometry: &ConeGeometry, volume: &ConeVolume) -> Result<()> {
    let rows_per_block = block_shape().1.min(8) as usize;
    let lim = i32::MAX as usize;
    let nvox = volume.nx as u128 * volume.ny as u128 * volume.nz as u128;
    if nvox > lim as u128 {
        return Err(CudaError::Parameter(format!(
            "a {}×{}×{} volume has more than {lim} voxels, too many for the GPU cone projector",
            volume.nx, volume.ny, volume.nz
        )));
    }
    if geometry.n_angles() > 65_535 {
        return Err(CudaError::Parameter(format!(
            "{} projections: the GPU cone projector handles at most 65535",
            geometry.n_angles()
        )));
    }
    if geometry.n_rows() > 65_535 * rows_per_block {
        return Err(CudaError::Parameter(format!(
            "{} detector rows: the GPU cone projector handles at most {}",
            geometry.n_rows(),
            65_535 * rows_per_block
        )));
    }
    Ok(())
}

impl CudaConeJoseph {
    /// The projector for `geometry` on `volume`, on `backend`'s device.
    ///
    /// Errors: the source orbit passes through the volume (as the CPU
    /// projector), sizes beyond the kernels' limits, compilation and driver
    /// errors.
    pub fn new(
        backend: &CudaBackend,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
    ) -> Result<Self> {
        Self::with_back(backend, geometry, volume, ConeBackProjector::Joseph)
    }

    /// The projector for `geometry` on `volume` with the back projection
    /// `back`, on `backend`'s device.
    ///
    /// Errors: as [`CudaConeJoseph::new`]; for
    /// [`ConeBackProjector::Voxel`] also more than [`CONE_MAX_ANGLES`]
    /// angles or a detector beyond the device's texture limits.
    pub fn with_back(
        backend: &CudaBackend,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        back: ConeBackProjector,
    ) -> Result<Self> {
        let ctx = backend.lock()?.ctx.clone();
        Self::on_context_with(ctx, geometry, volume, back)
    }

    /// The projector on an existing device context.
    ///
    /// Errors: as [`CudaConeJoseph::new`].
    pub fn on_context(
        ctx: Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
    ) -> Result<Self> {
        Self::on_context_with(ctx, geometry, volume, ConeBackProjector::Joseph)
    }

    /// The projector with the back projection `back` on an existing device
    /// context.
    ///
    /// Errors: as [`CudaConeJoseph::with_back`].
    pub fn on_context_with(
        ctx: Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        back: ConeBackProjector,
    ) -> Result<Self> {
        // The CPU operator's checks (source outside the volume), with its
        // error text.
        ConeJosephProjector::new(geometry, volume)?;
        check_sizes(geometry, volume)?;
        ctx.bind()?;
        let defines = vec![("WC".to_string(), warp_cols().to_string())];
        let (cubin, _) = cubin_cached(
            "cone_joseph",
            CONE_JOSEPH_CU,
            &defines,
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(&ctx, &cubin)?;
        let f = Fns {
            forward: module.function("cj_forward")?,
            forward_sq: module.function("cj_forward_sq")?,
            back: module.function("cj_back")?,
            back_merged: module.function("cj_back_merged")?,
            residual: module.function("cj_residual")?,
            sqsum: module.function("cj_sqsum")?,
            scale: module.function("cj_scale")?,
            fill: module.function("cj_fill")?,
            update: module.function("cj_update")?,
            weight_pack: module.function("cj_weight_pack")?,
            forward_tex: module.function("cj_forward_tex")?,
        };
        let stream = Stream::new(&ctx)?;
        let voxel = match back {
            ConeBackProjector::Joseph => None,
            ConeBackProjector::Voxel => Some(VoxelBack::new(&ctx, geometry, volume, &stream)?),
        };
        let fr = ray_frames(geometry, volume);
        let frames_buf = DeviceBuffer::new(&ctx, std::mem::size_of_val(&fr[..]), "cone frames")?;
        let partial = DeviceBuffer::new(&ctx, RED_BLOCKS * 8, "partial sums")?;
        let me = Self {
            ctx,
            stream,
            _module: module,
            f,
            volume: *volume,
            na: geometry.n_angles(),
            nr: geometry.n_rows(),
            nc: geometry.n_cols(),
            frames: frames_buf,
            partial,
            pins: Mutex::new(Vec::new()),
            block: block_shape(),
            merged: std::env::var("TOMORS_CONE_BACK").map_or(true, |v| v != "plain"),
            voxel,
        };
        me.put(&me.frames, &fr)?;
        Ok(me)
    }

    /// Chooses the back-projection kernel: `true` (the default; `false`
    /// when `TOMORS_CONE_BACK=plain`) merges the equal voxels of
    /// neighbouring rays within a warp before the `atomicAdd` (fewer
    /// atomics), `false` scatters every (voxel, weight) pair on its own.
    /// Both give the same sums up to the order of the additions.
    pub fn set_merged_back(&mut self, merged: bool) {
        self.merged = merged;
    }

    /// Whether the forward projection reads the volume through a 3D
    /// texture (`cj_forward_tex`, hardware trilinear interpolation with
    /// 8-bit weights at Joseph's sample points): the voxel pair's default
    /// (`TOMORS_CONE_FORWARD=loads` at construction turns it off); never
    /// with the Joseph pair.
    pub fn texture_forward(&self) -> bool {
        self.voxel.as_ref().is_some_and(|v| v.vol_tex.is_some())
    }

    /// Turns the voxel pair's texture forward projection on or off
    /// ([`CudaConeJoseph::texture_forward`]; allocates or frees the
    /// volume's 3D array).
    ///
    /// Errors: the Joseph pair (`on`), driver errors.
    pub fn set_texture_forward(&mut self, on: bool) -> Result<()> {
        let Some(vb) = self.voxel.as_mut() else {
            if on {
                return Err(CudaError::Parameter(
                    "the texture forward projection belongs to the voxel pair".into(),
                ));
            }
            return Ok(());
        };
        if on && vb.vol_tex.is_none() {
            let v = &self.volume;
            let arr = Array3d::new(&self.ctx, v.nx, v.ny, v.nz)?;
            let t = Texture::array3d(&self.ctx, &arr, TexFilter::Linear)?;
            vb.vol_tex = Some((t, arr));
        } else if !on {
            self.stream.synchronize()?;
            vb.vol_tex = None;
        }
        Ok(())
    }

    /// The back projection ([`ConeBackProjector`]).
    pub fn back_projector(&self) -> ConeBackProjector {
        if self.voxel.is_some() {
            ConeBackProjector::Voxel
        } else {
            ConeBackProjector::Joseph
        }
    }

    /// Whether the back projection merges neighbouring rays' voxels
    /// ([`CudaConeJoseph::set_merged_back`]).
    pub fn merged_back(&self) -> bool {
        self.merged
    }

    /// The device context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The stream every kernel of this projector runs on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `(nz, ny, nx)` of the volume.
    pub fn volume_dim(&self) -> (usize, usize, usize) {
        (self.volume.nz, self.volume.ny, self.volume.nx)
    }

    /// `(angles, rows, cols)` of the projections.
    pub fn projections_dim(&self) -> (usize, usize, usize) {
        (self.na, self.nr, self.nc)
    }

    /// Copies `data` to the start of `buf` on the stream and waits.
    fn put<T: Copy>(&self, buf: &DeviceBuffer, data: &[T]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.upload_async(
                0,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
                &self.stream,
            )?;
        }
        self.stream.synchronize()
    }

    fn alloc(&self, dim: (usize, usize, usize), what: &str) -> Result<ConeDeviceArray> {
        Ok(ConeDeviceArray {
            buf: DeviceBuffer::new(&self.ctx, dim.0 * dim.1 * dim.2 * 4, what)?,
            dim,
        })
    }

    /// A device volume `[z][y][x]` (contents undefined).
    pub fn alloc_volume(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.volume_dim(), "a device volume")
    }

    /// Device projections `[angle][row][col]` (contents undefined).
    pub fn alloc_projections(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.projections_dim(), "device projections")
    }

    fn upload(&self, host: ArrayView3<'_, f32>, dst: &ConeDeviceArray) -> Result<()> {
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        upload_staged(&self.ctx, &self.stream, &self.pins, &dst.buf, data)
    }

    /// Uploads a host volume `[z][y][x]` into a new device volume.
    ///
    /// Errors: a shape other than the projector's volume, driver errors.
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("volume", host.dim(), self.volume_dim())?;
        let v = self.alloc_volume()?;
        self.upload(host, &v)?;
        Ok(v)
    }

    /// Uploads host projections `[angle][row][col]` into new device
    /// projections.
    ///
    /// Errors: a shape other than the geometry's, driver errors.
    pub fn upload_projections(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("projections", host.dim(), self.projections_dim())?;
        let p = self.alloc_projections()?;
        self.upload(host, &p)?;
        Ok(p)
    }

    /// Downloads a device array (after the stream's work) into a host array
    /// of its shape.
    pub fn download(&self, dev: &ConeDeviceArray) -> Result<Array3<f32>> {
        let mut out = Array3::<f32>::zeros(dev.dim);
        download_staged(
            &self.ctx,
            &self.stream,
            &self.pins,
            &dev.buf,
            out.as_slice_mut().expect("standard layout"),
        )?;
        Ok(out)
    }

    fn launch(
        &self,
        f: Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: every caller passes parameters matching the kernel's
        // signature in `kernels/cone_joseph.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { launch(f, name, grid, block, 0, &self.stream, params) }
    }

    fn elementwise_grid(n: usize) -> (u32, u32, u32) {
        ((n.div_ceil(256)).clamp(1, 8192) as u32, 1, 1)
    }

    fn check_volume(&self, v: &ConeDeviceArray, what: &str) -> Result<()> {
        check_dim(what, v.dim, self.volume_dim())
    }

    fn check_projections(&self, p: &ConeDeviceArray, what: &str) -> Result<()> {
        check_dim(what, p.dim, self.projections_dim())
    }

    /// Launches a projector kernel (one thread per ray) on `src` → `dst`.
    fn project(&self, f: Function, name: &str, src: u64, dst: u64) -> Result<()> {
        // The merged back projection has its own layout: 256 threads
        // covering 32 × 8 pixels.
        let (block, tile) = if name == "cj_back_merged" {
            ((256, 1, 1), (32, 8))
        } else {
            (self.block, (self.block.0, self.block.1))
        };
        let (mut s, mut d) = (src, dst);
        let mut fp = self.frames.ptr();
        let (mut nx, mut ny, mut nz) = (
            self.volume.nx as i32,
            self.volume.ny as i32,
            self.volume.nz as i32,
        );
        let mut h = self.volume.voxel_size as f64;
        let (mut nr, mut nc) = (self.nr as i32, self.nc as i32);
        self.launch(
            f,
            name,
            (
                self.nc.div_ceil(tile.0 as usize) as u32,
                self.nr.div_ceil(tile.1 as usize) as u32,
                self.na as u32,
            ),
            block,
            &mut [
                &mut s as *mut _ as _,
                &mut d as *mut _ as _,
                &mut fp as *mut _ as _,
                &mut nx as *mut _ as _,
                &mut ny as *mut _ as _,
                &mut nz as *mut _ as _,
                &mut h as *mut _ as _,
                &mut nr as *mut _ as _,
                &mut nc as *mut _ as _,
            ],
        )
    }

    /// Forward projection `out = A·vol` of a device volume into device
    /// projections (overwritten), queued on the stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn forward_dev(&self, vol: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_projections(out, "the output projections")?;
        if let Some((t, arr)) = self.voxel.as_ref().and_then(|v| v.vol_tex.as_ref()) {
            self.ctx.bind()?;
            arr.copy_from_device(vol.buf.ptr(), &self.stream)?;
            return self.project(self.f.forward_tex, "cj_forward_tex", t.raw, out.buf.ptr());
        }
        self.project(self.f.forward, "cj_forward", vol.buf.ptr(), out.buf.ptr())
    }

    /// Back projection `out = Aᵀ·proj` (the exact transpose; with
    /// [`ConeBackProjector::Voxel`] the voxel-driven `B ≈ Aᵀ`) of device
    /// projections into a device volume (overwritten), queued on the
    /// stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn back_dev(&self, proj: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.back_impl(proj, out)
    }

    fn back_impl(&self, proj: &ConeDeviceArray, out: &ConeDeviceArray) -> Result<()> {
        self.check_projections(proj, "the projections")?;
        self.check_volume(out, "the output volume")?;
        self.ctx.bind()?;
        if let Some(vb) = &self.voxel {
            return self.voxel_back(vb, proj, out);
        }
        out.buf.fill_bytes(0, &self.stream)?;
        let (f, name) = if self.merged {
            (self.f.back_merged, "cj_back_merged")
        } else {
            (self.f.back, "cj_back")
        };
        self.project(f, name, proj.buf.ptr(), out.buf.ptr())
    }

    /// The voxel-driven back projection: weight and pack, then one launch
    /// of `cone_bp_tex` over every angle and the whole volume.
    fn voxel_back(
        &self,
        vb: &VoxelBack,
        proj: &ConeDeviceArray,
        out: &ConeDeviceArray,
    ) -> Result<()> {
        let (mut src, mut w, mut dst) = (proj.buf.ptr(), vb.weights.ptr(), vb.tex.ptr());
        let (mut nr, mut nc) = (self.nr as i32, self.nc as i32);
        let mut pitch = (vb.layout.pitch_bytes / 4) as i32;
        let mut tpg = vb.layout.tpg as i32;
        let mut gf = (vb.layout.gbytes / 4) as i64;
        let mut n = proj.len() as i64;
        self.launch(
            self.f.weight_pack,
            "cj_weight_pack",
            Self::elementwise_grid(proj.len()),
            (256, 1, 1),
            &mut [
                &mut src as *mut _ as _,
                &mut w as *mut _ as _,
                &mut dst as *mut _ as _,
                &mut nr as *mut _ as _,
                &mut nc as *mut _ as _,
                &mut pitch as *mut _ as _,
                &mut tpg as *mut _ as _,
                &mut gf as *mut _ as _,
                &mut n as *mut _ as _,
            ],
        )?;
        debug_assert_eq!(vb.textures.len(), self.na.div_ceil(vb.layout.tpg));
        vb.module.backproject(
            &self.stream,
            BpSource::Textures(vb.layout.tpg),
            out.buf.ptr(),
            &vb.geometry,
            &self.volume,
            0,
            self.volume.nz,
            self.na,
            false,
        )
    }

    /// Forward projection of a host volume `[z][y][x]` into host projections
    /// `[angle][row][col]`.
    ///
    /// Errors: a volume of another shape, driver and launch errors.
    pub fn forward(&self, volume: ArrayView3<'_, f32>) -> Result<Array3<f32>> {
        let v = self.upload_volume(volume)?;
        let mut p = self.alloc_projections()?;
        self.forward_dev(&v, &mut p)?;
        self.download(&p)
    }

    /// Back projection (exact transpose, or the voxel-driven one: see
    /// [`CudaConeJoseph::back_dev`]) of host projections
    /// `[angle][row][col]` into a host volume `[z][y][x]`.
    ///
    /// Errors: projections of another shape, driver and launch errors.
    pub fn back(&self, projections: ArrayView3<'_, f32>) -> Result<Array3<f32>> {
        let p = self.upload_projections(projections)?;
        let mut v = self.alloc_volume()?;
        self.back_dev(&p, &mut v)?;
        self.download(&v)
    }

    fn fill(&self, a: &ConeDeviceArray, value: f32) -> Result<()> {
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
    fn scale(&self, y: &ConeDeviceArray, w: Option<&DeviceBuffer>, c: f32) -> Result<()> {
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
    fn partial_sum(&self) -> Result<f64> {
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
    fn sq_norm(&self, y: &ConeDeviceArray) -> Result<f64> {
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
    fn residual(
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
    fn update(
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

    fn upload_weights(&self, mut w: Array3<f32>, what: &str) -> Result<DeviceBuffer> {
        let data = w.as_slice_mut().expect("standard layout");
        invert(data);
        let buf = DeviceBuffer::new(&self.ctx, data.len() * 4, what)?;
        self.put(&buf, data)?;
        Ok(buf)
    }

    /// `M` and `T` of `weighting` on the device (`None` = identity).
    fn weights(
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

    fn power_iteration(
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

fn check_dim(
    what: &str,
    got: (usize, usize, usize),
    expected: (usize, usize, usize),
) -> Result<()> {
    if got != expected {
        return Err(CoreError::Shape(format!(
            "{what} is {}×{}×{}, expected {}×{}×{}",
            got.0, got.1, got.2, expected.0, expected.1, expected.2
        ))
        .into());
    }
    Ok(())
}

/// Bytes of device memory [`cone_sirt_cuda`] holds for `geometry` and
/// `volume`: three volumes (iterate, gradient, column weights) and three
/// sets of projections (data, residual, row weights).
pub fn cone_sirt_bytes(geometry: &ConeGeometry, volume: &ConeVolume) -> usize {
    let nvox = volume.len();
    let nproj = geometry.n_angles() * geometry.n_rows() * geometry.n_cols();
    4 * 3 * (nvox + nproj)
}

/// Bytes of device memory [`cone_sirt_cuda_with`] holds with the back
/// projection `back`: [`cone_sirt_bytes`], and for
/// [`ConeBackProjector::Voxel`] the stacked projection textures (about one
/// more set of projections) and the per-pixel weights.
pub fn cone_sirt_bytes_with(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    back: ConeBackProjector,
) -> usize {
    cone_sirt_bytes(geometry, volume)
        + match back {
            ConeBackProjector::Joseph => 0,
            ConeBackProjector::Voxel => voxel_bytes(geometry, volume),
        }
}

/// Checks that the state of [`cone_sirt_cuda`] ([`cone_sirt_bytes`]) fits
/// in the free memory of `backend`'s device, with 256 MiB to spare.
///
/// Errors: [`CudaError::OutOfMemory`] naming the sizes, driver errors.
pub fn cone_sirt_fits(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
) -> Result<()> {
    let ctx = backend.lock()?.ctx.clone();
    fits_on(&ctx, geometry, volume)
}

/// Checks the free memory for the SIRT state (the projector's own state,
/// such as the voxel back projection's textures, is already allocated).
fn fits_on(ctx: &Arc<Context>, geometry: &ConeGeometry, volume: &ConeVolume) -> Result<()> {
    let need = cone_sirt_bytes(geometry, volume);
    let (free, _) = ctx.mem_info()?;
    if need + SPARE_BYTES > free {
        return Err(CudaError::OutOfMemory {
            what: format!(
                "holding the cone SIRT state of a {}×{}×{} volume and {}×{}×{} projections \
                 ({} MiB free on the device)",
                volume.nz,
                volume.ny,
                volume.nx,
                geometry.n_angles(),
                geometry.n_rows(),
                geometry.n_cols(),
                free >> 20
            ),
            bytes: need,
        });
    }
    Ok(())
}

/// Checks the inputs of [`cone_sirt_cuda`] (no GPU needed): the algorithm
/// is SIRT, at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box, projections that
/// fit the geometry, an initial volume that fits the volume, finite data,
/// sizes within the kernels' limits. Returns the weighting.
pub fn check_cone_sirt_inputs(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: &ArrayView3<'_, f32>,
    initial: Option<&ArrayView3<'_, f32>>,
    options: &IterativeOptions,
) -> Result<Weighting> {
    let weighting = check_options(options)?;
    check_dim(
        "the projections",
        projections.dim(),
        (geometry.n_angles(), geometry.n_rows(), geometry.n_cols()),
    )?;
    if let Some(x0) = initial {
        check_dim(
            "the initial volume",
            x0.dim(),
            (volume.nz, volume.ny, volume.nx),
        )?;
    }
    check_sizes(geometry, volume)?;
    find_non_finite(projections, "the projection data")?;
    if let Some(x0) = initial {
        find_non_finite(x0, "the initial volume")?;
    }
    Ok(weighting)
}

/// Cone-beam SIRT (`options.algorithm` must be
/// [`Algorithm::Sirt`](tomors_core::iterative::Algorithm::Sirt)) of
/// `projections` (`[angle][row][col]`) with Joseph's projector, the whole
/// iteration resident on `backend`'s device: the projections are uploaded
/// once, the volume is iterated `options.iterations` times (or until the
/// relative residual `‖b − A·x‖/‖b‖` reaches `options.tolerance`, or
/// `progress` returns `false`) and downloaded once. `initial` is the
/// starting volume `[z][y][x]` (zeros if `None`; the constraint is applied
/// to it). The result's `x` is the `[z][y][x]` volume.
///
/// The result matches tomors-core's
/// [`reconstruct_cone`](tomors_core::iterative::reconstruct_cone) with the
/// [`ConeJosephProjector`] in f32 up to rounding; the relaxation defaults to
/// 1 for row/column sums and to `1/ρ(T·Aᵀ·M·A)` (power iteration)
/// otherwise. `progress` sees every iteration (`slab` is always `(0, 1)`).
///
/// Errors: those of [`check_cone_sirt_inputs`], the source orbit through
/// the volume, device memory too small for the state
/// ([`cone_sirt_bytes`]), driver, compilation and launch errors,
/// divergence.
pub fn cone_sirt_cuda(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    cone_sirt_cuda_with(
        backend,
        geometry,
        volume,
        projections,
        initial,
        options,
        ConeBackProjector::Joseph,
        progress,
    )
}

/// [`cone_sirt_cuda`] with the back projection `back`:
/// [`ConeBackProjector::Joseph`] (the matched pair, as
/// [`cone_sirt_cuda`]) or [`ConeBackProjector::Voxel`] (the unmatched
/// pair of tomors-core's
/// [`ConeVoxelProjector`](tomors_core::iterative::ConeVoxelProjector),
/// whose f32 [`reconstruct_cone`](tomors_core::iterative::reconstruct_cone)
/// it matches to the texture interpolation's rounding; the column sums of
/// row/column-sum SIRT are `B·1`). Device memory:
/// [`cone_sirt_bytes_with`].
///
/// Errors: those of [`cone_sirt_cuda`] and of
/// [`CudaConeJoseph::with_back`].
#[allow(clippy::too_many_arguments)]
pub fn cone_sirt_cuda_with(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    back: ConeBackProjector,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let weighting =
        check_cone_sirt_inputs(geometry, volume, &projections, initial.as_ref(), options)?;
    let t0 = Instant::now();
    let op = CudaConeJoseph::with_back(backend, geometry, volume, back)?;
    fits_on(&op.ctx, geometry, volume)?;
    let mut stats = SirtStats {
        slabs: 1,
        ..SirtStats::default()
    };
    let (m, t) = op.weights(weighting)?;
    let lambda = match options.relaxation {
        Some(l) => l,
        None if weighting == Weighting::RowColumnSums => 1.0,
        None => {
            let rho = op.power_iteration(m.as_ref(), t.as_ref(), POWER_ITERATIONS)?;
            if rho <= 0.0 {
                return Err(CoreError::Data(
                    "the projector is zero on this volume (no ray meets it)".into(),
                )
                .into());
            }
            1.0 / rho
        }
    };
    let b_sq: f64 = {
        use rayon::prelude::*;
        projections
            .outer_iter()
            .into_par_iter()
            .map(|s| s.iter().map(|&v| v as f64 * v as f64).sum::<f64>())
            .sum()
    };
    let b_norm = b_sq.sqrt();
    let rel = |r2: f64| {
        if b_norm > 0.0 {
            r2.sqrt() / b_norm
        } else {
            r2.sqrt()
        }
    };
    let b = op.upload_projections(projections)?;
    let mut r = op.alloc_projections()?;
    let x = match initial {
        Some(x0) => {
            let c = options.constraint;
            op.upload_volume(x0.mapv(|v| clamp(&c, v)).view())?
        }
        None => {
            let x = op.alloc_volume()?;
            op.fill(&x, clamp(&options.constraint, 0.0))?;
            x
        }
    };
    let g = op.alloc_volume()?;
    op.stream.synchronize()?;
    stats.setup_s = t0.elapsed().as_secs_f64();

    let ev: Vec<Event> = (0..5).map(|_| Event::new(&op.ctx)).collect::<Result<_>>()?;
    let t_loop = Instant::now();
    // r = A x, then r = M (b − A x).
    ev[0].record(&op.stream)?;
    op.forward_dev(&x, &mut r)?;
    ev[1].record(&op.stream)?;
    op.residual(&b, &r, m.as_ref())?;
    ev[1].synchronize()?;
    stats.forward_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
    stats.forward_count += 1;
    let lf = lambda as f32;
    let mut residuals = Vec::with_capacity(options.iterations);
    let mut stop = StopReason::Iterations;
    for it in 1..=options.iterations {
        ev[0].record(&op.stream)?;
        op.back_impl(&r, &g)?;
        ev[1].record(&op.stream)?;
        op.update(&x, &g, t.as_ref(), lf, &options.constraint)?;
        ev[2].record(&op.stream)?;
        op.forward_dev(&x, &mut r)?;
        ev[3].record(&op.stream)?;
        op.residual(&b, &r, m.as_ref())?;
        ev[4].record(&op.stream)?;
        let r2 = op.partial_sum()?;
        stats.back_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
        stats.elementwise_s +=
            (ev[1].elapsed_ms(&ev[2])? + ev[3].elapsed_ms(&ev[4])?) as f64 * 1e-3;
        stats.forward_s += ev[2].elapsed_ms(&ev[3])? as f64 * 1e-3;
        stats.forward_count += 1;
        stats.iterations += 1;
        let res = rel(r2);
        if !res.is_finite() {
            return Err(CoreError::Data(format!(
                "the iteration diverged at iteration {it} (relaxation too large?)"
            ))
            .into());
        }
        residuals.push(res);
        let info = GpuIteration {
            slab: (0, 1),
            iteration: it,
            residual: res,
        };
        if !progress(&info) {
            stop = StopReason::Callback;
            break;
        }
        if let Some(tol) = options.tolerance {
            if res <= tol {
                stop = StopReason::Tolerance;
                break;
            }
        }
    }
    stats.loop_s = t_loop.elapsed().as_secs_f64();
    let t_down = Instant::now();
    let xh = op.download(&x)?;
    stats.download_s = t_down.elapsed().as_secs_f64();
    let t_free = Instant::now();
    drop((b, r, x, g, ev, m, t, op));
    stats.free_s = t_free.elapsed().as_secs_f64();
    stats.total_s = t0.elapsed().as_secs_f64();
    Ok((
        IterativeResult {
            x: xh,
            iterations: residuals.len(),
            residuals,
            relaxation: lambda,
            stop,
        },
        stats,
    ))
}
