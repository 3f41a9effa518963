//! The line-sweep back projector (`kernels/backproject_sweep.cu`): exact f32
//! linear interpolation with the lanes of a warp on 32 slice slots of the
//! same pixels, accumulators in registers, and a (value, difference) entry
//! loaded only when a pixel's bin differs from the previous pixel's of its
//! line. Its parameters, their text form and the padded entry layout.

use tomors_core::{ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::padding::{block_span, coordinate_range};
use crate::runtime::LaunchSpec;

/// Source of the line-sweep kernels (`pack_sweep`, `bp_sweep`).
pub const SWEEP_CU: &str = include_str!("../../kernels/backproject_sweep.cu");

/// Parameters of the line-sweep kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SweepParams {
    /// Pixel tile of a warp along x.
    pub tx: u8,
    /// Pixel tile of a warp along y.
    pub ty: u8,
    /// Slices per lane: 1, 2 or 4 (a warp covers 32 times as many).
    pub spl: u8,
    /// Warps of a block along x.
    pub wx: u8,
    /// Warps of a block along y.
    pub wy: u8,
    /// Sweep each projection along the axis with the smaller coordinate
    /// step (fewer bin changes) instead of always along x.
    pub axis: bool,
    /// Minimum resident blocks per multiprocessor (`__launch_bounds__`).
    pub min_blocks: u8,
    /// Shared-memory staging: 0 reads the entries through L1; 2 to 6
    /// stages a block's rows of each projection into a ring of that many
    /// buffers with `cp.async`, that many minus one projections ahead.
    pub stages: u8,
    /// 0, or the width in blocks of the strips the blocks are walked in
    /// (the blocks resident together then cover a compact patch).
    pub swizzle: u8,
}

impl Default for SweepParams {
    fn default() -> Self {
        Self {
            tx: 16,
            ty: 1,
            spl: 4,
            wx: 1,
            wy: 8,
            axis: false,
            min_blocks: 1,
            stages: 0,
            swizzle: 0,
        }
    }
}

impl SweepParams {
    /// The fastest shape measured (`--kernel sweep`): 4×8-pixel warp tiles
    /// swept along the axis with the smaller step, 2 slices per lane, blocks
    /// of 4×2 warps (16×16 pixels × 64 slices), 2 blocks per multiprocessor,
    /// a ring of 4 shared-memory stages, blocks walked in strips of 16.
    /// 4166 GU/s against 3645 for the exact cache kernel on an H200 at 2048
    /// bins × 2048 angles, 128 slices; FBP of 2048³ host to host 4.53 s
    /// against 5.05 s (`docs/perf-notes.md`, batch 4).
    pub fn tuned() -> Self {
        Self {
            tx: 4,
            ty: 8,
            spl: 2,
            wx: 4,
            wy: 2,
            axis: true,
            min_blocks: 2,
            stages: 4,
            swizzle: 16,
        }
    }

    /// Checks the values the kernel supports.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.spl, 1 | 2 | 4) {
            return Err(CudaError::Parameter(format!(
                "sweep slices per lane {} (use 1, 2 or 4)",
                self.spl
            )));
        }
        let acc = self.tx as usize * self.ty as usize * self.spl as usize;
        if self.tx == 0 || self.ty == 0 || acc > 160 {
            return Err(CudaError::Parameter(format!(
                "sweep tile {}x{} with {} slices per lane ({acc} accumulators; use 1 to 160)",
                self.tx, self.ty, self.spl
            )));
        }
        let warps = self.wx as usize * self.wy as usize;
        if warps == 0 || warps > 32 {
            return Err(CudaError::Parameter(format!(
                "sweep block of {}x{} warps (use 1 to 32 warps)",
                self.wx, self.wy
            )));
        }
        if self.stages == 1 || self.stages > 6 {
            return Err(CudaError::Parameter(format!(
                "sweep stages {} (use 0 for loads through L1, or 2 to 6)",
                self.stages
            )));
        }
        if !(1..=8).contains(&self.min_blocks) {
            return Err(CudaError::Parameter(format!(
                "sweep min_blocks {} (use 1 to 8)",
                self.min_blocks
            )));
        }
        Ok(())
    }

    /// Slices one block reconstructs (32 lanes × slices per lane).
    pub fn slices_per_block(&self) -> usize {
        32 * self.spl as usize
    }

    /// Compact text form, e.g. `x16,y1,s4,u1,v8,a0,b1,p0` (`,z16` with a
    /// swizzle; parsed back by [`SweepParams::parse`]).
    pub fn spec(&self) -> String {
        let z = if self.swizzle > 0 {
            format!(",z{}", self.swizzle)
        } else {
            String::new()
        };
        format!(
            "x{},y{},s{},u{},v{},a{},b{},p{}{z}",
            self.tx,
            self.ty,
            self.spl,
            self.wx,
            self.wy,
            u8::from(self.axis),
            self.min_blocks,
            self.stages
        )
    }

    /// Parses [`SweepParams::spec`]'s form; keys may come in any order and
    /// missing ones keep their defaults.
    pub fn parse(s: &str) -> Result<Self> {
        let mut p = Self::default();
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = part.split_at(1);
            let num: u8 = v.parse().map_err(|_| {
                CudaError::Parameter(format!(
                    "sweep parameter '{part}' (e.g. x16,y1,s4,u1,v8,a0,b1)"
                ))
            })?;
            match k {
                "x" => p.tx = num,
                "y" => p.ty = num,
                "s" => p.spl = num,
                "u" => p.wx = num,
                "v" => p.wy = num,
                "a" => p.axis = num != 0,
                "b" => p.min_blocks = num,
                "p" => p.stages = num,
                "z" => p.swizzle = num,
                _ => {
                    return Err(CudaError::Parameter(format!(
                        "sweep parameter '{part}' (keys x, y, s, u, v, a, b, p, z)"
                    )))
                }
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Pixels of a block along x and y.
    pub fn block_pixels(&self) -> (usize, usize) {
        (
            self.tx as usize * self.wx as usize,
            self.ty as usize * self.wy as usize,
        )
    }
}

/// The padded bin range of the entry layout: (`blo`, `nbp`), the global
/// bin of padded row 0 and the number of rows, so that every bin (and its
/// neighbour) a pixel of the grid rounded up to whole blocks touches in
/// any projection lies inside, with a margin of 3 rows for the f32
/// rounding of the coordinates.
pub fn padded_bins(p: SweepParams, geom: &ParallelGeometry, grid: &SliceGrid) -> (i64, usize) {
    let Some((lo, hi)) = coordinate_range(geom, grid, p.block_pixels()) else {
        return (0, 1);
    };
    let blo = lo.floor() as i64 - 3;
    let nbp = (hi.floor() as i64 - blo + 4).max(1) as usize;
    (blo, nbp)
}

/// Rows a block stages per projection with shared-memory staging: the
/// largest span of its pixel region over the projections, plus 5 (the
/// floor, the margin row, the linear neighbour, f32 rounding).
pub fn stage_rows(p: SweepParams, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
    block_span(geom, grid, p.block_pixels()).ceil() as usize + 5
}

/// Bytes of one padded bin row of a group (32 lanes' entries).
pub fn row_bytes(p: SweepParams) -> usize {
    32 * 8 * p.spl as usize
}

/// Dynamic shared memory of a block: the staging ring (0 without staging).
pub fn shared_bytes(p: SweepParams, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
    if p.stages == 0 {
        0
    } else {
        p.stages as usize * stage_rows(p, geom, grid) * row_bytes(p)
    }
}

/// Slots (of `spl` slices) per padded bin row for a slab of `slices`
/// slices: whole warps of 32.
pub fn row_slots(p: SweepParams, slices: usize) -> usize {
    slices.div_ceil(p.slices_per_block()).max(1) * 32
}

/// `#define`s of a line-sweep module.
pub fn sweep_defines(
    p: SweepParams,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
) -> Vec<(String, String)> {
    let (blo, nbp) = padded_bins_staged(p, geom, grid);
    vec![
        ("NX".into(), grid.nx.to_string()),
        ("NY".into(), grid.ny.to_string()),
        ("NPROJ".into(), geom.n_angles().to_string()),
        ("NB".into(), geom.n_bins().to_string()),
        ("SW_S".into(), p.spl.to_string()),
        ("SW_TX".into(), p.tx.to_string()),
        ("SW_TY".into(), p.ty.to_string()),
        ("SW_WX".into(), p.wx.to_string()),
        ("SW_WY".into(), p.wy.to_string()),
        ("SW_AXIS".into(), u8::from(p.axis).to_string()),
        ("SW_MINB".into(), p.min_blocks.to_string()),
        ("BLO".into(), blo.to_string()),
        ("NBP".into(), nbp.to_string()),
        ("SW_SMEM".into(), p.stages.to_string()),
        ("SW_CWB".into(), stage_rows(p, geom, grid).to_string()),
        ("SW_SWZ".into(), p.swizzle.to_string()),
    ]
}

/// [`padded_bins`], with room for a whole stage above the highest bin
/// when the kernel stages rows in shared memory.
pub fn padded_bins_staged(
    p: SweepParams,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
) -> (i64, usize) {
    let (blo, nbp) = padded_bins(p, geom, grid);
    if p.stages == 0 {
        (blo, nbp)
    } else {
        (blo, nbp + stage_rows(p, geom, grid))
    }
}

/// Bytes of the entry layout of a slab of `slices` slices.
pub fn entry_bytes(
    p: SweepParams,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    slices: usize,
) -> usize {
    let (_, nbp) = padded_bins_staged(p, geom, grid);
    geom.n_angles() * nbp * row_slots(p, slices) * 2 * p.spl as usize * 4
}

/// The `pack_sweep` launch that re-lays `slices` filtered slices of `na`
/// projections (rows at `src` = (address, row stride in floats, pair flag))
/// as the entries at `dst` (`nbp` padded bins).
pub fn pack_launch(
    p: SweepParams,
    na: usize,
    nbp: usize,
    slices: usize,
    src: (u64, i64, i32),
    dst: u64,
) -> LaunchSpec {
    let row = row_slots(p, slices);
    let (s, rs, pair) = src;
    LaunchSpec {
        name: "pack_sweep",
        grid: (nbp.div_ceil(8) as u32, na as u32, (row / 32) as u32),
        block: (32, 8, 1),
        shared: 0,
        args: vec![
            s.into(),
            rs.into(),
            pair.into(),
            dst.into(),
            (row as i32).into(),
            (na as i32).into(),
            (slices as i32).into(),
        ],
    }
}

/// The `bp_sweep` launch of the entries at `ent` ([`pack_launch`]) into
/// `slices` slices of `nx`×`ny` pixels at `out`, scaled by `scale`; `shared`
/// the module's shared bytes per block and `dconst` the address of its f64
/// projection constants.
#[allow(clippy::too_many_arguments)]
pub fn bp_launch(
    p: SweepParams,
    (nx, ny): (usize, usize),
    slices: usize,
    ent: u64,
    out: u64,
    scale: f32,
    shared: u32,
    dconst: u64,
) -> LaunchSpec {
    let row = row_slots(p, slices);
    let (bx, by) = p.block_pixels();
    LaunchSpec {
        name: "bp_sweep",
        grid: (
            nx.div_ceil(bx) as u32,
            ny.div_ceil(by) as u32,
            (row / 32) as u32,
        ),
        block: (32 * p.wx as u32 * p.wy as u32, 1, 1),
        shared,
        args: vec![
            ent.into(),
            out.into(),
            (slices as i32).into(),
            scale.into(),
            dconst.into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbp::kernels::projection_coefficients_f64;
    use tomors_core::geometry::uniform_angles;

    #[test]
    fn spec_round_trips_and_bad_values_are_refused() {
        let p = SweepParams {
            tx: 8,
            ty: 4,
            spl: 2,
            wx: 2,
            wy: 4,
            axis: true,
            min_blocks: 2,
            stages: 3,
            swizzle: 16,
        };
        assert_eq!(SweepParams::parse(&p.spec()).unwrap(), p);
        assert_eq!(SweepParams::parse("").unwrap(), SweepParams::default());
        for bad in [
            "s3",
            "x0",
            "x64,y4,s4",
            "u8,v8",
            "b9",
            "q1",
            "xa",
            "p1",
            "p7",
        ] {
            assert!(SweepParams::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn padding_covers_every_pixel_of_the_rounded_grid() {
        let geom = ParallelGeometry::new(uniform_angles(37, 2.0 * std::f32::consts::PI), 50)
            .unwrap()
            .with_center(20.3)
            .unwrap()
            .with_bin_width(0.7)
            .unwrap();
        let grid = SliceGrid::with_pixel_size(45, 31, 1.2).unwrap();
        let p = SweepParams::default();
        let (blo, nbp) = padded_bins(p, &geom, &grid);
        let c = projection_coefficients_f64(&geom, &grid);
        let n = geom.n_angles();
        let (bx, by) = p.block_pixels();
        for i in 0..n {
            for y in 0..grid.ny.div_ceil(by) * by {
                for x in 0..grid.nx.div_ceil(bx) * bx {
                    let u = c[i] + x as f64 * c[n + i] + y as f64 * c[2 * n + i];
                    let k = u.floor() as i64 - blo;
                    assert!(k >= 2 && k + 2 < nbp as i64, "bin {} outside", u);
                }
            }
        }
    }
}
