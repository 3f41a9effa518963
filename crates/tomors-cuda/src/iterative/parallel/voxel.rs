//! The voxel-driven back projection of the parallel-beam voxel pair
//! ([`CudaJoseph::set_voxel_back`]): Joseph's forward projection with
//! FBP's exact back projection kernels (`--kernel sweep` or `--kernel
//! tensor`, compiled from their public parameters and launched on the
//! projector's stream), scaled as tomors-core's
//! [`VoxelDrivenProjector`](tomors_core::iterative::VoxelDrivenProjector):
//! `pixel² / bin_width · Σ_θ p_θ(u)`, linear interpolation at each pixel
//! centre, zero outside the detector. Unmatched (`B ≈ Aᵀ`), as ASTRA's
//! `SIRT3D_CUDA`.
//!
//! Per back projection: the interleaved sinograms are de-interleaved into
//! flat rows (`[slice][angle][bin]`, what the FBP kernels' packing reads),
//! packed into the kernel's entries (the line sweep's straight from the
//! interleaved sinograms, `jp_pack_sweep2`), back projected into a flat
//! volume (in the flat rows' buffer) and interleaved into the projector's
//! layout. The layout and packing kernels
//! are timed as element-wise work, the back projection kernel as the back
//! projection.
//!
//! FBP entry points used (`crate::fbp`): `sweep::{SweepParams::tuned,
//! sweep_defines, shared_bytes, row_slots, entry_bytes, padded_bins_staged,
//! SWEEP_CU}`, `tensor::{TensorParams::tuned, tensor_defines, shared_bytes,
//! slots, maxima_bytes, entry_bytes, padded_angles, padded_bins,
//! check_geometry, check_device, TENSOR_CU}`,
//! `kernels::projection_coefficients_f64`, and the kernels `pack_sweep`,
//! `bp_sweep`, `tc_zero`, `tc_absmax`, `pack_tensor`, `bp_tensor` with the
//! signatures FBP's engine launches them with.

use std::sync::Mutex;

use crate::fbp::kernels::projection_coefficients_f64;
use crate::fbp::sweep::{self as fsweep, SweepParams};
use crate::fbp::tensor::{self as ftensor, TensorParams};
use crate::runtime::{launch, DeviceBuffer};

use super::*;

/// The FBP kernel of the voxel pair's back projection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VoxelKernel {
    /// The tensor-core kernel where the geometry and the device allow it
    /// (faster: 14.9 against 17.4 ms at 512³ from 512 angles on an H200,
    /// `docs/perf-notes.md`, helper psirt2), else the line-sweep kernel.
    #[default]
    Auto,
    /// FBP's line-sweep kernel (`--kernel sweep`, exact f32 linear
    /// interpolation, any bin width) in its tuned shape
    /// ([`SweepParams::tuned`]).
    Sweep,
    /// FBP's tensor-core kernel (`--kernel tensor`, f32-class results from
    /// split f16 products; pixels at most ≈ 1.17 bins wide; compute
    /// capability 8.0 on) in its tuned shape ([`TensorParams::tuned`]).
    Tensor,
    /// The line-sweep kernel in another shape (for benchmarks).
    SweepShape(SweepParams),
    /// The tensor-core kernel in another shape (for benchmarks).
    TensorShape(TensorParams),
}

impl VoxelKernel {
    /// The kernel's name and shape, e.g. `sweep@x4,y8,s2,u4,v2,a1,b2,p4,z16`
    /// (`auto` for [`VoxelKernel::Auto`]).
    pub fn name(self) -> String {
        if self == VoxelKernel::Auto {
            return "auto".into();
        }
        match self.params() {
            Params::Sweep(p) => format!("sweep@{}", p.spec()),
            Params::Tensor(p) => format!("tensor@{}", p.spec()),
        }
    }

    /// Parses `auto`, `sweep`, `tensor`, `sweep@SPEC` or `tensor@SPEC` (the specs of
    /// [`SweepParams::parse`] and [`TensorParams::parse`]).
    ///
    /// Errors: another name, a bad spec.
    pub fn parse(s: &str) -> Result<Self> {
        let (name, spec) = match s.split_once('@') {
            Some((n, sp)) => (n.trim(), Some(sp)),
            None => (s.trim(), None),
        };
        Ok(match (name, spec) {
            ("auto", None) => VoxelKernel::Auto,
            ("sweep", None) => VoxelKernel::Sweep,
            ("tensor", None) => VoxelKernel::Tensor,
            ("sweep", Some(sp)) => VoxelKernel::SweepShape(SweepParams::parse(sp)?),
            ("tensor", Some(sp)) => VoxelKernel::TensorShape(TensorParams::parse(sp)?),
            _ => {
                return Err(CudaError::Parameter(format!(
                    "voxel back projection kernel '{s}' (use auto, sweep or tensor, optionally \
                     @SPEC)"
                )))
            }
        })
    }

    /// The kernel [`VoxelKernel::Auto`] takes on a device of compute
    /// capability `cc` for `geometry` and `grid`: the tensor-core kernel
    /// where it runs, else the line sweep.
    pub fn resolve(self, cc: (i32, i32), geometry: &ParallelGeometry, grid: &SliceGrid) -> Self {
        if self != VoxelKernel::Auto {
            return self;
        }
        let tensor = ftensor::check_device(cc).is_ok()
            && ftensor::check_geometry(geometry, grid).is_ok()
            && TensorParams::tuned().for_device(cc).validate().is_ok();
        if tensor {
            VoxelKernel::Tensor
        } else {
            VoxelKernel::Sweep
        }
    }

    /// The kernel's parameters on a device of compute capability `cc`.
    fn params_for(self, cc: (i32, i32)) -> Params {
        match self {
            VoxelKernel::Tensor => Params::Tensor(TensorParams::tuned().for_device(cc)),
            k => k.params(),
        }
    }

    /// The kernel's parameters (the line sweep's for [`VoxelKernel::Auto`]).
    fn params(self) -> Params {
        match self {
            VoxelKernel::Auto | VoxelKernel::Sweep => Params::Sweep(SweepParams::tuned()),
            VoxelKernel::Tensor => Params::Tensor(TensorParams::tuned()),
            VoxelKernel::SweepShape(p) => Params::Sweep(p),
            VoxelKernel::TensorShape(p) => Params::Tensor(p),
        }
    }
}

#[derive(Clone, Copy)]
enum Params {
    Sweep(SweepParams),
    Tensor(TensorParams),
}

/// Scratch buffers of one stack size (grown on demand, never shrunk): the
/// flat rows (the de-interleaved sinograms the packing reads, then, once
/// packed, the flat volume the FBP kernel writes: one buffer, in stream
/// order) and the entries.
struct Scratch {
    slices: usize,
    flat: DeviceBuffer,
    ent: DeviceBuffer,
}

/// The compiled FBP kernel and its state for one geometry and grid.
pub(super) struct VoxelBack {
    /// The kernel asked for.
    kernel: VoxelKernel,
    /// The kernel it runs ([`VoxelKernel::resolve`]).
    resolved: VoxelKernel,
    params: Params,
    _module: Module,
    bp: Function,
    pack: Function,
    /// `tensor` only: `tc_zero` and `tc_absmax`.
    maxima: Option<(Function, Function)>,
    /// `[c0 | cx | cy]` in f64 (FBP's per-projection coordinates).
    dconst: DeviceBuffer,
    shared: usize,
    /// Padded bin rows of the entry layout.
    nbp: usize,
    scale: f32,
    geometry: ParallelGeometry,
    grid: SliceGrid,
    scratch: Mutex<Option<Scratch>>,
    /// The sweep's entries packed straight from the interleaved sinograms
    /// (`jp_pack_sweep2`, 2 slices per lane) instead of de-interleaved
    /// first and packed by FBP's `pack_sweep`.
    fused: bool,
}

impl VoxelBack {
    /// Compiles `kernel`'s module for `geometry` and `grid` on `ctx`.
    ///
    /// Errors: a geometry or device the kernel does not support,
    /// compilation and driver errors.
    pub(super) fn new(
        ctx: &Arc<Context>,
        kernel: VoxelKernel,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
    ) -> Result<Self> {
        ctx.bind()?;
        let (requested, kernel) = (kernel, kernel.resolve(ctx.cc, geometry, grid));
        let (params, name, src, defines, shared, nbp) = match kernel.params_for(ctx.cc) {
            Params::Sweep(p) => {
                p.validate()?;
                let (_, nbp) = fsweep::padded_bins_staged(p, geometry, grid);
                (
                    Params::Sweep(p),
                    "backproject_sweep",
                    fsweep::SWEEP_CU,
                    fsweep::sweep_defines(p, geometry, grid),
                    fsweep::shared_bytes(p, geometry, grid),
                    nbp,
                )
            }
            Params::Tensor(p) => {
                p.validate()?;
                ftensor::check_device(ctx.cc)?;
                ftensor::check_bulk(p, ctx.cc)?;
                ftensor::check_geometry(geometry, grid)?;
                let (_, nbp) = ftensor::padded_bins(p, geometry, grid);
                (
                    Params::Tensor(p),
                    "backproject_tensor",
                    ftensor::TENSOR_CU,
                    ftensor::tensor_defines(p, geometry, grid),
                    ftensor::shared_bytes(p, geometry, grid),
                    nbp,
                )
            }
        };
        let (cubin, _) = cubin_cached(name, src, &defines, &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        let (bp, pack, maxima) = match params {
            Params::Sweep(_) => (
                module.function("bp_sweep")?,
                module.function("pack_sweep")?,
                None,
            ),
            Params::Tensor(_) => (
                module.function("bp_tensor")?,
                module.function("pack_tensor")?,
                Some((module.function("tc_zero")?, module.function("tc_absmax")?)),
            ),
        };
        if shared > 48 * 1024 {
            bp.set_max_dynamic_shared(shared).map_err(|e| {
                CudaError::Parameter(format!(
                    "voxel back projection ({}): {shared} B of shared memory per block for \
                     this geometry ({e})",
                    kernel.name()
                ))
            })?;
        }
        let coef = projection_coefficients_f64(geometry, grid);
        let dconst = DeviceBuffer::new(ctx, coef.len() * 8, "voxel projection constants")?;
        dconst.upload(&coef)?;
        let h = grid.pixel_size as f64;
        Ok(Self {
            kernel: requested,
            resolved: kernel,
            params,
            _module: module,
            bp,
            pack,
            maxima,
            dconst,
            shared,
            nbp,
            scale: (h * h / geometry.bin_width() as f64) as f32,
            geometry: geometry.clone(),
            grid: *grid,
            scratch: Mutex::new(None),
            fused: matches!(params, Params::Sweep(p) if p.spl == 2),
        })
    }

    /// The kernel.
    pub(super) fn kernel(&self) -> VoxelKernel {
        self.kernel
    }

    /// Bytes of the entry layout for `slices` slices.
    fn entry_bytes(&self, slices: usize) -> usize {
        match self.params {
            Params::Sweep(p) => fsweep::entry_bytes(p, &self.geometry, &self.grid, slices),
            Params::Tensor(p) => ftensor::entry_bytes(p, &self.geometry, &self.grid, slices),
        }
    }

    /// Device bytes per slice of the scratch buffers and the rounding of a
    /// stack (for the slab size).
    pub(super) fn bytes(&self) -> (usize, usize) {
        let (na, nb) = (self.geometry.n_angles(), self.geometry.n_bins());
        let per = 4 * (na * nb).max(self.grid.nx * self.grid.ny) + self.entry_bytes(128) / 128;
        (per, self.entry_bytes(128))
    }

    /// Launches `f` with `shared` bytes of dynamic shared memory on `p`'s
    /// stream, timed as `kind`.
    #[allow(clippy::too_many_arguments)]
    fn go(
        p: &CudaJoseph,
        kind: KernelKind,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: usize,
        args: &[Arg],
    ) -> Result<()> {
        let q = &p.queue;
        q.timed(kind, || {
            q.context().bind()?;
            // SAFETY: every caller passes parameters matching the FBP
            // kernel's signature (as FBP's engine launches it), with device
            // pointers into the scratch buffers sized for the launch.
            unsafe { launch(f, name, grid, block, shared as u32, q.stream(), args) }
        })
    }

    /// The column sums `B·1` (a plane `[y][x]`): the interpolated detector
    /// rows of ones summed over the projections in f64 and scaled
    /// (`jp_voxel_ones`; one pass instead of a back projection of a whole
    /// slice group).
    pub(super) fn column_sums(&self, p: &CudaJoseph) -> Result<DeviceVec> {
        let v = DeviceVec::uninit(
            &p.queue,
            Layout::Plane {
                rows: p.ny,
                cols: p.nx,
            },
            "voxel column sums",
        )?;
        let h = self.grid.pixel_size as f64;
        let scale = h * h / self.geometry.bin_width() as f64;
        p.launch(
            KernelKind::Elementwise,
            &p.f.voxel_ones,
            "jp_voxel_ones",
            (p.nx.div_ceil(128) as u32, p.ny as u32, 1),
            (128, 1, 1),
            &[
                v.buffer().ptr().into(),
                self.dconst.ptr().into(),
                (p.na as i32).into(),
                (p.nb as i32).into(),
                (p.nx as i32).into(),
                (p.ny as i32).into(),
                scale.into(),
            ],
        )?;
        Ok(v)
    }

    /// Queues `bp_sweep` of the entries at `ent` into the flat volume `vol`.
    fn bp_sweep(
        &self,
        p: &CudaJoseph,
        sp: SweepParams,
        (ent, vol): (u64, u64),
        slices: usize,
    ) -> Result<()> {
        let (shared, d) = (self.shared as u32, self.dconst.ptr());
        let l = fsweep::bp_launch(sp, (p.nx, p.ny), slices, ent, vol, self.scale, shared, d);
        let kind = KernelKind::Back;
        Self::go(
            p,
            kind,
            &self.bp,
            l.name,
            l.grid,
            l.block,
            self.shared,
            &l.args,
        )
    }

    /// Queues `out = B·sino` for `slices` interleaved sinograms at `sino`
    /// (all projections) into the interleaved volume at `out`.
    pub(super) fn back(&self, p: &CudaJoseph, sino: u64, out: u64, slices: usize) -> Result<()> {
        let (na, nb, nx, ny) = (p.na, p.nb, p.nx, p.ny);
        let quads = slices.div_ceil(p.pad) * p.pad / 4;
        let mut guard = self
            .scratch
            .lock()
            .map_err(|_| CudaError::Parameter("voxel scratch lock poisoned".into()))?;
        if guard.as_ref().is_none_or(|s| s.slices < slices) {
            // Frees the old buffers first (cuMemFree waits for the device).
            *guard = None;
            let ctx = p.queue.context();
            *guard = Some(Scratch {
                slices,
                flat: DeviceBuffer::new(
                    ctx,
                    slices * (na * nb).max(nx * ny) * 4,
                    "voxel flat rows",
                )?,
                ent: DeviceBuffer::new(ctx, self.entry_bytes(slices), "voxel entries")?,
            });
        }
        let s = guard.as_ref().expect("allocated");
        // The flat volume takes the flat sinograms' place once they are packed.
        let (flat, ent) = (s.flat.ptr(), s.ent.ptr());
        let vol = flat;
        if !self.fused {
            p.deinterleave(sino, flat, slices, na * nb, quads)?;
        }
        let (na_i, ns_i, scale) = (na as i32, slices as i32, self.scale);
        let (rs, pair) = (nb as i64, 0i32);
        let d = self.dconst.ptr();
        let ew = KernelKind::Elementwise;
        match self.params {
            Params::Sweep(sp) if self.fused => {
                let row = fsweep::row_slots(sp, slices);
                let blo = fsweep::padded_bins_staged(sp, &self.geometry, &self.grid).0;
                p.launch(
                    ew,
                    &p.f.pack_sweep2,
                    "jp_pack_sweep2",
                    (self.nbp.div_ceil(8) as u32, na as u32, (row / 32) as u32),
                    (32, 8, 1),
                    &[
                        sino.into(),
                        ent.into(),
                        na_i.into(),
                        (nb as i32).into(),
                        (self.nbp as i32).into(),
                        (blo as i32).into(),
                        ns_i.into(),
                    ],
                )?;
                self.bp_sweep(p, sp, (ent, vol), slices)?;
            }
            Params::Sweep(sp) => {
                let l = fsweep::pack_launch(sp, na, self.nbp, slices, (flat, rs, pair), ent);
                Self::go(p, ew, &self.pack, l.name, l.grid, l.block, 0, &l.args)?;
                self.bp_sweep(p, sp, (ent, vol), slices)?;
            }
            Params::Tensor(tp) => {
                let (zero, absmax) = self.maxima.as_ref().expect("tensor maxima kernels");
                let packs = ftensor::pack_launches(tp, na, self.nbp, slices, (flat, rs, pair), ent);
                for (f, l) in [zero, absmax, &self.pack].into_iter().zip(packs) {
                    Self::go(p, ew, f, l.name, l.grid, l.block, 0, &l.args)?;
                }
                let shared = self.shared as u32;
                let l = ftensor::bp_launch(tp, (nx, ny), slices, ent, vol, scale, shared, d);
                let kind = KernelKind::Back;
                Self::go(
                    p,
                    kind,
                    &self.bp,
                    l.name,
                    l.grid,
                    l.block,
                    self.shared,
                    &l.args,
                )?;
            }
        }
        p.interleave_raw(vol, out, slices, nx * ny, quads)
    }
}

impl CudaJoseph {
    /// Selects the voxel-driven back projection (`Some(kernel)`: the
    /// unmatched voxel pair, as tomors-core's
    /// [`VoxelDrivenProjector`](tomors_core::iterative::VoxelDrivenProjector))
    /// or Joseph's exact transpose (`None`, the default). The voxel pair
    /// back projects all projections at once: block views (SART, BLOCK-IT)
    /// and ray batches (ART) are refused.
    ///
    /// Errors: the line-length model or the line-sweep back projection
    /// selected, a geometry or device the kernel does not support,
    /// compilation and driver errors.
    pub fn set_voxel_back(&mut self, kernel: Option<VoxelKernel>) -> Result<()> {
        let Some(kernel) = kernel else {
            self.voxel = None;
            return Ok(());
        };
        if self.is_line_model() || self.sweep_back() {
            return Err(CudaError::Parameter(
                "the voxel-driven back projection pairs with Joseph's forward projection \
                 (not with the line-length model or the line-sweep back projection)"
                    .into(),
            ));
        }
        if self.voxel.as_ref().map(|v| v.kernel()) != Some(kernel) {
            let ctx = self.queue.context().clone();
            self.voxel = Some(VoxelBack::new(&ctx, kernel, &self.geometry, &self.grid)?);
        }
        Ok(())
    }

    /// Packs the line-sweep kernel's entries straight from the interleaved
    /// sinograms (`true`, the default where the kernel has 2 slices per
    /// lane) or de-interleaves them first for FBP's own packing (`false`;
    /// for tests and benchmarks: the same entries). Returns whether the
    /// fused packing is used.
    pub fn set_voxel_fused_pack(&mut self, on: bool) -> bool {
        match self.voxel.as_mut() {
            Some(v) => {
                v.fused = on && matches!(v.params, Params::Sweep(p) if p.spl == 2);
                v.fused
            }
            None => false,
        }
    }

    /// The voxel pair's back projection kernel as selected, when selected.
    pub fn voxel_back(&self) -> Option<VoxelKernel> {
        self.voxel.as_ref().map(|v| v.kernel())
    }

    /// The kernel the voxel pair's back projection runs
    /// ([`VoxelKernel::Auto`] resolved), when selected.
    pub fn voxel_back_resolved(&self) -> Option<VoxelKernel> {
        self.voxel.as_ref().map(|v| v.resolved)
    }

    /// Device bytes per slice of the voxel back projection's scratch, and
    /// its rounding (0, 0 without it).
    pub(super) fn voxel_bytes(&self) -> (usize, usize) {
        self.voxel.as_ref().map_or((0, 0), |v| v.bytes())
    }

    /// The voxel pair's column sums `B·1` of all projections `angles` (a
    /// plane), or `None` without the voxel pair.
    ///
    /// Errors: a block of projections (the voxel pair has none), driver
    /// and launch errors.
    pub(super) fn voxel_column_sums(&self, tables: &BlockTables) -> Result<Option<DeviceVec>> {
        let Some(vb) = &self.voxel else {
            return Ok(None);
        };
        if !std::ptr::eq(tables, self.blocks.full().as_ref()) {
            return Err(voxel_blocks_refused());
        }
        vb.column_sums(self).map(Some)
    }

    /// Queues the voxel-driven back projection of `slices` sinograms at
    /// `sino` (the projections of `tables`, which must be all of them).
    pub(super) fn voxel_back_raw(
        &self,
        vb: &VoxelBack,
        (sino, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        if !std::ptr::eq(tables, self.blocks.full().as_ref()) {
            return Err(voxel_blocks_refused());
        }
        vb.back(self, sino, out, slices)
    }
}

/// The error for a block of projections with the voxel pair.
fn voxel_blocks_refused() -> CudaError {
    CoreError::Unsupported {
        backend: "cuda".into(),
        operation: "blocks of projections (SART, BLOCK-IT, ART) with the voxel-driven back \
                    projection on the parallel GPU (use SIRT, or --projector joseph)"
            .into(),
    }
    .into()
}
