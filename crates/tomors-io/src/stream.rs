//! Streaming: how many detector rows fit a memory budget, how the rows are
//! cut into slabs (aligned to the file's storage chunks), and a driver that
//! reads, preprocesses, reconstructs and writes a scan slab by slab with the
//! stages overlapped on threads ([`run_stages`], module `pipeline`), so a
//! volume larger than the memory reconstructs with bounded peak memory at
//! the speed of the slowest stage.

mod pipeline;

pub use pipeline::{run_stages, StageTimes, Stages, StreamMode};

use std::ops::Range;

use ndarray::Array3;

use crate::error::{IoError, Result};
use crate::preprocess::Preprocess;
use crate::source::ProjectionSource;
use crate::writer::VolumeWriter;

/// What one detector row costs in memory while it is processed, and what
/// the process needs besides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryModel {
    /// Projections per row.
    pub n_angles: usize,
    /// Detector columns.
    pub n_cols: usize,
    /// Length of a row padded for the filter's FFT (the filtered copy has
    /// it; [`tomors_core::filter::padded_len`] of `n_cols`).
    pub padded_cols: usize,
    /// Flat + dark frames.
    pub n_side_frames: usize,
    /// Pixels of one reconstructed slice (nx · ny).
    pub slice_pixels: usize,
    /// Bytes the process needs besides the slab (code, libraries, thread
    /// stacks, FFT plans, the HDF5 library's caches, allocator slack);
    /// 64 MiB by default. Measured on a 360 × 300 × 512 scan (2 threads):
    /// about 45 MiB with HDF5 input, 14 MiB more with HDF5 output, and about
    /// 3.1 MiB per row where the model counts 4.2.
    pub overhead: usize,
    /// Bytes per row held besides the above: what the source holds while
    /// it transforms its rows ([`ProjectionSource::extra_bytes_per_row`])
    /// and what the preprocessing holds ([`Self::with_preprocess`]).
    pub extra_per_row: usize,
}

impl MemoryModel {
    /// The model for reconstructing `source` onto slices of `slice_pixels`.
    pub fn for_source(source: &dyn ProjectionSource, slice_pixels: usize) -> Self {
        let [na, _, nc] = source.shape();
        Self {
            n_angles: na,
            n_cols: nc,
            padded_cols: tomors_core::filter::padded_len(nc),
            n_side_frames: source.n_flats() + source.n_darks(),
            slice_pixels,
            overhead: 64 << 20,
            extra_per_row: source.extra_bytes_per_row(),
        }
    }

    /// Adds the working set of the preprocessing `pre` on a detector of
    /// `n_rows` rows (see [`Preprocess::working_bytes`]: the rows read
    /// above and below a slab for the rotation and the phase retrieval, and
    /// the phase retrieval's padded FFT buffers).
    pub fn with_preprocess(mut self, pre: &Preprocess, n_rows: usize) -> Self {
        let (per_row, fixed) = pre.working_bytes(self.n_angles, n_rows, self.n_cols);
        self.extra_per_row = self.extra_per_row.saturating_add(per_row);
        self.overhead = self.overhead.saturating_add(fixed);
        self
    }

    /// Bytes per detector row of a slab, counting every slab in flight in
    /// the pipelined stream ([`run_stages`]; each of its four stages holds
    /// one slab at most): the raw slab being read (angles × cols), the slab
    /// being preprocessed (its raw values and its sinograms, 2 × angles ×
    /// cols), the sinograms being reconstructed (angles × cols) with their
    /// filtered copy at the padded length (angles × padded cols), the
    /// flats and darks (read and averaged, 2 × frames × cols), and three
    /// copies of the reconstructed slice (the result, the slab being
    /// written and the writer's buffer); f32 values.
    /// Saturates instead of overflowing (sizes from user input).
    pub fn bytes_per_row(&self) -> usize {
        let proj = 4usize
            .saturating_mul(self.n_angles)
            .saturating_mul(self.n_cols)
            .saturating_add(self.n_angles.saturating_mul(self.padded_cols));
        let side = 2usize
            .saturating_mul(self.n_side_frames)
            .saturating_mul(self.n_cols);
        let slice = 3usize.saturating_mul(self.slice_pixels);
        proj.saturating_add(side)
            .saturating_add(slice)
            .saturating_mul(4)
            .saturating_add(self.extra_per_row)
    }

    /// Rows per slab within `budget` bytes (at least 1), or an error when
    /// not even one row fits. The budget is capped by the memory available
    /// (see [`crate::memory`]): a budget beyond it is lowered to it, and a
    /// row that does not fit into it is an error, before anything is
    /// allocated.
    pub fn rows_per_slab(&self, budget: usize) -> Result<usize> {
        let per = self.bytes_per_row().max(1);
        let mut budget = budget;
        if let Some(avail) = crate::memory::available_bytes() {
            let avail = usize::try_from(avail).unwrap_or(usize::MAX);
            if budget > avail {
                if per.saturating_add(self.overhead) > avail {
                    return Err(IoError::Parameter(format!(
                        "one detector row needs {} (its reconstructed slice, projections and copies), \
                         but only {} of memory is available",
                        crate::memory::gib(per.saturating_add(self.overhead) as u64),
                        crate::memory::gib(avail as u64)
                    )));
                }
                tracing::info!(
                    "memory budget {} lowered to the {} available",
                    crate::memory::gib(budget as u64),
                    crate::memory::gib(avail as u64)
                );
                budget = avail;
            }
        }
        let avail = budget.saturating_sub(self.overhead);
        let rows = avail / per;
        if rows == 0 {
            return Err(IoError::Parameter(format!(
                "a memory budget of {} MiB is too small: one detector row needs {:.1} MiB plus {} MiB overhead",
                budget >> 20,
                per as f64 / (1 << 20) as f64,
                self.overhead >> 20
            )));
        }
        Ok(rows)
    }
}

/// Cuts `rows` into consecutive slabs of at most `per_slab` rows whose
/// boundaries fall on the storage chunks' row boundaries (multiples of
/// `row_chunk`, counted from detector row 0) wherever they can: with slabs
/// of at least one chunk (`per_slab` rounded down to a multiple of it),
/// every chunk lies in one slab and is decompressed once; with smaller
/// slabs, no slab crosses a chunk boundary, so the slabs of one band of
/// chunks follow each other and a chunk cache of one band
/// ([`ProjectionSource::row_band_cache_bytes`]) decompresses each chunk once.
pub fn slab_plan(
    rows: Range<usize>,
    per_slab: usize,
    row_chunk: Option<usize>,
) -> Vec<Range<usize>> {
    let per = per_slab.max(1);
    let c = match row_chunk {
        Some(c) if c > 1 => c,
        _ => return slabs(rows, per).collect(),
    };
    let mut out = Vec::new();
    let mut s = rows.start;
    while s < rows.end {
        let e = if per >= c {
            let lim = (s + per - per % c).min(rows.end);
            let boundary = lim - lim % c;
            if boundary > s && lim < rows.end {
                boundary
            } else {
                lim
            }
        } else {
            (s + per).min((s / c + 1) * c).min(rows.end)
        };
        out.push(s..e);
        s = e;
    }
    out
}

/// Splits `rows` into consecutive slabs of at most `per_slab` rows.
pub fn slabs(rows: Range<usize>, per_slab: usize) -> impl Iterator<Item = Range<usize>> {
    let per = per_slab.max(1);
    let start = rows.start;
    let end = rows.end;
    (start..end)
        .step_by(per)
        .map(move |s| s..(s + per).min(end))
}

/// Parses a memory size: a number with an optional unit `K`, `M`, `G`, `T`
/// (binary: KiB, MiB, ...; an optional trailing `B`/`iB`).
pub fn parse_bytes(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('m') => (&stripped[..stripped.len() - 1], 1 << 20),
        Some('g') => (&stripped[..stripped.len() - 1], 1 << 30),
        Some('t') => (&stripped[..stripped.len() - 1], 1 << 40),
        _ => (stripped, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a memory size (e.g. 512M, 4G)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("memory size '{s}' must be positive"));
    }
    Ok((v * mult as f64) as usize)
}

/// Reads, processes and writes a scan slab by slab: for each slab of
/// detector rows (`rows` split into slabs of `per_slab`), reads and
/// preprocesses the projections `[angle][row][col]`, passes them to
/// `process`, which returns the slab's slices `[z][y][x]`, writes those
/// with `writer` (slice z of the output = detector row `rows.start + z`),
/// and reports `(slabs done, slabs in all)` to `progress`. Finishes the
/// writer at the end; on an error the writer is dropped, which removes its
/// partial output. The stages run one after the other; [`run_stages`]
/// overlaps them.
pub fn stream_slabs(
    source: &mut dyn ProjectionSource,
    pre: &Preprocess,
    rows: Range<usize>,
    per_slab: usize,
    writer: Box<dyn VolumeWriter>,
    process: impl FnMut(Range<usize>, Array3<f32>) -> Result<Array3<f32>>,
    progress: impl FnMut(usize, usize),
) -> Result<()> {
    let all: Vec<Range<usize>> = slabs(rows, per_slab).collect();
    run_stages(
        source,
        pre,
        &all,
        writer,
        Stages {
            prepare: |_, p| Ok(p),
            process,
        },
        progress,
        StreamMode::Sequential,
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_cover_rows_once() {
        let v: Vec<_> = slabs(3..13, 4).collect();
        assert_eq!(v, vec![3..7, 7..11, 11..13]);
    }

    #[test]
    fn slab_plan_cuts_at_chunk_boundaries() {
        // Slabs of at least a chunk: every chunk of 32 rows in one slab,
        // from a start that is not on a chunk boundary.
        let p = slab_plan(100..300, 70, Some(32));
        assert_eq!(p, vec![100..160, 160..224, 224..288, 288..300]);
        // Smaller slabs never cross a chunk boundary.
        let p = slab_plan(10..70, 12, Some(32));
        assert_eq!(p, vec![10..22, 22..32, 32..44, 44..56, 56..64, 64..70]);
        // Every chunk lies within one slab when slabs hold a chunk.
        for (start, end, per, c) in [(0, 1000, 64, 16), (5, 997, 100, 7), (31, 33, 40, 32)] {
            let p = slab_plan(start..end, per, Some(c));
            assert_eq!(p.first().unwrap().start, start);
            assert_eq!(p.last().unwrap().end, end);
            for w in p.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            for r in &p {
                assert!(r.len() <= per && !r.is_empty());
                let (c0, c1) = (r.start / c, (r.end - 1) / c);
                for k in c0..=c1 {
                    let others = p
                        .iter()
                        .filter(|q| q.start < (k + 1) * c && q.end > k * c)
                        .count();
                    assert_eq!(others, 1, "chunk {k} in {others} slabs of {p:?}");
                }
            }
        }
        // No chunks: plain slabs.
        assert_eq!(slab_plan(3..13, 4, None), vec![3..7, 7..11, 11..13]);
    }

    #[test]
    fn parse_sizes() {
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("-1G").is_err());
    }

    #[test]
    fn budget_bounds_rows() {
        let m = MemoryModel {
            n_angles: 100,
            n_cols: 100,
            padded_cols: 100,
            n_side_frames: 0,
            slice_pixels: 10_000,
            overhead: 1 << 20,
            extra_per_row: 0,
        };
        // 4·(50000 + 30000) = 320000 bytes per row.
        assert_eq!(m.bytes_per_row(), 320_000);
        assert_eq!(m.rows_per_slab((1 << 20) + 1_000_000).unwrap(), 3);
        assert!(m.rows_per_slab(1 << 20).is_err());
    }

    #[test]
    fn phase_retrieval_takes_its_share_of_the_budget() {
        let m = MemoryModel {
            n_angles: 200,
            n_cols: 256,
            padded_cols: 512,
            n_side_frames: 4,
            slice_pixels: 256 * 256,
            overhead: 8 << 20,
            extra_per_row: 0,
        };
        let pre = Preprocess {
            phase: Some(crate::Paganin {
                delta_beta: 300.0,
                energy_kev: 20.0,
                distance_mm: 200.0,
                pixel_um: (1.0, 1.0),
                pad: None,
            }),
            ..Preprocess::default()
        };
        let budget = 256 << 20;
        let plain = m.rows_per_slab(budget).unwrap();
        let phase = m.with_preprocess(&pre, 1000);
        let (per_row, fixed) = pre.working_bytes(200, 1000, 256);
        assert!(per_row > 0 && fixed > 0);
        let with = phase.rows_per_slab(budget).unwrap();
        assert!(
            with < plain,
            "{with} rows with phase retrieval, {plain} without"
        );
        // The slab chosen, with its margins and FFT buffers, fits.
        assert!(phase.overhead + with * phase.bytes_per_row() <= budget);
        // Without phase retrieval or rotation nothing is added.
        assert_eq!(Preprocess::default().working_bytes(200, 1000, 256), (0, 0));
    }
}
