//! The device state of the gridding method and its overlapped slab
//! pipeline: upload → pad, 1D FFT, weight → gather → 2D inverse FFT, crop →
//! download, on three streams with double-buffered slabs and pinned staging
//! (as the FBP pipeline in `fbp/engine`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};
use tomors_core::fourier::gather::GatherParams;
use tomors_core::fourier::FourierPlan;
use tomors_core::Padding;

use super::fft2::C2cPlan;
use super::FourierStats;
use crate::error::Result;
use crate::runtime::compile::cubin_cached;
use crate::runtime::{
    copy_in, copy_out, ensure, ensure_pinned, is_pinned, launch, Arg, Context, DeviceBuffer, Event,
    Function, Module, PinnedBuffer, Stream,
};

/// The CUDA source of the gridding kernels.
pub const GRIDREC_CU: &str = include_str!("../../kernels/gridrec.cu");
/// The CUDA source of the atomic-free tiled gather (warp-private tiles).
pub const GRIDREC_WARP_CU: &str = include_str!("../../kernels/gridrec_warp.cu");

struct Kernels {
    _module: Module,
    pad: Function,
    weight: Function,
    gather: Function,
    crop: Function,
}

/// The tiled gather (`gr_warp`) of one kernel width.
struct TileKernel {
    _module: Module,
    func: Function,
    side: usize,
    threads: u32,
}

/// Side of the warp gather's tiles.
const WARP_TILE: usize = 32;

/// Warps per block of the warp gather.
const WARPS: usize = 4;

impl TileKernel {
    /// Side [`WARP_TILE`] and [`WARPS`] warps per block (the private
    /// copies, one float2 per cell in rows of side + 4, take 4 × 32 × 36 × 8
    /// = 36 KB of the 48 KB of static shared memory).
    fn load(ctx: &Arc<Context>, width: usize) -> Result<Self> {
        let (side, warps) = (WARP_TILE, WARPS);
        let defines = vec![
            ("KW".to_string(), width.to_string()),
            ("TILE".to_string(), side.to_string()),
            ("WARPS".to_string(), warps.to_string()),
        ];
        let (cubin, _) = cubin_cached(
            "gridrec_warp",
            GRIDREC_WARP_CU,
            &defines,
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(ctx, &cubin)?;
        Ok(Self {
            func: module.function("gr_warp")?,
            side,
            threads: (warps * 32) as u32,
            _module: module,
        })
    }
}

/// How grid points are computed. Both gathers add in a fixed order, so
/// repeated runs give the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum GatherKind {
    /// One block per 32×32 tile; each warp spreads whole lines of samples
    /// into its own copy of the tile in shared memory, with the samples in
    /// flight far enough apart that no two lanes touch one cell (no
    /// atomics); the copies are summed in a fixed order (the default, the
    /// fastest).
    #[default]
    Warp,
    /// One thread per grid point, summing the samples in its support (the
    /// CPU reference's formulation, `gather_point`).
    Point,
}

impl Kernels {
    fn load(ctx: &Arc<Context>) -> Result<Self> {
        let (cubin, _) = cubin_cached("gridrec", GRIDREC_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        Ok(Self {
            pad: module.function("gr_pad")?,
            weight: module.function("gr_weight")?,
            gather: module.function("gr_gather")?,
            crop: module.function("gr_crop")?,
            _module: module,
        })
    }
}

/// Device tables of one plan.
struct Tables {
    key: (usize, usize, usize, usize, usize, u64),
    shift: DeviceBuffer,
    resp: DeviceBuffer,
    cos: DeviceBuffer,
    sin: DeviceBuffer,
    dx: DeviceBuffer,
    dy: DeviceBuffer,
}

/// One device's gridding state (used behind a Mutex).
pub(crate) struct FourierEngine {
    pub ctx: Arc<Context>,
    up: Stream,
    comp: Stream,
    down: Stream,
    k: Kernels,
    tiles: HashMap<usize, TileKernel>,
    /// The gather variant.
    pub gather: GatherKind,
    plans: HashMap<(Vec<usize>, usize), C2cPlan>,
    tables: Option<Tables>,
    raw: [Option<DeviceBuffer>; 2],
    out: [Option<DeviceBuffer>; 2],
    spec: Option<DeviceBuffer>,
    grid: Option<DeviceBuffer>,
    pin_in: [Option<PinnedBuffer>; 2],
    pin_out: [Option<PinnedBuffer>; 3],
    /// Slices per slab (0 = automatic).
    pub slab_override: usize,
    pub stats: FourierStats,
}

// SAFETY: every handle inside is usable from any thread with the context
// bound, and the engine is only used behind a Mutex.
unsafe impl Send for FourierEngine {}

fn f32_bytes(v: &[f32]) -> usize {
    std::mem::size_of_val(v)
}

impl FourierEngine {
    pub fn new(ordinal: usize) -> Result<Self> {
        let ctx = Context::new(ordinal)?;
        let k = Kernels::load(&ctx)?;
        Ok(Self {
            up: Stream::new(&ctx)?,
            comp: Stream::new(&ctx)?,
            down: Stream::new(&ctx)?,
            ctx,
            k,
            tiles: HashMap::new(),
            gather: GatherKind::default(),
            plans: HashMap::new(),
            tables: None,
            raw: [None, None],
            out: [None, None],
            spec: None,
            grid: None,
            pin_in: [None, None],
            pin_out: [None, None, None],
            slab_override: 0,
            stats: FourierStats::default(),
        })
    }

    /// Releases every cached buffer and plan (after an out-of-memory error).
    pub fn free_buffers(&mut self) {
        self.plans.clear();
        self.raw = [None, None];
        self.out = [None, None];
        self.spec = None;
        self.grid = None;
        self.pin_in = [None, None];
        self.pin_out = [None, None, None];
    }

    fn upload_tables(&mut self, plan: &FourierPlan) -> Result<()> {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for v in plan.response.iter().chain(&plan.cos).chain(&plan.deapod_x) {
            h = (h ^ v.to_bits() as u64).wrapping_mul(0x100_0000_01b3);
        }
        for v in &plan.shift {
            h = (h ^ v.to_bits()).wrapping_mul(0x100_0000_01b3);
        }
        let key = (plan.n_bins, plan.n_angles, plan.grid, plan.nx, plan.ny, h);
        if self.tables.as_ref().is_some_and(|t| t.key == key) {
            return Ok(());
        }
        self.comp.synchronize()?;
        let buf = |v: &[f32], what: &str| -> Result<DeviceBuffer> {
            let b = DeviceBuffer::new(&self.ctx, f32_bytes(v), what)?;
            b.upload(v)?;
            Ok(b)
        };
        let shift = DeviceBuffer::new(&self.ctx, plan.shift.len() * 8, "fourier shifts")?;
        shift.upload(&plan.shift)?;
        self.tables = Some(Tables {
            key,
            shift,
            resp: buf(&plan.response, "fourier response")?,
            cos: buf(&plan.cos, "fourier cos table")?,
            sin: buf(&plan.sin, "fourier sin table")?,
            dx: buf(&plan.deapod_x, "fourier deapodization")?,
            dy: buf(&plan.deapod_y, "fourier deapodization")?,
        });
        Ok(())
    }

    fn plan_fft(&mut self, dims: &[usize], batch: usize) -> Result<()> {
        let key = (dims.to_vec(), batch);
        if !self.plans.contains_key(&key) {
            self.ctx.bind()?;
            let p = C2cPlan::new(dims, batch)?;
            self.plans.insert(key, p);
        }
        Ok(())
    }

    /// Device bytes per pair of slices (work buffers, FFT work areas and
    /// the double-buffered slabs).
    fn bytes_per_pair(plan: &FourierPlan) -> usize {
        let spec = plan.n_angles * plan.padded * 8;
        let grid = plan.grid * plan.grid * 8;
        let slab = 2 * 2 * (plan.n_angles * plan.n_bins + plan.nx * plan.ny) * 4;
        spec * 2 + grid * 2 + slab
    }

    /// Slices per slab: the override ([`super::CudaFourier::set_slab`]) or
    /// about 4 GB of device memory (an even count).
    fn slab_size(&self, plan: &FourierPlan, total: usize) -> usize {
        let s = if self.slab_override > 0 {
            self.slab_override
        } else {
            2 * (4_000_000_000 / Self::bytes_per_pair(plan).max(1)).clamp(1, 16)
        };
        s.max(1).min(total.max(1))
    }

    fn ensure_buffers(&mut self, plan: &FourierPlan, ss: usize) -> Result<()> {
        let pairs = ss.div_ceil(2);
        let raw = ss * plan.n_angles * plan.n_bins;
        let out = ss * plan.nx * plan.ny;
        for b in 0..2 {
            ensure(
                &mut self.raw[b],
                &self.ctx,
                raw * 4,
                "fourier slab sinograms",
            )?;
            ensure(&mut self.out[b], &self.ctx, out * 4, "fourier slab slices")?;
        }
        let spec = pairs * plan.n_angles * plan.padded * 8;
        ensure(&mut self.spec, &self.ctx, spec, "fourier spectra")?;
        let grid = pairs * plan.grid * plan.grid * 8;
        ensure(&mut self.grid, &self.ctx, grid, "fourier grid")?;
        self.plan_fft(&[plan.padded], pairs * plan.n_angles)?;
        self.plan_fft(&[plan.grid, plan.grid], pairs)?;
        Ok(())
    }

    /// Queues the computation of one slab of `k` slices from `raw` into
    /// `out` on the compute stream, with events after the 1D stage and the
    /// gather.
    #[allow(clippy::too_many_arguments)]
    fn compute(
        &self,
        plan: &FourierPlan,
        edge: bool,
        raw: u64,
        out: u64,
        k: usize,
        marks: [&Event; 2],
    ) -> Result<()> {
        let t = self.tables.as_ref().expect("tables uploaded");
        let kern = &self.k;
        let pairs = k.div_ceil(2);
        let (na, n, p, g) = (plan.n_angles, plan.n_bins, plan.padded, plan.grid);
        let spec = self.spec.as_ref().expect("allocated").ptr();
        let grid = self.grid.as_ref().expect("allocated").ptr();
        let s = &self.comp;
        let rows = (p.div_ceil(256) as u32, na as u32, pairs as u32);
        // SAFETY: argument lists match the kernels in gridrec.cu; every
        // buffer holds the sizes allocated in `ensure_buffers`.
        unsafe {
            let a: [Arg; 7] = [
                raw.into(),
                spec.into(),
                (n as i32).into(),
                (p as i32).into(),
                (na as i32).into(),
                (k as i32).into(),
                i32::from(edge).into(),
            ];
            launch(&kern.pad, "gr_pad", rows, (256, 1, 1), 0, s, &a)?;
            self.plans[&(vec![p], pairs * na)].exec(spec, true, s)?;
            let a: [Arg; 5] = [
                spec.into(),
                t.shift.ptr().into(),
                t.resp.ptr().into(),
                (p as i32).into(),
                (na as i32).into(),
            ];
            launch(&kern.weight, "gr_weight", rows, (256, 1, 1), 0, s, &a)?;
            marks[0].record(s)?;
            let q = GatherParams::from_plan(plan);
            let a: [Arg; 15] = [
                spec.into(),
                grid.into(),
                t.cos.ptr().into(),
                t.sin.ptr().into(),
                q.n_angles.into(),
                q.padded.into(),
                q.grid.into(),
                q.images.into(),
                q.alpha.into(),
                q.rmax.into(),
                q.half_w.into(),
                q.beta.into(),
                q.edge.into(),
                q.theta0.into(),
                q.dtheta.into(),
            ];
            match self.gather {
                GatherKind::Point => {
                    let gb = g.div_ceil(16) as u32;
                    let dims = (gb, gb, pairs as u32);
                    launch(&kern.gather, "gr_gather", dims, (16, 16, 1), 0, s, &a)?;
                }
                GatherKind::Warp => {
                    let tk = &self.tiles[&plan.kernel.width];
                    let tb = g.div_ceil(tk.side) as u32;
                    let dims = (tb, tb, pairs as u32);
                    launch(&tk.func, "gr_warp", dims, (tk.threads, 1, 1), 0, s, &a)?;
                }
            }
            marks[1].record(s)?;
            self.plans[&(vec![g, g], pairs)].exec(grid, false, s)?;
            let a: [Arg; 8] = [
                grid.into(),
                out.into(),
                t.dx.ptr().into(),
                t.dy.ptr().into(),
                (g as i32).into(),
                (plan.nx as i32).into(),
                (plan.ny as i32).into(),
                (k as i32).into(),
            ];
            let cg = (plan.nx.div_ceil(256) as u32, plan.ny as u32, pairs as u32);
            launch(&kern.crop, "gr_crop", cg, (256, 1, 1), 0, s, &a)?;
        }
        Ok(())
    }

    /// Reconstructs `input` (`[slice][angle][bin]`) into `output`
    /// (`[slice][y][x]`) through the overlapped pipeline. Retries with
    /// smaller slabs on out-of-memory.
    pub fn run(
        &mut self,
        plan: &FourierPlan,
        padding: Padding,
        input: ArrayView3<'_, f32>,
        output: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.ctx.bind()?;
        let total = input.len_of(Axis(0));
        if total == 0 {
            return Ok(());
        }
        self.upload_tables(plan)?;
        let w = plan.kernel.width;
        if self.gather == GatherKind::Warp && !self.tiles.contains_key(&w) {
            let k = TileKernel::load(&self.ctx, w)?;
            self.tiles.insert(w, k);
        }
        let mut ss = self.slab_size(plan, total);
        loop {
            match self.ensure_buffers(plan, ss) {
                Ok(()) => break,
                Err(e) if e.is_out_of_memory() && ss > 1 => {
                    tracing::warn!("{e}; retrying with slabs of {} slices", ss / 2);
                    self.free_buffers();
                    ss /= 2;
                }
                Err(e) => return Err(e),
            }
        }
        let edge = padding == Padding::Edge;
        let (na, n) = (plan.n_angles, plan.n_bins);
        let plane_out = plan.nx * plan.ny;
        let mut stats = FourierStats {
            slices: total,
            slab_size: ss,
            gather: format!("{:?}", self.gather).to_lowercase(),
            ..Default::default()
        };
        // Events of slab i live in set i % 3: slab i waits for slab i − 2
        // (buffer reuse) and the host unstages slab i − 2, so three sets.
        let ev3 = |ctx: &Arc<Context>| -> Result<[Event; 3]> {
            Ok([Event::new(ctx)?, Event::new(ctx)?, Event::new(ctx)?])
        };
        let (up0, up1, c0, c1, c2, c3, d0, d1) = (
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
            ev3(&self.ctx)?,
        );
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let (mut i_rest, mut o_rest) = (input, output);
        while i_rest.len_of(Axis(0)) > 0 {
            let k = ss.min(i_rest.len_of(Axis(0)));
            let (a, ri) = i_rest.split_at(Axis(0), k);
            let (b, ro) = o_rest.split_at(Axis(0), k);
            inputs.push(a);
            outputs.push(Some(b));
            i_rest = ri;
            o_rest = ro;
        }
        let ns = inputs.len();
        stats.slabs = ns;
        // Page-locked caller arrays are copied by DMA directly (no staging).
        let direct_in = inputs
            .iter()
            .all(|a| a.as_slice().is_some_and(|s| is_pinned(s.as_ptr())));
        let direct_out = outputs.iter().all(|v| {
            v.as_ref()
                .and_then(|a| a.as_slice())
                .is_some_and(|s| is_pinned(s.as_ptr()))
        });
        stats.pinned_in = direct_in;
        stats.pinned_out = direct_out;
        // Staging buffers only for pageable arrays (two in, three out).
        if !direct_in {
            for b in &mut self.pin_in {
                ensure_pinned(b, &self.ctx, ss * na * n)?;
            }
        }
        if !direct_out {
            for b in &mut self.pin_out {
                ensure_pinned(b, &self.ctx, ss * plane_out)?;
            }
        }
        if !direct_in {
            let th = Instant::now();
            let k = inputs[0].len_of(Axis(0));
            let pin = self.pin_in[0].as_mut().expect("allocated").as_mut_slice();
            copy_in(&inputs[0], &mut pin[..k * na * n]);
            stats.host_in_ms += th.elapsed().as_secs_f64() * 1e3;
        }
        // Slab i: upload (staged in the previous step), compute, download;
        // meanwhile the host stages slab i + 1 and unstages slab i − 2 at
        // once (two slabs behind, so that waiting for a download never holds
        // back the next upload).
        for i in 0..ns + 2 {
            if i < ns {
                let (b, e) = (i % 2, i % 3);
                let prev = (i + 1) % 3; // the set of slab i − 2
                let k = inputs[i].len_of(Axis(0));
                let src = if direct_in {
                    inputs[i].as_slice().expect("checked contiguous").as_ptr()
                } else {
                    self.pin_in[b]
                        .as_ref()
                        .expect("allocated")
                        .as_slice()
                        .as_ptr()
                };
                if i >= 2 {
                    self.up.wait(&c3[prev])?;
                }
                up0[e].record(&self.up)?;
                let raw = self.raw[b].as_ref().expect("allocated");
                // SAFETY: the source (the staging buffer, not written again
                // until up1[e] completes, or the caller's page-locked array,
                // borrowed for the whole call) holds k·na·n floats.
                unsafe {
                    raw.upload_async(0, src as *const u8, k * na * n * 4, &self.up)?;
                }
                up1[e].record(&self.up)?;
                self.comp.wait(&up1[e])?;
                if i >= 2 {
                    self.comp.wait(&d1[prev])?;
                }
                let (rp, op) = (raw.ptr(), self.out[b].as_ref().expect("allocated").ptr());
                // The last slab may hold fewer pairs: plans for its batch.
                let pairs = k.div_ceil(2);
                self.plan_fft(&[plan.padded], pairs * na)?;
                self.plan_fft(&[plan.grid, plan.grid], pairs)?;
                c0[e].record(&self.comp)?;
                self.compute(plan, edge, rp, op, k, [&c1[e], &c2[e]])?;
                c3[e].record(&self.comp)?;
                self.down.wait(&c3[e])?;
                d0[e].record(&self.down)?;
                let dst = if direct_out {
                    let o = outputs[i].as_mut().expect("slab not yet taken");
                    o.as_slice_mut().expect("checked contiguous").as_mut_ptr()
                } else {
                    let pin = self.pin_out[e].as_mut().expect("allocated");
                    pin.as_mut_slice().as_mut_ptr()
                };
                // SAFETY: the host reads staging buffer e only after d1[e]
                // completes (and slab i + 3, the next to use it, is queued
                // only after that); the caller's page-locked slab is borrowed
                // for the whole call and read only after the final
                // synchronisation.
                unsafe {
                    self.out[b].as_ref().expect("allocated").download_async(
                        0,
                        dst as *mut u8,
                        k * plane_out * 4,
                        &self.down,
                    )?;
                }
                d1[e].record(&self.down)?;
            }
            let stage = (!direct_in && i + 1 < ns).then_some(i + 1);
            let unstage = (i >= 2).then(|| i - 2);
            let mut done = unstage.and_then(|j| outputs[j].take());
            let (pin_in, pin_out) = (&mut self.pin_in, &self.pin_out);
            let inputs = &inputs;
            let (up1r, d1r) = (&up1, &d1);
            let (t_in, t_out) = rayon::join(
                || -> Result<Option<f64>> {
                    let Some(next) = stage else { return Ok(None) };
                    // Staging buffer (next % 2) was last read by slab next − 2.
                    if next >= 2 {
                        up1r[(next - 2) % 3].synchronize()?;
                    }
                    let th = Instant::now();
                    let k = inputs[next].len_of(Axis(0));
                    let pin = pin_in[next % 2].as_mut().expect("allocated").as_mut_slice();
                    copy_in(&inputs[next], &mut pin[..k * na * n]);
                    Ok(Some(th.elapsed().as_secs_f64() * 1e3))
                },
                || -> Result<Option<f64>> {
                    let Some(j) = unstage else { return Ok(None) };
                    d1r[j % 3].synchronize()?;
                    let Some(dst) = done.as_mut() else {
                        return Ok(None);
                    };
                    if direct_out {
                        return Ok(None);
                    }
                    let th = Instant::now();
                    let k = dst.len_of(Axis(0));
                    let src =
                        &pin_out[j % 3].as_ref().expect("allocated").as_slice()[..k * plane_out];
                    copy_out(src, dst);
                    Ok(Some(th.elapsed().as_secs_f64() * 1e3))
                },
            );
            stats.host_in_ms += t_in?.unwrap_or(0.0);
            stats.host_out_ms += t_out?.unwrap_or(0.0);
            if let Some(j) = unstage {
                let e = j % 3;
                stats.upload_ms += up0[e].elapsed_ms(&up1[e])? as f64;
                stats.fft_ms += c0[e].elapsed_ms(&c1[e])? as f64;
                stats.gather_ms += c1[e].elapsed_ms(&c2[e])? as f64;
                stats.ifft_ms += c2[e].elapsed_ms(&c3[e])? as f64;
                stats.download_ms += d0[e].elapsed_ms(&d1[e])? as f64;
            }
        }
        stats.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.stats = stats;
        Ok(())
    }
}
