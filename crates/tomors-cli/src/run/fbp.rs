//! Parallel-beam FBP, streamed: read a slab of detector rows, preprocess,
//! reconstruct, write — within the memory budget, the stages overlapped on
//! threads (`tomors_io::stream::run_stages`).

use std::ops::Range;

use anyhow::Result;
use ndarray::{s, Array3, Axis};
use rayon::prelude::*;
use tomors_core::fbp::check_finite;
use tomors_core::SliceGrid;
use tomors_io::stream::{run_stages, slab_plan, MemoryModel, Stages, StreamMode};

use crate::backend_select::make_backend;
use crate::job::{center, input, output, Job, DEFAULT_MEMORY};
use crate::progress;

/// Runs an FBP job.
pub fn run(job: &Job) -> Result<()> {
    let format = job.output.check()?;
    let budget = job.memory.unwrap_or(DEFAULT_MEMORY);
    let mut scan = input::open(&job.input, &job.pre, false)?;
    let path = scan.path().to_path_buf();
    let [n_angles, n_rows, n_bins] = scan.shape();
    let rows = job.geometry.rows(n_rows)?;
    let centre = center::resolve(&scan, &job.geometry, &rows)?;
    let geometry = centre.geometry(&scan)?;
    let grid = SliceGrid::for_geometry(&geometry);
    let options = job.method.fbp.options()?;
    let model = MemoryModel::for_source(scan.source.as_ref(), grid.len())
        .with_preprocess(&scan.pre, n_rows);
    let slab_rows = |budget: usize| -> Result<usize> {
        Ok(model
            .rows_per_slab(budget)
            .map_err(|e| {
                let why = e.to_string();
                let why = why.trim_start_matches("invalid parameter: ");
                anyhow::anyhow!("{}: --memory: {why}", path.display())
            })?
            .min(rows.len()))
    };
    let mut per_slab = slab_rows(budget)?;
    let chunk = scan.source.row_chunk();
    let margin = {
        let r = rows.start..rows.start + 1;
        let rr = scan.pre.read_range(&r, n_rows, n_bins);
        (rr.start < r.start) || (rr.end > r.end)
    };
    if let Some(band) = scan.source.row_band_cache_bytes() {
        match chunk {
            // Slabs that share a band of compressed chunks (smaller than a
            // chunk, or overlapping by a preprocessing margin): a chunk cache
            // of one band, counted in the budget, decompresses each once.
            Some(c) if per_slab < c || margin => {
                match slab_rows(budget.saturating_sub(band)) {
                    Ok(p) if band <= budget / 4 => {
                        per_slab = p;
                        scan.source.set_chunk_cache(band)?;
                        tracing::info!(
                            "chunk cache of {} MiB (one band of {c} rows of compressed chunks)",
                            band >> 20
                        );
                    }
                    _ => tracing::warn!(
                        "{}: the compressed chunks hold {c} rows; a band of them ({} MiB) does not fit the \
                         memory budget, so chunks shared by slabs are decompressed again for each",
                        path.display(),
                        band >> 20
                    ),
                }
            }
            None if per_slab < rows.len() => tracing::warn!(
                "{}: the projections are compressed in chunks of every detector row: each of the {} \
                 slabs decompresses every chunk again (a larger --memory makes fewer slabs)",
                path.display(),
                rows.len().div_ceil(per_slab)
            ),
            _ => {}
        }
    }
    let plan = slab_plan(rows.clone(), per_slab, chunk);
    let backend = make_backend(&job.backend)?;
    let (lo, hi) = geometry
        .angles()
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &a| {
            (l.min(a), h.max(a))
        });
    let meta = output::base_meta(&scan, "FBP")
        .int("first_detector_row", rows.start as i64)
        .int("n_angles", n_angles as i64)
        .float("angle_min_deg", f64::from(lo).to_degrees())
        .float("angle_max_deg", f64::from(hi).to_degrees())
        .float("center", f64::from(geometry.center(0)))
        .float("bin_width", f64::from(geometry.bin_width()))
        .float("pixel_size", f64::from(grid.pixel_size))
        .text("filter", &format!("{:?}", options.filter))
        .text("method", &options.method.to_string())
        .text("interpolation", &options.interpolation.to_string())
        .text("layout", "[z][y][x], z = detector row - first_detector_row");
    let writer = output::create(&job.output, format, [rows.len(), grid.ny, grid.nx], &meta)?;
    let n_slabs = plan.len();
    let mode = StreamMode::from_env();
    tracing::info!(
        "reconstructing rows {}..{} of {} ({}: {} angles × {} bins, centre {:.2}) on {} in {} slab(s) of ≤ {} rows (memory budget {} MiB, {} stream)",
        rows.start,
        rows.end,
        path.display(),
        scan.source.format(),
        n_angles,
        n_bins,
        geometry.center(0),
        backend.name(),
        n_slabs,
        per_slab,
        budget >> 20,
        if mode == StreamMode::Pipelined { "pipelined" } else { "sequential" }
    );
    let bar = progress::bar(n_slabs as u64, "reconstructing", "slabs");
    let drift = centre.drift.as_ref();
    let times = run_stages(
        scan.source.as_mut(),
        &scan.pre,
        &plan,
        writer,
        Stages {
            // On the preprocessing thread: drift correction, the finiteness
            // check and the sinograms.
            prepare: |slab: Range<usize>, mut projections: Array3<f32>| {
                if let Some(d) = drift {
                    d.apply(&mut projections, &slab);
                }
                check_all_finite(&projections).map_err(|e| tomors_io::IoError::Format {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                Ok(to_sinograms(&projections))
            },
            // On this thread: the reconstruction.
            process: |_slab: Range<usize>, sinograms: Array3<f32>| {
                Ok(tomors_core::fbp::fbp_sinograms(
                    backend.as_ref(),
                    sinograms.view(),
                    &geometry,
                    &grid,
                    &options,
                )?)
            },
        },
        |done, _| bar.set_position(done as u64),
        mode,
    )?;
    bar.finish_and_clear();
    let updates = (grid.len() * rows.len() * n_angles) as f64;
    let gus = |d: std::time::Duration| updates / d.as_secs_f64().max(1e-9) / 1e9;
    tracing::info!("stages: {times}");
    tracing::info!(
        "reconstructed {} slices in {:.2} s ({:.3} GU/s including reading and writing; the reconstruction alone {:.2} s, {:.3} GU/s)",
        rows.len(),
        times.wall.as_secs_f64(),
        gus(times.wall),
        times.process.as_secs_f64(),
        gus(times.process)
    );
    println!(
        "wrote {} ([z][y][x] = [{}, {}, {}], centre {:.2})",
        job.output.path.display(),
        rows.len(),
        grid.ny,
        grid.nx,
        geometry.center(0)
    );
    Ok(())
}

/// [`check_finite`] on all cores: the error (the first non-finite value in
/// C order) is the same.
fn check_all_finite(p: &Array3<f32>) -> tomors_core::Result<()> {
    let clean = match p.as_slice() {
        Some(v) => !v.is_empty() && v.par_iter().all(|x| x.is_finite()),
        None => false,
    };
    if clean {
        return Ok(());
    }
    check_finite(p.view(), "the preprocessed projections")
}

/// Projections `[angle][row][col]` re-arranged into sinograms
/// `[row][angle][col]`, one row per task (a copy: the same values as
/// `tomors_core::fbp::projections_to_sinograms`).
fn to_sinograms(p: &Array3<f32>) -> Array3<f32> {
    let (na, nr, nc) = p.dim();
    let mut out = Array3::<f32>::zeros((nr, na, nc));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(r, mut sino)| sino.assign(&p.slice(s![.., r, ..])));
    out
}
