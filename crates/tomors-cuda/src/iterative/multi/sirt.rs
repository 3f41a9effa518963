//! Cone-beam SIRT-type methods resident on several devices (z-slabs).

use std::time::Instant;

use ndarray::ArrayView3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{solve, IterativeOptions, IterativeResult};
use tomors_core::linalg::{LinearOperator, Vector};

use super::{slab_range, CudaConeSlabs, Exchange};
use crate::error::{CudaError, Result};
use crate::fbp::CudaBackend;
use crate::iterative::cone::{check_cone_sirt_inputs, cone_sirt_bytes_with, ConeBackProjector};
use crate::iterative::run::{with_relaxation, Prepared};
use crate::iterative::{GpuIteration, SirtStats};

/// Device memory kept free beside the state on every device.
const SPARE_BYTES: usize = 256 << 20;

/// Bytes of device memory [`cone_sirt_cuda_multi`] holds on the device of
/// slab `s` of `p`: the single-device state ([`cone_sirt_bytes_with`]) of
/// its slab, and with several devices one more set of projections per
/// other device (the received partial projections).
pub fn cone_sirt_multi_bytes(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    back: ConeBackProjector,
    p: usize,
    s: usize,
) -> usize {
    let slab = ConeVolume {
        nz: slab_range(volume.nz, p.max(1), s).len(),
        ..*volume
    };
    let nproj = geometry.n_angles() * geometry.n_rows() * geometry.n_cols();
    cone_sirt_bytes_with(geometry, &slab, back) + 4 * nproj * p.saturating_sub(1)
}

/// Cone-beam SIRT (or Landweber, Cimmino; SART and BLOCK-IT with the Joseph
/// pair) of `projections` (`[angle][row][col]`) on the devices `devices`,
/// the volume split into z-slabs (slab `s` on `devices[s]`,
/// [`CudaConeSlabs`]), the partial projections summed across the devices
/// by `exchange` once per forward projection. As
/// [`cone_sirt_cuda_with`](crate::cone_sirt_cuda_with) otherwise: the
/// projections are uploaded once (to every device), tomors-core's
/// [`solve`] iterates, the slabs are downloaded once; `initial` is the
/// starting volume. One device gives [`cone_sirt_cuda_with`]'s result (the
/// same kernels on the whole volume).
///
/// `stats.slabs` is the number of devices; the kernel times are not
/// measured (no per-kernel events), `loop_s`, `setup_s`, `download_s` and
/// `total_s` are.
///
/// Errors: those of [`check_cone_sirt_inputs`], no device, fewer slices
/// than devices, a device without room for its state
/// ([`cone_sirt_multi_bytes`]), driver, compilation and launch errors,
/// divergence.
#[allow(clippy::too_many_arguments)]
pub fn cone_sirt_cuda_multi(
    devices: &[&CudaBackend],
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    back: ConeBackProjector,
    exchange: Exchange,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    check_cone_sirt_inputs(geometry, volume, &projections, initial.as_ref(), options)?;
    let t0 = Instant::now();
    let op = CudaConeSlabs::new(devices, geometry, volume, back, exchange)?;
    let p = devices.len();
    for (s, slab) in op.slabs().iter().enumerate() {
        let need = cone_sirt_multi_bytes(geometry, volume, back, p, s);
        let (free, _) = crate::iterative::OnQueue::context(slab).mem_info()?;
        if need + SPARE_BYTES > free {
            return Err(CudaError::OutOfMemory {
                what: format!(
                    "holding slab {s} ({} slices) of the cone SIRT state over {p} devices \
                     ({} MiB free on device {})",
                    slab.z_range().len(),
                    free >> 20,
                    crate::iterative::OnQueue::context(slab).ordinal
                ),
                bytes: need,
            });
        }
    }
    let mut stats = SirtStats {
        slabs: p,
        ..SirtStats::default()
    };
    let (options, _) = with_relaxation(&op, options)?;
    let prepared = Prepared::new(&op, &options.algorithm)?;
    let b = op.upload_projections(projections)?;
    let mut x = match initial {
        Some(x0) => op.upload_volume(x0)?,
        None => {
            let mut x = op.domain_zeros()?;
            x.fill(0.0)?;
            x
        }
    };
    for v in x.parts() {
        v.queue().stream().synchronize()?;
    }
    stats.setup_s = t0.elapsed().as_secs_f64();
    let t_loop = Instant::now();
    let report = solve(&prepared, &b, &mut x, &options, &mut |state| {
        progress(&GpuIteration {
            slab: (0, 1),
            iteration: state.iteration,
            residual: state.residual.unwrap_or(f64::NAN),
        })
    })?;
    stats.loop_s = t_loop.elapsed().as_secs_f64();
    stats.iterations = report.iterations;
    drop(b);
    let t_down = Instant::now();
    let xh = op.download_volume(&x)?;
    stats.download_s = t_down.elapsed().as_secs_f64();
    let t_free = Instant::now();
    drop(x);
    drop(prepared);
    drop(op);
    stats.free_s = t_free.elapsed().as_secs_f64();
    stats.total_s = t0.elapsed().as_secs_f64();
    Ok((IterativeResult::from_report(xh, report), stats))
}
