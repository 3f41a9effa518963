//! Iterative reconstruction on the GPU (parallel beam): Joseph's projector
//! and its exact transpose as CUDA kernels ([`CudaJoseph`]), and SIRT with
//! the whole iteration resident on the device ([`sirt_cuda`]).
//!
//! - The operator is the one of
//!   [`JosephProjector`](tomors_core::iterative::JosephProjector): same
//!   geometry (bin width, pixel size, per-projection centres), same weights
//!   (linear interpolation between the two pixels next to the ray on each
//!   line along the dominant axis, times the step length), virtual zero
//!   padding.
//! - Forward (`jp_forward`): one thread per (bin, projection, group of
//!   [`CudaJoseph::slice_group`] slices); the ray's weights are shared by the
//!   slices of the group, whose values lie side by side on the device
//!   (`[group][row][col][slice]`). Positions along the ray are stepped in
//!   32.32 fixed point (exact interpolation weights to 2⁻²³). Rays that step
//!   along columns read a transposed copy of the volume, so every warp reads
//!   neighbouring pixels of one line.
//! - Back (`jp_back`): the exact transpose as a gather, one thread per pixel
//!   and group: the entry of ray (a, k) for pixel p is
//!   `len_a · max(0, 1 − σ_a·|k − u_a(p)|)` (`u_a(p)` the pixel centre's
//!   detector coordinate, `σ_a = bin width / (pixel · max(|sin|, |cos|))`),
//!   so each pixel reads the two (or, for bins narrower than pixels, a few
//!   more) bins within `1/σ_a` of `u_a(p)`. No atomics: the result is
//!   deterministic, and forward and back are a matched pair to f32 rounding.
//! - SIRT: `x ← P_C(x + λ·T·Aᵀ·M·(b − A·x))` with the weightings of
//!   [`Weighting`] (row/column sums = ASTRA's SIRT, Cimmino, Landweber),
//!   the sinograms uploaded once and the volume downloaded once; per
//!   iteration one back projection, one update (writing the volume and its
//!   transposed copy), one forward projection and one residual kernel
//!   (`M·(b − A·x)` and the partial sums of `‖b − A·x‖²`, read back for the
//!   residual history). Stacks larger than the device memory are cut into
//!   slabs of slices (slices are independent); several devices share the
//!   slabs ([`sirt_cuda_multi`]).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ndarray::{Array2, Array3, ArrayView3, ArrayViewMut3, Axis};
use tomors_core::iterative::{
    Algorithm, Constraint, IterativeOptions, IterativeResult, StopReason, Weighting,
};
use tomors_core::{CoreError, ParallelGeometry, SliceGrid};

use crate::backend::{CudaBackend, MultiCudaBackend};
use crate::compile::cubin_cached;
use crate::driver::{launch, Context, DeviceBuffer, Event, Function, Module, PinnedBuffer, Stream};
use crate::error::{CudaError, Result};

/// Source of the Joseph projector and SIRT kernels.
pub const JOSEPH_CU: &str = include_str!("../kernels/joseph.cu");

/// Floats per pinned staging chunk of large transfers (32 MiB).
const PIN_CHUNK: usize = 8 << 20;

/// Blocks of the reduction kernels (fixed, so the partial sums and thus the
/// residuals are deterministic).
pub(crate) const RED_BLOCKS: usize = 1024;

/// Weights below this fraction of the largest are treated as zero rows or
/// columns (as tomors-core's `WEIGHT_FLOOR`).
const WEIGHT_FLOOR: f64 = 1e-6;

/// Most power iterations for the default relaxation (as tomors-core).
pub(crate) const POWER_ITERATIONS: usize = 50;

/// Most slices of one device stack (the kernels' grids have at most 65535
/// quads of 4 slices in z).
const MAX_SLAB_SLICES: usize = 65_528 * 4;

/// Largest pixel size / bin width ratio the back projector's gather handles.
const MAX_EXTRA_BINS: usize = 8;

/// Per-projection constants of `jp_forward` (layout of `FpAngle`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct FpAngle {
    q0: f64,
    qk: f64,
    qs: f64,
    dfix: i64,
    len: f32,
    transposed: i32,
}

/// Most rays (projections) per thread of `jp_forward` (`AP` in the kernel).
const AP: usize = 4;

/// Slices per back-projection thread by default.
const DEFAULT_BACK_GROUP: usize = 16;

/// Whether `jp_forward` uses two threads per ray by default.
const DEFAULT_PAIR: bool = true;

/// Projections per unrolled step of `jp_back` (`BPU` in the kernel).
const DEFAULT_BPU: usize = 2;

/// A group of up to [`AP`] projections of one stepping direction, processed
/// together by `jp_forward` (layout of `FpGroup`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct FpGroup {
    idx: [i32; AP],
    count: i32,
    transposed: i32,
}

/// Groups of neighbouring projections (sorted by stepping direction and
/// angle modulo π) for `jp_forward`.
fn angle_groups(geometry: &ParallelGeometry, fp: &[FpAngle], per: usize) -> Vec<FpGroup> {
    let pi = std::f64::consts::PI;
    let mut order: Vec<usize> = (0..fp.len()).collect();
    let key = |i: usize| (geometry.angles()[i] as f64).rem_euclid(pi);
    order.sort_by(|&a, &b| {
        fp[a]
            .transposed
            .cmp(&fp[b].transposed)
            .then(key(a).total_cmp(&key(b)))
    });
    let mut groups = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let flag = fp[order[i]].transposed;
        let mut g = FpGroup {
            idx: [order[i] as i32; AP],
            count: 0,
            transposed: flag,
        };
        while i < order.len() && (g.count as usize) < per && fp[order[i]].transposed == flag {
            g.idx[g.count as usize] = order[i] as i32;
            g.count += 1;
            i += 1;
        }
        groups.push(g);
    }
    groups
}

/// Per-projection constants of `jp_back` (layout of `BpAngle`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BpAngle {
    c0: f64,
    cx: f64,
    cy: f64,
    sigma: f32,
    len: f32,
}

/// The constants of both kernels for `geometry` on `grid`, in f64, and the
/// number of extra bins the gather needs on each side.
fn angle_tables(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
) -> (Vec<FpAngle>, Vec<BpAngle>, usize) {
    let h = grid.pixel_size as f64;
    let bw = geometry.bin_width() as f64;
    let cxg = (grid.nx as f64 - 1.0) * 0.5;
    let cyg = (grid.ny as f64 - 1.0) * 0.5;
    let mut fp = Vec::with_capacity(geometry.n_angles());
    let mut bp = Vec::with_capacity(geometry.n_angles());
    let mut extra = 0usize;
    for (i, &a) in geometry.angles().iter().enumerate() {
        let (sin, cos) = (a as f64).sin_cos();
        let c = geometry.center(i) as f64;
        let m = sin.abs().max(cos.abs());
        let f = if sin.abs() >= cos.abs() {
            // Column stepping: on column ix the ray of bin k is at row
            // r = cy + c·bw/(sin h) − cx·dr − k·bw/(sin h) + ix·dr.
            let dr = cos / sin;
            FpAngle {
                q0: cyg + c * bw / (sin * h) - cxg * dr,
                qk: -bw / (sin * h),
                qs: dr,
                dfix: (dr * 4294967296.0).round() as i64,
                len: (h / sin.abs()) as f32,
                transposed: 1,
            }
        } else {
            // Row stepping: on row iy the ray is at column
            // q = cx − c·bw/(cos h) − cy·dq + k·bw/(cos h) + iy·dq.
            let dq = sin / cos;
            FpAngle {
                q0: cxg - c * bw / (cos * h) - cyg * dq,
                qk: bw / (cos * h),
                qs: dq,
                dfix: (dq * 4294967296.0).round() as i64,
                len: (h / cos.abs()) as f32,
                transposed: 0,
            }
        };
        fp.push(f);
        let sigma = bw / (h * m);
        extra = extra.max(((1.0 / sigma).ceil() as usize).saturating_sub(1));
        bp.push(BpAngle {
            c0: c + (-cxg * h * cos + cyg * h * sin) / bw,
            cx: h * cos / bw,
            cy: -h * sin / bw,
            sigma: sigma as f32,
            len: (h / m) as f32,
        });
    }
    (fp, bp, extra)
}

/// Kernel parameters of [`CudaJoseph`] (tuning knobs: results do not depend
/// on them beyond rounding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JosephTuning {
    /// Slices per forward-projection thread (4 or 8).
    pub slice_group: usize,
    /// Slices per back-projection thread (4, 8 or 16).
    pub back_slice_group: usize,
    /// Neighbouring projections per forward-projection thread (1 to 4).
    pub rays_per_thread: usize,
    /// Two threads per forward-projection ray, each reading one of the two
    /// pixels of every step.
    pub paired: bool,
}

impl Default for JosephTuning {
    fn default() -> Self {
        Self {
            slice_group: 8,
            back_slice_group: DEFAULT_BACK_GROUP,
            rays_per_thread: AP,
            paired: DEFAULT_PAIR,
        }
    }
}

/// An interleaved stack on the device: `slices` images of `rows × cols`
/// stored as `[quad][row][col][slice in quad]` with quads of 4 slices,
/// padded with zero slices to a multiple of [`CudaJoseph::slice_group`].
/// Volumes are `[slice][y][x]` stacks, sinograms `[slice][angle][bin]`.
pub struct DeviceStack {
    buf: DeviceBuffer,
    slices: usize,
    rows: usize,
    cols: usize,
    sg: usize,
}

impl DeviceStack {
    /// Number of real slices.
    pub fn slices(&self) -> usize {
        self.slices
    }

    /// `(slices, rows, cols)`.
    pub fn dim(&self) -> (usize, usize, usize) {
        (self.slices, self.rows, self.cols)
    }

    /// Number of slice groups of the projectors' threads.
    pub fn groups(&self) -> usize {
        self.slices.div_ceil(self.sg)
    }

    /// Number of quads of 4 slices stored.
    fn quads(&self) -> usize {
        self.groups() * self.sg / 4
    }

    /// Floats stored (padding included).
    fn len(&self) -> usize {
        self.groups() * self.sg * self.rows * self.cols
    }
}

struct Fns {
    forward: Function,
    forward_sq: Function,
    back: Function,
    interleave: Function,
    deinterleave: Function,
    transpose: Function,
    residual: Function,
    sqsum: Function,
    scale: Function,
    fill: Function,
    update: Function,
}

/// Joseph's projector on one GPU for a parallel-beam geometry and slice
/// grid: forward and exact back projection of device-resident stacks
/// ([`DeviceStack`]) and host convenience methods ([`CudaJoseph::forward`],
/// [`CudaJoseph::back`]). Its kernels run in order on its own stream.
pub struct CudaJoseph {
    ctx: Arc<Context>,
    stream: Stream,
    _module: Module,
    f: Fns,
    sg: usize,
    bsg: usize,
    pad: usize,
    nx: usize,
    ny: usize,
    na: usize,
    nb: usize,
    fp_angles: DeviceBuffer,
    fp_groups: DeviceBuffer,
    n_fp_groups: usize,
    pair: usize,
    bp_angles: DeviceBuffer,
    partial: DeviceBuffer,
    pins: Mutex<Vec<PinnedBuffer>>,
}

/// Projections per unrolled back-projection step: `TOMORS_BP_UNROLL` (1, 2
/// or 4; for benchmarks), else the default.
fn bpu() -> usize {
    match std::env::var("TOMORS_BP_UNROLL")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(v @ (1 | 2 | 4)) => v,
        _ => DEFAULT_BPU,
    }
}

/// Checks that sizes fit the kernels' 32-bit indices and grid limits.
fn check_sizes(geometry: &ParallelGeometry, grid: &SliceGrid) -> Result<()> {
    let lim = 1usize << 19;
    if grid.nx > lim || grid.ny > lim || geometry.n_bins() > lim {
        return Err(CudaError::Parameter(format!(
            "a {}×{} grid with {} bins is too large for the GPU projector (at most {lim} a side)",
            grid.nx,
            grid.ny,
            geometry.n_bins()
        )));
    }
    if geometry.n_angles() > 65_535 {
        return Err(CudaError::Parameter(format!(
            "{} projections: the GPU projector handles at most 65535",
            geometry.n_angles()
        )));
    }
    Ok(())
}

impl CudaJoseph {
    /// The projector on `backend`'s device, with `slice_group` slices per
    /// thread (4 or 8; 8 suits stacks of many slices).
    ///
    /// Errors: a slice group other than 4 or 8, pixels more than 8 times as
    /// wide as the bins, sizes beyond the kernels' limits, compilation and
    /// driver errors.
    pub fn new(
        backend: &CudaBackend,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        slice_group: usize,
    ) -> Result<Self> {
        Self::tuned(
            backend,
            geometry,
            grid,
            &JosephTuning {
                slice_group,
                back_slice_group: slice_group,
                ..JosephTuning::default()
            },
        )
    }

    /// The projector with explicit kernel parameters ([`JosephTuning`]).
    ///
    /// Errors: as [`CudaJoseph::new`], and parameters out of range.
    pub fn tuned(
        backend: &CudaBackend,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        tuning: &JosephTuning,
    ) -> Result<Self> {
        let ctx = backend.lock()?.ctx.clone();
        Self::on_context(ctx, geometry, grid, tuning)
    }

    fn on_context(
        ctx: Arc<Context>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        tuning: &JosephTuning,
    ) -> Result<Self> {
        let (sg, bsg, ap, paired) = (
            tuning.slice_group,
            tuning.back_slice_group,
            tuning.rays_per_thread,
            tuning.paired,
        );
        if sg != 4 && sg != 8 {
            return Err(CudaError::Parameter(format!(
                "slice group {sg}: use 4 or 8"
            )));
        }
        if ![4, 8, 16].contains(&bsg) {
            return Err(CudaError::Parameter(format!(
                "back-projection slice group {bsg}: use 4, 8 or 16"
            )));
        }
        if !(1..=AP).contains(&ap) {
            return Err(CudaError::Parameter(format!(
                "{ap} rays per thread: use 1 to {AP}"
            )));
        }
        check_sizes(geometry, grid)?;
        let (fp, bp, extra) = angle_tables(geometry, grid);
        if extra > MAX_EXTRA_BINS {
            return Err(CudaError::Parameter(format!(
                "pixels ({}) more than {} times as wide as the detector bins ({}) are not \
                 supported by the GPU projector",
                grid.pixel_size,
                MAX_EXTRA_BINS + 1,
                geometry.bin_width()
            )));
        }
        ctx.bind()?;
        let defines = vec![
            ("SG".to_string(), sg.to_string()),
            ("SGB".to_string(), bsg.to_string()),
            ("KM".to_string(), extra.to_string()),
            ("AP".to_string(), ap.to_string()),
            (
                "PAIR".to_string(),
                if paired { "2" } else { "1" }.to_string(),
            ),
            ("BPU".to_string(), bpu().to_string()),
        ];
        let (cubin, _) =
            cubin_cached("joseph", JOSEPH_CU, &defines, &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(&ctx, &cubin)?;
        let f = Fns {
            forward: module.function("jp_forward")?,
            forward_sq: module.function("jp_forward_sq")?,
            back: module.function("jp_back")?,
            interleave: module.function("jp_interleave")?,
            deinterleave: module.function("jp_deinterleave")?,
            transpose: module.function("jp_transpose")?,
            residual: module.function("jp_residual")?,
            sqsum: module.function("jp_sqsum")?,
            scale: module.function("jp_scale")?,
            fill: module.function("jp_fill")?,
            update: module.function("jp_update")?,
        };
        let stream = Stream::new(&ctx)?;
        let groups = angle_groups(geometry, &fp, ap);
        let fp_groups =
            DeviceBuffer::new(&ctx, std::mem::size_of_val(&groups[..]), "forward groups")?;
        let fp_angles =
            DeviceBuffer::new(&ctx, std::mem::size_of_val(&fp[..]), "forward constants")?;
        let bp_angles = DeviceBuffer::new(&ctx, std::mem::size_of_val(&bp[..]), "back constants")?;
        let partial = DeviceBuffer::new(&ctx, RED_BLOCKS * 8, "partial sums")?;
        let me = Self {
            ctx,
            stream,
            _module: module,
            f,
            sg,
            bsg,
            pad: sg.max(bsg),
            nx: grid.nx,
            ny: grid.ny,
            na: geometry.n_angles(),
            nb: geometry.n_bins(),
            fp_angles,
            fp_groups,
            n_fp_groups: groups.len(),
            pair: if paired { 2 } else { 1 },
            bp_angles,
            partial,
            pins: Mutex::new(Vec::new()),
        };
        me.put(&me.fp_angles, &fp)?;
        me.put(&me.fp_groups, &groups)?;
        me.put(&me.bp_angles, &bp)?;
        Ok(me)
    }

    /// Slices per forward-projection thread (4 or 8).
    pub fn slice_group(&self) -> usize {
        self.sg
    }

    /// Slices per back-projection thread (4, 8 or 16).
    pub fn back_slice_group(&self) -> usize {
        self.bsg
    }

    /// The device context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The stream every kernel of this projector runs on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `(ny, nx)` of the images.
    pub fn image_dim(&self) -> (usize, usize) {
        (self.ny, self.nx)
    }

    /// `(angles, bins)` of the sinograms.
    pub fn sinogram_dim(&self) -> (usize, usize) {
        (self.na, self.nb)
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

    /// Copies the start of `buf` into `data` after the stream's work, and waits.
    fn get<T: Copy>(&self, buf: &DeviceBuffer, data: &mut [T]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.download_async(
                0,
                data.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(data),
                &self.stream,
            )?;
        }
        self.stream.synchronize()
    }

    /// Uploads `data` to the start of `buf` through pinned chunks, and waits.
    fn put_f32(&self, buf: &DeviceBuffer, data: &[f32]) -> Result<()> {
        upload_staged(&self.ctx, &self.stream, &self.pins, buf, data)
    }

    /// Downloads the start of `buf` into `out` through pinned chunks (after
    /// the stream's work), and waits.
    fn get_f32(&self, buf: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        download_staged(&self.ctx, &self.stream, &self.pins, buf, out)
    }

    /// A device stack of `slices` images of `rows × cols` (contents undefined).
    fn alloc(&self, slices: usize, rows: usize, cols: usize, what: &str) -> Result<DeviceStack> {
        if slices == 0 {
            return Err(CudaError::Parameter(format!("{what}: no slices")));
        }
        let groups = slices.div_ceil(self.pad);
        if groups * self.pad > MAX_SLAB_SLICES {
            return Err(CudaError::Parameter(format!(
                "{what}: {slices} slices in one device stack (at most {MAX_SLAB_SLICES})"
            )));
        }
        let bytes = groups * self.pad * rows * cols * 4;
        Ok(DeviceStack {
            buf: DeviceBuffer::new(&self.ctx, bytes, what)?,
            slices,
            rows,
            cols,
            sg: self.pad,
        })
    }

    /// A device volume of `slices` images (contents undefined).
    pub fn alloc_volume(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.ny, self.nx, "a device volume")
    }

    /// A device stack of `slices` sinograms (contents undefined).
    pub fn alloc_sinograms(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.na, self.nb, "device sinograms")
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
        // signature in `kernels/joseph.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { launch(f, name, grid, block, 0, &self.stream, params) }
    }

    fn elementwise_grid(n: usize) -> (u32, u32, u32) {
        ((n.div_ceil(256)).clamp(1, 8192) as u32, 1, 1)
    }

    /// Uploads a host stack (`[slice][rows][cols]`) into `dst` (same shape),
    /// interleaving it on the device through `staging` (at least as large).
    fn upload_into(
        &self,
        host: ArrayView3<'_, f32>,
        dst: &DeviceStack,
        staging: &DeviceStack,
    ) -> Result<()> {
        if host.dim() != dst.dim() || staging.len() < dst.len() {
            return Err(CudaError::Parameter(format!(
                "upload of {:?} into a device stack of {:?}",
                host.dim(),
                dst.dim()
            )));
        }
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        self.put_f32(&staging.buf, data)?;
        let mut src = staging.buf.ptr();
        let mut d = dst.buf.ptr();
        let mut ns = dst.slices as i32;
        let mut plane = (dst.rows * dst.cols) as i64;
        let mut groups = dst.quads() as i32;
        self.launch(
            self.f.interleave,
            "jp_interleave",
            Self::elementwise_grid(dst.quads() * dst.rows * dst.cols),
            (256, 1, 1),
            &mut [
                &mut src as *mut _ as _,
                &mut d as *mut _ as _,
                &mut ns as *mut _ as _,
                &mut plane as *mut _ as _,
                &mut groups as *mut _ as _,
            ],
        )
    }

    /// Downloads `src` into the host stack `out` (same shape), through
    /// `staging` (at least as large).
    fn download_from(
        &self,
        src: &DeviceStack,
        staging: &DeviceStack,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        if out.dim() != src.dim() || staging.len() < src.len() {
            return Err(CudaError::Parameter(format!(
                "download of a device stack of {:?} into {:?}",
                src.dim(),
                out.dim()
            )));
        }
        let mut s = src.buf.ptr();
        let mut d = staging.buf.ptr();
        let mut ns = src.slices as i32;
        let mut plane = (src.rows * src.cols) as i64;
        let mut groups = src.quads() as i32;
        self.launch(
            self.f.deinterleave,
            "jp_deinterleave",
            Self::elementwise_grid(src.quads() * src.rows * src.cols),
            (256, 1, 1),
            &mut [
                &mut s as *mut _ as _,
                &mut d as *mut _ as _,
                &mut ns as *mut _ as _,
                &mut plane as *mut _ as _,
                &mut groups as *mut _ as _,
            ],
        )?;
        match out.as_slice_mut() {
            Some(dst) => self.get_f32(&staging.buf, dst),
            None => {
                let mut tmp = vec![0f32; src.slices * src.rows * src.cols];
                self.get_f32(&staging.buf, &mut tmp)?;
                out.iter_mut().zip(tmp).for_each(|(o, v)| *o = v);
                Ok(())
            }
        }
    }

    fn check_volume(&self, v: &DeviceStack, what: &str) -> Result<()> {
        if v.quads() * 4 < v.slices.div_ceil(self.pad) * self.pad
            || v.rows != self.ny
            || v.cols != self.nx
        {
            return Err(CudaError::Parameter(format!(
                "{what} is a stack of {}×{} images (groups of {}), the projector's grid is {}×{} \
                 (groups of {})",
                v.rows, v.cols, v.sg, self.ny, self.nx, self.pad
            )));
        }
        Ok(())
    }

    fn check_sinograms(&self, s: &DeviceStack, what: &str) -> Result<()> {
        if s.quads() * 4 < s.slices.div_ceil(self.pad) * self.pad
            || s.rows != self.na
            || s.cols != self.nb
        {
            return Err(CudaError::Parameter(format!(
                "{what} are {}×{} sinograms (groups of {}), the projector's geometry has {} \
                 angles × {} bins (groups of {})",
                s.rows, s.cols, s.sg, self.na, self.nb, self.pad
            )));
        }
        Ok(())
    }

    /// Writes the transposed copy (`[group][x][y][slice]`) of the volume `vol`
    /// into `vol_t`, which the forward projection reads for projections that
    /// step along columns.
    pub fn transpose_dev(&self, vol: &DeviceStack, vol_t: &mut DeviceStack) -> Result<()> {
        self.transpose_impl(vol, vol_t)
    }

    fn transpose_impl(&self, vol: &DeviceStack, vol_t: &DeviceStack) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_volume(vol_t, "the transposed volume")?;
        if vol.slices != vol_t.slices {
            return Err(CudaError::Parameter(
                "volume and copy differ in slices".into(),
            ));
        }
        let mut s = vol.buf.ptr();
        let mut d = vol_t.buf.ptr();
        let (mut nx, mut ny) = (self.nx as i32, self.ny as i32);
        self.launch(
            self.f.transpose,
            "jp_transpose",
            (
                self.nx.div_ceil(32) as u32,
                self.ny.div_ceil(32) as u32,
                vol.quads() as u32,
            ),
            (32, 8, 1),
            &mut [
                &mut s as *mut _ as _,
                &mut d as *mut _ as _,
                &mut nx as *mut _ as _,
                &mut ny as *mut _ as _,
            ],
        )
    }

    fn forward_impl(
        &self,
        vol: &DeviceStack,
        vol_t: &DeviceStack,
        out: &DeviceStack,
        squared: bool,
    ) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_volume(vol_t, "the transposed volume")?;
        self.check_sinograms(out, "the output")?;
        if vol.slices != out.slices || vol_t.slices != vol.slices {
            return Err(CudaError::Parameter(format!(
                "{} slices projected into {} sinograms",
                vol.slices, out.slices
            )));
        }
        let mut v = vol.buf.ptr();
        let mut vt = vol_t.buf.ptr();
        let mut o = out.buf.ptr();
        let mut ap = self.fp_angles.ptr();
        let mut gp = self.fp_groups.ptr();
        let (mut nx, mut ny, mut na, mut nb) = (
            self.nx as i32,
            self.ny as i32,
            self.na as i32,
            self.nb as i32,
        );
        let (f, name) = if squared {
            (self.f.forward_sq, "jp_forward_sq")
        } else {
            (self.f.forward, "jp_forward")
        };
        self.launch(
            f,
            name,
            (
                (self.nb * self.pair).div_ceil(128) as u32,
                self.n_fp_groups as u32,
                vol.slices.div_ceil(self.sg) as u32,
            ),
            (128, 1, 1),
            &mut [
                &mut v as *mut _ as _,
                &mut vt as *mut _ as _,
                &mut o as *mut _ as _,
                &mut ap as *mut _ as _,
                &mut gp as *mut _ as _,
                &mut nx as *mut _ as _,
                &mut ny as *mut _ as _,
                &mut na as *mut _ as _,
                &mut nb as *mut _ as _,
            ],
        )
    }

    /// Forward projection `out = A·vol` of a device volume, given with its
    /// transposed copy `vol_t` (see [`CudaJoseph::transpose_dev`]), into
    /// device sinograms (overwritten), queued on the stream.
    pub fn forward_dev(
        &self,
        vol: &DeviceStack,
        vol_t: &DeviceStack,
        out: &mut DeviceStack,
    ) -> Result<()> {
        self.forward_impl(vol, vol_t, out, false)
    }

    /// Back projection `out = Aᵀ·sino` of device sinograms into a device
    /// volume (overwritten), queued on the stream.
    pub fn back_dev(&self, sino: &DeviceStack, out: &mut DeviceStack) -> Result<()> {
        self.back_impl(sino, out)
    }

    fn back_impl(&self, sino: &DeviceStack, out: &DeviceStack) -> Result<()> {
        self.check_sinograms(sino, "the sinograms")?;
        self.check_volume(out, "the output")?;
        if sino.slices != out.slices {
            return Err(CudaError::Parameter(format!(
                "{} sinograms back projected into {} slices",
                sino.slices, out.slices
            )));
        }
        let mut s = sino.buf.ptr();
        let mut o = out.buf.ptr();
        let mut ap = self.bp_angles.ptr();
        let (mut nx, mut ny, mut na, mut nb) = (
            self.nx as i32,
            self.ny as i32,
            self.na as i32,
            self.nb as i32,
        );
        self.launch(
            self.f.back,
            "jp_back",
            (
                self.nx.div_ceil(16) as u32,
                self.ny.div_ceil(16) as u32,
                sino.slices.div_ceil(self.bsg) as u32,
            ),
            (256, 1, 1),
            &mut [
                &mut s as *mut _ as _,
                &mut o as *mut _ as _,
                &mut ap as *mut _ as _,
                &mut nx as *mut _ as _,
                &mut ny as *mut _ as _,
                &mut na as *mut _ as _,
                &mut nb as *mut _ as _,
            ],
        )
    }

    /// Uploads a host volume `[slice][y][x]` (a new device volume and its
    /// transposed copy).
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<(DeviceStack, DeviceStack)> {
        let (ns, ny, nx) = host.dim();
        if (ny, nx) != (self.ny, self.nx) {
            return Err(CoreError::Shape(format!(
                "volume is {:?}, expected [slices][{}][{}]",
                host.dim(),
                self.ny,
                self.nx
            ))
            .into());
        }
        let v = self.alloc_volume(ns)?;
        let mut vt = self.alloc_volume(ns)?;
        self.upload_into(host, &v, &vt)?;
        self.transpose_dev(&v, &mut vt)?;
        Ok((v, vt))
    }

    /// Uploads host sinograms `[slice][angle][bin]`.
    pub fn upload_sinograms(&self, host: ArrayView3<'_, f32>) -> Result<DeviceStack> {
        let (ns, na, nb) = host.dim();
        if (na, nb) != (self.na, self.nb) {
            return Err(CoreError::Shape(format!(
                "sinograms are {:?}, expected [slices][{}][{}]",
                host.dim(),
                self.na,
                self.nb
            ))
            .into());
        }
        let s = self.alloc_sinograms(ns)?;
        let staging = self.alloc_sinograms(ns)?;
        self.upload_into(host, &s, &staging)?;
        self.stream.synchronize()?;
        Ok(s)
    }

    /// Downloads a device stack into a host array of its shape.
    pub fn download(&self, dev: &DeviceStack) -> Result<Array3<f32>> {
        let staging = self.alloc(dev.slices, dev.rows, dev.cols, "download staging")?;
        let mut out = Array3::<f32>::zeros(dev.dim());
        self.download_from(dev, &staging, out.view_mut())?;
        Ok(out)
    }

    /// Forward projection of a host volume `[slice][y][x]` into host
    /// sinograms `[slice][angle][bin]` (overwritten).
    ///
    /// Errors: shapes that do not fit, driver and launch errors.
    pub fn forward(&self, volume: ArrayView3<'_, f32>, out: ArrayViewMut3<'_, f32>) -> Result<()> {
        let ns = volume.len_of(Axis(0));
        if out.dim() != (ns, self.na, self.nb) {
            return Err(CoreError::Shape(format!(
                "sinograms are {:?}, expected {:?}",
                out.dim(),
                (ns, self.na, self.nb)
            ))
            .into());
        }
        let (v, vt) = self.upload_volume(volume)?;
        let mut s = self.alloc_sinograms(ns)?;
        self.forward_dev(&v, &vt, &mut s)?;
        let staging = self.alloc_sinograms(ns)?;
        self.download_from(&s, &staging, out)
    }

    /// Back projection (exact transpose) of host sinograms
    /// `[slice][angle][bin]` into a host volume `[slice][y][x]` (overwritten).
    ///
    /// Errors: shapes that do not fit, driver and launch errors.
    pub fn back(&self, sinograms: ArrayView3<'_, f32>, out: ArrayViewMut3<'_, f32>) -> Result<()> {
        let ns = sinograms.len_of(Axis(0));
        if out.dim() != (ns, self.ny, self.nx) {
            return Err(CoreError::Shape(format!(
                "volume is {:?}, expected {:?}",
                out.dim(),
                (ns, self.ny, self.nx)
            ))
            .into());
        }
        let s = self.upload_sinograms(sinograms)?;
        let mut v = self.alloc_volume(ns)?;
        self.back_dev(&s, &mut v)?;
        let staging = self.alloc_volume(ns)?;
        self.download_from(&v, &staging, out)
    }

    fn fill(&self, buf: &DeviceStack, value: f32) -> Result<()> {
        let mut p = buf.buf.ptr();
        let mut v = value;
        let mut n = buf.len() as i64;
        self.launch(
            self.f.fill,
            "jp_fill",
            Self::elementwise_grid(buf.len()),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut v as *mut _ as _,
                &mut n as *mut _ as _,
            ],
        )
    }

    /// `y *= c·w[element]` with `w` per pixel or per ray (or `c` alone).
    fn scale(&self, y: &DeviceStack, w: Option<&DeviceBuffer>, c: f32) -> Result<()> {
        let mut p = y.buf.ptr();
        let mut wp = w.map_or(0, |w| w.ptr());
        let mut cc = c;
        let mut n = y.len() as i64;
        let mut per = (y.rows * y.cols) as i64;
        self.launch(
            self.f.scale,
            "jp_scale",
            Self::elementwise_grid(y.len()),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut wp as *mut _ as _,
                &mut cc as *mut _ as _,
                &mut n as *mut _ as _,
                &mut per as *mut _ as _,
            ],
        )
    }

    /// Sums the partial sums of the last reduction (waits for the stream).
    fn partial_sum(&self) -> Result<f64> {
        let mut p = vec![0f64; RED_BLOCKS];
        self.get(&self.partial, &mut p)?;
        Ok(p.iter().sum())
    }

    /// `Σ y²` over the real slices (waits for the stream).
    fn sq_norm(&self, y: &DeviceStack) -> Result<f64> {
        let mut p = y.buf.ptr();
        let mut part = self.partial.ptr();
        let mut n = y.len() as i64;
        let mut per = (y.rows * y.cols) as i64;
        let mut ns = y.slices as i32;
        self.launch(
            self.f.sqsum,
            "jp_sqsum",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &mut [
                &mut p as *mut _ as _,
                &mut part as *mut _ as _,
                &mut n as *mut _ as _,
                &mut per as *mut _ as _,
                &mut ns as *mut _ as _,
            ],
        )?;
        self.partial_sum()
    }

    /// `r ← M·(b − r)` in place, queueing the partial sums of `‖b − r‖²`.
    fn residual(&self, b: &DeviceStack, r: &DeviceStack, m: Option<&DeviceBuffer>) -> Result<()> {
        let mut bp = b.buf.ptr();
        let mut rp = r.buf.ptr();
        let mut mp = m.map_or(0, |m| m.ptr());
        let mut part = self.partial.ptr();
        let mut n = r.len() as i64;
        let mut per = (r.rows * r.cols) as i64;
        let mut ns = r.slices as i32;
        self.launch(
            self.f.residual,
            "jp_residual",
            (RED_BLOCKS as u32, 1, 1),
            (256, 1, 1),
            &mut [
                &mut bp as *mut _ as _,
                &mut rp as *mut _ as _,
                &mut mp as *mut _ as _,
                &mut part as *mut _ as _,
                &mut n as *mut _ as _,
                &mut per as *mut _ as _,
                &mut ns as *mut _ as _,
            ],
        )
    }

    /// `x ← P_C(x + λ·T·g)`, also writing the transposed copy `xt`.
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        x: &DeviceStack,
        xt: &DeviceStack,
        g: &DeviceStack,
        t: Option<&DeviceBuffer>,
        lambda: f32,
        clamp: &Constraint,
    ) -> Result<()> {
        let mut xp = x.buf.ptr();
        let mut xtp = xt.buf.ptr();
        let mut gp = g.buf.ptr();
        let mut tp = t.map_or(0, |t| t.ptr());
        let mut l = lambda;
        let mut has_lo = i32::from(clamp.min.is_some());
        let mut lo = clamp.min.unwrap_or(0.0) as f32;
        let mut has_hi = i32::from(clamp.max.is_some());
        let mut hi = clamp.max.unwrap_or(0.0) as f32;
        let (mut nx, mut ny) = (self.nx as i32, self.ny as i32);
        self.launch(
            self.f.update,
            "jp_update",
            (
                self.nx.div_ceil(32) as u32,
                self.ny.div_ceil(32) as u32,
                x.quads() as u32,
            ),
            (32, 8, 1),
            &mut [
                &mut xp as *mut _ as _,
                &mut xtp as *mut _ as _,
                &mut gp as *mut _ as _,
                &mut tp as *mut _ as _,
                &mut l as *mut _ as _,
                &mut has_lo as *mut _ as _,
                &mut lo as *mut _ as _,
                &mut has_hi as *mut _ as _,
                &mut hi as *mut _ as _,
                &mut nx as *mut _ as _,
                &mut ny as *mut _ as _,
            ],
        )
    }

    /// Row sums `A·1` (`[angle][bin]`), or the squared row norms `‖a_i‖²`.
    pub fn row_sums(&self, squared: bool) -> Result<Array2<f32>> {
        let v = self.alloc_volume(1)?;
        let vt = self.alloc_volume(1)?;
        self.fill(&v, 1.0)?;
        self.fill(&vt, 1.0)?;
        let s = self.alloc_sinograms(1)?;
        self.forward_impl(&v, &vt, &s, squared)?;
        Ok(self.download(&s)?.index_axis_move(Axis(0), 0))
    }

    /// Column sums `Aᵀ·1` (`[y][x]`).
    pub fn column_sums(&self) -> Result<Array2<f32>> {
        let s = self.alloc_sinograms(1)?;
        self.fill(&s, 1.0)?;
        let mut v = self.alloc_volume(1)?;
        self.back_dev(&s, &mut v)?;
        Ok(self.download(&v)?.index_axis_move(Axis(0), 0))
    }

    /// Uploads a small host array (weights) into a new device buffer.
    fn upload_weights(&self, w: &Array2<f32>, what: &str) -> Result<DeviceBuffer> {
        let data = w.as_standard_layout();
        let data = data.as_slice().expect("standard layout");
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
            Weighting::Cimmino => {
                let mut m = self.row_sums(true)?;
                invert(m.as_slice_mut().expect("standard layout"));
                (Some(self.upload_weights(&m, "row weights")?), None)
            }
            Weighting::RowColumnSums => {
                let mut m = self.row_sums(false)?;
                invert(m.as_slice_mut().expect("standard layout"));
                let mut t = self.column_sums()?;
                invert(t.as_slice_mut().expect("standard layout"));
                (
                    Some(self.upload_weights(&m, "row weights")?),
                    Some(self.upload_weights(&t, "column weights")?),
                )
            }
        })
    }

    /// Spectral radius of `T·Aᵀ·M·A` by power iteration from the all-ones
    /// image (as tomors-core's
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
        let v = self.alloc_volume(1)?;
        let mut vt = self.alloc_volume(1)?;
        let mut w = self.alloc_volume(1)?;
        let mut s = self.alloc_sinograms(1)?;
        self.fill(&v, 1.0)?;
        let mut norm_v = ((self.nx * self.ny) as f64).sqrt();
        let mut rho = 0.0f64;
        let mut cur = v;
        for _ in 0..max_iterations.max(1) {
            self.transpose_dev(&cur, &mut vt)?;
            self.forward_dev(&cur, &vt, &mut s)?;
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

/// Two pinned staging buffers of [`PIN_CHUNK`] floats (allocated once).
fn pinned<'p>(
    ctx: &Arc<Context>,
    pins: &'p Mutex<Vec<PinnedBuffer>>,
) -> Result<std::sync::MutexGuard<'p, Vec<PinnedBuffer>>> {
    let mut p = pins
        .lock()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    while p.len() < 2 {
        p.push(PinnedBuffer::new(ctx, PIN_CHUNK)?);
    }
    Ok(p)
}

/// Uploads `data` to the start of `buf` through pinned chunks (host
/// copies in parallel, overlapped with the transfers), and waits.
pub(crate) fn upload_staged(
    ctx: &Arc<Context>,
    stream: &Stream,
    pins: &Mutex<Vec<PinnedBuffer>>,
    buf: &DeviceBuffer,
    data: &[f32],
) -> Result<()> {
    ctx.bind()?;
    if data.len() <= PIN_CHUNK {
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.upload_async(
                0,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
                stream,
            )?;
        }
        return stream.synchronize();
    }
    let mut pins = pinned(ctx, pins)?;
    let ev = [Event::new(ctx)?, Event::new(ctx)?];
    for (i, chunk) in data.chunks(PIN_CHUNK).enumerate() {
        if i >= 2 {
            ev[i % 2].synchronize()?;
        }
        let pin = &mut pins[i % 2].as_mut_slice()[..chunk.len()];
        par_copy(chunk, pin);
        // SAFETY: the pinned chunk is not written again before its event
        // (recorded right after the copy) has completed.
        unsafe {
            buf.upload_async(
                i * PIN_CHUNK * 4,
                pin.as_ptr() as *const u8,
                chunk.len() * 4,
                stream,
            )?;
        }
        ev[i % 2].record(stream)?;
    }
    stream.synchronize()
}

/// Downloads the start of `buf` into `out` through pinned chunks (after
/// the stream's work), and waits.
pub(crate) fn download_staged(
    ctx: &Arc<Context>,
    stream: &Stream,
    pins: &Mutex<Vec<PinnedBuffer>>,
    buf: &DeviceBuffer,
    out: &mut [f32],
) -> Result<()> {
    ctx.bind()?;
    if out.len() <= PIN_CHUNK {
        // SAFETY: `out` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.download_async(
                0,
                out.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(out),
                stream,
            )?;
        }
        return stream.synchronize();
    }
    let mut pins = pinned(ctx, pins)?;
    let ev = [Event::new(ctx)?, Event::new(ctx)?];
    let chunks: Vec<&mut [f32]> = out.chunks_mut(PIN_CHUNK).collect();
    let n = chunks.len();
    let mut pending: Option<(usize, &mut [f32])> = None;
    let mut it = chunks.into_iter().enumerate();
    for step in 0..=n {
        let next = if step < n { it.next() } else { None };
        if let Some((i, dst)) = &next {
            let pin = &mut pins[i % 2];
            // SAFETY: the pinned buffer is read on the host only after
            // its event has completed, and not reused before that read.
            unsafe {
                buf.download_async(
                    i * PIN_CHUNK * 4,
                    pin.as_mut_slice().as_mut_ptr() as *mut u8,
                    dst.len() * 4,
                    stream,
                )?;
            }
            ev[i % 2].record(stream)?;
        }
        if let Some((j, dst)) = pending.take() {
            ev[j % 2].synchronize()?;
            par_copy(&pins[j % 2].as_slice()[..dst.len()], dst);
        }
        pending = next;
    }
    Ok(())
}

/// `dst.copy_from_slice(src)` on all cores.
pub(crate) fn par_copy(src: &[f32], dst: &mut [f32]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(1 << 18)
        .zip(src.par_chunks(1 << 18))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// `1/v` for `v` above `WEIGHT_FLOOR` × the largest, else 0 (as tomors-core).
pub(crate) fn invert(a: &mut [f32]) {
    let max = a.iter().fold(0.0f64, |m, &v| m.max(v as f64));
    let floor = max * WEIGHT_FLOOR;
    a.iter_mut().for_each(|x| {
        let v = *x as f64;
        *x = if v > floor && v > 0.0 {
            (1.0 / v) as f32
        } else {
            0.0
        };
    });
}

/// Progress of [`sirt_cuda`]: called after every iteration of every slab.
#[derive(Clone, Copy, Debug)]
pub struct GpuIteration {
    /// The slab (0-based) and the number of slabs.
    pub slab: (usize, usize),
    /// Iterations done on this slab (1 after the first).
    pub iteration: usize,
    /// Relative residual `‖b − A·x‖/‖b‖` of this slab.
    pub residual: f64,
}

/// Device options of [`sirt_cuda`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuSirtOptions {
    /// Slices per slab (0: as many as fit in device memory, shared evenly
    /// between the devices).
    pub slab: usize,
    /// Slices per thread: 4 or 8 (0: 8 for stacks of 8 slices or more, else 4).
    pub slice_group: usize,
    /// Projections per forward-projection thread, 1 to 4 (0: the default, 4).
    pub rays_per_thread: usize,
    /// Two threads per forward-projection ray (`None`: the default).
    pub paired: Option<bool>,
    /// Slices per back-projection thread, 4, 8 or 16 (0: the default).
    pub back_slice_group: usize,
}

/// Times of a [`sirt_cuda`] run, summed over slabs and devices.
#[derive(Clone, Debug, Default)]
pub struct SirtStats {
    /// Slabs.
    pub slabs: usize,
    /// Iterations done (summed over slabs).
    pub iterations: usize,
    /// Forward-projection kernel time (s, CUDA events), the initial one included.
    pub forward_s: f64,
    /// Back-projection kernel time (s, CUDA events).
    pub back_s: f64,
    /// Update and residual kernels (s, CUDA events).
    pub elementwise_s: f64,
    /// Iteration loop wall time (s), summed over slabs.
    pub loop_s: f64,
    /// Setup: module, weights, uploads (wall, s), summed over slabs.
    pub setup_s: f64,
    /// Downloads of the volume (wall, s), summed over slabs.
    pub download_s: f64,
    /// Freeing device and pinned memory (wall, s).
    pub free_s: f64,
    /// The whole call (wall, s).
    pub total_s: f64,
    /// Forward projections timed.
    pub forward_count: usize,
}

impl SirtStats {
    fn add(&mut self, o: &SirtStats) {
        self.slabs += o.slabs;
        self.iterations += o.iterations;
        self.forward_s += o.forward_s;
        self.back_s += o.back_s;
        self.elementwise_s += o.elementwise_s;
        self.loop_s += o.loop_s;
        self.setup_s += o.setup_s;
        self.download_s += o.download_s;
        self.forward_count += o.forward_count;
        self.free_s += o.free_s;
    }
}

pub(crate) fn check_constraint(c: &Constraint) -> Result<()> {
    for v in [c.min, c.max].into_iter().flatten() {
        if !v.is_finite() {
            return Err(CudaError::Parameter(format!(
                "constraint bound {v} is not finite"
            )));
        }
    }
    if let (Some(lo), Some(hi)) = (c.min, c.max) {
        if lo > hi {
            return Err(CudaError::Parameter(format!(
                "constraint minimum {lo} exceeds maximum {hi}"
            )));
        }
    }
    Ok(())
}

pub(crate) fn clamp(c: &Constraint, v: f32) -> f32 {
    let mut v = v;
    if let Some(lo) = c.min {
        if v < lo as f32 {
            v = lo as f32;
        }
    }
    if let Some(hi) = c.max {
        if v > hi as f32 {
            v = hi as f32;
        }
    }
    v
}

pub(crate) fn find_non_finite(a: &ArrayView3<'_, f32>, what: &str) -> Result<()> {
    use rayon::prelude::*;
    let all_finite = a
        .outer_iter()
        .into_par_iter()
        .all(|s| s.iter().all(|v| v.is_finite()));
    if all_finite {
        return Ok(());
    }
    if let Some((pos, _)) = a.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(CoreError::Data(format!("{what} has a non-finite value at {pos:?}")).into());
    }
    Ok(())
}

/// Checks the inputs of [`sirt_cuda`] (no GPU needed): the algorithm is
/// SIRT, at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box, sinograms that
/// fit the geometry, an initial volume that fits the grid, finite data.
/// Returns the weighting.
pub fn check_sirt_inputs(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: &ArrayView3<'_, f32>,
    initial: Option<&ArrayView3<'_, f32>>,
    options: &IterativeOptions,
) -> Result<Weighting> {
    let weighting = check_options(options)?;
    let (ns, na, nb) = sinograms.dim();
    if na != geometry.n_angles() || nb != geometry.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the geometry {} × {}",
            geometry.n_angles(),
            geometry.n_bins()
        ))
        .into());
    }
    if ns == 0 {
        return Err(CoreError::Shape("no sinograms to reconstruct".into()).into());
    }
    if let Some(x0) = initial {
        if x0.dim() != (ns, grid.ny, grid.nx) {
            return Err(CoreError::Shape(format!(
                "initial volume is {:?}, expected {:?}",
                x0.dim(),
                (ns, grid.ny, grid.nx)
            ))
            .into());
        }
    }
    check_sizes(geometry, grid)?;
    find_non_finite(sinograms, "the sinogram data")?;
    if let Some(x0) = initial {
        find_non_finite(x0, "the initial volume")?;
    }
    Ok(weighting)
}

/// Checks the options of the GPU SIRT runs (no GPU needed): the algorithm
/// is SIRT, at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box. Returns the
/// weighting.
pub(crate) fn check_options(options: &IterativeOptions) -> Result<Weighting> {
    let weighting = match options.algorithm {
        Algorithm::Sirt(w) => w,
        other => {
            return Err(CudaError::Parameter(format!(
                "the GPU runs SIRT (sirt, landweber, cimmino) only, not {other:?}; use the CPU"
            )))
        }
    };
    if options.iterations == 0 {
        return Err(CudaError::Parameter(
            "the iteration count must be at least 1".into(),
        ));
    }
    if let Some(l) = options.relaxation {
        if !(l.is_finite() && l > 0.0) {
            return Err(CudaError::Parameter(format!(
                "relaxation {l} must be a positive finite number"
            )));
        }
    }
    if let Some(tol) = options.tolerance {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(CudaError::Parameter(format!(
                "tolerance {tol} must be a non-negative finite number"
            )));
        }
    }
    check_constraint(&options.constraint)?;
    Ok(weighting)
}

/// Per-slab outcome.
struct SlabOut {
    sq: Vec<f64>,
    b_sq: f64,
    stop: StopReason,
}

struct Shared<'a> {
    lambda: f64,
    options: &'a IterativeOptions,
    progress: &'a (dyn Fn(&GpuIteration) -> bool + Sync),
    stop: AtomicBool,
    slabs: usize,
}

/// One device's state for a run: projector and weights.
struct DeviceRun {
    op: CudaJoseph,
    m: Option<DeviceBuffer>,
    t: Option<DeviceBuffer>,
}

/// Runs SIRT on one slab (host views of its sinograms, initial volume and
/// output), resident on the device.
fn solve_slab(
    dev: &DeviceRun,
    index: usize,
    b_host: ArrayView3<'_, f32>,
    x0: Option<ArrayView3<'_, f32>>,
    out: ArrayViewMut3<'_, f32>,
    sh: &Shared<'_>,
    stats: &mut SirtStats,
) -> Result<SlabOut> {
    let op = &dev.op;
    let t_setup = Instant::now();
    let ns = b_host.len_of(Axis(0));
    let b_sq: f64 = {
        use rayon::prelude::*;
        b_host
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
    let b = op.alloc_sinograms(ns)?;
    let r = op.alloc_sinograms(ns)?;
    let x = op.alloc_volume(ns)?;
    let mut xt = op.alloc_volume(ns)?;
    let g = op.alloc_volume(ns)?;
    op.upload_into(b_host, &b, &r)?;
    match x0 {
        Some(x0) => {
            let c = sh.options.constraint;
            let clamped = x0.mapv(|v| clamp(&c, v));
            op.upload_into(clamped.view(), &x, &g)?;
        }
        None => op.fill(&x, clamp(&sh.options.constraint, 0.0))?,
    }
    op.transpose_dev(&x, &mut xt)?;
    op.stream.synchronize()?;
    stats.setup_s += t_setup.elapsed().as_secs_f64();

    let ctx = &op.ctx;
    let ev: Vec<Event> = (0..5).map(|_| Event::new(ctx)).collect::<Result<_>>()?;
    let t_loop = Instant::now();
    // r = A x, then r = M (b − A x).
    ev[0].record(&op.stream)?;
    op.forward_impl(&x, &xt, &r, false)?;
    ev[1].record(&op.stream)?;
    op.residual(&b, &r, dev.m.as_ref())?;
    ev[1].synchronize()?;
    stats.forward_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
    stats.forward_count += 1;
    let lambda = sh.lambda as f32;
    let mut sq = Vec::with_capacity(sh.options.iterations);
    let mut stop = StopReason::Iterations;
    for it in 1..=sh.options.iterations {
        if sh.stop.load(Ordering::Relaxed) {
            stop = StopReason::Callback;
            break;
        }
        ev[0].record(&op.stream)?;
        op.back_impl(&r, &g)?;
        ev[1].record(&op.stream)?;
        op.update(&x, &xt, &g, dev.t.as_ref(), lambda, &sh.options.constraint)?;
        ev[2].record(&op.stream)?;
        op.forward_impl(&x, &xt, &r, false)?;
        ev[3].record(&op.stream)?;
        op.residual(&b, &r, dev.m.as_ref())?;
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
        sq.push(r2);
        let info = GpuIteration {
            slab: (index, sh.slabs),
            iteration: it,
            residual: res,
        };
        if !(sh.progress)(&info) {
            sh.stop.store(true, Ordering::Relaxed);
            stop = StopReason::Callback;
            break;
        }
        if let Some(tol) = sh.options.tolerance {
            if res <= tol {
                stop = StopReason::Tolerance;
                break;
            }
        }
    }
    stats.loop_s += t_loop.elapsed().as_secs_f64();
    let t_down = Instant::now();
    op.download_from(&x, &g, out)?;
    stats.download_s += t_down.elapsed().as_secs_f64();
    let t_free = Instant::now();
    drop((b, r, x, xt, g, ev));
    stats.free_s += t_free.elapsed().as_secs_f64();
    stats.slabs += 1;
    Ok(SlabOut { sq, b_sq, stop })
}

/// SIRT on one GPU: see [`sirt_cuda_multi`].
#[allow(clippy::too_many_arguments)]
pub fn sirt_cuda(
    backend: &CudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    sirt_on(
        &[backend],
        geometry,
        grid,
        sinograms,
        initial,
        options,
        gpu,
        progress,
    )
}

/// SIRT (`options.algorithm` must be [`Algorithm::Sirt`]) of `sinograms`
/// (`[slice][angle][bin]`) on the devices of `backend`, resident on each
/// device: slabs of slices are handed round-robin to the devices, each slab
/// is uploaded once, iterated `options.iterations` times (or until its
/// relative residual reaches `options.tolerance`, or `progress` returns
/// `false`, which stops every slab) and downloaded once.
///
/// The result matches tomors-core's
/// [`reconstruct`](tomors_core::iterative::reconstruct) with the
/// [`JosephProjector`](tomors_core::iterative::JosephProjector) in f32 up to
/// rounding; the relaxation defaults to 1 for row/column sums and to
/// `1/ρ(T·Aᵀ·M·A)` (power iteration on the first device) otherwise. The
/// residual history is the relative residual of the whole stack (slabs that
/// stopped early count with their last residual).
///
/// Errors: those of [`check_sirt_inputs`], device memory too small for one
/// group of slices, driver, compilation and launch errors, divergence.
#[allow(clippy::too_many_arguments)]
pub fn sirt_cuda_multi(
    backend: &MultiCudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let devs: Vec<&CudaBackend> = backend.devices().iter().collect();
    sirt_on(
        &devs, geometry, grid, sinograms, initial, options, gpu, progress,
    )
}

#[allow(clippy::too_many_arguments)]
fn sirt_on(
    devices: &[&CudaBackend],
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let weighting = check_sirt_inputs(geometry, grid, &sinograms, initial.as_ref(), options)?;
    if devices.is_empty() {
        return Err(CudaError::Parameter("no CUDA device selected".into()));
    }
    let (ns, na, nb) = sinograms.dim();
    let (ny, nx) = (grid.ny, grid.nx);
    let sg = match gpu.slice_group {
        0 => {
            if ns >= 8 {
                8
            } else {
                4
            }
        }
        s => s,
    };
    let t0 = Instant::now();
    // One projector and the weights per device (in parallel).
    let runs: Vec<Result<DeviceRun>> = std::thread::scope(|s| {
        let hs: Vec<_> = devices
            .iter()
            .map(|d| {
                s.spawn(move || -> Result<DeviceRun> {
                    let ap = if gpu.rays_per_thread == 0 {
                        AP
                    } else {
                        gpu.rays_per_thread
                    };
                    let bsg = match gpu.back_slice_group {
                        0 => DEFAULT_BACK_GROUP.min(if ns >= 16 { 16 } else { sg }),
                        b => b,
                    };
                    let op = CudaJoseph::tuned(
                        d,
                        geometry,
                        grid,
                        &JosephTuning {
                            slice_group: sg,
                            back_slice_group: bsg,
                            rays_per_thread: ap,
                            paired: gpu.paired.unwrap_or(DEFAULT_PAIR),
                        },
                    )?;
                    let (m, t) = op.weights(weighting)?;
                    Ok(DeviceRun { op, m, t })
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CudaError::Parameter("a device thread panicked".into()))
                })
            })
            .collect()
    });
    let runs: Vec<DeviceRun> = runs.into_iter().collect::<Result<_>>()?;
    let lambda = match options.relaxation {
        Some(l) => l,
        None if weighting == Weighting::RowColumnSums => 1.0,
        None => {
            let r = &runs[0];
            let rho =
                r.op.power_iteration(r.m.as_ref(), r.t.as_ref(), POWER_ITERATIONS)?;
            if rho <= 0.0 {
                return Err(CoreError::Data(
                    "the projector is zero on this grid (no ray meets the image)".into(),
                )
                .into());
            }
            1.0 / rho
        }
    };
    // Slab size: what fits beside 512 MiB spare on the smallest device,
    // shared evenly between the devices.
    let unit = runs.iter().map(|r| r.op.pad).max().unwrap_or(sg);
    let per_group = unit * 4 * (2 * na * nb + 3 * ny * nx);
    let mut fit = usize::MAX;
    for r in &runs {
        let (free, _) = r.op.ctx.mem_info()?;
        fit = fit.min(free.saturating_sub(512 << 20) / per_group.max(1));
    }
    if fit == 0 {
        return Err(CudaError::OutOfMemory {
            what: format!("holding {unit} slices of the SIRT state"),
            bytes: per_group,
        });
    }
    let even = ns.div_ceil(devices.len()).div_ceil(unit) * unit;
    let mut slab = (fit * unit).min(even).min(MAX_SLAB_SLICES).max(unit);
    if gpu.slab > 0 {
        slab = slab.min(gpu.slab.div_ceil(unit) * unit).max(unit);
    }
    let n_slabs = ns.div_ceil(slab);
    let setup_s = t0.elapsed().as_secs_f64();

    let mut x = Array3::<f32>::zeros((ns, ny, nx));
    let sh = Shared {
        lambda,
        options,
        progress,
        stop: AtomicBool::new(false),
        slabs: n_slabs,
    };
    type Job<'v> = (
        usize,
        ArrayView3<'v, f32>,
        Option<ArrayView3<'v, f32>>,
        ArrayViewMut3<'v, f32>,
    );
    let mut per_dev: Vec<Vec<Job<'_>>> = (0..devices.len()).map(|_| Vec::new()).collect();
    let x0_chunks: Vec<Option<ArrayView3<'_, f32>>> = match &initial {
        Some(x0) => x0.axis_chunks_iter(Axis(0), slab).map(Some).collect(),
        None => vec![None; n_slabs],
    };
    for (i, ((b, x0), o)) in sinograms
        .axis_chunks_iter(Axis(0), slab)
        .zip(x0_chunks)
        .zip(x.axis_chunks_iter_mut(Axis(0), slab))
        .enumerate()
    {
        per_dev[i % devices.len()].push((i, b, x0, o));
    }
    let outs: Mutex<Vec<(usize, SlabOut)>> = Mutex::new(Vec::new());
    let total = Mutex::new(SirtStats::default());
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let hs: Vec<_> = runs
            .iter()
            .zip(per_dev)
            .map(|(run, jobs)| {
                let (sh, outs, total) = (&sh, &outs, &total);
                s.spawn(move || -> Result<()> {
                    let mut st = SirtStats::default();
                    for (i, b, x0, o) in jobs {
                        let r = solve_slab(run, i, b, x0, o, sh, &mut st);
                        match r {
                            Ok(out) => outs
                                .lock()
                                .map_err(|_| CudaError::Parameter("poisoned lock".into()))?
                                .push((i, out)),
                            Err(e) => {
                                sh.stop.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    total
                        .lock()
                        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?
                        .add(&st);
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CudaError::Parameter("a device thread panicked".into()))
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let mut outs = outs
        .into_inner()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    outs.sort_by_key(|o| o.0);
    let mut stats = total
        .into_inner()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    stats.setup_s += setup_s;
    let t_free = Instant::now();
    drop(runs);
    stats.free_s += t_free.elapsed().as_secs_f64();
    stats.total_s = t0.elapsed().as_secs_f64();
    let done = outs.iter().map(|o| o.1.sq.len()).max().unwrap_or(0);
    let b_sq: f64 = outs.iter().map(|o| o.1.b_sq).sum();
    let b_norm = b_sq.sqrt();
    let residuals: Vec<f64> = (0..done)
        .map(|it| {
            let r2: f64 = outs
                .iter()
                .map(|o| o.1.sq.get(it).or(o.1.sq.last()).copied().unwrap_or(b_sq))
                .sum();
            if b_norm > 0.0 {
                r2.sqrt() / b_norm
            } else {
                r2.sqrt()
            }
        })
        .collect();
    let stop = if outs.iter().any(|o| o.1.stop == StopReason::Callback) {
        StopReason::Callback
    } else if outs.iter().all(|o| o.1.stop == StopReason::Tolerance) {
        StopReason::Tolerance
    } else {
        StopReason::Iterations
    };
    Ok((
        IterativeResult {
            x,
            residuals,
            iterations: done,
            relaxation: lambda,
            stop,
        },
        stats,
    ))
}
