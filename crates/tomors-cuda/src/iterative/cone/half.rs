//! Half-precision texels for the voxel pair's folded back projection
//! (`kernels/cone_sirt_half.cu`, then FDK's `cone_bp_fold` compiled for
//! `__half2` texels): half the texel bytes per fetch, the unit that bounds
//! the folded back projection (FDK batch 1 of helper fdk2: −28 %).
//! Each projection is scaled by a power of two before the rounding to half
//! (11 significant bits), and the back projection multiplies by the exact
//! inverse; the rounding errors of the ≈ 4 texels × projections of a voxel
//! average out (FDK measured 0.7–1.0·10⁻⁴ relative L2 against `float2`
//! texels). Off by default ([`CudaConeJoseph::set_half`]).

use super::*;
use crate::cone::fold::FoldScale;

/// Source of the half-texel packing kernels.
pub const CONE_SIRT_HALF_CU: &str = include_str!("../../../kernels/cone_sirt_half.cu");

/// The packing kernels and the per-projection scale of the half texels.
/// Fields drop in order: the buffers and functions before their module.
pub(super) struct HalfPack {
    max: Function,
    pack: Function,
    /// The largest |weighted value| of each projection (float bits).
    mx: DeviceBuffer,
    /// The inverse of each projection's scale.
    unscale: DeviceBuffer,
    _module: Module,
}

impl HalfPack {
    /// The kernels (compiled on first use, then from the cubin cache) and
    /// the scale arrays of `na` projections.
    ///
    /// Errors: compilation and driver errors.
    pub(super) fn new(ctx: &Arc<Context>, na: usize) -> Result<Self> {
        ctx.bind()?;
        let (cubin, _) = cubin_cached(
            "cone_sirt_half",
            CONE_SIRT_HALF_CU,
            &[],
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(ctx, &cubin)?;
        Ok(Self {
            max: module.function("cj_half_max")?,
            pack: module.function("cj_weight_pack_fold_half")?,
            mx: DeviceBuffer::new(ctx, na.max(1) * 4, "half texel maxima")?,
            unscale: DeviceBuffer::new(ctx, na.max(1) * 4, "half texel scales")?,
            _module: module,
        })
    }

    /// The scale arrays as `cone_bp_fold` reads them.
    pub(super) fn scale(&self) -> FoldScale {
        FoldScale {
            max: self.mx.ptr(),
            unscale: self.unscale.ptr(),
        }
    }
}

impl CudaConeJoseph {
    /// Turns the half-precision texels of the voxel pair's folded back
    /// projection on or off (rebuilding the folded state; default off; on
    /// with [`ConeGpuOptions::half`] in [`cone_sirt_cuda_opts`]). Returns
    /// whether they are now used (only with the voxel pair's folded back
    /// projection).
    ///
    /// Errors: compilation and driver errors (the folded state).
    pub fn set_half(&mut self, on: bool) -> Result<bool> {
        self.queue.stream().synchronize()?;
        let ctx = self.queue.context().clone();
        let fold = self.fold;
        let Some(vb) = self.voxel.as_mut() else {
            return Ok(false);
        };
        if vb.half != on {
            vb.half = on;
            if vb.fold.is_some() {
                vb.fold = None;
                vb.set_fold(&ctx, fold, self.queue.stream())?;
            }
        }
        self.queue.stream().synchronize()?;
        Ok(on && vb.fold.as_ref().is_some_and(|f| f.half.is_some()))
    }

    /// Queues the weighting and packing of the first `nang` projections at
    /// `src` (`0`: ones) into the folded `__half2` layout of `fb`: zeroes
    /// the maxima, `cj_half_max`, then `cj_weight_pack_fold_half`.
    pub(super) fn pack_half(
        &self,
        hp: &HalfPack,
        weights: u64,
        layout: &FoldLayout,
        tex: u64,
        src: u64,
        nang: usize,
    ) -> Result<()> {
        let stream = self.queue.stream();
        self.queue.context().bind()?;
        hp.mx.fill_bytes(0, stream)?;
        let npix = self.nr * self.nc;
        let per = npix.div_ceil(256 * 16).clamp(1, 64);
        let margs: [Arg; 5] = [
            src.into(),
            weights.into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
            hp.mx.ptr().into(),
        ];
        let l = layout;
        let n = nang * l.h * self.nc;
        let args: [Arg; 14] = [
            src.into(),
            weights.into(),
            tex.into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
            ((l.pitch_bytes / 4) as i32).into(),
            (l.tpg as i32).into(),
            ((l.gbytes / 4) as i64).into(),
            (l.h as i32).into(),
            (l.a_row as i32).into(),
            (l.s_sum as i32).into(),
            hp.mx.ptr().into(),
            hp.unscale.ptr().into(),
            (n as i64).into(),
        ];
        // SAFETY: the parameters of `cj_half_max` and
        // `cj_weight_pack_fold_half`; `src` holds the first `nang`
        // projections (or is null: ones), `weights` a detector of floats,
        // `tex` the half layout of all projections, the scale arrays `na`
        // entries.
        unsafe {
            self.queue.launch_raw(
                &hp.max,
                "cj_half_max",
                (per as u32, nang as u32, 1),
                (256, 1, 1),
                &margs,
            )?;
            self.queue.launch_raw(
                &hp.pack,
                "cj_weight_pack_fold_half",
                Queue::grid(n),
                (256, 1, 1),
                &args,
            )
        }
    }
}
