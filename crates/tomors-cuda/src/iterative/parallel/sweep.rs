//! Joseph's forward projection as a line sweep (`kernels/joseph_sweep.cu`,
//! opt-in: [`CudaJoseph::set_sweep_forward`], or `TOMORS_JP_FORWARD=sweep`
//! for the SIRT runs): the volume is re-laid per projection call into two
//! copies whose 32 lanes of a warp are 32 quads (128 slices) of one pixel
//! (`jp_to_sweep`, rows and columns), and a warp walks `R` adjacent rays of
//! one projection, loading a pixel only when the rays' pixel pair moves.
//! The same operator as `jp_forward` (the same fixed-point positions and
//! weights; the zero padding outside the image by the pixel bounds).

use std::sync::Mutex;

use super::*;
use crate::runtime::{ensure, DeviceBuffer};

/// Source of the line-sweep forward projection.
pub const JOSEPH_SWEEP_CU: &str = include_str!("../../../kernels/joseph_sweep.cu");

/// `TOMORS_JP_SWEEP=R,WPB[,REUSE]` (rays per warp 1–16, warps per block
/// 1–8, 0 or 1; for benchmarks), else 8 rays, 4 warps, reuse.
fn shape() -> (usize, usize, usize) {
    let v: Vec<usize> = std::env::var("TOMORS_JP_SWEEP")
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let reuse = v.get(2).map_or(1, |&u| usize::from(u != 0));
    match v.as_slice() {
        [r, w, ..] if (1..=16).contains(r) && (1..=8).contains(w) => (*r, *w, reuse),
        _ => (8, 4, reuse),
    }
}

/// The kernels and the two re-laid copies of the volume (grown on use).
pub(super) struct SweepForward {
    to_sweep: Function,
    forward: Function,
    r: usize,
    wpb: usize,
    bufs: Mutex<(Option<DeviceBuffer>, Option<DeviceBuffer>)>,
    _module: Module,
}

impl SweepForward {
    fn new(ctx: &Arc<Context>) -> Result<Self> {
        let (r, wpb, reuse) = shape();
        ctx.bind()?;
        let defines = vec![
            ("R".to_string(), r.to_string()),
            ("WPB".to_string(), wpb.to_string()),
            ("REUSE".to_string(), reuse.to_string()),
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
            r,
            wpb,
            bufs: Mutex::new((None, None)),
            _module: module,
        })
    }
}

/// Whether `TOMORS_JP_FORWARD=sweep` asks for the line-sweep forward
/// projection (for benchmarks).
pub(super) fn sweep_env() -> bool {
    std::env::var("TOMORS_JP_FORWARD").is_ok_and(|v| v == "sweep")
}

/// Bytes of the two re-laid copies for a stack of `stored` slices of
/// `ny × nx` (groups of 128 slices).
pub(super) fn sweep_bytes(stored: usize, ny: usize, nx: usize) -> usize {
    2 * (stored / 4).div_ceil(32) * 128 * ny * nx * 4
}

impl CudaJoseph {
    /// Turns the line-sweep forward projection on or off (Joseph's model;
    /// the squared weights of the row norms keep `jp_forward_sq`). Returns
    /// whether it is now used.
    ///
    /// Errors: compilation and driver errors.
    pub fn set_sweep_forward(&mut self, on: bool) -> Result<bool> {
        self.queue.stream().synchronize()?;
        if on && self.sweep.is_none() {
            self.sweep = Some(SweepForward::new(self.queue.context())?);
        } else if !on {
            self.sweep = None;
        }
        Ok(self.sweep.is_some())
    }

    /// Whether the line-sweep forward projection is used.
    pub fn sweep_forward(&self) -> bool {
        self.sweep.is_some()
    }

    /// Queues the line-sweep forward projection of `slices` slices of the
    /// volume stack at `v` for the projections of `tables` into the
    /// sinograms at `out`: the re-laying, then the sweep (both timed as the
    /// forward projection).
    pub(super) fn sweep_forward_raw(
        &self,
        sw: &SweepForward,
        (v, out): (u64, u64),
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        let quads = slices.div_ceil(self.pad) * self.pad / 4;
        let groups = quads.div_ceil(32);
        let n = groups * self.nx * self.ny * 32;
        let (sv, svt) = {
            let mut b = sw
                .bufs
                .lock()
                .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
            let ctx = self.queue.context();
            (
                ensure(&mut b.0, ctx, n * 16, "the swept volume")?,
                ensure(&mut b.1, ctx, n * 16, "the swept transposed volume")?,
            )
        };
        self.launch(
            KernelKind::Forward,
            &sw.to_sweep,
            "jp_to_sweep",
            (n.div_ceil(256).clamp(1, 65_535) as u32, 1, 1),
            (256, 1, 1),
            &[
                v.into(),
                sv.into(),
                svt.into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
                (quads as i32).into(),
                (n as i64).into(),
            ],
        )?;
        self.launch(
            KernelKind::Forward,
            &sw.forward,
            "jp_forward_sweep",
            (
                tables.len as u32,
                self.nb.div_ceil(sw.r * sw.wpb) as u32,
                groups as u32,
            ),
            ((32 * sw.wpb) as u32, 1, 1),
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
            ],
        )
    }
}
