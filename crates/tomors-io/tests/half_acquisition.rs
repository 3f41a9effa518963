//! Half acquisition (360° scans with an offset axis) against known answers:
//! exact phantom projections with the axis at a known column; the axis
//! found, the stitched sinogram reconstructed into the wide slice and
//! compared with the phantom and with a full-field scan of the same object;
//! and the 180° centre search over a range wider than its default ±50 px.

use ndarray::{Array2, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::nrmse;
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::half::{find_axis_360, pair_opposite, AxisSearch, Stitch};
use tomors_io::{find_center, CenterOptions};

/// Exact projections of the Shepp–Logan phantom (`scale` pixels per
/// normalised unit) over 360° with `n` angles on `bins` columns, the axis at
/// `axis`.
fn scan_360(n: usize, bins: usize, axis: f32, scale: f64) -> (Array2<f32>, Vec<f32>) {
    let angles = uniform_angles(n, 2.0 * std::f32::consts::PI);
    let g = ParallelGeometry::new(angles.clone(), bins)
        .unwrap()
        .with_center(axis)
        .unwrap();
    (Phantom2d::shepp_logan().project(&g, scale), angles)
}

/// FBP (Ram-Lak, CPU) of one sinogram on its geometry's default grid.
fn fbp(sino: &Array2<f32>, angles: &[f32], center: f32) -> (Array2<f32>, SliceGrid) {
    fbp_on(sino, angles, center, None)
}

/// FBP (Ram-Lak, CPU) of one sinogram on `grid` (default: its geometry's),
/// centred on the axis.
fn fbp_on(
    sino: &Array2<f32>,
    angles: &[f32],
    center: f32,
    grid: Option<SliceGrid>,
) -> (Array2<f32>, SliceGrid) {
    let g = ParallelGeometry::new(angles.to_vec(), sino.ncols())
        .unwrap()
        .with_center(center)
        .unwrap();
    let grid = grid.unwrap_or_else(|| SliceGrid::for_geometry(&g));
    let v = fbp_sinograms(
        &CpuBackend::new(),
        sino.clone().insert_axis(Axis(0)).view(),
        &g,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    (v.index_axis(Axis(0), 0).to_owned(), grid)
}

/// NRMSE of the reconstruction of `sino` (axis `center`) against the
/// phantom inside the disc the stitched field of view covers.
fn error(sino: &Array2<f32>, angles: &[f32], center: f32, scale: f64) -> f64 {
    let (rec, grid) = fbp(sino, angles, center);
    let truth = Phantom2d::shepp_logan().rasterize(&grid, scale, 4);
    let mask = tomors_core::metrics::disc_mask(grid.ny, grid.nx, 0.49);
    nrmse(rec.view(), truth.view(), Some(&mask)).unwrap()
}

/// The case: 512 columns, the axis at column 40. The axis is found
/// within 0.1 px, and the stitched reconstruction's NRMSE is within 25 % of
/// a full-field scan's (a 180° scan over the same angles on a detector as
/// wide as the stitched rows).
#[test]
fn finds_an_axis_at_column_40_of_512_and_reconstructs_the_wide_slice() {
    let (bins, axis, n) = (512usize, 40.0f32, 720usize);
    // The stitched field of view reaches 471 px from the axis.
    let scale = 480.0;
    let (sino, angles) = scan_360(n, bins, axis, scale);
    let found = find_axis_360(sino.view(), &angles, &AxisSearch::default()).unwrap();
    let err_px = (found.axis - f64::from(axis)).abs();
    eprintln!(
        "axis {axis}: found {:.4} (error {err_px:.4} px, quality {:.3})",
        found.axis, found.quality
    );
    assert!(err_px <= 0.1, "axis {axis}, found {}", found.axis);
    assert!(found.quality > 0.2, "quality {}", found.quality);

    let pairs = pair_opposite(&angles).unwrap();
    let top: Vec<f32> = pairs.iter().map(|p| angles[p.index]).collect();
    assert_eq!(top.len(), n / 2);
    let stitch = Stitch::new(found.axis, bins).unwrap();
    assert_eq!(stitch.width(), 943);
    let wide = stitch.stitch(sino.view(), &pairs);
    let half = error(&wide, &top, stitch.center() as f32, scale);

    // The full-field reference: the same object and angles, a detector of
    // the stitched width centred on the axis.
    let exact = Stitch::new(f64::from(axis), bins).unwrap();
    let g = ParallelGeometry::new(top.clone(), exact.width())
        .unwrap()
        .with_center(exact.center() as f32)
        .unwrap();
    let full_sino = Phantom2d::shepp_logan().project(&g, scale);
    let full = error(&full_sino, &top, exact.center() as f32, scale);
    // And what a wrong axis costs: 0.1 px off.
    let off = Stitch::new(f64::from(axis) + 0.1, bins).unwrap();
    let wide_off = off.stitch(sino.view(), &pairs);
    let off_err = error(&wide_off, &top, off.center() as f32, scale);
    eprintln!(
        "NRMSE against the phantom: full field {full:.4}, stitched (axis found) {half:.4} (×{:.3}), \
         stitched with the axis 0.1 px off {off_err:.4} (×{:.3})",
        half / full,
        off_err / full
    );
    // Against the full-field reconstruction itself.
    let (full_rec, grid) = fbp(&full_sino, &top, exact.center() as f32);
    let mask = tomors_core::metrics::disc_mask(grid.ny, grid.nx, 0.49);
    let vs_full = |sino: &Array2<f32>, c: f64| {
        let (r, _) = fbp_on(sino, &top, c as f32, Some(grid));
        nrmse(r.view(), full_rec.view(), Some(&mask)).unwrap()
    };
    eprintln!(
        "NRMSE against the full-field reconstruction: axis found {:.5}, axis 0.1 px off {:.5}",
        vs_full(&wide, stitch.center()),
        vs_full(&wide_off, off.center())
    );
    assert!(half <= 1.25 * full, "stitched {half}, full field {full}");
}

/// The axis on the right side of the detector, at a fractional column, and
/// an odd number of projections (opposites interpolated between angles).
#[test]
fn finds_an_axis_on_the_right_side() {
    let (bins, axis, n) = (256usize, 221.3f32, 361usize);
    let scale = 250.0;
    let (sino, angles) = scan_360(n, bins, axis, scale);
    let found = find_axis_360(sino.view(), &angles, &AxisSearch::default()).unwrap();
    eprintln!("axis {axis}: found {:.4}", found.axis);
    // Linear interpolation of the opposite projections between angles 1°
    // apart blurs them a little: 0.15 px here.
    assert!(
        (found.axis - f64::from(axis)).abs() <= 0.15,
        "axis {axis}, found {}",
        found.axis
    );
    let stitch = Stitch::new(found.axis, bins).unwrap();
    assert!(!stitch.axis_left());
    // Restricting the search to the wrong side finds nothing as good.
    let left = find_axis_360(
        sino.view(),
        &angles,
        &AxisSearch {
            range: Some((0.0, 100.0)),
            ..AxisSearch::default()
        },
    )
    .unwrap();
    let best =
        |r: &tomors_io::half::AxisFound| r.metric.iter().map(|m| m.1).fold(f64::INFINITY, f64::min);
    assert!(
        best(&left) > 10.0 * best(&found),
        "{} vs {}",
        best(&left),
        best(&found)
    );
}

/// With noise (Gaussian, 1 % of the sinogram's maximum) the axis is still
/// found within a quarter pixel.
#[test]
fn finds_the_axis_of_a_noisy_scan() {
    use rand::{Rng, SeedableRng};
    let (bins, axis, n) = (256usize, 30.5f32, 400usize);
    let (mut sino, angles) = scan_360(n, bins, axis, 220.0);
    let peak = sino.iter().fold(0f32, |a, &b| a.max(b));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let normal = rand_distr::Normal::new(0.0f32, 0.01 * peak).unwrap();
    sino.mapv_inplace(|v| v + rng.sample(normal));
    let found = find_axis_360(sino.view(), &angles, &AxisSearch::default()).unwrap();
    eprintln!("noisy, axis {axis}: found {:.4}", found.axis);
    assert!(
        (found.axis - f64::from(axis)).abs() <= 0.25,
        "found {}",
        found.axis
    );
}

/// A 180° scan whose centre lies 68 px left of the middle: the default
/// search (±50 px) cannot reach it, `CenterOptions::for_range` over the
/// whole detector finds it (trial centres whose mirror leaves the object
/// skipped, see `center.rs`).
#[test]
fn centre_search_over_the_whole_detector() {
    let (bins, c) = (256usize, 60.0f32);
    let g = ParallelGeometry::new(uniform_angles(180, std::f32::consts::PI), bins)
        .unwrap()
        .with_center(c)
        .unwrap();
    // Small enough to stay on the detector with the axis off the middle.
    let sino = Phantom2d::shepp_logan().project(&g, 55.0);
    let narrow = find_center(sino.view(), g.angles(), &CenterOptions::default()).unwrap();
    // (A local minimum inside ±50 px, 124.0 with quality 0.16, measured.)
    assert!((narrow.center - c).abs() > 5.0, "{narrow:?}");
    let wide = CenterOptions::for_range(0.0, (bins - 1) as f32, bins).unwrap();
    let r = find_center(sino.view(), g.angles(), &wide).unwrap();
    eprintln!("centre {c}: found {} (quality {:.3})", r.center, r.quality);
    assert!(
        (r.center - c).abs() <= 0.5,
        "centre {c}, found {}",
        r.center
    );
    assert!(CenterOptions::for_range(300.0, 400.0, bins).is_err());
    assert!(CenterOptions::for_range(10.0, 5.0, bins).is_err());
}
