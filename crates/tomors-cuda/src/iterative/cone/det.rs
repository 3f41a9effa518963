//! The deterministic mode of the cone-beam Joseph back projection
//! ([`CudaConeJoseph::set_deterministic`]): the exact transpose scatters
//! with atomics, and float atomics add in an order that varies between
//! runs; in this mode every contribution is added as a 64-bit fixed-point
//! integer (`kernels/cone_det.cu`), so the sums, and every iterate of a
//! run, are the same bits on every run. The default stays the faster float
//! scatter (`cj_back_merged`); the cost of this mode is measured by
//! `tomors bench` (see docs/iterative.md).
//!
//! Per back projection: the largest `|y|` on the device (`cj_absmax`), the
//! scatter into a 64-bit accumulator of the volume's size (allocated when
//! the mode is turned on), the conversion to f32. The fixed-point scale is
//! `2^(62 − e)` with `2^e ≥ max|y|·W`, `W` a bound on the summed weights of
//! the rays through one voxel: the projections of the block times the most
//! ART batches of a projection (rays of one batch touch disjoint voxels,
//! see `art.rs`) times the largest weight `h·√3`. The sums are exact to
//! `2^-62·max|y|·W`, far below f32 rounding.

use super::*;

/// Source of the deterministic back projection's kernels (compiled after
/// `cone_joseph.cu`).
pub const CONE_DET_CU: &str = include_str!("../../../kernels/cone_det.cu");

/// The deterministic mode's kernels and buffers.
pub(crate) struct DetState {
    back: Function,
    absmax: Function,
    to_float: Function,
    /// 64-bit accumulator of the volume.
    acc: DeviceBuffer,
    /// `max |y|` as float bits.
    maxbits: DeviceBuffer,
    /// Most ART batches of one projection (rays through one voxel).
    max_rays: usize,
    _module: Module,
}

impl CudaConeJoseph {
    /// Turns the deterministic back projection on (`true`: fixed-point
    /// integer accumulation, the same bits on every run; allocates 8 bytes
    /// per voxel) or off (`false`, the default: the faster float atomics).
    /// Only the Joseph pair's back projection uses atomics; the voxel
    /// pair's is a gather and deterministic either way.
    ///
    /// Errors: compilation and driver errors, device memory.
    pub fn set_deterministic(&mut self, on: bool) -> Result<()> {
        if !on {
            self.queue.stream().synchronize()?;
            self.det = None;
            return Ok(());
        }
        if self.det.is_some() {
            return Ok(());
        }
        let ctx = self.queue.context().clone();
        ctx.bind()?;
        let source = format!("{CONE_JOSEPH_CU}\n{CONE_DET_CU}");
        let (cubin, _) = cubin_cached("cone_det", &source, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(&ctx, &cubin)?;
        let max_rays = (0..self.na)
            .map(|a| {
                let s = self.art_stride(a);
                s.min(self.nr) * s.min(self.nc)
            })
            .max()
            .unwrap_or(1);
        self.det = Some(DetState {
            back: module.function("cj_back_fixed")?,
            absmax: module.function("cj_absmax")?,
            to_float: module.function("cj_fixed_to_float")?,
            acc: DeviceBuffer::new(&ctx, self.volume.len() * 8, "the deterministic accumulator")?,
            maxbits: DeviceBuffer::new(&ctx, 4, "the largest projection value")?,
            max_rays,
            _module: module,
        });
        Ok(())
    }

    /// Whether the back projection is deterministic
    /// ([`CudaConeJoseph::set_deterministic`]).
    pub fn deterministic(&self) -> bool {
        self.det.is_some()
    }

    /// The deterministic back projection of the projections of `block` at
    /// `proj` into the volume at `out` (overwritten), untimed.
    pub(super) fn back_fixed(
        &self,
        d: &DetState,
        proj: &ConeDeviceArray,
        out: &ConeDeviceArray,
        block: &ConeBlock,
    ) -> Result<()> {
        let stream = self.queue.stream();
        self.queue.context().bind()?;
        d.acc.fill_bytes(0, stream)?;
        d.maxbits.fill_bytes(0, stream)?;
        let v = &self.volume;
        let wbound =
            1.01 * block.len as f64 * d.max_rays as f64 * v.voxel_size as f64 * 3f64.sqrt();
        let n = proj.len();
        // SAFETY: the parameters of the kernels of `kernels/cone_det.cu`;
        // `proj` holds the block's projections and `out` a volume (checked
        // by the callers), the accumulator is the volume's size, the frames
        // one per projection of the block.
        unsafe {
            self.queue.launch_raw(
                &d.absmax,
                "cj_absmax",
                Queue::grid(n),
                (256, 1, 1),
                &[
                    proj.buffer().ptr().into(),
                    (n as i64).into(),
                    d.maxbits.ptr().into(),
                ],
            )?;
            self.queue.launch_raw(
                &d.back,
                "cj_back_fixed",
                (
                    self.nc.div_ceil(32) as u32,
                    self.nr.div_ceil(8) as u32,
                    block.len as u32,
                ),
                (32, 8, 1),
                &[
                    proj.buffer().ptr().into(),
                    d.acc.ptr().into(),
                    block.frames.ptr().into(),
                    (v.nx as i32).into(),
                    (v.ny as i32).into(),
                    (v.nz as i32).into(),
                    (v.voxel_size as f64).into(),
                    (self.nr as i32).into(),
                    (self.nc as i32).into(),
                    d.maxbits.ptr().into(),
                    wbound.into(),
                ],
            )?;
            let nv = v.len();
            self.queue.launch_raw(
                &d.to_float,
                "cj_fixed_to_float",
                Queue::grid(nv),
                (256, 1, 1),
                &[
                    d.acc.ptr().into(),
                    out.buffer().ptr().into(),
                    (nv as i64).into(),
                    d.maxbits.ptr().into(),
                    wbound.into(),
                ],
            )
        }
    }
}
