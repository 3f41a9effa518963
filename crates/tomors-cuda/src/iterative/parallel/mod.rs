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
//! - As a tomors-core [`LinearOperator`](tomors_core::linalg::LinearOperator)
//!   on stacks of `slices` slices ([`CudaJoseph::operator`],
//!   [`JosephStackOp`]): domain and range are [`DeviceVec`]s
//!   (`[slice][y][x]`, `[slice][angle][bin]`, interleaved), a block of
//!   projections runs the same kernels with the block's own angle tables
//!   (built and uploaded once per block, then cached), and the SIRT
//!   weights are single planes broadcast over the slices. Every
//!   iterative method of tomors-core's
//!   [`solve`](tomors_core::iterative::solve) that needs no single rays
//!   (SIRT, SART, BLOCK-IT) runs on it, resident on the device.
//! - The voxel pair ([`CudaJoseph::set_voxel_back`], [`VoxelKernel`]):
//!   Joseph's forward projection with FBP's exact voxel-driven back
//!   projection kernels (`voxel.rs`), as tomors-core's
//!   [`VoxelDrivenProjector`](tomors_core::iterative::VoxelDrivenProjector)
//!   and ASTRA's `SIRT3D_CUDA`: unmatched, SIRT only.
//! - [`sirt_cuda`] / [`sirt_cuda_multi`]: upload once,
//!   [`solve`](tomors_core::iterative::solve) on the device, download
//!   once; stacks larger than the device memory are cut into slabs of
//!   slices (slices are independent), and several devices share the slabs.

use std::sync::Arc;

use ndarray::{Array3, ArrayView3, ArrayViewMut3, Axis};
use tomors_core::{CoreError, ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::CudaBackend;
use crate::iterative::blocks::BlockCache;
use crate::iterative::device::{DeviceVec, KernelKind, Layout, OnQueue, Queue};
use crate::runtime::compile::cubin_cached;
use crate::runtime::{Arg, Context, Function, Module};

mod art;
mod foreign;
mod line;
mod operator;
mod ops;
mod sirt;
mod sweep;
mod tables;
mod voxel;

pub use art::{joseph_art_strides, ART_CU};
pub use line::LINE_CU;
pub use operator::JosephStackOp;
pub use sirt::{check_sirt_inputs, sirt_cuda, sirt_cuda_multi, GpuSirtOptions};
pub use sweep::JOSEPH_SWEEP_CU;
use tables::{
    angle_tables, BlockTables, BpAngle, FpAngle, AP, DEFAULT_BACK_GROUP, DEFAULT_BPU, DEFAULT_PAIR,
    DEFAULT_QUAD, DEFAULT_QUAD_BACK_GROUP,
};
pub use voxel::VoxelKernel;

/// Source of the Joseph projector and SIRT kernels.
pub const JOSEPH_CU: &str = include_str!("../../../kernels/joseph.cu");

/// Most slices of one device stack (the kernels' grids have at most 65535
/// quads of 4 slices in z).
const MAX_SLAB_SLICES: usize = 65_528 * 4;

/// Largest pixel size / bin width ratio the back projector's gather handles.
const MAX_EXTRA_BINS: usize = 8;

/// Kernel parameters of [`CudaJoseph`] (tuning knobs: results do not depend
/// on them beyond rounding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JosephTuning {
    /// Slices per forward-projection thread (4, 8 or 16).
    pub slice_group: usize,
    /// Slices per back-projection thread (4, 8 or 16).
    pub back_slice_group: usize,
    /// Neighbouring projections per forward-projection thread (1 to 4).
    pub rays_per_thread: usize,
    /// Two threads per forward-projection ray, each reading one of the two
    /// pixels of every step.
    pub paired: bool,
    /// Back projection with 2×2 pixels per thread sharing their four bins
    /// (`jp_back_quad`), where every hat spans at most one bin (bins at
    /// least as wide as the pixels' footprint); else the one-pixel kernel.
    pub back_quad: bool,
}

impl Default for JosephTuning {
    fn default() -> Self {
        Self {
            slice_group: 8,
            back_slice_group: DEFAULT_BACK_GROUP,
            rays_per_thread: AP,
            paired: DEFAULT_PAIR,
            back_quad: DEFAULT_QUAD,
        }
    }
}

/// An interleaved stack on the device: `slices` images of `rows × cols`
/// stored as `[quad][row][col][slice in quad]` with quads of 4 slices,
/// padded with slices to a multiple of the projector's slice groups
/// ([`Layout::Stack`]). Volumes are `[slice][y][x]` stacks, sinograms
/// `[slice][angle][bin]`.
pub type DeviceStack = DeviceVec;

struct Fns {
    forward: Function,
    forward_sq: Function,
    back: Function,
    /// `jp_back_quad`, when selected and possible.
    back_quad: Option<Function>,
    interleave: Function,
    deinterleave: Function,
    transpose: Function,
    /// The voxel pair's packing from the interleaved sinograms.
    pack_sweep2: Function,
    /// The voxel pair's column sums.
    voxel_ones: Function,
}

/// Joseph's projector on one GPU for a parallel-beam geometry and slice
/// grid: forward and exact back projection of device-resident stacks
/// ([`DeviceStack`]), host convenience methods ([`CudaJoseph::forward`],
/// [`CudaJoseph::back`]), and a tomors-core linear operator on stacks
/// ([`CudaJoseph::operator`]). Its kernels and those of its vectors run in
/// order on one stream ([`OnQueue`]).
pub struct CudaJoseph {
    queue: Arc<Queue>,
    _module: Module,
    f: Fns,
    sg: usize,
    bsg: usize,
    pad: usize,
    nx: usize,
    ny: usize,
    na: usize,
    nb: usize,
    ap: usize,
    pair: usize,
    /// Host copies of the per-projection tables (for block tables).
    fp_host: Vec<FpAngle>,
    bp_host: Vec<BpAngle>,
    /// Projection angles modulo π (the order of the forward groups).
    keys: Vec<f64>,
    /// The tables of all projections and of other blocks.
    blocks: BlockCache<BlockTables>,
    /// The ART kernels, compiled on first use.
    art: art::ArtCell,
    /// The line-length model's kernels when it is selected
    /// ([`CudaJoseph::set_line_model`]).
    line: Option<line::LineKernels>,
    /// The line-sweep kernels, when selected
    /// ([`CudaJoseph::set_sweep_forward`], [`CudaJoseph::set_sweep_back`]).
    sweep: Option<sweep::SweepForward>,
    /// Extra bins on each side of the back projection's gather (`KM`).
    km: usize,
    /// The voxel-driven back projection, when selected
    /// ([`CudaJoseph::set_voxel_back`]).
    voxel: Option<voxel::VoxelBack>,
    geometry: ParallelGeometry,
    grid: SliceGrid,
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
        if ![4, 8, 16].contains(&sg) {
            return Err(CudaError::Parameter(format!(
                "slice group {sg}: use 4, 8 or 16"
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
        let quad = tuning.back_quad && extra == 0;
        let mut defines = vec![
            ("SG".to_string(), sg.to_string()),
            ("SGB".to_string(), bsg.to_string()),
            ("KM".to_string(), extra.to_string()),
            ("AP".to_string(), ap.to_string()),
            (
                "PAIR".to_string(),
                if paired { "2" } else { "1" }.to_string(),
            ),
            ("BPU".to_string(), DEFAULT_BPU.to_string()),
        ];
        if quad {
            defines.push(("BPQ".to_string(), "1".to_string()));
            // Quarter warps of 4×2 threads (8×4 pixels): 22.8 ms against 23.4 ms
            // for 8×1 at 512³ from 512 angles on an H200
            // (`docs/runs/2026-11-27-h200-sirtfast-run3.txt`).
            defines.push(("BQZ".to_string(), "1".to_string()));
        }
        let (cubin, _) =
            cubin_cached("joseph", JOSEPH_CU, &defines, &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(&ctx, &cubin)?;
        let f = Fns {
            forward: module.function("jp_forward")?,
            forward_sq: module.function("jp_forward_sq")?,
            back: module.function("jp_back")?,
            back_quad: if quad {
                Some(module.function("jp_back_quad")?)
            } else {
                None
            },
            interleave: module.function("jp_interleave")?,
            deinterleave: module.function("jp_deinterleave")?,
            transpose: module.function("jp_transpose")?,
            pack_sweep2: module.function("jp_pack_sweep2")?,
            voxel_ones: module.function("jp_voxel_ones")?,
        };
        let queue = Queue::new(ctx)?;
        let keys: Vec<f64> = geometry
            .angles()
            .iter()
            .map(|&a| (a as f64).rem_euclid(std::f64::consts::PI))
            .collect();
        let all: Vec<usize> = (0..geometry.n_angles()).collect();
        let full = BlockTables::new(&queue, &all, &fp, &bp, &keys, ap)?;
        Ok(Self {
            queue,
            _module: module,
            f,
            sg,
            bsg,
            pad: sg.max(bsg),
            nx: grid.nx,
            ny: grid.ny,
            na: geometry.n_angles(),
            nb: geometry.n_bins(),
            ap,
            pair: if paired { 2 } else { 1 },
            fp_host: fp,
            bp_host: bp,
            keys,
            blocks: BlockCache::new(geometry.n_angles(), full),
            art: art::ArtCell::new(),
            line: None,
            sweep: None,
            km: extra,
            voxel: None,
            geometry: geometry.clone(),
            grid: *grid,
        })
    }

    /// Slices per forward-projection thread (4 or 8).
    pub fn slice_group(&self) -> usize {
        self.sg
    }

    /// Slices per back-projection thread (4, 8 or 16).
    pub fn back_slice_group(&self) -> usize {
        self.bsg
    }

    /// `(ny, nx)` of the images.
    pub fn image_dim(&self) -> (usize, usize) {
        (self.ny, self.nx)
    }

    /// `(angles, bins)` of the sinograms.
    pub fn sinogram_dim(&self) -> (usize, usize) {
        (self.na, self.nb)
    }
}

impl OnQueue for CudaJoseph {
    fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }
}

impl Drop for CudaJoseph {
    fn drop(&mut self) {
        // Kernels of this projector's module may still be queued (vectors
        // can outlive it): let them finish before the module is unloaded.
        let _ = self.queue.stream().synchronize();
    }
}
