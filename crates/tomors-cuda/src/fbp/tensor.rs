//! The tensor-core back projector (`kernels/backproject_tensor.cu`): linear
//! interpolation as hat-function weights, so that a 4×4 pixel block × 8
//! slices × 2 projections is one `mma.m16n8k16` (weights × values), with
//! both operands split in two f16 parts (three products: f32-class
//! results). Its parameters, their text form, the geometry it accepts and
//! the padded entry layout.

use tomors_core::{ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::kernels::projection_coefficients_f64;
use crate::fbp::padding::{block_span, coordinate_range};
use crate::runtime::LaunchSpec;

/// Source of the tensor-core kernels (`tc_zero`, `tc_absmax`,
/// `pack_tensor`, `bp_tensor`): the layout, f16 splits and packing part,
/// then the back projection.
pub const TENSOR_CU: &str = concat!(
    include_str!("../../kernels/backproject_tensor_pack.cu"),
    include_str!("../../kernels/backproject_tensor.cu")
);

/// Largest bin span of a 4×4 pixel block (3 (|cx| + |cy|) in bins) the
/// kernel's 8 bins per block and projection cover, with a margin for the
/// f32 rounding of the coordinates.
pub const MAX_BLOCK_SPAN: f64 = 4.95;

/// Parameters of the tensor-core kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorParams {
    /// 4×4 pixel blocks of a warp along x.
    pub bx: u8,
    /// 4×4 pixel blocks of a warp along y.
    pub by: u8,
    /// 8-slice tiles of a warp (a block reconstructs 8 × this many slices).
    pub nt: u8,
    /// Warps of a block along x.
    pub wx: u8,
    /// Warps of a block along y.
    pub wy: u8,
    /// Projection pairs per shared-memory stage.
    pub ap: u8,
    /// Stages in the shared-memory ring (2 to 6).
    pub stages: u8,
    /// How the MMA results reach the f32 sums (the tensor core's
    /// accumulation truncates, so long chains drift): 1 = each pair's three
    /// products from zero, then one FADD each; G ≥ 2 = the MMA accumulators
    /// collect G pairs, then are added to f32 sums (twice the
    /// accumulators); 0 = the MMA accumulates over all projections (not
    /// exact: 7·10⁻⁵ relative at 2048 projections).
    pub flush: u8,
    /// Minimum resident blocks per multiprocessor (`__launch_bounds__`).
    pub min_blocks: u8,
    /// 0, or the width in blocks of the strips the blocks are walked in
    /// (the blocks resident together then cover a compact patch).
    pub swizzle: u8,
    /// The weights' f16 high part by clearing low mantissa bits instead of
    /// rounding (no conversion back from f16; ≈ 21 instead of 22 bits).
    pub mask: bool,
    /// Slice tiles outermost: every block's weights first, then per tile
    /// the blocks' independent MMA chains (more registers live).
    pub nt_outer: bool,
    /// Slice tiles whose MMA chains are issued interleaved (all tiles'
    /// first products, then the second, then the third): that many
    /// independent chains in flight per warp (divides `nt`).
    pub interleave: u8,
    /// Stage with the copy engine (1, 2; 0 = 16-byte `cp.async` copies by
    /// every thread): per stage and projection one bulk copy (`cp.async.bulk`
    /// completing on an mbarrier, compute capability 9.0 on) of rows padded
    /// in device memory as in shared memory, issued by one thread that also
    /// computes the projection's constants; with 2 that thread prefetches
    /// the f64 coefficients an iteration ahead (`cp.async` into shared
    /// memory), so that it does not wait for device memory.
    pub bulk: u8,
    /// How the weights are made: 0 = clamped hats split by rounding to f16
    /// and converting back (or by masking with `mask`); 1 = lean: the
    /// unclamped hats split by masking and converted with clamping
    /// conversions (`cvt.rn.relu`: the clamp and the conversion back cost
    /// nothing; ≈ 21 bits as `mask`), the blocks' offsets added to the pair's
    /// origin without multiplications by zero.
    pub weights: u8,
    /// With `flush` 1: projection pairs whose products form one MMA chain
    /// from zero before it is added to the f32 sums (1, 2 or 4, dividing
    /// `ap`): the FADDs per pair divided by this; the chain truncates at
    /// most 3 × this many times instead of 3.
    pub pair_group: u8,
}

impl Default for TensorParams {
    fn default() -> Self {
        Self {
            bx: 2,
            by: 1,
            nt: 8,
            wx: 4,
            wy: 4,
            ap: 2,
            stages: 3,
            flush: 1,
            min_blocks: 1,
            swizzle: 0,
            mask: false,
            nt_outer: false,
            interleave: 1,
            bulk: 0,
            weights: 0,
            pair_group: 1,
        }
    }
}

impl TensorParams {
    /// The shape `--kernel tensor` uses (`x2,y1,n8,u2,v4,a4,p2,f1,b1,c2,w1,g4`):
    /// 8 warps of 2 blocks × 64 slices (≈ 232 registers), 4 projection pairs
    /// per stage in 2 stages copied by the copy engine with the coefficients
    /// prefetched (`c2`), lean weights (`w1`) and one MMA chain per 4 pairs
    /// (`g4`): 6970 GU/s with `c1` against 4576 for the previous shape
    /// (`v3`) on an H200 in the same call, `docs/perf-notes.md`. Below
    /// compute capability 9.0 it runs without the copy engine
    /// ([`TensorParams::for_device`]).
    pub fn tuned() -> Self {
        Self {
            wx: 2,
            ap: 4,
            stages: 2,
            bulk: 2,
            weights: 1,
            pair_group: 4,
            ..Self::default()
        }
    }

    /// This shape as a device of compute capability `cc` runs it: bulk
    /// staging (the copy engine) needs 9.0, so below it the stages are
    /// copied by every thread (`c0`; the same arithmetic and results).
    pub fn for_device(self, cc: (i32, i32)) -> Self {
        if cc.0 < 9 {
            Self { bulk: 0, ..self }
        } else {
            self
        }
    }

    /// Checks the values the kernel supports.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.nt, 1 | 2 | 4 | 8) {
            return Err(CudaError::Parameter(format!(
                "tensor slice tiles {} (use 1, 2, 4 or 8)",
                self.nt
            )));
        }
        let acc = self.bx as usize
            * self.by as usize
            * self.nt as usize
            * if self.flush >= 2 { 8 } else { 4 };
        if self.bx == 0 || self.by == 0 || acc > 128 {
            return Err(CudaError::Parameter(format!(
                "tensor warp of {}x{} blocks × {} slice tiles ({acc} accumulators; use 1 to 128)",
                self.bx, self.by, self.nt
            )));
        }
        if !matches!(self.interleave, 1 | 2 | 4 | 8) || self.interleave > self.nt {
            return Err(CudaError::Parameter(format!(
                "tensor interleaved tiles {} (use 1, 2, 4 or 8, at most the {} slice tiles)",
                self.interleave, self.nt
            )));
        }
        let warps = self.wx as usize * self.wy as usize;
        if warps == 0 || warps > 32 {
            return Err(CudaError::Parameter(format!(
                "tensor block of {}x{} warps (use 1 to 32 warps)",
                self.wx, self.wy
            )));
        }
        if !(1..=8).contains(&self.ap) {
            return Err(CudaError::Parameter(format!(
                "tensor projection pairs per stage {} (use 1 to 8)",
                self.ap
            )));
        }
        if !(2..=6).contains(&self.stages) {
            return Err(CudaError::Parameter(format!(
                "tensor stages {} (use 2 to 6)",
                self.stages
            )));
        }
        if !matches!(self.pair_group, 1 | 2 | 4)
            || (self.pair_group > 1
                && (!self.ap.is_multiple_of(self.pair_group)
                    || self.flush != 1
                    || self.interleave != 1
                    || self.nt_outer))
        {
            return Err(CudaError::Parameter(format!(
                "tensor pair group g{} (use 1, 2 or 4 dividing the {} pairs per stage; above 1 \
                 only with f1 and without i or o)",
                self.pair_group, self.ap
            )));
        }
        if self.bulk > 2 {
            return Err(CudaError::Parameter(format!(
                "tensor staging c{} (use c0, c1 or c2)",
                self.bulk
            )));
        }
        if self.weights > 1 {
            return Err(CudaError::Parameter(format!(
                "tensor weights w{} (use w0 or w1)",
                self.weights
            )));
        }
        if self.flush > 64 {
            return Err(CudaError::Parameter(format!(
                "tensor flush {} (use 0, 1, or 2 to 64 pairs)",
                self.flush
            )));
        }
        if !(1..=8).contains(&self.min_blocks) {
            return Err(CudaError::Parameter(format!(
                "tensor min_blocks {} (use 1 to 8)",
                self.min_blocks
            )));
        }
        Ok(())
    }

    /// Slices one block reconstructs (8 per slice tile).
    pub fn slices_per_block(&self) -> usize {
        8 * self.nt as usize
    }

    /// Pixels of a block along x and y.
    pub fn block_pixels(&self) -> (usize, usize) {
        (
            4 * self.bx as usize * self.wx as usize,
            4 * self.by as usize * self.wy as usize,
        )
    }

    /// Threads of a block.
    pub fn threads(&self) -> usize {
        32 * self.wx as usize * self.wy as usize
    }

    /// Compact text form, e.g. `x2,y1,n8,u4,v4,a2,p3,f1,b1` (`,z8` with a
    /// swizzle, `,m1` with masked weights; parsed back by
    /// [`TensorParams::parse`]).
    pub fn spec(&self) -> String {
        let mut z = if self.swizzle > 0 {
            format!(",z{}", self.swizzle)
        } else {
            String::new()
        };
        if self.mask {
            z.push_str(",m1");
        }
        if self.nt_outer {
            z.push_str(",o1");
        }
        if self.interleave > 1 {
            z.push_str(&format!(",i{}", self.interleave));
        }
        if self.bulk > 0 {
            z.push_str(&format!(",c{}", self.bulk));
        }
        if self.weights > 0 {
            z.push_str(&format!(",w{}", self.weights));
        }
        if self.pair_group > 1 {
            z.push_str(&format!(",g{}", self.pair_group));
        }
        format!(
            "x{},y{},n{},u{},v{},a{},p{},f{},b{}{z}",
            self.bx,
            self.by,
            self.nt,
            self.wx,
            self.wy,
            self.ap,
            self.stages,
            self.flush,
            self.min_blocks
        )
    }

    /// Parses [`TensorParams::spec`]'s form; keys may come in any order and
    /// missing ones keep their defaults.
    pub fn parse(s: &str) -> Result<Self> {
        let mut p = Self::default();
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = part.split_at(1);
            let num: u8 = v.parse().map_err(|_| {
                CudaError::Parameter(format!(
                    "tensor parameter '{part}' (e.g. x2,y1,n8,u4,v4,a2,p3,f1,b1)"
                ))
            })?;
            match k {
                "x" => p.bx = num,
                "y" => p.by = num,
                "n" => p.nt = num,
                "u" => p.wx = num,
                "v" => p.wy = num,
                "a" => p.ap = num,
                "p" => p.stages = num,
                "f" => p.flush = num,
                "b" => p.min_blocks = num,
                "z" => p.swizzle = num,
                "m" => p.mask = num != 0,
                "o" => p.nt_outer = num != 0,
                "i" => p.interleave = num,
                "c" => p.bulk = num,
                "w" => p.weights = num,
                "g" => p.pair_group = num,
                _ => {
                    return Err(CudaError::Parameter(format!(
                        "tensor parameter '{part}' (keys x, y, n, u, v, a, p, f, b, z, m, o, i, k, c, w, g)"
                    )))
                }
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Projections per stage.
    pub fn stage_angles(&self) -> usize {
        2 * self.ap as usize
    }
}

/// Checks that every 4×4 pixel block spans at most [`MAX_BLOCK_SPAN`] bins
/// in every projection (pixels at most ≈ 1.17 bins wide at 45°).
pub fn check_geometry(geom: &ParallelGeometry, grid: &SliceGrid) -> Result<()> {
    let c = projection_coefficients_f64(geom, grid);
    let n = geom.n_angles();
    let span = (0..n)
        .map(|i| 3.0 * (c[n + i].abs() + c[2 * n + i].abs()))
        .fold(0.0f64, f64::max);
    if span > MAX_BLOCK_SPAN || !span.is_finite() {
        return Err(CudaError::Parameter(format!(
            "tensor: a 4x4 pixel block spans {span:.2} bins in some projection (pixel size {} \
             against bin width {}); the kernel covers {MAX_BLOCK_SPAN} (pixels up to about 1.17 \
             bins); use another kernel",
            grid.pixel_size,
            geom.bin_width()
        )));
    }
    Ok(())
}

/// Checks that the device has the `mma.sync.m16n8k16` f16 instruction and
/// the paired f16 conversions the kernel uses (compute capability 8.0 on).
pub fn check_device(cc: (i32, i32)) -> Result<()> {
    if cc.0 < 8 {
        return Err(CudaError::Parameter(format!(
            "tensor: the kernel needs compute capability 8.0 or newer (this device has {}.{}); \
             use another kernel",
            cc.0, cc.1
        )));
    }
    Ok(())
}

/// Checks that bulk staging (`c1`: `cp.async.bulk` on an mbarrier) has the
/// copy engine it needs (compute capability 9.0 on).
pub fn check_bulk(p: TensorParams, cc: (i32, i32)) -> Result<()> {
    if p.bulk > 0 && cc.0 < 9 {
        return Err(CudaError::Parameter(format!(
            "tensor: bulk staging (c1, c2) needs compute capability 9.0 or newer (this device has \
             {}.{}); use c0",
            cc.0, cc.1
        )));
    }
    Ok(())
}

/// Projections padded to whole stages.
pub fn padded_angles(p: TensorParams, n: usize) -> usize {
    n.div_ceil(p.stage_angles()).max(1) * p.stage_angles()
}

/// Bins a block stages per projection: its largest span over the
/// projections plus the margins (one bin below its lowest, a block's 8 bins
/// from its lowest coordinate, f32 rounding).
pub fn stage_bins(p: TensorParams, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
    block_span(geom, grid, p.block_pixels()).ceil() as usize + 11
}

/// The padded bin range of the entry layout: (`blo`, `nbp`), the global bin
/// of padded row 0 and the number of rows, so that every staged row of
/// every block of the grid rounded up to whole blocks lies inside.
pub fn padded_bins(p: TensorParams, geom: &ParallelGeometry, grid: &SliceGrid) -> (i64, usize) {
    let Some((lo, hi)) = coordinate_range(geom, grid, p.block_pixels()) else {
        return (0, 1);
    };
    let blo = lo.floor() as i64 - 3;
    let nbp = (hi.floor() as i64 - blo) as usize + stage_bins(p, geom, grid) + 2;
    (blo, nbp)
}

/// Bytes of one bin row of the entry layout (per slice tile 8 hi and 8 lo
/// f16 values); shared memory pads it by 16.
pub fn row_bytes(p: TensorParams) -> usize {
    32 * p.nt as usize
}

/// Bytes between bin rows of the entries in device memory: the row, padded
/// by 16 as in shared memory when stages are bulk copies.
pub fn row_pitch(p: TensorParams) -> usize {
    row_bytes(p) + if p.bulk > 0 { 16 } else { 0 }
}

/// Bytes of the entries (without the maxima) of `nslots` slots, `npp`
/// padded projections and `nbp` padded bins.
pub fn entries_bytes(p: TensorParams, nslots: usize, npp: usize, nbp: usize) -> usize {
    nslots.div_ceil(p.slices_per_block()) * npp * nbp * row_pitch(p)
}

/// Bytes of one staged projection in shared memory.
pub fn stage_angle_bytes(p: TensorParams, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
    stage_bins(p, geom, grid) * (row_bytes(p) + 16)
}

/// Dynamic shared memory of a block: the staging ring with its constants.
pub fn shared_bytes(p: TensorParams, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
    let a = p.stage_angles();
    p.stages as usize * (a * stage_angle_bytes(p, geom, grid) + a * 16)
}

/// Slots (slices) of the entry layout for a slab of `slices` slices:
/// whole blocks, rounded up to 32 (the packing tile).
pub fn slots(p: TensorParams, slices: usize) -> usize {
    (slices.div_ceil(p.slices_per_block()).max(1) * p.slices_per_block()).div_ceil(32) * 32
}

/// The launches that pack `slices` filtered slices of `na` projections
/// (rows at `src` = (address, row stride in floats, pair flag)) into the
/// buffer at `buf` (the per-slot maxima, then the entries of `nbp` padded
/// bins): `tc_zero`, `tc_absmax`, `pack_tensor`, in this order.
pub fn pack_launches(
    p: TensorParams,
    na: usize,
    nbp: usize,
    slices: usize,
    src: (u64, i64, i32),
    buf: u64,
) -> [LaunchSpec; 3] {
    let npp = padded_angles(p, na);
    let nslots = slots(p, slices);
    let ent = buf + maxima_bytes(p, slices) as u64;
    let (s, rs, pair) = src;
    let (na_i, ns_i) = (na as i32, slices as i32);
    [
        LaunchSpec {
            name: "tc_zero",
            grid: (nslots.div_ceil(256) as u32, 1, 1),
            block: (256, 1, 1),
            shared: 0,
            args: vec![buf.into(), (nslots as i32).into()],
        },
        LaunchSpec {
            name: "tc_absmax",
            grid: (slices as u32, na.div_ceil(8) as u32, 1),
            block: (256, 1, 1),
            shared: 0,
            args: vec![s.into(), rs.into(), pair.into(), buf.into(), na_i.into()],
        },
        LaunchSpec {
            name: "pack_tensor",
            grid: (nbp.div_ceil(32) as u32, npp as u32, (nslots / 32) as u32),
            block: (32, 8, 1),
            shared: 0,
            args: vec![
                s.into(),
                rs.into(),
                pair.into(),
                buf.into(),
                ent.into(),
                na_i.into(),
                ns_i.into(),
            ],
        },
    ]
}

/// The `bp_tensor` launch of the entries packed at `buf`
/// ([`pack_launches`]) into `slices` slices of `nx`×`ny` pixels at `out`,
/// scaled by `scale`; `shared` the module's shared bytes per block and
/// `dconst` the address of its f64 projection constants.
#[allow(clippy::too_many_arguments)]
pub fn bp_launch(
    p: TensorParams,
    (nx, ny): (usize, usize),
    slices: usize,
    buf: u64,
    out: u64,
    scale: f32,
    shared: u32,
    dconst: u64,
) -> LaunchSpec {
    let (bx, by) = p.block_pixels();
    let ent = buf + maxima_bytes(p, slices) as u64;
    LaunchSpec {
        name: "bp_tensor",
        grid: (
            nx.div_ceil(bx) as u32,
            ny.div_ceil(by) as u32,
            slices.div_ceil(p.slices_per_block()) as u32,
        ),
        block: (p.threads() as u32, 1, 1),
        shared,
        args: vec![
            ent.into(),
            buf.into(),
            out.into(),
            (slices as i32).into(),
            scale.into(),
            dconst.into(),
        ],
    }
}

/// Bytes of the per-slot maxima (ahead of the entries, 256-byte aligned).
pub fn maxima_bytes(p: TensorParams, slices: usize) -> usize {
    (slots(p, slices) * 4).div_ceil(256) * 256
}

/// Bytes of the entry buffer (maxima, then the entries) for `slices` slices.
pub fn entry_bytes(
    p: TensorParams,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    slices: usize,
) -> usize {
    let (_, nbp) = padded_bins(p, geom, grid);
    maxima_bytes(p, slices)
        + entries_bytes(p, slots(p, slices), padded_angles(p, geom.n_angles()), nbp)
}

/// `#define`s of a tensor-core module.
pub fn tensor_defines(
    p: TensorParams,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
) -> Vec<(String, String)> {
    let (blo, nbp) = padded_bins(p, geom, grid);
    vec![
        ("NX".into(), grid.nx.to_string()),
        ("NY".into(), grid.ny.to_string()),
        ("NPROJ".into(), geom.n_angles().to_string()),
        ("NPP".into(), padded_angles(p, geom.n_angles()).to_string()),
        ("NB".into(), geom.n_bins().to_string()),
        ("BLO".into(), blo.to_string()),
        ("NBP".into(), nbp.to_string()),
        ("TC_BX".into(), p.bx.to_string()),
        ("TC_BY".into(), p.by.to_string()),
        ("TC_NT".into(), p.nt.to_string()),
        ("TC_WX".into(), p.wx.to_string()),
        ("TC_WY".into(), p.wy.to_string()),
        ("TC_AP".into(), p.ap.to_string()),
        ("TC_ST".into(), p.stages.to_string()),
        ("TC_SB".into(), stage_bins(p, geom, grid).to_string()),
        ("TC_FLUSH".into(), p.flush.to_string()),
        ("TC_MINB".into(), p.min_blocks.to_string()),
        ("TC_SWZ".into(), p.swizzle.to_string()),
        ("TC_MASK".into(), u8::from(p.mask).to_string()),
        ("TC_NTO".into(), u8::from(p.nt_outer).to_string()),
        ("TC_IL".into(), p.interleave.to_string()),
        ("TC_BULK".into(), p.bulk.to_string()),
        ("TC_WGT".into(), p.weights.to_string()),
        ("TC_PG".into(), p.pair_group.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use tomors_core::geometry::uniform_angles;

    #[test]
    fn spec_round_trips_and_bad_values_are_refused() {
        let p = TensorParams {
            bx: 2,
            by: 2,
            nt: 4,
            wx: 2,
            wy: 4,
            ap: 1,
            stages: 4,
            flush: 8,
            min_blocks: 2,
            swizzle: 8,
            mask: true,
            nt_outer: true,
            interleave: 2,
            bulk: 2,
            weights: 1,
            pair_group: 1,
        };
        assert_eq!(TensorParams::parse(&p.spec()).unwrap(), p);
        let i = TensorParams {
            interleave: 4,
            ..TensorParams::default()
        };
        assert_eq!(TensorParams::parse(&i.spec()).unwrap(), i);
        let g = TensorParams::parse("a4,g4,c1,w1").unwrap();
        assert_eq!((g.ap, g.pair_group, g.bulk, g.weights), (4, 4, 1, 1));
        assert_eq!(TensorParams::parse(&g.spec()).unwrap(), g);
        assert_eq!(TensorParams::parse("").unwrap(), TensorParams::default());
        for bad in [
            "n3", "x0", "x4,y2,n8", "x2,y2,f2", "u8,v8", "a0", "a9", "p1", "p7", "b9", "q1", "xa",
            "f65", "i3", "n2,i4", "f0,k1", "f8,k2", "k4", "y2,k3", "w2", "c3", "g3", "a3,g2",
            "f0,g2", "i2,g2", "k1,g2", "o1,g2",
        ] {
            assert!(TensorParams::parse(bad).is_err(), "{bad} accepted");
        }
    }

    /// The stage of every block covers the 8 bins from the floor of every
    /// 4×4 block's lowest coordinate, those every pixel's weights need, and
    /// the padding every stage (the kernel's arithmetic, in f64).
    #[test]
    fn stages_and_padding_cover_every_block() {
        let geom = ParallelGeometry::new(uniform_angles(37, 2.0 * std::f32::consts::PI), 50)
            .unwrap()
            .with_center(20.3)
            .unwrap()
            .with_bin_width(0.9)
            .unwrap();
        let grid = SliceGrid::with_pixel_size(45, 31, 1.05).unwrap();
        check_geometry(&geom, &grid).unwrap();
        for p in [
            TensorParams::default(),
            TensorParams::tuned(),
            TensorParams {
                bx: 1,
                by: 2,
                nt: 2,
                wx: 2,
                wy: 1,
                ..TensorParams::default()
            },
        ] {
            let (blo, nbp) = padded_bins(p, &geom, &grid);
            let sb = stage_bins(p, &geom, &grid) as i64;
            let c = projection_coefficients_f64(&geom, &grid);
            let n = geom.n_angles();
            let (px, py) = p.block_pixels();
            for i in 0..n {
                let (c0, cx, cy) = (c[i], c[n + i], c[2 * n + i]);
                for yc in (0..grid.ny.div_ceil(py) * py).step_by(py) {
                    for xc in (0..grid.nx.div_ceil(px) * px).step_by(px) {
                        let u = c0 + xc as f64 * cx + yc as f64 * cy;
                        let umin = u
                            + (0f64).min((px as f64 - 1.0) * cx)
                            + (0f64).min((py as f64 - 1.0) * cy);
                        let kbd = umin.floor() - 1.0;
                        let k = kbd as i64 - blo;
                        assert!(k >= 0 && k + sb <= nbp as i64, "stage outside the padding");
                        for by in (0..py).step_by(4) {
                            for bx in (0..px).step_by(4) {
                                let s = u - kbd + bx as f64 * cx + by as f64 * cy;
                                let f = s + (0f64).min(3.0 * cx) + (0f64).min(3.0 * cy);
                                let b0 = f.floor();
                                assert!(b0 >= 0.0 && b0 as i64 + 8 <= sb, "block outside");
                                for dy in 0..4 {
                                    for dx in 0..4 {
                                        let sp_ = s + dx as f64 * cx + dy as f64 * cy;
                                        assert!(sp_ - b0 > -1e-6 && sp_ + 1.0 <= b0 + 8.0);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn kernel_names_parse() {
        use crate::fbp::kernels::{BpConfig, KernelChoice, KernelKind, SliceMode};
        let k: KernelChoice = "tensor".parse().unwrap();
        let want = BpConfig {
            kernel: KernelKind::Tensor(TensorParams::tuned()),
            mode: SliceMode::F32,
        };
        assert_eq!(k, KernelChoice::Fixed(want));
        let k: KernelChoice = "tensor@f0,z8".parse().unwrap();
        let KernelChoice::Fixed(c) = k else {
            panic!("tensor@f0,z8 parsed as {k:?}")
        };
        assert_eq!(c.to_string(), "tensor@x2,y1,n8,u4,v4,a2,p3,f0,b1,z8");
        assert_eq!(c.to_string().parse::<KernelChoice>().unwrap(), k);
        assert!("tensor@n3".parse::<KernelChoice>().is_err());
        assert!("tensor-float2".parse::<KernelChoice>().is_err());
    }

    #[test]
    fn large_pixels_are_refused() {
        let geom = ParallelGeometry::new(uniform_angles(16, std::f32::consts::PI), 64).unwrap();
        let grid = SliceGrid::with_pixel_size(40, 40, 1.3).unwrap();
        assert!(check_geometry(&geom, &grid).is_err());
        let grid = SliceGrid::with_pixel_size(40, 40, 1.0).unwrap();
        assert!(check_geometry(&geom, &grid).is_ok());
    }
}
