//! Joseph's forward projection as a line sweep (`kernels/joseph_sweep.cu`,
//! opt-in: [`CudaJoseph::set_sweep_forward`], or
//! `GpuSirtOptions::sweep_forward` for the SIRT runs): the volume is re-laid per projection call into two
//! copies whose 32 lanes of a warp are 32 quads (128 slices) of one pixel
//! (`jp_to_sweep`, rows and columns), and a warp walks `R` adjacent rays of
//! one projection, loading a pixel only when the rays' pixel pair moves.
//! The same operator as `jp_forward` (the same fixed-point positions and
//! weights; the zero padding outside the image by the pixel bounds).
//! The back projection likewise (`jp_back_sweep`, opt-in:
//! [`CudaJoseph::set_sweep_back`], `GpuSirtOptions::sweep_back`; hats of at most
//! one bin only): the sinograms re-laid as `[group][angle][bin][lane][4]`,
//! a warp's tile of pixels accumulated in registers over all projections,
//! `jp_back`'s weights bit for bit.

use std::sync::Mutex;

use super::*;
use crate::runtime::{ensure, DeviceBuffer};

/// Source of the line-sweep forward projection.
pub const JOSEPH_SWEEP_CU: &str = include_str!("../../../kernels/joseph_sweep.cu");

/// The forward sweep's shape: rays per lane, warps per block, the pixel
/// pair's reuse, quads per group (8 or 32) and whether the row- and
/// column-stepping projections run as two launches (each reading one copy).
#[derive(Clone, Copy, Debug)]
struct Shape {
    r: usize,
    wpb: usize,
    reuse: usize,
    fq: usize,
    split: bool,
}

/// The forward sweep's shape: 8 rays per lane, 4 warps per block, no
/// reuse, groups of 8 quads, row and column launches apart (the fastest
/// measured: 27.8 ms per projection at 512³ from 512 angles on an H200;
/// the other shapes' figures in `docs/perf-notes.md`, helper psirt).
const SHAPE: Shape = Shape {
    r: 8,
    wpb: 4,
    reuse: 0,
    fq: 8,
    split: true,
};

/// The back sweep's shape: the tile of a warp, the warps of a block along x
/// and y, the bin pair's reuse.
#[derive(Clone, Copy, Debug)]
struct BackShape {
    tx: usize,
    ty: usize,
    bwx: usize,
    bwy: usize,
    reuse: usize,
}

/// The back sweep's shape: 8×2 pixels per warp, blocks of 4×2 warps, the
/// bin pair reused (the fastest measured: 37.9 ms at 512³ from 512 angles
/// on an H200, `docs/perf-notes.md`, helper psirt).
const BACK_SHAPE: BackShape = BackShape {
    tx: 8,
    ty: 2,
    bwx: 4,
    bwy: 2,
    reuse: 1,
};

/// The kernels and the re-laid copies (grown on use), and which
/// projections use them.
pub(super) struct SweepForward {
    to_sweep: Function,
    forward: Function,
    back: Function,
    shape: Shape,
    tile: BackShape,
    /// The forward projection is swept.
    pub(super) fwd: bool,
    /// The back projection is swept.
    pub(super) bwd: bool,
    /// The volume's two copies and the sinograms' copy.
    bufs: Mutex<[Option<DeviceBuffer>; 3]>,
    _module: Module,
}

impl SweepForward {
    fn new(ctx: &Arc<Context>) -> Result<Self> {
        let (sh, bs) = (SHAPE, BACK_SHAPE);
        ctx.bind()?;
        let defines = vec![
            ("R".to_string(), sh.r.to_string()),
            ("WPB".to_string(), sh.wpb.to_string()),
            ("REUSE".to_string(), sh.reuse.to_string()),
            ("FQ".to_string(), sh.fq.to_string()),
            ("TX".to_string(), bs.tx.to_string()),
            ("TY".to_string(), bs.ty.to_string()),
            ("BWX".to_string(), bs.bwx.to_string()),
            ("BWY".to_string(), bs.bwy.to_string()),
            ("BREUSE".to_string(), bs.reuse.to_string()),
        ];
        let (cubin, _) = cubin_cached(
            "joseph_sweep",
            JOSEPH_SWEEP_CU,
            &defines,
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(ctx, &cubin)?;
        Ok(Self {
            to_sweep: module.function("jp_to_sweep")?,
            forward: module.function("jp_forward_sweep")?,
            back: module.function("jp_back_sweep")?,
            shape: sh,
            tile: bs,
            fwd: false,
            bwd: false,
            bufs: Mutex::new([None, None, None]),
            _module: module,
        })
    }
}

/// Bytes per slice of the re-laid copies (two volumes for the forward
/// projection, one set of sinograms for the back projection), and the
/// rounding of a stack up to a group of 128 slices.
pub(super) fn sweep_bytes(
    fwd: bool,
    bwd: bool,
    (na, nb): (usize, usize),
    (ny, nx): (usize, usize),
) -> (usize, usize) {
    let per = 4 * (if fwd { 2 * ny * nx } else { 0 } + if bwd { na * nb } else { 0 });
    (per, 128 * per)
}

impl CudaJoseph {
    /// Turns the line-sweep forward projection on or off (Joseph's model;
    /// the squared weights of the row norms keep `jp_forward_sq`). Returns
    /// whether it is now used.
    ///
    /// Errors: compilation and driver errors.
    pub fn set_sweep_forward(&mut self, on: bool) -> Result<bool> {
        self.set_sweep(Some(on), None)?;
        Ok(self.sweep_forward())
    }

    /// Turns the line-sweep back projection on or off; only where every
    /// hat spans at most one bin (bins at least as wide as the pixels'
    /// footprint). Returns whether it is now used.
    ///
    /// Errors: compilation and driver errors.
    pub fn set_sweep_back(&mut self, on: bool) -> Result<bool> {
        self.set_sweep(None, Some(on && self.km == 0))?;
        Ok(self.sweep_back())
    }

    fn set_sweep(&mut self, fwd: Option<bool>, bwd: Option<bool>) -> Result<()> {
        self.queue.stream().synchronize()?;
        let (f0, b0) = (self.sweep_forward(), self.sweep_back());
        let (f, b) = (fwd.unwrap_or(f0), bwd.unwrap_or(b0));
        if !(f || b) {
            self.sweep = None;
            return Ok(());
        }
        if self.sweep.is_none() {
            self.sweep = Some(SweepForward::new(self.queue.context())?);
        }
        if let Some(sw) = self.sweep.as_mut() {
            sw.fwd = f;
            sw.bwd = b;
        }
        Ok(())
    }

    /// Whether the line-sweep forward projection is used.
    pub fn sweep_forward(&self) -> bool {
        self.sweep.as_ref().is_some_and(|s| s.fwd)
    }

    /// Whether the line-sweep back projection is used.
    pub fn sweep_back(&self) -> bool {
        self.sweep.as_ref().is_some_and(|s| s.bwd)
    }

    /// Queues kernel `f` of `kernels/joseph_sweep.cu` on the stream, untimed
    /// (the caller times the whole projection).
    fn launch_sweep(
        &self,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        // SAFETY: every caller passes parameters matching the kernel's
        // signature in `kernels/joseph_sweep.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { self.queue.launch_raw(f, name, grid, block, args) }
    }

    /// Queues the re-laying of the stack at `src` (`quads` quads of planes
    /// of `rows × cols`) in groups of `qg` quads into the copy `slot` (and,
    /// for `slot` 0, the transposed copy 1); returns their addresses.
    fn relay(
        &self,
        sw: &SweepForward,
        src: u64,
        (rows, cols): (usize, usize),
        quads: usize,
        qg: usize,
        slot: usize,
    ) -> Result<(u64, u64)> {
        let groups = quads.div_ceil(qg);
        let n = groups * rows * cols * qg;
        let (a, b) = {
            let mut bufs = sw
                .bufs
                .lock()
                .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
            let ctx = self.queue.context();
            let a = ensure(&mut bufs[slot], ctx, n * 16, "a re-laid stack")?;
            let b = if slot == 0 {
                ensure(&mut bufs[1], ctx, n * 16, "a re-laid transposed volume")?
            } else {
                0
            };
            (a, b)
        };
        self.launch_sweep(
            &sw.to_sweep,
            "jp_to_sweep",
            (n.div_ceil(256).clamp(1, 65_535) as u32, 1, 1),
            (256, 1, 1),
            &[
                src.into(),
                a.into(),
                b.into(),
                (cols as i32).into(),
                (rows as i32).into(),
                (quads as i32).into(),
                (qg as i32).into(),
                (n as i64).into(),
            ],
        )?;
        Ok((a, b))
    }

    /// Queues the line-sweep back projection of `slices` sinograms at
    /// `sino` (the projections of `tables`) into the volume at `out`: the
    /// re-laying, then the sweep (timed together as one back projection).
    pub(super) fn sweep_back_raw(
        &self,
        sw: &SweepForward,
        (sino, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        let quads = slices.div_ceil(self.pad) * self.pad / 4;
        let bs = sw.tile;
        self.queue.timed(KernelKind::Back, || {
            let (ss, _) = self.relay(sw, sino, (tables.len, self.nb), quads, 32, 2)?;
            self.launch_sweep(
                &sw.back,
                "jp_back_sweep",
                (
                    self.nx.div_ceil(bs.tx * bs.bwx) as u32,
                    self.ny.div_ceil(bs.ty * bs.bwy) as u32,
                    quads.div_ceil(32) as u32,
                ),
                ((32 * bs.bwx * bs.bwy) as u32, 1, 1),
                &[
                    ss.into(),
                    out.into(),
                    tables.bp.ptr().into(),
                    (self.nx as i32).into(),
                    (self.ny as i32).into(),
                    (tables.len as i32).into(),
                    (self.nb as i32).into(),
                    (quads as i32).into(),
                ],
            )
        })
    }

    /// Queues the line-sweep forward projection of `slices` slices of the
    /// volume stack at `v` for the projections of `tables` into the
    /// sinograms at `out`: the re-laying, then the sweep (timed together as
    /// one forward projection).
    pub(super) fn sweep_forward_raw(
        &self,
        sw: &SweepForward,
        (v, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        let quads = slices.div_ceil(self.pad) * self.pad / 4;
        let sh = sw.shape;
        self.queue.timed(KernelKind::Forward, || {
            let (sv, svt) = self.relay(sw, v, (self.ny, self.nx), quads, sh.fq, 0)?;
            let wants: &[i32] = if sh.split { &[0, 1] } else { &[-1] };
            for &want in wants {
                self.launch_sweep(
                    &sw.forward,
                    "jp_forward_sweep",
                    (
                        tables.len as u32,
                        self.nb.div_ceil(sh.r * (32 / sh.fq) * sh.wpb) as u32,
                        quads.div_ceil(sh.fq) as u32,
                    ),
                    ((32 * sh.wpb) as u32, 1, 1),
                    &[
                        sv.into(),
                        svt.into(),
                        out.into(),
                        tables.fp.ptr().into(),
                        (self.nx as i32).into(),
                        (self.ny as i32).into(),
                        (tables.len as i32).into(),
                        (self.nb as i32).into(),
                        (quads as i32).into(),
                        want.into(),
                    ],
                )?;
            }
            Ok(())
        })
    }
}
