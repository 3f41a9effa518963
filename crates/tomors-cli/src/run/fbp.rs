//! Parallel-beam FBP, streamed: read a slab of detector rows, preprocess,
//! reconstruct, write — within the memory budget.

use std::time::Instant;

use anyhow::{Context, Result};
use ndarray::Axis;
use tomors_core::fbp::{check_finite, projections_to_sinograms};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::stream::{align_to_chunks, stream_slabs, MemoryModel};

use crate::backend_select::make_backend;
use crate::job::{center, input, output, Job, DEFAULT_MEMORY};
use crate::progress;

/// Runs an FBP job.
pub fn run(job: &Job) -> Result<()> {
    let format = job.output.check()?;
    let budget = job.memory.unwrap_or(DEFAULT_MEMORY);
    let scan = input::open(&job.input, &job.pre, false)?;
    let path = scan.path().to_path_buf();
    let [n_angles, n_rows, n_bins] = scan.shape();
    let rows = job.geometry.rows(n_rows)?;
    let centre = center::resolve(&scan, &job.geometry, &rows)?;
    let mut geometry = ParallelGeometry::new(scan.angles.clone(), n_bins)
        .with_context(|| path.display().to_string())?;
    if let Some(c) = centre.center {
        geometry = geometry
            .with_center(c)
            .with_context(|| path.display().to_string())?;
    }
    let grid = SliceGrid::for_geometry(&geometry);
    let options = job.method.fbp.options()?;
    let per_slab = MemoryModel::for_source(scan.source.as_ref(), grid.len())
        .with_preprocess(&scan.pre, n_rows)
        .rows_per_slab(budget)
        .map_err(|e| {
            let why = e.to_string();
            let why = why.trim_start_matches("invalid parameter: ");
            anyhow::anyhow!("{}: --memory: {why}", path.display())
        })?
        .min(rows.len());
    let per_slab = align_to_chunks(per_slab, scan.source.row_chunk());
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
        .text("interpolation", &options.interpolation.to_string())
        .text("layout", "[z][y][x], z = detector row - first_detector_row");
    let writer = output::create(&job.output, format, [rows.len(), grid.ny, grid.nx], &meta)?;
    let n_slabs = rows.len().div_ceil(per_slab);
    tracing::info!(
        "reconstructing rows {}..{} of {} ({}: {} angles × {} bins, centre {:.2}) on {} in {} slab(s) of ≤ {} rows (memory budget {} MiB)",
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
        budget >> 20
    );
    let bar = progress::bar(n_slabs as u64, "reconstructing", "slabs");
    let t = Instant::now();
    stream_slabs(
        scan.source.as_ref(),
        &scan.pre,
        rows.clone(),
        per_slab,
        writer,
        |slab, mut projections| {
            if let Some(d) = &centre.drift {
                d.apply(&mut projections, &slab);
            }
            check_finite(projections.view(), "the preprocessed projections").map_err(|e| {
                tomors_io::IoError::Format {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
            let n = projections.len_of(Axis(1));
            let sinograms = projections_to_sinograms(projections.view(), 0..n)?;
            drop(projections);
            Ok(tomors_core::fbp::fbp_sinograms(
                backend.as_ref(),
                sinograms.view(),
                &geometry,
                &grid,
                &options,
            )?)
        },
        |done, _| bar.set_position(done as u64),
    )?;
    bar.finish_and_clear();
    let seconds = t.elapsed().as_secs_f64();
    let updates = (grid.len() * rows.len() * n_angles) as f64;
    tracing::info!(
        "reconstructed {} slices in {seconds:.2} s ({:.3} GU/s including reading and writing)",
        rows.len(),
        updates / seconds / 1e9
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
