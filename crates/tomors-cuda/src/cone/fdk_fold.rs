//! FDK on the device with the folded kernel and the back projection
//! overlapped with the uploads and the downloads (the whole volume, a
//! centred detector: see [`crate::cone::fold`]).
//!
//! The volume stays on the device. Angle chunks are copied into pinned
//! staging and uploaded (upload stream), weighted, filtered and packed into
//! the folded layout (compute stream) as in [`super::fdk`]; as soon as a
//! group of chunks is packed, its projections are back projected into the
//! whole volume on a third stream (the first group overwrites, the others
//! add), while the next chunks are uploaded. The last group of angles is
//! back projected slab by slab (upper slices and their mirrors), and each
//! finished slab pair is downloaded and copied out while the next one is
//! computed. So the uploads hide behind the early groups' back projection
//! and the downloads behind the last group's.

use std::time::Instant;

use ndarray::{s, ArrayView3, ArrayViewMut3};
use tomors_core::cone::{ConeGeometry, ConeVolume, FdkOptions};

use crate::cone::fdk_common::{filter_job, summed_ms, FdkStats, FdkWeights, SPARE_BYTES};
use crate::cone::fold::{FoldLayout, FoldModule, FoldScale, FoldVariant};
use crate::cone::fold_plan::Plan;
use crate::error::{CudaError, Result};
use crate::fbp::engine::{copy_in, copy_out, Engine};
use crate::runtime::{ensure, ensure_pinned};
use crate::runtime::{Array2d, DeviceBuffer, Event, Stream, TexFilter, Texture};

pub use crate::cone::fold_plan::FdkFold;

/// The device state the folded pipeline keeps between calls (the whole
/// volume lives in the engine's first output slot, which
/// `Engine::free_buffers` frees with the other buffers).
pub(crate) struct FoldState {
    /// The back-projection stream (with `FdkFold::separate_stream`).
    bp: Stream,
    /// Device buffers of uploaded chunks (enough for a group and one more,
    /// so the uploads run a group ahead of the back projection).
    raw: Vec<Option<DeviceBuffer>>,
    /// CUDA arrays of the texture groups (with `FdkFold::arrays`).
    arrays: Vec<Array2d>,
    /// The half texels' per-projection maxima and inverse scales (see
    /// [`FoldScale`]; with `FdkFold::half`).
    scale: Option<DeviceBuffer>,
    /// The last call's weights (reused when they are the same).
    weights: Option<FdkWeights>,
    /// Timing events, reused by every call (each call's are complete
    /// before it returns).
    events: Vec<Event>,
    /// The texture objects over the pitched layout and what they were
    /// made for: (base address, textures, layout).
    textures: Option<(u64, usize, FoldLayout, Vec<Texture>)>,
}

/// The device buffers of one folded FDK.
struct Buffers {
    /// Whether the projections are read through the state's arrays.
    arrays: bool,
    tex: u64,
    raw: Vec<u64>,
    vol: u64,
    scale: FoldScale,
    state: FoldState,
}

/// Checks the memory and allocates (or reuses) every buffer of `plan`;
/// the fold state leaves the engine's map (the caller puts it back).
fn allocate(
    e: &mut Engine,
    plan: &Plan,
    layout: &FoldLayout,
    (na, nr, nc): (usize, usize, usize),
    volume: &ConeVolume,
) -> Result<Buffers> {
    let ctx = e.ctx.clone();
    ctx.bind()?;
    let (plane, plane_out) = (nr * nc, volume.nx * volume.ny);
    let ca = plan.ca;
    let (fft_bytes, fft_spec) = Engine::fft_bytes(e.fft_variant, ca * nr, nc);
    let vol_bytes = volume.nz * plane_out * 4;
    let tex_bytes = layout.bytes(na);
    let have_arrays = e
        .ext
        .get::<FoldState>()
        .is_some_and(|st| st.arrays.len() == layout.groups(na));
    // Bytes still to allocate, beside what the engine holds already.
    let needs = |e: &Engine| {
        let have = |b: &Option<DeviceBuffer>, want: usize| match b {
            Some(b) if b.bytes() >= want => want,
            _ => 0,
        };
        let base = tex_bytes - have(&e.stack_tex, tex_bytes)
            + plan.nraw() * ca * plane * 4
            + fft_bytes
            + fft_spec
            + vol_bytes
            - have(&e.out[0], vol_bytes)
            + (plane + na * nc) * 4
            + if layout.half { 8 * na } else { 0 };
        (base, if have_arrays { 0 } else { tex_bytes })
    };
    let (base, arr) = needs(e);
    let (free, _) = ctx.mem_info()?;
    let mut arrays = plan.arrays;
    if base + if arrays { arr } else { 0 } + SPARE_BYTES > free {
        e.free_buffers();
        let (base, arr) = needs(e);
        let (free, _) = ctx.mem_info()?;
        if base + SPARE_BYTES > free {
            return Err(CudaError::OutOfMemory {
                what: format!(
                    "the folded FDK's {na} projections and the whole volume beside {free} free bytes"
                ),
                bytes: base,
            });
        }
        arrays = arrays && base + arr + SPARE_BYTES <= free;
    }
    let tex = ensure(
        &mut e.stack_tex,
        &ctx,
        layout.bytes(na),
        "FDK folded projection textures",
    )?;
    for b in 0..2 {
        ensure_pinned(&mut e.pin_in[b], &ctx, ca * plane)?;
        ensure_pinned(&mut e.pin_out[b], &ctx, 2 * plan.su * plane_out)?;
    }
    let vol = ensure(&mut e.out[0], &ctx, vol_bytes, "FDK volume")?;
    let mut state = match e.ext.remove::<FoldState>() {
        Some(st) => st,
        None => FoldState {
            bp: Stream::new(&ctx)?,
            raw: Vec::new(),
            arrays: Vec::new(),
            scale: None,
            weights: None,
            events: Vec::new(),
            textures: None,
        },
    };
    if arrays {
        let groups = layout.groups(na);
        let fits = |a: &Array2d| {
            a.width == layout.nc && a.height == layout.height && a.format == layout.format()
        };
        if state.arrays.len() != groups || !state.arrays.iter().all(fits) {
            state.arrays.clear();
            for _ in 0..groups {
                match Array2d::new(&ctx, layout.nc, layout.height, layout.format()) {
                    Ok(a) => state.arrays.push(a),
                    Err(err) => {
                        tracing::info!("FDK projections in pitched memory, not arrays: {err}");
                        state.arrays.clear();
                        break;
                    }
                }
            }
        }
    } else {
        state.arrays.clear();
    }
    let scale = if layout.half {
        match ensure(&mut state.scale, &ctx, 8 * na, "FDK half-texel scales") {
            Ok(p) => FoldScale {
                max: p,
                unscale: p + 4 * na as u64,
            },
            Err(err) => {
                e.ext.insert(state);
                return Err(err);
            }
        }
    } else {
        FoldScale::default()
    };
    let nraw = plan.nraw();
    state.raw.resize_with(state.raw.len().max(nraw), || None);
    let mut raw = Vec::with_capacity(nraw);
    for slot in state.raw.iter_mut().take(nraw) {
        match ensure(slot, &ctx, ca * plane * 4, "FDK projection chunk") {
            Ok(p) => raw.push(p),
            Err(err) => {
                e.ext.insert(state);
                return Err(err);
            }
        }
    }
    Ok(Buffers {
        arrays: arrays && !state.arrays.is_empty(),
        tex,
        raw,
        vol,
        scale,
        state,
    })
}

/// Loads the kernels, allocates every buffer and plans the FFTs of a
/// folded FDK of `volume` from projections of `geometry`, without data
/// (see [`CudaBackend::prepare_fdk`](crate::CudaBackend::prepare_fdk)).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_fold(
    e: &mut Engine,
    (cfg, chunk): (&FdkFold, usize),
    layout: &FoldLayout,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    options: &FdkOptions,
    weights: Option<(&[f32], &[f32])>,
) -> Result<()> {
    let shape = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    let plan = Plan::new(cfg, chunk, shape, volume, options);
    FoldModule::of(e, cfg.variant())?;
    crate::cone::ConeModule::of(e)?;
    let mut buffers = allocate(e, &plan, layout, shape, volume)?;
    // The weights, events and texture objects the call will reuse.
    let r = reuse(e, &mut buffers, &plan, layout, shape.0, weights);
    e.ext.insert(buffers.state);
    r?;
    // One filtering of a chunk's rows plans the FFTs and uploads the
    // filter's response (the values are discarded).
    let variant = e.fft_variant;
    let job = filter_job(geometry, options);
    e.filter_rows(buffers.raw[0], plan.ca * shape.1, shape.2, &job, variant)?;
    e.comp.synchronize()
}

/// Makes (or keeps from the last call) the per-call objects of `plan` in
/// the buffers' state: the weights on the device (when given), the timing
/// events, the texture objects over the pitched layout of `na` angles.
fn reuse(
    e: &Engine,
    buffers: &mut Buffers,
    plan: &Plan,
    layout: &FoldLayout,
    na: usize,
    weights: Option<(&[f32], &[f32])>,
) -> Result<()> {
    let ctx = &e.ctx;
    let state = &mut buffers.state;
    if let Some(w) = weights {
        FdkWeights::refresh(&mut state.weights, ctx, w, &e.comp)?;
    }
    let nev = 4 * plan.nchunks + 2 * plan.ngroups() + 4 * plan.slabs.len();
    while state.events.len() < nev {
        state.events.push(Event::new(ctx)?);
    }
    let groups = layout.groups(na);
    let fresh = !matches!(&state.textures,
        Some((base, n, l, _)) if *base == buffers.tex && *n == groups && l.same_textures(layout));
    if !buffers.arrays && fresh {
        state.textures = None;
        let t = layout.textures(ctx, buffers.tex, na)?;
        state.textures = Some((buffers.tex, groups, *layout, t));
    }
    Ok(())
}

/// The folded pipeline (see the module documentation); `Ok(None)` when a
/// projection value is not finite (nothing is written to `out` then).
/// Errors: out of memory (the caller falls back), driver and launch errors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_fold(
    e: &mut Engine,
    (cfg, chunk): (&FdkFold, usize),
    layout: &FoldLayout,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    options: &FdkOptions,
    weights: (&[f32], &[f32]),
    out: ArrayViewMut3<'_, f32>,
) -> Result<Option<FdkStats>> {
    let module = FoldModule::of(
        e,
        FoldVariant {
            half: layout.half,
            ..cfg.variant()
        },
    )?;
    let plan = Plan::new(cfg, chunk, projections.dim(), volume, options);
    let mut buffers = allocate(e, &plan, layout, projections.dim(), volume)?;
    if let Err(err) = reuse(
        e,
        &mut buffers,
        &plan,
        layout,
        projections.dim().0,
        Some(weights),
    ) {
        e.ext.insert(buffers.state);
        return Err(err);
    }
    // The compute stream ahead of the back projection's stream, for this
    // call (a driver that refuses leaves the priorities as they are).
    let raised = plan.priority
        && match e.comp.set_priority(e.ctx.greatest_stream_priority()?) {
            Ok(()) => true,
            Err(err) => {
                tracing::info!("FDK compute stream priority not set: {err}");
                false
            }
        };
    let r = pipeline(
        e,
        (&buffers, raised),
        &module,
        layout,
        &plan,
        projections,
        geometry,
        volume,
        options,
        out,
    );
    if raised {
        let _ = e.comp.set_priority(0);
    }
    e.ext.insert(buffers.state);
    r
}

#[allow(clippy::too_many_arguments)]
fn pipeline(
    e: &mut Engine,
    (buffers, raised): (&Buffers, bool),
    module: &FoldModule,
    layout: &FoldLayout,
    plan: &Plan,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    options: &FdkOptions,
    mut out: ArrayViewMut3<'_, f32>,
) -> Result<Option<FdkStats>> {
    let t_entry = Instant::now();
    let ctx = e.ctx.clone();
    let (na, nr, nc) = projections.dim();
    let (nx, ny, nz) = (volume.nx, volume.ny, volume.nz);
    let (plane, plane_out) = (nr * nc, nx * ny);
    let Plan {
        ca,
        nchunks,
        early,
        kmid,
        nu,
        su,
        separate,
        ..
    } = *plan;
    let nslabs = plan.slabs.len();
    let (tex, raw, volp, state) = (buffers.tex, &buffers.raw, buffers.vol, &buffers.state);
    let scale = &buffers.scale;
    let nraw = raw.len();
    // The back-projection stream: the compute stream (in order with the
    // filtering) or the state's own.
    macro_rules! bps {
        () => {
            if separate {
                &state.bp
            } else {
                &e.comp
            }
        };
    }
    let cone = crate::cone::ConeModule::of(e)?;

    let weights = state.weights.as_ref().expect("refreshed by run_fold");
    // The constants first (synchronous copies); the folded layout needs no
    // clearing (the packing writes every texel a fetch can touch).
    module.set_geometry(geometry, volume, &e.comp)?;
    let array_textures = if buffers.arrays {
        let t = state
            .arrays
            .iter()
            .map(|a| Texture::array(&ctx, a, TexFilter::Linear))
            .collect::<Result<Vec<_>>>()?;
        module.set_textures(&t, &e.comp)?;
        t
    } else {
        let (.., t) = state.textures.as_ref().expect("made by run_fold");
        module.set_textures(t, &e.comp)?;
        Vec::new()
    };
    if let Some(b) = state.scale.as_ref().filter(|_| layout.half) {
        b.fill_bytes(0, &e.comp)?;
    }
    let job = filter_job(geometry, options);
    let ngroups = plan.ngroups();
    // The events, from the state's pool.
    let mut pool = state.events.iter();
    let mut take = |n: usize| -> Vec<&Event> { pool.by_ref().take(n).collect() };
    let (up0, up1, c0, c1) = (take(nchunks), take(nchunks), take(nchunks), take(nchunks));
    let (g0, g1) = (take(ngroups), take(ngroups));
    let (bp0, bp1, d0, d1) = (take(nslabs), take(nslabs), take(nslabs), take(nslabs));
    let mut stats = FdkStats {
        on_device: true,
        folded: true,
        half: layout.half,
        priority: raised,
        chunks: nchunks,
        slabs: nslabs,
        ..FdkStats::default()
    };
    let angles_of = |i: usize| (i * ca, ((i + 1) * ca).min(na));
    let mut groups_done = 0;
    let mut group_start = 0;

    // 1. Upload, weight, filter and pack chunk by chunk; back project each
    //    finished early group into the whole volume on the bp stream.
    for i in 0..nchunks {
        let b = i % 2;
        let rb = i % nraw;
        let (a0, a1) = angles_of(i);
        let k = a1 - a0;
        if i >= 2 {
            up1[i - 2].synchronize()?;
        }
        let th = Instant::now();
        if i == 0 {
            stats.setup_ms = (th - t_entry).as_secs_f64() * 1e3;
        }
        {
            let pin = e.pin_in[b].as_mut().expect("allocated");
            copy_in(
                &projections.slice(s![a0..a1, .., ..]),
                &mut pin.as_mut_slice()[..k * plane],
            );
        }
        stats.host_in_s += th.elapsed().as_secs_f64();
        if i >= nraw {
            e.up.wait(c1[i - nraw])?;
        }
        up0[i].record(&e.up)?;
        // SAFETY: the pinned buffer is not written again before up1[i]
        // completes (waited for two chunks later).
        unsafe {
            state.raw[rb].as_ref().expect("allocated").upload_async(
                0,
                e.pin_in[b].as_ref().expect("allocated").as_slice().as_ptr() as *const u8,
                k * plane * 4,
                &e.up,
            )?;
        }
        up1[i].record(&e.up)?;
        e.comp.wait(up1[i])?;
        c0[i].record(&e.comp)?;
        let (rows, stride, pair) =
            weights.weight_and_filter(e, &cone, raw[rb], (a0, k), (nr, nc), &job)?;
        module.measure(&e.comp, rows, stride, pair, a0, k, nr, nc, scale)?;
        module.pack(&e.comp, rows, stride, pair, tex, a0, k, nr, layout, scale)?;
        if buffers.arrays {
            // The chunk's bands (with their zero rows) into the arrays.
            let band = layout.h + 1;
            let mut g = a0;
            while g < a1 {
                let t = g / layout.tpg;
                let g_end = a1.min((t + 1) * layout.tpg);
                let rows = (g % layout.tpg) * band..((g_end - 1) % layout.tpg + 1) * band;
                state.arrays[t].copy_rows_from_device(
                    tex + (t * layout.gbytes) as u64,
                    layout.pitch_bytes,
                    rows,
                    &e.comp,
                )?;
                g = g_end;
            }
        }
        c1[i].record(&e.comp)?;
        // An early group ends with this chunk: back project it.
        if plan.ends_group(i) {
            let gi = groups_done;
            let (p0, _) = angles_of(group_start);
            group_start = i + 1;
            bps!().wait(c1[i])?;
            g0[gi].record(bps!())?;
            // On a separate stream, in slabs (short launches, so the filter
            // kernels of the next chunks find free blocks between them).
            let step = if separate && !plan.priority { su } else { nu };
            for k0 in (kmid..nz).step_by(step) {
                module.backproject(
                    bps!(),
                    volp,
                    geometry,
                    volume,
                    layout,
                    scale,
                    (p0, a1 - p0),
                    (k0, step.min(nz - k0)),
                    gi > 0,
                )?;
            }
            g1[gi].record(bps!())?;
            groups_done += 1;
        }
    }
    // 2. The last group slab by slab, every launch queued at once (they
    //    wait for nothing but the filtering); each pair of slabs (upper
    //    slices and their mirrors) is downloaded as soon as it is done and
    //    copied out while the next ones are computed.
    let (pl, _) = angles_of(early);
    bps!().wait(c1[nchunks - 1])?;
    for (j, &(k0, k1)) in plan.slabs.iter().enumerate() {
        bp0[j].record(bps!())?;
        module.backproject(
            bps!(),
            volp,
            geometry,
            volume,
            layout,
            scale,
            (pl, na - pl),
            (k0, k1 - k0),
            early > 0,
        )?;
        bp1[j].record(bps!())?;
    }
    // Every value is checked before anything reaches `out`.
    c1[nchunks - 1].synchronize()?;
    if !weights.all_finite()? {
        bps!().synchronize()?;
        return Ok(None);
    }
    let slab_range = |j: usize| plan.slabs[j];
    for j in 0..=nslabs {
        if j < nslabs {
            let b = j % 2;
            let (k0, k1) = slab_range(j);
            let n = k1 - k0;
            e.down.wait(bp1[j])?;
            d0[j].record(&e.down)?;
            let vol = e.out[0].as_ref().expect("allocated");
            let pin = e.pin_out[b].as_mut().expect("allocated").as_mut_slice();
            let bytes = n * plane_out * 4;
            // SAFETY: the host reads the pinned buffer only after d1[j]
            // completes, and refills it only after copying it out.
            unsafe {
                vol.download_async(
                    k0 * plane_out * 4,
                    pin.as_mut_ptr() as *mut u8,
                    bytes,
                    &e.down,
                )?;
                vol.download_async(
                    (nz - k1) * plane_out * 4,
                    pin[n * plane_out..].as_mut_ptr() as *mut u8,
                    bytes,
                    &e.down,
                )?;
            }
            d1[j].record(&e.down)?;
        }
        if j >= 1 {
            let p = j - 1;
            let (k0, k1) = slab_range(p);
            let n = k1 - k0;
            d1[p].synchronize()?;
            let th = Instant::now();
            let src =
                &e.pin_out[p % 2].as_ref().expect("allocated").as_slice()[..2 * n * plane_out];
            copy_out(
                &src[..n * plane_out],
                &mut out.slice_mut(s![k0..k1, .., ..]),
            );
            copy_out(
                &src[n * plane_out..],
                &mut out.slice_mut(s![nz - k1..nz - k0, .., ..]),
            );
            stats.host_out_s += th.elapsed().as_secs_f64();
        }
    }
    drop(array_textures);
    stats.upload_ms = summed_ms(&up0, &up1)?;
    stats.filter_ms = summed_ms(&c0, &c1)?;
    stats.backproject_ms = summed_ms(&g0, &g1)? + summed_ms(&bp0, &bp1)?;
    stats.download_ms = summed_ms(&d0, &d1)?;
    let first_bp = if ngroups > 0 { &g0[0] } else { &bp0[0] };
    stats.first_bp_ms = up0[0].elapsed_ms(first_bp)? as f64;
    stats.span_ms = up0[0].elapsed_ms(bp1[nslabs - 1])? as f64;
    // The pipeline's own wall time (the caller turns it into the call's).
    stats.total_s = t_entry.elapsed().as_secs_f64();
    Ok(Some(stats))
}
