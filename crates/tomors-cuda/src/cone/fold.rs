//! The folded cone-beam back projection (`kernels/cone_fold.cu`): one
//! `float2` texture fetch serves slice `k` and its mirror `nz - 1 - k`,
//! which share the detector column and weights and whose rows are mirrored
//! about the principal point's row. Applies when the principal point's row
//! is a whole or half pixel index (twice it an integer: a centred detector)
//! and the whole volume is reconstructed (the volume is centred on z = 0).
//! Same values as `cone_bp_tex` to the texture's 8-bit weights. Optionally
//! (`half`) the folded texels are `__half2` (4 bytes instead of 8), each
//! projection scaled by a power of two into half's range.

use std::collections::HashMap;
use std::sync::Arc;

use tomors_core::cone::{ConeGeometry, ConeVolume};

use crate::cone::{
    launch_items, load_module, set_textures, stacked_textures, CONE_MAX_ANGLES, TEX_ROWS,
};
use crate::error::Result;
use crate::fbp::engine::Engine;
use crate::runtime::{launch, Context, Function, Module, Stream, TexFormat, Texture};

/// Source of the folded kernels.
pub const CONE_FOLD_CU: &str = include_str!("../../kernels/cone_fold.cu");

/// Texture objects per launch at most (8 KiB of constants).
const FOLD_MAXT: usize = 1024;

/// Launch shape of the folded kernel: upper slices per thread (each with
/// its mirror) and threads of a 256-thread block along x.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FoldShape {
    /// Upper slices per thread (1 to 32).
    pub zb: usize,
    /// Threads along x per block (a power of two, 8 to 64).
    pub bx: usize,
}

impl Default for FoldShape {
    fn default() -> Self {
        Self { zb: 16, bx: 16 }
    }
}

impl FoldShape {
    /// Whether the kernel can be built with this shape.
    pub fn is_valid(&self) -> bool {
        (1..=32).contains(&self.zb) && [8, 16, 32, 64].contains(&self.bx)
    }
}

/// What selects a compiled variant of the folded kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FoldVariant {
    /// The launch shape.
    pub shape: FoldShape,
    /// `__half2` texels (scaled per projection) instead of `float2`.
    pub half: bool,
    /// Blocks of 256 threads per multiprocessor the compiler must fit
    /// (0 or 1: no register cap).
    pub min_blocks: usize,
}

/// The folded kernels of one device, shape and texel type.
pub(crate) struct FoldModule {
    module: Module,
    bp: Function,
    pack: Function,
    max: Function,
    shape: FoldShape,
    /// `__half2` texels (scaled per projection) instead of `float2`.
    pub(crate) half: bool,
}

/// The loaded shapes of one engine.
#[derive(Default)]
struct FoldModules(HashMap<FoldVariant, Arc<FoldModule>>);

impl FoldModule {
    pub(crate) fn load(ctx: &Arc<Context>, v: FoldVariant) -> Result<Self> {
        ctx.bind()?;
        let FoldVariant { shape, half, .. } = v;
        let defines = vec![
            ("MAXP".to_string(), CONE_MAX_ANGLES.to_string()),
            ("MAXT".to_string(), FOLD_MAXT.to_string()),
            ("ZB".to_string(), shape.zb.to_string()),
            ("BX".to_string(), shape.bx.to_string()),
            ("HALF".to_string(), u8::from(half).to_string()),
            ("MINB".to_string(), v.min_blocks.clamp(1, 8).to_string()),
        ];
        let module = load_module(ctx, "cone_fold", CONE_FOLD_CU, &defines)?;
        Ok(Self {
            bp: module.function("cone_bp_fold")?,
            pack: module.function("cone_pack_fold")?,
            max: module.function("cone_fold_max")?,
            module,
            shape,
            half,
        })
    }

    /// The engine's folded module of variant `v`, compiled or loaded on
    /// first use.
    pub(crate) fn of(engine: &mut Engine, v: FoldVariant) -> Result<Arc<Self>> {
        let v = FoldVariant {
            min_blocks: v.min_blocks.clamp(1, 8),
            ..v
        };
        if let Some(m) = engine.ext.get::<FoldModules>().and_then(|m| m.0.get(&v)) {
            return Ok(m.clone());
        }
        let m = Arc::new(Self::load(&engine.ctx, v)?);
        let mut all = engine
            .ext
            .get::<FoldModules>()
            .map_or_else(HashMap::new, |m| m.0.clone());
        all.insert(v, m.clone());
        engine.ext.insert(FoldModules(all));
        Ok(m)
    }

    /// Sets the per-projection constants of `geometry`'s angles on `volume`
    /// (see the kernel source) after the work queued on `stream`.
    pub(crate) fn set_geometry(
        &self,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        stream: &Stream,
    ) -> Result<()> {
        let c = fold_constants(geometry, volume);
        self.module.set_global("c_geo", &c, stream)
    }

    /// Sets the texture objects of a launch (`c_ftex`), after the work
    /// queued on `stream`.
    pub(crate) fn set_textures(&self, textures: &[Texture], stream: &Stream) -> Result<()> {
        set_textures(&self.module, "c_ftex", textures, stream)
    }

    /// With `__half2` texels: max-es the largest |value| of each of `nang`
    /// projections of filtered rows (laid out as for [`Self::pack`]) into
    /// `scale.max` (u32 float bits per global angle, zeroed before the
    /// call's first chunk). Nothing to do with `float2` texels.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn measure(
        &self,
        stream: &Stream,
        src: u64,
        row_stride: usize,
        pair: bool,
        a_first: usize,
        nang: usize,
        nr: usize,
        nc: usize,
        scale: &FoldScale,
    ) -> Result<()> {
        if !self.half || nang == 0 {
            return Ok(());
        }
        let params = [
            src.into(),
            (row_stride as i64).into(),
            i32::from(pair).into(),
            (a_first as i32).into(),
            (nr as i32).into(),
            (nc as i32).into(),
            scale.max.into(),
        ];
        let per = (nr * nc).div_ceil(256 * 8).clamp(1, 16) as u32;
        // SAFETY: the parameters match `cone_fold_max`; `src` holds nang
        // projections of nr rows, `scale.max` every global angle.
        unsafe {
            launch(
                &self.max,
                "cone_fold_max",
                (per, nang as u32, 1),
                (256, 1, 1),
                0,
                stream,
                &params,
            )
        }
    }

    /// Packs `nang` projections of filtered rows (`src`: plain rows
    /// `row_stride` floats apart, or two rows per complex row when `pair`)
    /// into the folded layout at `dst`, as global angles `a_first..`
    /// (with `__half2` texels scaled by the powers of two of
    /// [`Self::measure`], their inverses written to `scale.unscale`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pack(
        &self,
        stream: &Stream,
        src: u64,
        row_stride: usize,
        pair: bool,
        dst: u64,
        a_first: usize,
        nang: usize,
        nr: usize,
        layout: &FoldLayout,
        scale: &FoldScale,
    ) -> Result<()> {
        let tb = layout.texel_bytes();
        let params = [
            src.into(),
            (row_stride as i64).into(),
            i32::from(pair).into(),
            dst.into(),
            (a_first as i32).into(),
            (nang as i32).into(),
            (nr as i32).into(),
            (layout.nc as i32).into(),
            ((layout.pitch_bytes / tb) as i32).into(),
            (layout.tpg as i32).into(),
            ((layout.gbytes / tb) as i64).into(),
            (layout.h as i32).into(),
            (layout.a_row as i32).into(),
            (layout.s_sum as i32).into(),
            scale.max.into(),
            scale.unscale.into(),
        ];
        let items = nang * (layout.h + 1) * layout.nc;
        // SAFETY: the parameters match `cone_pack_fold` in order and type;
        // `src` holds nang projections of nr rows, `dst` the folded layout
        // of every angle up to a_first + nang.
        unsafe { launch_items(&self.pack, "cone_pack_fold", items, stream, &params) }
    }

    /// Back projects projections `p_first..p_first + nang` (textures bound
    /// by [`FoldLayout::bind`]) into upper slices `k_first..k_first + nk`
    /// of `volume` and their mirrors, in the whole volume at `vol`
    /// (`[z][y][x]`), overwriting or (`accumulate`) adding.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backproject(
        &self,
        stream: &Stream,
        vol: u64,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        layout: &FoldLayout,
        scale: &FoldScale,
        (p_first, nang): (usize, usize),
        (k_first, nk): (usize, usize),
        accumulate: bool,
    ) -> Result<()> {
        let (nx, ny, nz) = (volume.nx, volume.ny, volume.nz);
        debug_assert!(k_first >= nz / 2 && k_first + nk <= nz);
        let params = [
            vol.into(),
            (p_first as i32).into(),
            (nang as i32).into(),
            (k_first as i32).into(),
            (nk as i32).into(),
            i32::from(accumulate).into(),
            (layout.tpg as i32).into(),
            (layout.h as i32).into(),
            (nx as i32).into(),
            (ny as i32).into(),
            (nz as i32).into(),
            (geometry.n_cols() as f32).into(),
            ((geometry.sdd() / geometry.pixel_v()) as f32).into(),
            (geometry.sod() as f32).into(),
            (geometry.center_col() as f32).into(),
            ((geometry.center_row() - layout.a_row as f64) as f32).into(),
            volume.voxel_size.into(),
            scale.unscale.into(),
        ];
        let by = 256 / self.shape.bx;
        let grid = (
            nx.div_ceil(self.shape.bx) as u32,
            ny.div_ceil(by) as u32,
            nk.div_ceil(self.shape.zb) as u32,
        );
        // SAFETY: the parameters match `cone_bp_fold`; `vol` holds the
        // whole volume and the textures in `c_ftex` every projection up to
        // p_first + nang.
        unsafe {
            launch(
                &self.bp,
                "cone_bp_fold",
                grid,
                (256, 1, 1),
                0,
                stream,
                &params,
            )
        }
    }
}

/// The six f32 constants per projection of `cone_bp_fold` (computed in
/// f64): depth = d0 + ix dx + iy dy; u = u0 + ix ux + iy uy, with the
/// detector column = ccol + u / depth.
pub(crate) fn fold_constants(geometry: &ConeGeometry, volume: &ConeVolume) -> Vec<f32> {
    let vox = volume.voxel_size as f64;
    let x0 = -(volume.nx as f64 - 1.0) * 0.5 * vox;
    let y0 = (volume.ny as f64 - 1.0) * 0.5 * vox;
    let (sod, su) = (geometry.sod(), geometry.sdd() / geometry.pixel_u());
    geometry
        .angles()
        .iter()
        .flat_map(|&a| {
            let (sn, cs) = (a as f64).sin_cos();
            [
                sod - x0 * sn + y0 * cs,
                -vox * sn,
                -vox * cs,
                (x0 * cs + y0 * sn) * su,
                vox * cs * su,
                -vox * sn * su,
            ]
        })
        .map(|v| v as f32)
        .collect()
}

/// Device arrays of the half texels' per-projection scale (null pointers
/// with `float2` texels): the largest |value| of each projection (u32
/// float bits) and the inverse of its power-of-two scale.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FoldScale {
    pub max: u64,
    pub unscale: u64,
}

/// The folded texture layout: `tpg` projections per pitched `float2` (or
/// `__half2`) texture, `h` folded rows each plus one zero row, rows `pitch_bytes`
/// apart, textures `gbytes` apart; folded row `i` holds detector rows
/// `a_row + i` and `s_sum - a_row - i`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FoldLayout {
    pub tpg: usize,
    pub h: usize,
    pub a_row: i64,
    pub s_sum: i64,
    pub pitch_bytes: usize,
    pub gbytes: usize,
    pub height: usize,
    pub nc: usize,
    /// `__half2` texels instead of `float2`.
    pub half: bool,
}

impl FoldLayout {
    /// The layout for `geometry` with `nang` projections, or `None` when
    /// the detector cannot be folded (twice the principal point's row is
    /// not an integer), a folded projection exceeds a texture's rows or
    /// the device's limits, or more than the kernel's textures are needed.
    pub(crate) fn new(
        ctx: &Context,
        geometry: &ConeGeometry,
        nang: usize,
        half: bool,
    ) -> Option<Self> {
        let s = 2.0 * geometry.center_row();
        let s_sum = s.round();
        if !s.is_finite() || (s - s_sum).abs() > 1e-6 || s_sum.abs() > 1e9 {
            return None;
        }
        let s_sum = s_sum as i64;
        let nr = geometry.n_rows() as i64;
        let nc = geometry.n_cols();
        let a_row = s_sum.div_euclid(2) - 1;
        let h = nr.max(s_sum + 1) - a_row + 1;
        if h < 2 || h + 2 > TEX_ROWS as i64 {
            return None;
        }
        let h = h as usize;
        let tpg = (TEX_ROWS - 1) / (h + 1);
        let align = ctx.pitch_align.max(32);
        let tb = if half { 4 } else { 8 };
        let pitch_bytes = (nc * tb).div_ceil(align) * align;
        let height = tpg * (h + 1);
        if height > ctx.max_tex_height || nc > ctx.max_tex_width || nang.div_ceil(tpg) > FOLD_MAXT {
            return None;
        }
        let gbytes = (height * pitch_bytes).div_ceil(512) * 512;
        Some(Self {
            tpg,
            h,
            a_row,
            s_sum,
            pitch_bytes,
            gbytes,
            height,
            nc,
            half,
        })
    }

    /// Bytes per texel (8 for `float2`, 4 for `__half2`).
    pub(crate) fn texel_bytes(&self) -> usize {
        if self.half {
            4
        } else {
            8
        }
    }

    /// The texel format of the layout's textures and arrays.
    pub(crate) fn format(&self) -> TexFormat {
        if self.half {
            TexFormat::Half2
        } else {
            TexFormat::Float2
        }
    }

    /// Bytes of the folded layout of `nang` projections.
    pub(crate) fn bytes(&self, nang: usize) -> usize {
        nang.div_ceil(self.tpg) * self.gbytes
    }

    /// The texture objects (bilinear, border zero) over the layout of
    /// `nang` projections at `base` (set them with
    /// [`FoldModule::set_textures`]).
    pub(crate) fn textures(
        &self,
        ctx: &Arc<Context>,
        base: u64,
        nang: usize,
    ) -> Result<Vec<Texture>> {
        stacked_textures(
            ctx,
            (base, self.groups(nang), self.gbytes),
            (self.nc, self.height, self.pitch_bytes),
            self.format(),
        )
    }

    /// Whether texture objects made for `other` serve this layout too.
    pub(crate) fn same_textures(&self, other: &Self) -> bool {
        (
            self.nc,
            self.height,
            self.pitch_bytes,
            self.gbytes,
            self.half,
        ) == (
            other.nc,
            other.height,
            other.pitch_bytes,
            other.gbytes,
            other.half,
        )
    }

    /// Texture groups of `nang` projections.
    pub(crate) fn groups(&self, nang: usize) -> usize {
        nang.div_ceil(self.tpg)
    }
}
