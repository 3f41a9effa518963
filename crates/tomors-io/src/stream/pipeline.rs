//! The pipelined slab stream: a reader thread (raw rows from the file), a
//! preprocessing thread (flat/dark, −log, ... and the caller's `prepare`,
//! e.g. the re-arrangement into sinograms), the reconstruction on the
//! calling thread and a writer thread, joined by rendezvous channels. While
//! slab k is reconstructed, slab k+1 is preprocessed, slab k+2 read and
//! slab k−1 written; each stage holds at most one slab, so four slabs are in
//! flight at most (see [`super::MemoryModel::bytes_per_row`]).
//!
//! The same stages run one after the other in [`StreamMode::Sequential`]
//! (the reference: the output is bit-identical, tested in
//! `tests/stream_pipeline.rs`).

use std::ops::Range;
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::{Duration, Instant};

use ndarray::{Array3, Axis};

use crate::error::{IoError, Result};
use crate::preprocess::Preprocess;
use crate::source::{check_rows, ProjectionSource, RawSlab};
use crate::writer::VolumeWriter;

/// How the stages of a stream run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StreamMode {
    /// Reader, preprocessing and writer threads overlap with the
    /// reconstruction (the default).
    #[default]
    Pipelined,
    /// Every stage of a slab runs on the calling thread before the next slab
    /// is read (the reference the pipelined stream is compared with).
    Sequential,
}

impl StreamMode {
    /// The mode the environment asks for: `TOMORS_STREAM=sequential` runs
    /// the stages one after the other (for comparisons and diagnosis);
    /// anything else, or nothing, pipelines.
    pub fn from_env() -> Self {
        match std::env::var("TOMORS_STREAM") {
            Ok(v) if v.trim().eq_ignore_ascii_case("sequential") => Self::Sequential,
            _ => Self::Pipelined,
        }
    }
}

/// Time spent in each stage of a stream, summed over the slabs, and the
/// bytes read and written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Slabs streamed.
    pub slabs: usize,
    /// Whether the stages overlapped ([`StreamMode::Pipelined`]).
    pub pipelined: bool,
    /// Reading the raw rows (projections, flats, darks, margins) and
    /// checking them for non-finite values.
    pub read: Duration,
    /// Bytes of stored values read (element size of the file × values).
    pub read_bytes: u64,
    /// Preprocessing and the caller's `prepare`.
    pub preprocess: Duration,
    /// The caller's `process` (the reconstruction).
    pub process: Duration,
    /// Writing the slices.
    pub write: Duration,
    /// Bytes of float32 slices written.
    pub write_bytes: u64,
    /// Wall time of the whole stream, the writer's `finish` included.
    pub wall: Duration,
}

impl StageTimes {
    /// The stages' times summed.
    pub fn busy(&self) -> Duration {
        self.read + self.preprocess + self.process + self.write
    }

    /// The overlap achieved: the stages' summed time over the wall time
    /// (1 when nothing overlaps; at most 4).
    pub fn overlap(&self) -> f64 {
        let w = self.wall.as_secs_f64();
        if w > 0.0 {
            self.busy().as_secs_f64() / w
        } else {
            1.0
        }
    }

    /// The name and time of the slowest stage.
    pub fn slowest(&self) -> (&'static str, Duration) {
        [
            ("read", self.read),
            ("preprocess", self.preprocess),
            ("reconstruct", self.process),
            ("write", self.write),
        ]
        .into_iter()
        .max_by_key(|(_, d)| *d)
        .unwrap_or(("read", self.read))
    }
}

fn rate(bytes: u64, d: Duration) -> String {
    let s = d.as_secs_f64();
    if s > 0.0 {
        format!("{:.0} MB/s", bytes as f64 / s / 1e6)
    } else {
        "- MB/s".into()
    }
}

impl std::fmt::Display for StageTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slab(s), {}: read {:.2} s ({:.0} MB, {}), preprocess {:.2} s, reconstruct {:.2} s, \
             write {:.2} s ({:.0} MB, {}); wall {:.2} s; overlap {:.2} (stages' sum / wall); slowest: {}",
            self.slabs,
            if self.pipelined { "pipelined" } else { "sequential" },
            self.read.as_secs_f64(),
            self.read_bytes as f64 / 1e6,
            rate(self.read_bytes, self.read),
            self.preprocess.as_secs_f64(),
            self.process.as_secs_f64(),
            self.write.as_secs_f64(),
            self.write_bytes as f64 / 1e6,
            rate(self.write_bytes, self.write),
            self.wall.as_secs_f64(),
            self.overlap(),
            self.slowest().0
        )
    }
}

/// What a slab's reading stage needs of the source, fixed before the
/// threads start.
struct ReadSpec<'a> {
    path: &'a Path,
    n_rows: usize,
    n_cols: usize,
    value_bytes: u64,
}

/// What the reading stage hands on: raw rows to preprocess, or rows the
/// source has preprocessed itself (a source that is not
/// [`ProjectionSource::reads_raw`]).
enum ReadSlab {
    Raw(RawSlab),
    Ready(Array3<f32>),
}

impl ReadSlab {
    /// The preprocessed projections of slab `rows`.
    fn preprocess(
        self,
        pre: &Preprocess,
        spec: &ReadSpec<'_>,
        rows: Range<usize>,
    ) -> Result<Array3<f32>> {
        match self {
            Self::Raw(raw) => pre.apply_within(raw, spec.path, spec.n_rows, rows),
            Self::Ready(p) => Ok(p),
        }
    }
}

/// Reads what a slab needs: the raw rows (its preprocessing margin included),
/// checked exactly as [`ProjectionSource::read_rows`] does, or, from a source
/// that preprocesses its own rows, the preprocessed rows.
fn read_any(
    source: &dyn ProjectionSource,
    spec: &ReadSpec<'_>,
    pre: &Preprocess,
    rows: &Range<usize>,
) -> Result<(ReadSlab, u64)> {
    if source.reads_raw() {
        let (raw, bytes) = read_slab(source, spec, pre, rows)?;
        return Ok((ReadSlab::Raw(raw), bytes));
    }
    let p = source.read_rows(rows.clone(), pre)?;
    let bytes = p.len() as u64 * spec.value_bytes;
    Ok((ReadSlab::Ready(p), bytes))
}

/// Reads the raw rows a slab needs (its preprocessing margin included) and
/// checks them, exactly as [`ProjectionSource::read_rows`] does.
fn read_slab(
    source: &dyn ProjectionSource,
    spec: &ReadSpec<'_>,
    pre: &Preprocess,
    rows: &Range<usize>,
) -> Result<(RawSlab, u64)> {
    check_rows(spec.path, rows, spec.n_rows)?;
    let raw = source.read_raw(pre.read_range(rows, spec.n_rows, spec.n_cols))?;
    crate::checks::check_slab_finite(spec.path, &raw)?;
    let values = raw.projections.len()
        + raw.flats.iter().map(|g| g.frames.len()).sum::<usize>()
        + raw.darks.iter().map(|g| g.frames.len()).sum::<usize>();
    Ok((raw, values as u64 * spec.value_bytes))
}

fn check_slices(rows: &Range<usize>, vol: &Array3<f32>) -> Result<()> {
    let n = vol.len_of(Axis(0));
    if n != rows.len() {
        return Err(IoError::Parameter(format!(
            "slab of {} detector rows gave {n} slices",
            rows.len()
        )));
    }
    Ok(())
}

/// The stages of a stream of slabs: `prepare` runs after the preprocessing
/// (on the preprocessing thread when pipelined), `process` on the calling
/// thread.
pub struct Stages<P, R> {
    /// Turns a slab's preprocessed projections `[angle][row][col]` into
    /// what `process` takes (e.g. sinograms); runs on another thread.
    pub prepare: P,
    /// Reconstructs a prepared slab into its slices `[z][y][x]`.
    pub process: R,
}

/// Streams `slabs` (consecutive ranges of detector rows; slice z of the
/// output is detector row `slabs[0].start + z`) through read → preprocess →
/// `prepare` → `process` → write, in `mode`, reporting `(slabs done, slabs
/// in all)` to `progress` on the calling thread. Finishes the writer when
/// every slab is written; on an error of any stage the other stages stop,
/// the writer is dropped (which removes its partial output) and the error
/// of the earliest slab is returned, as the sequential stream would.
#[allow(clippy::too_many_arguments)]
pub fn run_stages<T, P, R>(
    source: &mut dyn ProjectionSource,
    pre: &Preprocess,
    slabs: &[Range<usize>],
    writer: Box<dyn VolumeWriter>,
    stages: Stages<P, R>,
    mut progress: impl FnMut(usize, usize),
    mode: StreamMode,
) -> Result<StageTimes>
where
    T: Send,
    P: Fn(Range<usize>, Array3<f32>) -> Result<T> + Sync,
    R: FnMut(Range<usize>, T) -> Result<Array3<f32>>,
{
    let t0 = Instant::now();
    let [_, n_rows, n_cols] = source.shape();
    let path = source.path().to_path_buf();
    let spec = ReadSpec {
        path: &path,
        n_rows,
        n_cols,
        value_bytes: source.stored_value_bytes() as u64,
    };
    let first = slabs.first().map(|r| r.start).unwrap_or(0);
    let mut times = match mode {
        StreamMode::Sequential => sequential(
            &*source,
            &spec,
            pre,
            slabs,
            first,
            writer,
            stages,
            &mut progress,
        )?,
        StreamMode::Pipelined => pipelined(
            source,
            &spec,
            pre,
            slabs,
            first,
            writer,
            stages,
            &mut progress,
        )?,
    };
    times.slabs = slabs.len();
    times.wall = t0.elapsed();
    Ok(times)
}

#[allow(clippy::too_many_arguments)]
fn sequential<T, P, R>(
    source: &dyn ProjectionSource,
    spec: &ReadSpec<'_>,
    pre: &Preprocess,
    slabs: &[Range<usize>],
    first: usize,
    mut writer: Box<dyn VolumeWriter>,
    mut stages: Stages<P, R>,
    progress: &mut impl FnMut(usize, usize),
) -> Result<StageTimes>
where
    P: Fn(Range<usize>, Array3<f32>) -> Result<T>,
    R: FnMut(Range<usize>, T) -> Result<Array3<f32>>,
{
    let mut st = StageTimes::default();
    for (i, r) in slabs.iter().enumerate() {
        let t = Instant::now();
        let (raw, bytes) = read_any(source, spec, pre, r)?;
        st.read += t.elapsed();
        st.read_bytes += bytes;
        let t = Instant::now();
        let proj = raw.preprocess(pre, spec, r.clone())?;
        let prepared = (stages.prepare)(r.clone(), proj)?;
        st.preprocess += t.elapsed();
        let t = Instant::now();
        let vol = (stages.process)(r.clone(), prepared)?;
        st.process += t.elapsed();
        check_slices(r, &vol)?;
        let t = Instant::now();
        writer.write_slab(r.start - first, vol.view())?;
        st.write += t.elapsed();
        st.write_bytes += vol.len() as u64 * 4;
        progress(i + 1, slabs.len());
    }
    let t = Instant::now();
    writer.finish()?;
    st.write += t.elapsed();
    Ok(st)
}

/// A stage's outcome: its times, and the first error with the index of
/// the slab it happened on.
type StageEnd = (StageTimes, Option<(usize, IoError)>);

/// Makes glibc give every buffer of 4 MiB or more its own mapping, returned
/// to the system when freed. By default the threshold rises to the size of
/// the largest buffer freed (up to 32 MiB), after which slab-sized buffers
/// freed by one stage's thread stay in that thread's arena while another
/// thread allocates new ones: the resident memory of a 200 MiB budget then
/// reached 206 MiB, against 121 MiB with the fixed threshold (the test
/// `reliability_memory`: 360 × 160 × 512, HDF5 to HDF5, CPU backend). Left
/// alone when the user sets `MALLOC_MMAP_THRESHOLD_`.
fn map_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                // SAFETY: mallopt only changes the allocator's parameters.
                unsafe {
                    libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
                }
            }
        });
    }
}

/// The result of a stage's thread (its panic goes on).
fn join<X>(h: std::thread::ScopedJoinHandle<'_, X>) -> X {
    match h.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Sends `item` downstream; `false` when the next stage has stopped.
fn pass<X>(tx: &SyncSender<X>, item: X) -> bool {
    tx.send(item).is_ok()
}

/// The loop of a stage's thread: `work` on each `(slab index, input)` in
/// turn, its time added to `spent`, each result passed on through `tx`
/// (the loop ends when the next stage has stopped); the first error with
/// its slab index.
fn run_stage<I, X>(
    inputs: impl IntoIterator<Item = (usize, I)>,
    spent: &mut Duration,
    tx: &SyncSender<(usize, X)>,
    mut work: impl FnMut(usize, I) -> Result<X>,
) -> Option<(usize, IoError)> {
    for (i, input) in inputs {
        let t = Instant::now();
        let got = work(i, input);
        *spent += t.elapsed();
        match got {
            Ok(x) => {
                if !pass(tx, (i, x)) {
                    break;
                }
            }
            Err(e) => return Some((i, e)),
        }
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn pipelined<T, P, R>(
    source: &mut dyn ProjectionSource,
    spec: &ReadSpec<'_>,
    pre: &Preprocess,
    slabs: &[Range<usize>],
    first: usize,
    mut writer: Box<dyn VolumeWriter>,
    mut stages: Stages<P, R>,
    progress: &mut impl FnMut(usize, usize),
) -> Result<StageTimes>
where
    T: Send,
    P: Fn(Range<usize>, Array3<f32>) -> Result<T> + Sync,
    R: FnMut(Range<usize>, T) -> Result<Array3<f32>>,
{
    map_large_buffers();
    // Rendezvous channels: a finished slab waits in the stage that made it
    // until the next stage takes it, so each stage holds one slab at most.
    let (raw_tx, raw_rx) = sync_channel::<(usize, ReadSlab)>(0);
    let (prep_tx, prep_rx) = sync_channel::<(usize, T)>(0);
    let (out_tx, out_rx) = sync_channel::<(usize, Array3<f32>)>(0);
    let prepare = &stages.prepare;
    let n = slabs.len();
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("tomors-read".into())
            .spawn_scoped(scope, move || -> StageEnd {
                let mut st = StageTimes::default();
                let mut read_bytes = 0;
                let err = run_stage(slabs.iter().enumerate(), &mut st.read, &raw_tx, |_, r| {
                    let (raw, bytes) = read_any(&*source, spec, pre, r)?;
                    read_bytes += bytes;
                    Ok(raw)
                });
                st.read_bytes = read_bytes;
                (st, err)
            })
            .expect("spawning the reader thread");
        let preprocessor = std::thread::Builder::new()
            .name("tomors-preprocess".into())
            .spawn_scoped(scope, move || -> StageEnd {
                let mut st = StageTimes::default();
                let err = run_stage(raw_rx.iter(), &mut st.preprocess, &prep_tx, |i, raw| {
                    let r = slabs[i].clone();
                    raw.preprocess(pre, spec, r.clone())
                        .and_then(|p| prepare(r, p))
                });
                (st, err)
            })
            .expect("spawning the preprocessing thread");
        let writing = std::thread::Builder::new()
            .name("tomors-write".into())
            .spawn_scoped(scope, move || -> StageEnd {
                let mut st = StageTimes::default();
                let mut written = 0;
                for (i, vol) in out_rx.iter() {
                    let bytes = vol.len() as u64 * 4;
                    let t = Instant::now();
                    let got = writer.write_slab(slabs[i].start - first, vol.view());
                    st.write += t.elapsed();
                    drop(vol);
                    if let Err(e) = got {
                        // Returning drops the writer, which removes its
                        // partial output.
                        return (st, Some((i, e)));
                    }
                    st.write_bytes += bytes;
                    written += 1;
                }
                if written < n {
                    // An earlier stage failed: no output.
                    return (st, None);
                }
                let t = Instant::now();
                let done = writer.finish();
                st.write += t.elapsed();
                (st, done.err().map(|e| (n, e)))
            })
            .expect("spawning the writer thread");
        // The reconstruction, on this thread.
        let mut st = StageTimes::default();
        let mut failed: Option<(usize, IoError)> = None;
        let mut done = 0;
        for (i, x) in prep_rx.iter() {
            let r = slabs[i].clone();
            let t = Instant::now();
            let got = (stages.process)(r.clone(), x).and_then(|v| check_slices(&r, &v).map(|()| v));
            st.process += t.elapsed();
            match got {
                Ok(v) => {
                    if !pass(&out_tx, (i, v)) {
                        break;
                    }
                    done += 1;
                    progress(done, n);
                }
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        // Stop the stages around: the writer sees the end of its input, the
        // preprocessing thread a closed channel.
        drop(out_tx);
        drop(prep_rx);
        let (rd, rd_err) = join(reader);
        let (pp, pp_err) = join(preprocessor);
        let (wr, wr_err) = join(writing);
        // The error of the earliest slab, in stage order on a tie: what the
        // sequential stream would have reported.
        let first_err = [rd_err, pp_err, failed, wr_err]
            .into_iter()
            .enumerate()
            .filter_map(|(k, e)| e.map(|(i, e)| (i, k, e)))
            .min_by_key(|(i, k, _)| (*i, *k))
            .map(|(_, _, e)| e);
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(StageTimes {
            pipelined: true,
            read: rd.read,
            read_bytes: rd.read_bytes,
            preprocess: pp.preprocess,
            process: st.process,
            write: wr.write,
            write_bytes: wr.write_bytes,
            ..Default::default()
        })
    })
}
