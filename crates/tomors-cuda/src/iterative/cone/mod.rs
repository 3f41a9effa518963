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
//! - As a tomors-core [`LinearOperator`](tomors_core::linalg::LinearOperator)
//!   ([`CudaConeJoseph::operator`], [`ConeOp`]): domain and range are flat
//!   [`DeviceVec`]s; a block of projections runs the same kernels on the
//!   block's own ray frames (uploaded once per block, then cached). SIRT
//!   ([`cone_sirt_cuda`]) is tomors-core's
//!   [`solve`](tomors_core::iterative::solve) on it: the projections are
//!   uploaded once and the volume downloaded once; the whole volume and
//!   all projections live on one device (no slabs).
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
//!   weights); [`CudaConeJoseph::set_texture_forward`]`(false)` selects
//!   Joseph's exact loads.

use std::sync::Arc;

use ndarray::{Array3, ArrayView3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{ray_frames, ConeJosephProjector, RayFrame};
use tomors_core::CoreError;

use crate::cone::fold::{FoldLayout, FoldModule, FoldScale, FoldVariant};
use crate::cone::{check_extents, BpSource, ConeModule, FoldShape, StackLayout, CONE_MAX_ANGLES};
use crate::error::{CudaError, Result};
use crate::fbp::CudaBackend;
use crate::iterative::blocks::BlockCache;
use crate::iterative::device::{DeviceVec, KernelKind, Layout, OnQueue, Queue};
use crate::runtime::compile::cubin_cached;
use crate::runtime::{
    Arg, Array3d, Context, DeviceBuffer, Function, Module, Stream, TexFilter, TexFormat, Texture,
};

mod art;
mod det;
mod half;
mod operator;
mod ops;
mod sirt;
mod slab;

pub use art::{cone_art_stride, CONE_ART_CU};
pub use det::CONE_DET_CU;
pub use half::CONE_SIRT_HALF_CU;
pub use operator::ConeOp;

use crate::iterative::check_dim;

pub use sirt::{
    check_cone_sirt_inputs, cone_sirt_bytes, cone_sirt_bytes_with, cone_sirt_cuda,
    cone_sirt_cuda_opts, cone_sirt_cuda_with, cone_sirt_fits, ConeGpuOptions,
};

/// Source of the cone-beam Joseph projector and SIRT kernels.
pub const CONE_JOSEPH_CU: &str = include_str!("../../../kernels/cone_joseph.cu");

/// Device memory kept free beside the SIRT state.
const SPARE_BYTES: usize = 256 << 20;

/// Threads per block of the projectors: 32 columns × 8 rows.
const BLOCK: (u32, u32, u32) = (32, 8, 1);

/// A flat `f32` array on the device: a `[z][y][x]` volume or
/// `[angle][row][col]` projections of a [`CudaConeJoseph`]
/// ([`Layout::Flat`]).
pub type ConeDeviceArray = DeviceVec;

/// The device tables of one block of projections: the ray frames of its
/// projections in block order and their indices (for selecting rows).
pub(crate) struct ConeBlock {
    frames: DeviceBuffer,
    idx: DeviceBuffer,
    len: usize,
}

impl ConeBlock {
    fn new(queue: &Queue, angles: &[usize], frames: &[RayFrame]) -> Result<Self> {
        let fr: Vec<RayFrame> = angles.iter().map(|&a| frames[a]).collect();
        let idx: Vec<i32> = angles.iter().map(|&a| a as i32).collect();
        Ok(Self {
            frames: queue.upload_small(&fr, "cone frames")?,
            idx: queue.upload_small(&idx, "projection indices")?,
            len: angles.len(),
        })
    }
}

struct Fns {
    forward: Function,
    forward_sq: Function,
    /// Row sums `A·1` by arithmetic (`cj_forward_ones`).
    forward_ones: Function,
    back: Function,
    back_merged: Function,
    weight_pack: Function,
    forward_tex: Function,
    /// The folded kernels of a mirror-symmetric geometry
    /// ([`CudaConeJoseph::set_fold`]).
    forward_fold: Function,
    forward_ones_fold: Function,
    fold_volume: Function,
    weight_pack_fold: Function,
    /// The sum of a volume's four quarter turns (`cj_rot4_sum`).
    rot4_sum: Function,
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

/// The volume as a texture for the voxel pair's forward projection.
/// Fields drop in order: the texture before its array.
enum VolTex {
    /// A 3D `float` texture of the volume (`cj_forward_tex`).
    Plain(Texture, Array3d),
    /// The volume folded about its middle plane (`cj_fold_volume`) in a 3D
    /// `float2` texture (`cj_forward_fold`), and the buffer it is folded
    /// into before the copy into the array.
    Folded(Texture, Array3d, DeviceBuffer),
}

impl VolTex {
    /// The texture of `volume` (`[z][y][x]`), folded or not.
    fn new(ctx: &Arc<Context>, volume: &ConeVolume, folded: bool) -> Result<Self> {
        if folded {
            let nf = volume.nz / 2 + 1;
            let arr = Array3d::with_format(ctx, volume.nx, volume.ny, nf, TexFormat::Float2)?;
            let t = Texture::array3d(ctx, &arr, TexFilter::Linear)?;
            let buf = DeviceBuffer::new(
                ctx,
                volume.nx * volume.ny * nf * 8,
                "the folded volume of the forward projection",
            )?;
            Ok(Self::Folded(t, arr, buf))
        } else {
            let arr = Array3d::new(ctx, volume.nx, volume.ny, volume.nz)?;
            let t = Texture::array3d(ctx, &arr, TexFilter::Linear)?;
            Ok(Self::Plain(t, arr))
        }
    }
}

/// The stacked texture layout of `cone_bp_tex` (unfolded). Fields drop in
/// order: the textures before their buffer.
struct Stacked {
    textures: Vec<Texture>,
    module: ConeModule,
    layout: StackLayout,
    tex: DeviceBuffer,
}

impl Stacked {
    fn new(ctx: &Arc<Context>, geometry: &ConeGeometry, stream: &Stream) -> Result<Self> {
        let (na, nr, nc) = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
        let module = ConeModule::load(ctx)?;
        let layout = StackLayout::new(ctx, nr, nc)?;
        let tex = DeviceBuffer::new(ctx, layout.bytes(na), "voxel back projection textures")?;
        tex.fill_bytes(0, stream)?;
        module.set_angles(geometry.angles(), stream)?;
        let textures = layout.bind(ctx, &module, tex.ptr(), na, stream)?;
        Ok(Self {
            textures,
            module,
            layout,
            tex,
        })
    }
}

/// The folded layout of `cone_bp_fold` (`kernels/cone_fold.cu`: one
/// `float2` fetch for a voxel and its mirror). Fields drop in order: the
/// textures before their buffer.
struct FoldBack {
    textures: Vec<Texture>,
    module: FoldModule,
    layout: FoldLayout,
    /// The half-texel packing (`__half2` layout), or `None` (`float2`).
    half: Option<half::HalfPack>,
    tex: DeviceBuffer,
}

impl FoldBack {
    /// The folded state for the whole `volume`, or `None` where the
    /// detector cannot be folded ([`FoldLayout::new`]).
    fn new(
        ctx: &Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        half: bool,
        stream: &Stream,
    ) -> Result<Option<Self>> {
        let na = geometry.n_angles();
        let Some(layout) = FoldLayout::new(ctx, geometry, na, half) else {
            return Ok(None);
        };
        // Half texels with FDK's register cap (4 blocks of 256 per SM).
        let min_blocks = if half { 4 } else { 0 };
        let module = FoldModule::load(
            ctx,
            FoldVariant {
                shape: FoldShape::default(),
                half,
                min_blocks,
            },
        )?;
        let half = if half {
            Some(half::HalfPack::new(ctx, na)?)
        } else {
            None
        };
        let tex = DeviceBuffer::new(
            ctx,
            layout.bytes(na),
            "folded voxel back projection textures",
        )?;
        tex.fill_bytes(0, stream)?;
        module.set_geometry(geometry, volume, stream)?;
        let textures = layout.textures(ctx, tex.ptr(), na)?;
        module.set_textures(&textures, stream)?;
        Ok(Some(Self {
            textures,
            module,
            layout,
            half,
            tex,
        }))
    }
}

/// The device state of the voxel-driven back projection: the stacked
/// (`cone_bp_tex`) or the folded (`cone_bp_fold`) texture layout of all
/// angles with its module (angles or constants and texture handles in
/// constant memory), and the per-pixel weights.
struct VoxelBack {
    /// The volume as a 3D texture for the texture forward projection
    /// (`None`: Joseph's loads).
    vol_tex: Option<VolTex>,
    /// The unfolded layout (`None` while folded).
    stack: Option<Stacked>,
    /// The folded layout ([`CudaConeJoseph::set_fold`]).
    fold: Option<FoldBack>,
    weights: DeviceBuffer,
    geometry: ConeGeometry,
    /// The whole volume and the first slice of the projector's slab (the
    /// back projection fills slices `z0..z0 + nz` of the whole volume).
    full: ConeVolume,
    z0: usize,
    /// The folded layout has `__half2` texels ([`CudaConeJoseph::set_half`]).
    half: bool,
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

/// Bytes of the voxel pair's state beyond the SIRT state: the stacked or
/// folded textures (about one set of projections), the weights and the
/// volume's 3D texture copy (folded: a `float2` array of half the slices
/// and the buffer it is folded into).
fn voxel_bytes(geometry: &ConeGeometry, volume: &ConeVolume) -> usize {
    let (na, nr, nc) = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    let stacked = na * (nr + 1) * (nc * 4).div_ceil(512) * 512;
    let folded = na * (nr / 2 + 3) * (nc * 8).div_ceil(512) * 512;
    let tex = volume.len() * 4;
    let tex_folded = 2 * volume.nx * volume.ny * (volume.nz / 2 + 1) * 8;
    stacked.max(folded) + nr * nc * 4 + tex.max(tex_folded)
}

/// `na / 4` when a quarter turn of the volume about its z axis (a square
/// `nx = ny` volume, so the turn maps its voxels onto each other) maps
/// projection `k` onto projection `k + na/4` (mod `na`) for every `k`, in
/// the same sense for all: the frames in voxel-index coordinates agree
/// after the turn, to 1e-5 relative (the f32 angles' rounding, ≤ 5e-7 rad,
/// moves a source by ≈ 1e-3 voxel at 512³).
fn quarter_turn(frames: &[RayFrame], volume: &ConeVolume) -> Option<usize> {
    let na = frames.len();
    if volume.nx != volume.ny || na < 4 || !na.is_multiple_of(4) {
        return None;
    }
    let s = na / 4;
    let m = volume.nx as f64 - 1.0;
    let amax = |v: &[f64; 3]| v.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
    // Index coordinates (X, Y): a turn is (m − Y, X) or (Y, m − X).
    let point = |p: &[f64; 3], sense: bool| {
        if sense {
            [m - p[1], p[0], p[2]]
        } else {
            [p[1], m - p[0], p[2]]
        }
    };
    let vector = |v: &[f64; 3], sense: bool| {
        if sense {
            [-v[1], v[0], v[2]]
        } else {
            [v[1], -v[0], v[2]]
        }
    };
    let close =
        |a: [f64; 3], b: &[f64; 3], tol: f64| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol);
    [true, false]
        .into_iter()
        .find(|&sense| {
            frames.iter().enumerate().all(|(k, f)| {
                let g = &frames[(k + s) % na];
                let tp = 1e-5 * (1.0 + amax(&f.src).max(amax(&f.base)));
                let tv = 1e-5 * (1.0 + amax(&f.eu).max(amax(&f.ev)));
                close(point(&f.src, sense), &g.src, tp)
                    && close(point(&f.base, sense), &g.base, tp)
                    && close(vector(&f.eu, sense), &g.eu, tv)
                    && close(vector(&f.ev, sense), &g.ev, tv)
            })
        })
        .map(|_| s)
}

/// Whether every projection of `frames` (voxel-index coordinates of a
/// volume of `nz` slices, detector of `nr` rows) is mirror-symmetric about
/// the volume's middle plane `z = (nz − 1)/2`: the source on it, the rows
/// level (no z along a row, no x or y along a column) and centred on it,
/// so that the ray of row `nr − 1 − r` is the mirror image of that of row
/// `r` (to the rounding of the set-up, relative 1e-9 allowed).
fn mirror_symmetric(frames: &[RayFrame], nz: usize, nr: usize) -> bool {
    let zc = (nz as f64 - 1.0) * 0.5;
    let m = (nr as f64 - 1.0) * 0.5;
    let tol = 1e-9;
    let amax = |v: &[f64; 3]| v.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
    frames.iter().all(|f| {
        let s = 1.0 + amax(&f.src).max(amax(&f.base)).max(zc);
        let (eu, ev) = (amax(&f.eu), amax(&f.ev));
        (f.src[2] - zc).abs() <= tol * s
            && f.eu[2].abs() <= tol * eu
            && f.ev[0].abs() <= tol * ev
            && f.ev[1].abs() <= tol * ev
            && (f.base[2] + m * f.ev[2] - zc).abs() <= tol * (s + ev * nr as f64)
    })
}

impl VoxelBack {
    /// The state for slab `volume` (slices `z0..` of `full`).
    /// The state for slab `volume` (slices `z0..` of `full`), folded
    /// (forward and back, where the detector allows) when `fold`.
    fn new(
        ctx: &Arc<Context>,
        geometry: &ConeGeometry,
        (full, z0): (&ConeVolume, usize),
        volume: &ConeVolume,
        fold: bool,
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
        let w = voxel_weights(geometry, volume);
        let weights = DeviceBuffer::new(ctx, w.len() * 4, "voxel back projection weights")?;
        weights.upload(&w)?;
        let mut vb = Self {
            vol_tex: Some(VolTex::new(ctx, volume, fold)?),
            stack: None,
            fold: None,
            weights,
            geometry: geometry.clone(),
            full: *full,
            z0,
            half: false,
        };
        vb.set_fold(ctx, fold, stream)?;
        stream.synchronize()?;
        Ok(vb)
    }

    /// Builds the folded back projection's state (`fold`, where the
    /// detector can be folded) or the stacked one, and frees the other.
    fn set_fold(&mut self, ctx: &Arc<Context>, fold: bool, stream: &Stream) -> Result<()> {
        if fold && self.fold.is_none() {
            self.fold = FoldBack::new(ctx, &self.geometry, &self.full, self.half, stream)?;
        } else if !fold {
            self.fold = None;
        }
        if self.fold.is_some() {
            self.stack = None;
        } else if self.stack.is_none() {
            self.stack = Some(Stacked::new(ctx, &self.geometry, stream)?);
        }
        Ok(())
    }
}

/// Joseph's cone-beam projector on one GPU for a circular cone-beam
/// geometry and a volume: forward and exact back projection of
/// device-resident arrays ([`ConeDeviceArray`]) and host convenience
/// methods ([`CudaConeJoseph::forward`], [`CudaConeJoseph::back`]). Its
/// kernels and those of its vectors run in order on one stream
/// ([`OnQueue`]); [`CudaConeJoseph::operator`] is the
/// projector as a tomors-core linear operator.
pub struct CudaConeJoseph {
    queue: Arc<Queue>,
    _module: Module,
    f: Fns,
    volume: ConeVolume,
    na: usize,
    nr: usize,
    nc: usize,
    /// The ray frames of every projection (host copy, for block tables).
    frames_host: Vec<RayFrame>,
    /// The tables of all projections and of other blocks.
    blocks: BlockCache<ConeBlock>,
    merged: bool,
    voxel: Option<VoxelBack>,
    /// The whole volume (`volume` is its slices `z0..z0 + volume.nz`).
    full: ConeVolume,
    z0: usize,
    /// The ART kernels, compiled on first use.
    art: art::ConeArtCell,
    /// The deterministic back projection, when selected
    /// ([`CudaConeJoseph::set_deterministic`]).
    det: Option<det::DetState>,
    /// The geometry is mirror-symmetric about the volume's middle plane
    /// and the projector acts on the whole volume (`mirror_symmetric`).
    symmetric: bool,
    /// The folded kernels are used ([`CudaConeJoseph::set_fold`]).
    fold: bool,
    /// `na / 4` when a quarter turn about the z axis maps the projections
    /// onto themselves (`quarter_turn`; whole volumes only).
    quarter: Option<usize>,
    /// The weights use the quarter turn ([`CudaConeJoseph::set_rotation`]).
    rotate: bool,
    /// Temporaries of the weights whose freeing (`cuMemFree` waits for the
    /// whole device) waits for [`CudaConeJoseph::release_deferred`].
    deferred: std::sync::Mutex<Vec<ConeDeviceArray>>,
}

/// Checks that the sizes fit the kernels' 32-bit indices and grid limits.
fn check_sizes(geometry: &ConeGeometry, volume: &ConeVolume) -> Result<()> {
    let rows_per_block = BLOCK.1 as usize;
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
        Self::build(ctx, geometry, volume, 0..volume.nz, back)
    }

    /// Chooses the back-projection kernel: `true` (the default) merges the
    /// equal voxels of
    /// neighbouring rays within a warp before the `atomicAdd` (fewer
    /// atomics), `false` scatters every (voxel, weight) pair on its own.
    /// Both give the same sums up to the order of the additions.
    pub fn set_merged_back(&mut self, merged: bool) {
        self.merged = merged;
    }

    /// Whether the forward projection reads the volume through a 3D
    /// texture (`cj_forward_tex`, hardware trilinear interpolation with
    /// 8-bit weights at Joseph's sample points): the voxel pair's default
    /// ([`CudaConeJoseph::set_texture_forward`] turns it off); never with
    /// the Joseph pair.
    pub fn texture_forward(&self) -> bool {
        self.voxel.as_ref().is_some_and(|v| v.vol_tex.is_some())
    }

    /// Turns the folded kernels on or off where the geometry is
    /// mirror-symmetric (the source on the volume's middle plane, the
    /// detector's rows level and centred on it: the ray of row
    /// `nr − 1 − r` is the mirror of that of row `r`) and the projector acts
    /// on the whole volume; the default is on. Folded, the row sums are
    /// computed for half the rows and mirrored, the voxel pair's texture
    /// forward projection
    /// reads the volume folded about its middle plane as `float2` texels
    /// (`cj_forward_fold`: one fetch for a ray and its mirror) and its back
    /// projection is FDK's folded kernel (`cone_bp_fold`, where the
    /// detector can be folded). The same operators to the texture unit's
    /// 8-bit weights and the f32 rounding of the mirrored set-up. Returns
    /// whether the folded kernels are now used.
    ///
    /// Errors: driver errors (allocating the folded or unfolded state).
    pub fn set_fold(&mut self, on: bool) -> Result<bool> {
        let on = on && self.symmetric;
        self.queue.stream().synchronize()?;
        self.fold = on;
        let ctx = self.queue.context().clone();
        if let Some(vb) = self.voxel.as_mut() {
            if vb.vol_tex.is_some() {
                vb.vol_tex = None;
                vb.vol_tex = Some(VolTex::new(&ctx, &self.volume, on)?);
            }
            vb.set_fold(&ctx, on, self.queue.stream())?;
        }
        self.queue.stream().synchronize()?;
        Ok(on)
    }

    /// Turns the quarter-turn symmetry of the voxel pair's weights on or off
    /// where the geometry has one (a square volume and projections that a
    /// quarter turn about the z axis maps onto each other, `k → k + na/4`;
    /// the default is on; never for the Joseph pair, whose weights stay those of every projection's
    /// own rays: the turned copies stand for angles that differ from an
    /// exact quarter turn by the f32 rounding of the angles, which moves
    /// the row sums of rays that graze the volume enough to show at the
    /// 1e-5 agreement of the matched pair with the CPU). On, the row sums of
    /// all projections are computed for the first quarter and copied, and
    /// the voxel pair's column sums `B·1` (with the folded back projection)
    /// are the sum of the four quarter turns of the first quarter's back
    /// projection (`cj_rot4_sum`): a quarter of the work, the same values
    /// to the rounding of the f32 angles and of the texture coordinates.
    /// Returns whether it is now used.
    pub fn set_rotation(&mut self, on: bool) -> bool {
        self.rotate = on && self.quarter.is_some() && self.voxel.is_some();
        self.rotate
    }

    /// The quarter `na / 4` when the weights of the projections `angles`
    /// may use the quarter-turn symmetry ([`CudaConeJoseph::set_rotation`]):
    /// all projections in order.
    pub(super) fn quarter_for(&self, angles: &[usize]) -> Option<usize> {
        let all = angles.len() == self.na && angles.iter().enumerate().all(|(i, &a)| i == a);
        self.quarter.filter(|_| self.rotate && all)
    }

    /// Whether the folded kernels are used: `(forward and row sums, voxel
    /// back projection)` ([`CudaConeJoseph::set_fold`]).
    pub fn folded(&self) -> (bool, bool) {
        (
            self.fold,
            self.voxel.as_ref().is_some_and(|v| v.fold.is_some()),
        )
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
            vb.vol_tex = Some(VolTex::new(self.queue.context(), &self.volume, self.fold)?);
        } else if !on {
            self.queue.stream().synchronize()?;
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

    /// `(nz, ny, nx)` of the volume.
    pub fn volume_dim(&self) -> (usize, usize, usize) {
        (self.volume.nz, self.volume.ny, self.volume.nx)
    }

    /// `(angles, rows, cols)` of the projections.
    pub fn projections_dim(&self) -> (usize, usize, usize) {
        (self.na, self.nr, self.nc)
    }
}

impl OnQueue for CudaConeJoseph {
    fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }
}

impl Drop for CudaConeJoseph {
    fn drop(&mut self) {
        // Kernels of this projector's module may still be queued (vectors
        // can outlive it): let them finish before the module is unloaded.
        let _ = self.queue.stream().synchronize();
    }
}
