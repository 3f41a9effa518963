//! The folded cone-beam back projection (`kernels/cone_fold.cu`): one
//! `float2` texture fetch serves slice `k` and its mirror `nz - 1 - k`,
//! which share the detector column and weights and whose rows are mirrored
//! about the principal point's row. Applies when the principal point's row
//! is a whole or half pixel index (twice it an integer: a centred detector)
//! and the whole volume is reconstructed (the volume is centred on z = 0).
//! Same values as `cone_bp_tex` to the texture's 8-bit weights.

use std::collections::HashMap;
use std::sync::Arc;

use tomors_core::cone::{ConeGeometry, ConeVolume};

use crate::cone::{CONE_MAX_ANGLES, TEX_ROWS};
use crate::error::Result;
use crate::fbp::engine::Engine;
use crate::runtime::compile::cubin_cached;
use crate::runtime::{launch, Context, Function, Module, Stream, TexFilter, TexFormat, Texture};

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

/// The folded kernels of one device and shape.
pub(crate) struct FoldModule {
    module: Module,
    bp: Function,
    pack: Function,
    shape: FoldShape,
}

/// The loaded shapes of one engine.
#[derive(Default)]
struct FoldModules(HashMap<FoldShape, Arc<FoldModule>>);

impl FoldModule {
    pub(crate) fn load(ctx: &Arc<Context>, shape: FoldShape) -> Result<Self> {
        ctx.bind()?;
        let defines = vec![
            ("MAXP".to_string(), CONE_MAX_ANGLES.to_string()),
            ("MAXT".to_string(), FOLD_MAXT.to_string()),
            ("ZB".to_string(), shape.zb.to_string()),
            ("BX".to_string(), shape.bx.to_string()),
        ];
        let (cubin, _) = cubin_cached(
            "cone_fold",
            CONE_FOLD_CU,
            &defines,
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(ctx, &cubin)?;
        Ok(Self {
            bp: module.function("cone_bp_fold")?,
            pack: module.function("cone_pack_fold")?,
            module,
            shape,
        })
    }

    /// The engine's folded module of `shape`, compiled or loaded on first use.
    pub(crate) fn of(engine: &mut Engine, shape: FoldShape) -> Result<Arc<Self>> {
        if let Some(m) = engine
            .ext
            .get::<FoldModules>()
            .and_then(|m| m.0.get(&shape))
        {
            return Ok(m.clone());
        }
        let m = Arc::new(Self::load(&engine.ctx, shape)?);
        let mut all = engine
            .ext
            .get::<FoldModules>()
            .map_or_else(HashMap::new, |m| m.0.clone());
        all.insert(shape, m.clone());
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
        let handles: Vec<u64> = textures.iter().map(|t| t.raw).collect();
        self.module.set_global("c_ftex", &handles, stream)
    }

    /// Packs `nang` projections of filtered rows (`src`: plain rows
    /// `row_stride` floats apart, or two rows per complex row when `pair`)
    /// into the folded layout at `dst`, as global angles `a_first..`.
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
    ) -> Result<()> {
        let params = [
            src.into(),
            (row_stride as i64).into(),
            i32::from(pair).into(),
            dst.into(),
            (a_first as i32).into(),
            (nang as i32).into(),
            (nr as i32).into(),
            (layout.nc as i32).into(),
            ((layout.pitch_bytes / 8) as i32).into(),
            (layout.tpg as i32).into(),
            ((layout.gbytes / 8) as i64).into(),
            (layout.h as i32).into(),
            (layout.a_row as i32).into(),
            (layout.s_sum as i32).into(),
        ];
        let blocks = (nang * layout.h * layout.nc)
            .div_ceil(256)
            .clamp(1, 65_535 * 8) as u32;
        // SAFETY: the parameters match `cone_pack_fold` in order and type;
        // `src` holds nang projections of nr rows, `dst` the folded layout
        // of every angle up to a_first + nang.
        unsafe {
            launch(
                &self.pack,
                "cone_pack_fold",
                (blocks, 1, 1),
                (256, 1, 1),
                0,
                stream,
                &params,
            )
        }
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

/// The folded texture layout: `tpg` projections per pitched `float2`
/// texture, `h` folded rows each plus one zero row, rows `pitch_bytes`
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
}

impl FoldLayout {
    /// The layout for `geometry` with `nang` projections, or `None` when
    /// the detector cannot be folded (twice the principal point's row is
    /// not an integer), a folded projection exceeds a texture's rows or
    /// the device's limits, or more than the kernel's textures are needed.
    pub(crate) fn new(ctx: &Context, geometry: &ConeGeometry, nang: usize) -> Option<Self> {
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
        let pitch_bytes = (nc * 8).div_ceil(align) * align;
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
        })
    }

    /// Bytes of the folded layout of `nang` projections.
    pub(crate) fn bytes(&self, nang: usize) -> usize {
        nang.div_ceil(self.tpg) * self.gbytes
    }

    /// The texture objects (bilinear, border zero) over the layout of
    /// `nang` projections at `base`, set into `c_ftex` of `module`.
    pub(crate) fn bind(
        &self,
        ctx: &Arc<Context>,
        module: &FoldModule,
        base: u64,
        nang: usize,
        stream: &Stream,
    ) -> Result<Vec<Texture>> {
        let textures = (0..nang.div_ceil(self.tpg))
            .map(|g| {
                Texture::pitch2d(
                    ctx,
                    base + (g * self.gbytes) as u64,
                    self.nc,
                    self.height,
                    self.pitch_bytes,
                    TexFormat::Float2,
                    TexFilter::Linear,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        module.set_textures(&textures, stream)?;
        Ok(textures)
    }

    /// Texture groups of `nang` projections.
    pub(crate) fn groups(&self, nang: usize) -> usize {
        nang.div_ceil(self.tpg)
    }
}
