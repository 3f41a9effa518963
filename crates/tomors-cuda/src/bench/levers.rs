//! Measurements for the 2048³ FBP target (issue 15, part 3): kernel rates
//! of chosen configurations at several slice counts on one data set, the
//! difference between two kernels' results on the same input, and
//! end-to-end FBP host to host with a chosen kernel and slab size.

use ndarray::Array3;
use rayon::prelude::*;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

use super::{fill_random, measure, BenchRow};
use crate::error::{CudaError, Result};
use crate::fbp::engine::PipelineStats;
use crate::fbp::kernels::{BpConfig, KernelChoice};
use crate::fbp::{CudaBackend, CudaOptions};

/// Parses `KERNEL[:linear|nearest]` (linear when omitted) into a fixed
/// configuration and its interpolation.
///
/// Errors: an unknown kernel, `auto`, or an unknown interpolation.
pub fn parse_case(s: &str) -> Result<(BpConfig, Interpolation)> {
    let (k, i) = s.split_once(':').unwrap_or((s, "linear"));
    let interp = match i {
        "linear" | "lin" => Interpolation::Linear,
        "nearest" | "near" => Interpolation::Nearest,
        _ => {
            return Err(CudaError::Parameter(format!(
                "interpolation '{i}' (use linear or nearest)"
            )))
        }
    };
    match k.parse::<KernelChoice>()? {
        KernelChoice::Fixed(c) => {
            c.check(interp)?;
            Ok((c, interp))
        }
        KernelChoice::Auto => Err(CudaError::Parameter("name a fixed kernel, not auto".into())),
    }
}

/// Times every case at every slice count on device `device` (`n` bins ×
/// `n` angles → `n²`), one backend and one random data set for all, the
/// median of `reps` launches after a warm-up launch.
///
/// Errors: no usable device, compilation or launch errors.
pub fn kernel_rates(
    device: usize,
    cases: &[(BpConfig, Interpolation)],
    n: usize,
    slices: &[usize],
    reps: usize,
) -> Result<Vec<BenchRow>> {
    let be = CudaBackend::new(device)?;
    let most = slices.iter().copied().max().unwrap_or(0);
    let mut data = vec![0f32; most * n * n];
    fill_random(&mut data, 11);
    let mut rows = Vec::new();
    for &(cfg, interp) in cases {
        for &k in slices {
            let row = measure(&be, cfg, interp, n, k, reps, &data)?;
            eprintln!(
                "  {:<40} {:<8} {:>3} slices {:>9.3} ms {:>8.1} GU/s",
                row.kernel,
                interp.to_string(),
                k,
                row.ms,
                row.gups
            );
            rows.push(row);
        }
    }
    Ok(rows)
}

/// How far one result is from another: relative L2 and the largest
/// absolute difference over the reference's gray range (max − min).
#[derive(Clone, Copy, Debug)]
pub struct Difference {
    /// ‖a − b‖ / ‖b‖.
    pub rel_l2: f64,
    /// max |a − b| / (max b − min b).
    pub max_over_range: f64,
}

/// Compares `a` with the reference `b` (same length).
pub fn difference(a: &[f32], b: &[f32]) -> Difference {
    let (mut num, mut den, mut md) = (0f64, 0f64, 0f64);
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        num += (x - y) * (x - y);
        den += y * y;
        md = md.max((x - y).abs());
        lo = lo.min(y);
        hi = hi.max(y);
    }
    Difference {
        rel_l2: (num / den.max(f64::MIN_POSITIVE)).sqrt(),
        max_over_range: md / (hi - lo).max(f64::MIN_POSITIVE),
    }
}

/// Runs `case` and the reference case on the same `slices` random
/// sinograms of `n` bins × `n` angles, unfiltered (back projection) and
/// filtered (FBP, Ram-Lak), and returns both differences (case vs
/// reference). Every output element is checked to be written (NaN-poisoned
/// first).
///
/// Errors: device, compilation or launch errors; an unwritten output.
pub fn compare(
    device: usize,
    case: (BpConfig, Interpolation),
    reference: (BpConfig, Interpolation),
    n: usize,
    slices: usize,
) -> Result<(Difference, Difference)> {
    let geom = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let mut sino = Array3::<f32>::zeros((slices, n, n));
    fill_random(sino.as_slice_mut().expect("contiguous"), 5);
    let mut be = CudaBackend::new(device)?;
    let mut run = |(cfg, interp): (BpConfig, Interpolation), filtered: bool| -> Result<Vec<f32>> {
        be.set_kernel(KernelChoice::Fixed(cfg));
        let mut out = Array3::from_elem((slices, grid.ny, grid.nx), f32::NAN);
        if filtered {
            be.fbp(
                sino.view(),
                &geom,
                &grid,
                &FilterSpec::default(),
                interp,
                out.view_mut(),
            )?;
        } else {
            be.backproject(sino.view(), &geom, &grid, interp, 1.0, out.view_mut())?;
        }
        let v = out.into_raw_vec_and_offset().0;
        if v.par_iter().any(|x| !x.is_finite()) {
            return Err(CudaError::Parameter(format!(
                "{cfg}: output not fully written (NaN left)"
            )));
        }
        Ok(v)
    };
    let bp = difference(&run(case, false)?, &run(reference, false)?);
    let fbp = difference(&run(case, true)?, &run(reference, true)?);
    Ok((bp, fbp))
}

/// End-to-end FBP host to host of `slices` random sinograms of `n` bins ×
/// `n` angles into `n²` slices (Ram-Lak) with each fixed kernel and slab
/// size (0 = automatic) of `cases`, on one pair of host arrays; each timed
/// after a warm-up FBP of `warm` slices with a fresh backend: wall seconds
/// and the pipeline's stage times, reported through `done` as they finish.
/// `serial_filter`: filter on the compute stream (no overlap with the back
/// projection; [`CudaOptions::serial_filter`]).
///
/// Errors: device, compilation, launch or allocation errors.
pub fn e2e(
    device: usize,
    cases: &[((BpConfig, Interpolation), usize)],
    n: usize,
    slices: usize,
    warm: usize,
    serial_filter: bool,
    done: &mut dyn FnMut(usize, f64, &PipelineStats),
) -> Result<()> {
    let geom = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let mut sino = Array3::<f32>::zeros((slices, n, n));
    fill_random(sino.as_slice_mut().expect("contiguous"), 7);
    let mut out = Array3::<f32>::zeros((slices, n, n));
    out.as_slice_mut()
        .expect("contiguous")
        .par_chunks_mut(1 << 16)
        .for_each(|c| c.fill(1.0));
    let filter = FilterSpec::default();
    let w = warm.clamp(1, slices);
    let mut o = Array3::<f32>::zeros((w, n, n));
    for (i, &(case, slab)) in cases.iter().enumerate() {
        let be = CudaBackend::with_options(
            device,
            CudaOptions {
                kernel: KernelChoice::Fixed(case.0),
                slab,
                serial_filter,
                ..Default::default()
            },
        )?;
        be.fbp(
            sino.slice(ndarray::s![..w, .., ..]),
            &geom,
            &grid,
            &filter,
            case.1,
            o.view_mut(),
        )?;
        let t = std::time::Instant::now();
        be.fbp(sino.view(), &geom, &grid, &filter, case.1, out.view_mut())?;
        done(i, t.elapsed().as_secs_f64(), &be.last_stats());
    }
    Ok(())
}
