//! Cone beam over ranks: the volume split into z-slabs.
//!
//! - Iterative methods (the thesis' domain decomposition):
//!   [`DistConeOperator`] is the cone-beam operator of one rank's slab
//!   whose forward projection sums the slabs' partial projections over the
//!   ranks (`MPI_Allreduce`), so every rank holds the whole projection of
//!   the whole volume, forms the same residual and back-projects it into
//!   its own slab (no communication). Row sums are forward projections and
//!   are summed the same way; column sums are back projections, local.
//!   The core's algorithms run on it unchanged.
//! - FDK: each rank reads the detector rows its slab's voxels project to,
//!   filters them and back-projects into its slab.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use ndarray::{Array2, Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis};
use tomors_core::cone::{fdk_filter, ConeGeometry, ConeVolume};
use tomors_core::fbp::check_finite;
use tomors_core::iterative::{
    cone_projector, reconstruct_cone, Algorithm, ConeOperator, IterationInfo, IterativeOptions,
    IterativeResult, Projector, ProjectorKind, VolumeBox, Weighting,
};
use tomors_io::VolumeMeta;

use crate::comm::Comm;
use crate::job::{bar, Method, ReconJob};
use crate::output::DistOutput;
use crate::split::split_rows;
use crate::status::{agree, injected_failure, Failure};

/// One rank's part of a cone-beam operator split into z-slabs: its image
/// is the rank's slab `[z·y][x]`, its sinogram the whole projections
/// `[angle][row·col]`, identical on every rank after each forward
/// projection.
pub struct DistConeOperator<'c> {
    local: Box<dyn ConeOperator<f32>>,
    comm: &'c dyn Comm,
    /// Sums done, values summed, nanoseconds spent in them.
    stats: [AtomicU64; 3],
}

impl<'c> DistConeOperator<'c> {
    /// The operator of slab `z` of `volume` on this rank.
    ///
    /// Errors: those of [`cone_projector`] (an empty slab, a source orbit
    /// through the volume).
    pub fn new(
        comm: &'c dyn Comm,
        kind: ProjectorKind,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
    ) -> tomors_core::Result<Self> {
        let local =
            cone_projector::<f32>(kind, geometry, volume, Some(VolumeBox::slab(volume, z)))?;
        Ok(Self {
            local,
            comm,
            stats: Default::default(),
        })
    }

    /// Communication so far: `(sums, bytes summed per rank, seconds)`.
    pub fn comm_stats(&self) -> (u64, u64, f64) {
        (
            self.stats[0].load(Ordering::Relaxed),
            4 * self.stats[1].load(Ordering::Relaxed),
            self.stats[2].load(Ordering::Relaxed) as f64 * 1e-9,
        )
    }

    fn sum(&self, out: ArrayViewMut2<'_, f32>) {
        let t = Instant::now();
        let n = out.len() as u64;
        self.sum_inner(out);
        self.stats[0].fetch_add(1, Ordering::Relaxed);
        self.stats[1].fetch_add(n, Ordering::Relaxed);
        self.stats[2].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn sum_inner(&self, mut out: ArrayViewMut2<'_, f32>) {
        match out.as_slice_mut() {
            Some(s) => self.comm.allreduce_sum_f32(s),
            None => {
                let mut v = out.to_owned();
                self.comm
                    .allreduce_sum_f32(v.as_slice_mut().expect("owned is standard"));
                out.assign(&v);
            }
        }
    }
}

impl Projector<f32> for DistConeOperator<'_> {
    fn name(&self) -> &'static str {
        self.local.name()
    }
    fn n_angles(&self) -> usize {
        self.local.n_angles()
    }
    fn n_bins(&self) -> usize {
        self.local.n_bins()
    }
    fn image_dim(&self) -> (usize, usize) {
        self.local.image_dim()
    }
    fn is_matched(&self) -> bool {
        self.local.is_matched()
    }
    fn forward_slice(
        &self,
        image: ArrayView2<'_, f32>,
        angles: &[usize],
        mut out: ArrayViewMut2<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.local.forward_slice(image, angles, out.view_mut())?;
        self.sum(out);
        Ok(())
    }
    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, f32>,
        angles: &[usize],
        out: ArrayViewMut2<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.local.back_slice(sinogram, angles, out)
    }
    /// The local part of a ray only (ART-type methods do not decompose).
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, f32)) {
        self.local.trace_ray(angle, bin, visit)
    }
    // One "slice" (the whole slab): run on the calling thread, so the
    // collective inside happens in the same order on every rank.
    fn forward(
        &self,
        volume: ArrayView3<'_, f32>,
        angles: &[usize],
        mut out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        if volume.len_of(Axis(0)) != 1 || out.len_of(Axis(0)) != 1 {
            return Err(tomors_core::CoreError::Shape(
                "a cone-beam operator works on one [z·y][x] image".into(),
            ));
        }
        self.forward_slice(
            volume.index_axis(Axis(0), 0),
            angles,
            out.index_axis_mut(Axis(0), 0),
        )
    }
    fn back(
        &self,
        sinograms: ArrayView3<'_, f32>,
        angles: &[usize],
        mut out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        if sinograms.len_of(Axis(0)) != 1 || out.len_of(Axis(0)) != 1 {
            return Err(tomors_core::CoreError::Shape(
                "a cone-beam operator works on one [z·y][x] image".into(),
            ));
        }
        self.back_slice(
            sinograms.index_axis(Axis(0), 0),
            angles,
            out.index_axis_mut(Axis(0), 0),
        )
    }
    fn row_norms_sq(&self, angles: &[usize]) -> tomors_core::Result<Array2<f32>> {
        // Σ over the slabs of each ray's squared weights: the local sums,
        // summed over the ranks (in f64, as the core accumulates).
        let local = self.local.row_norms_sq(angles)?;
        let mut v: Vec<f64> = local.iter().map(|&x| f64::from(x)).collect();
        self.comm.allreduce_sum_f64(&mut v);
        Ok(
            Array2::from_shape_vec(local.dim(), v.into_iter().map(|x| x as f32).collect())
                .expect("same shape"),
        )
    }
}

impl ConeOperator<f32> for DistConeOperator<'_> {
    fn volume_dim(&self) -> (usize, usize, usize) {
        self.local.volume_dim()
    }
    fn detector_dim(&self) -> (usize, usize) {
        self.local.detector_dim()
    }
}

/// The relaxation the single process would pick by default, computed with
/// norms over the whole volume: 1 for row/column-sum weights, else `1/ρ`
/// by power iteration on the distributed operator (the core's power
/// iteration sees only the local slab's norm, so it cannot be reused).
fn default_relaxation(
    op: &DistConeOperator<'_>,
    comm: &dyn Comm,
    algorithm: &Algorithm,
) -> Result<f64> {
    let n = op.n_angles();
    let (weighting, per) = match *algorithm {
        Algorithm::Sirt(w) => (w, n),
        Algorithm::BlockSequential {
            weighting,
            projections_per_block,
        } => (weighting, projections_per_block.clamp(1, n)),
        _ => bail!("ART and the block-parallel method do not decompose over ranks"),
    };
    if weighting == Weighting::RowColumnSums {
        return Ok(1.0);
    }
    let blocks: Vec<Range<usize>> = (0..n).step_by(per).map(|s| s..(s + per).min(n)).collect();
    let mut picks: Vec<usize> = (0..3).map(|i| i * blocks.len() / 3).collect();
    picks.dedup();
    let mut rho = 0.0f64;
    for i in picks {
        let angles: Vec<usize> = blocks[i].clone().collect();
        rho = rho.max(power_iteration(op, comm, weighting, &angles)?);
    }
    if rho <= 0.0 {
        bail!("the projector is zero on this grid (no ray meets the volume)");
    }
    Ok(1.0 / rho)
}

/// The core's power iteration (50 steps, 1e-4 relative change) with the
/// image norm summed over the ranks.
fn power_iteration(
    op: &DistConeOperator<'_>,
    comm: &dyn Comm,
    weighting: Weighting,
    angles: &[usize],
) -> Result<f64> {
    let invert = |a: &mut Array2<f32>| {
        let max = a.iter().fold(0.0f64, |m, &v| m.max(f64::from(v)));
        let floor = max * 1e-6;
        a.mapv_inplace(|v| {
            let v = f64::from(v);
            if v > floor && v > 0.0 {
                (1.0 / v) as f32
            } else {
                0.0
            }
        });
    };
    let m = match weighting {
        Weighting::Landweber => None,
        Weighting::Cimmino => Some(op.row_norms_sq(angles)?),
        Weighting::RowColumnSums => Some(op.row_sums(angles)?),
    }
    .map(|mut m| {
        invert(&mut m);
        m
    });
    let dim = op.image_dim();
    let mut v = Array2::from_elem(dim, 1.0f32);
    let mut total = [v.len() as f64];
    comm.allreduce_sum_f64(&mut total);
    let mut norm_v = total[0].sqrt();
    let mut sino = Array2::zeros((angles.len(), op.n_bins()));
    let mut w = Array2::zeros(dim);
    let mut rho = 0.0f64;
    for _ in 0..50 {
        op.forward_slice(v.view(), angles, sino.view_mut())?;
        if let Some(m) = &m {
            sino *= m;
        }
        op.back_slice(sino.view(), angles, w.view_mut())?;
        let mut sq = [w.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>()];
        comm.allreduce_sum_f64(&mut sq);
        let norm_w = sq[0].sqrt();
        let new = norm_w / norm_v;
        if !new.is_finite() {
            bail!("power iteration diverged");
        }
        if norm_w == 0.0 {
            return Ok(0.0);
        }
        let scale = (1.0 / norm_w) as f32;
        v.zip_mut_with(&w, |a, &b| *a = b * scale);
        norm_v = 1.0;
        let done = (new - rho).abs() <= 1e-4 * new;
        rho = new;
        if done {
            break;
        }
    }
    Ok(rho)
}

/// Cone-beam iterative reconstruction of `projections` (`[angle][row][col]`,
/// the same on every rank) with the volume split into z-slabs over the
/// ranks of `comm`. Returns this rank's slab range and its part of the
/// result (`x` is the slab `[z][y][x]`). Collective. Ranks with no slice
/// (more ranks than slices) are an error.
///
/// The result equals the single-process one up to the order of summation
/// of each ray's slab contributions (see `docs/distributed.md`).
pub fn reconstruct_distributed(
    comm: &dyn Comm,
    kind: ProjectorKind,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationInfo<'_, f32>) -> bool,
) -> Result<(Range<usize>, IterativeResult<f32>)> {
    let z = split_rows(&(0..volume.nz), comm.size(), comm.rank());
    if z.is_empty() {
        bail!(
            "{} ranks for {} slices: at most one rank per slice",
            comm.size(),
            volume.nz
        );
    }
    let op = DistConeOperator::new(comm, kind, geometry, volume, z.clone())?;
    let mut options = *options;
    if options.relaxation.is_none() {
        options.relaxation = Some(default_relaxation(&op, comm, &options.algorithm)?);
    }
    let t = Instant::now();
    let result = reconstruct_cone(&op, projections, None, &options, callback)?;
    let (sums, bytes, seconds) = op.comm_stats();
    if comm.rank() == 0 {
        tracing::info!(
            "rank 0: {:.3} s iterating, of which {seconds:.3} s in {sums} sums of partial projections over the ranks ({:.1} MiB each)",
            t.elapsed().as_secs_f64(),
            bytes as f64 / sums.max(1) as f64 / (1 << 20) as f64
        );
    }
    Ok((z, result))
}

/// The sanity of a distributed cone iterative method, before any work.
fn check_method(options: &IterativeOptions) -> Result<()> {
    if matches!(
        options.algorithm,
        Algorithm::Art { .. } | Algorithm::BlockParallel { .. }
    ) {
        bail!("art and block-parallel update ray by ray and do not decompose over ranks; use sirt, landweber, cimmino, sart or block-it");
    }
    Ok(())
}

fn cone_meta(job: &ReconJob, g: &ConeGeometry, v: &ConeVolume, what: &str) -> VolumeMeta {
    VolumeMeta::default()
        .text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")))
        .text("input", &job.source.path().display().to_string())
        .text("geometry", "cone")
        .float("sod", g.sod())
        .float("odd", g.odd())
        .int("n_angles", g.n_angles() as i64)
        .float("voxel_size", f64::from(v.voxel_size))
        .text("method", what)
        .text("layout", "[z][y][x]")
}

fn say_wrote(comm: &dyn Comm, job: &ReconJob, v: &ConeVolume, t: Instant) {
    if comm.rank() == 0 {
        tracing::info!(
            "reconstructed on {} ranks in {:.2} s",
            comm.size(),
            t.elapsed().as_secs_f64()
        );
        println!(
            "wrote {} ([z][y][x] = {:?}, voxel size {})",
            job.out.display(),
            (v.nz, v.ny, v.nx),
            v.voxel_size
        );
    }
}

/// Distributed cone-beam iterative reconstruction ([`Method::ConeIterative`]).
pub(crate) fn run_iterative(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::ConeIterative {
        geometry,
        volume,
        options,
        projector,
    } = &job.method
    else {
        unreachable!("cone iterative jobs only")
    };
    let rank = comm.rank();
    let input = job.source.path().display().to_string();
    let setup = (|| -> Result<Array3<f32>> {
        check_method(options)?;
        if volume.nz < comm.size() {
            bail!(
                "{} ranks for {} slices: at most one rank per slice",
                comm.size(),
                volume.nz
            );
        }
        let n_rows = job.source.shape()[1];
        let p = job.source.read_rows(0..n_rows, &job.preprocess)?;
        check_finite(p.view(), "the projections").context(input.clone())?;
        injected_failure(rank)?;
        Ok(p)
    })();
    let projections = agree(comm, setup)?;
    if rank == 0 {
        tracing::info!(
            "{:?} with the {:?} projector, {} iterations on {} ranks: {} onto {}×{}×{} voxels, z-slabs of {} slices (±1)",
            options.algorithm,
            projector,
            options.iterations,
            comm.size(),
            input,
            volume.nx,
            volume.ny,
            volume.nz,
            volume.nz / comm.size()
        );
    }
    let bar = bar(
        comm,
        job.quiet,
        options.iterations as u64,
        "iterating",
        "iterations",
    );
    let t = Instant::now();
    let run = reconstruct_distributed(
        comm,
        *projector,
        geometry,
        volume,
        projections.view(),
        options,
        &mut |info| {
            bar.set_position(info.iteration as u64);
            if let Some(r) = info.residual {
                tracing::debug!("iteration {}: relative residual {r:.3e}", info.iteration);
            }
            true
        },
    );
    // The ranks run the same collectives in the same order; an error inside
    // one rank's iteration (after the checks above) may leave the others
    // waiting in a sum, so it ends the whole job at once. No output exists
    // yet, so nothing is left behind.
    let (z, result) = match run {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: rank {rank}: {input}: {e:#}");
            comm.abort(1)
        }
    };
    bar.finish_and_clear();
    if rank == 0 {
        tracing::info!(
            "{} iterations (λ = {:.4e}, stopped: {:?}), final relative residual {}",
            result.iterations,
            result.relaxation,
            result.stop,
            result
                .residuals
                .last()
                .map_or("–".to_string(), |r| format!("{r:.3e}"))
        );
    }
    let what = format!(
        "{:?}, {:?} projector, {} ranks",
        options.algorithm,
        projector,
        comm.size()
    );
    let meta = cone_meta(&job, geometry, volume, &what);
    let shape = [volume.nz, volume.ny, volume.nx];
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    let local = out.write(comm, z.start, result.x.view());
    out.finish(comm, local)?;
    say_wrote(comm, &job, volume, t);
    Ok(())
}

/// Detector rows whose pixels the voxels of slices `z` project to at some
/// angle, plus two rows each side for the bilinear interpolation.
pub fn rows_for_slab(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z: &Range<usize>,
) -> Range<usize> {
    let h = f64::from(volume.voxel_size);
    let (x0, x1) = (volume.x(0) - h, volume.x(volume.nx - 1) + h);
    let (y0, y1) = (volume.y(0) + h, volume.y(volume.ny - 1) - h);
    let (z0, z1) = (volume.z(z.start) - h, volume.z(z.end - 1) + h);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..geometry.n_angles() {
        for x in [x0, x1] {
            for y in [y0, y1] {
                for zz in [z0, z1] {
                    match geometry.project_point(i, x, y, zz) {
                        Some(p) => {
                            lo = lo.min(p.row);
                            hi = hi.max(p.row);
                        }
                        None => return 0..geometry.n_rows(),
                    }
                }
            }
        }
    }
    let n = geometry.n_rows() as f64;
    let first = (lo.floor() - 2.0).clamp(0.0, n) as usize;
    let end = (hi.ceil() + 3.0).clamp(0.0, n) as usize;
    first..end.max(first + 1).min(geometry.n_rows())
}

/// Distributed FDK ([`Method::Fdk`]).
pub(crate) fn run_fdk(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::Fdk {
        geometry,
        volume,
        options,
        backend,
    } = &job.method
    else {
        unreachable!("FDK jobs only")
    };
    let rank = comm.rank();
    let input = job.source.path().display().to_string();
    let z = split_rows(&(0..volume.nz), comm.size(), rank);
    let setup = (|| -> Result<_> {
        if volume.nz < comm.size() {
            bail!(
                "{} ranks for {} slices: at most one rank per slice",
                comm.size(),
                volume.nz
            );
        }
        let backend = backend(comm.local_rank())?;
        Ok(backend)
    })();
    let backend = agree(comm, setup)?;
    let rows = rows_for_slab(geometry, volume, &z);
    if rank == 0 {
        tracing::info!(
            "FDK of {} onto {}×{}×{} voxels on {} ranks (z-slabs of {} slices ±1; rank 0 reads detector rows {}..{} of {}) on {}",
            input,
            volume.nx,
            volume.ny,
            volume.nz,
            comm.size(),
            volume.nz / comm.size(),
            rows.start,
            rows.end,
            geometry.n_rows(),
            backend.name()
        );
    }
    tracing::debug!("slices {z:?} need detector rows {rows:?}");
    let what = format!("FDK {:?}, {} ranks", options.filter, comm.size());
    let meta = cone_meta(&job, geometry, volume, &what);
    let shape = [volume.nz, volume.ny, volume.nx];
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    let bar = bar(comm, job.quiet, 1, "FDK", "slabs of rank 0");
    let t = Instant::now();
    let local = (|| -> Result<()> {
        let p = job.source.read_rows(rows.clone(), &job.preprocess)?;
        check_finite(p.view(), "the projections").map_err(|e| anyhow!("{input}: {e}"))?;
        injected_failure(rank)?;
        let sub = geometry.detector_rows(rows.clone())?;
        let filtered = fdk_filter(backend.as_ref(), p.view(), &sub, options)
            .map_err(|e| anyhow!("{input}: {e}"))?;
        drop(p);
        let mut slab = Array3::<f32>::zeros((z.len(), volume.ny, volume.nx));
        backend
            .cone_backproject(filtered.view(), &sub, volume, z.clone(), slab.view_mut())
            .map_err(|e| anyhow!("{input}: {e}"))?;
        out.write(comm, z.start, slab.view())?;
        bar.inc(1);
        Ok(())
    })();
    out.finish(comm, local)?;
    bar.finish_and_clear();
    say_wrote(comm, &job, volume, t);
    Ok(())
}
