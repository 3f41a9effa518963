//! FBP of exact analytic projections reproduces the phantom.

use ndarray::{s, Array2, Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::filter::{padded_len, RowFilter};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::{Phantom2d, Phantom3d};
use tomors_core::{FilterKind, FilterSpec, Interpolation, Padding, ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

/// FBP of the n² modified Shepp-Logan from `n_angles` exact projections over
/// `range`; returns (reconstruction, rasterised phantom).
fn shepp_logan_fbp(
    n: usize,
    n_angles: usize,
    range: f32,
    options: &FbpOptions,
) -> (Array2<f32>, Array2<f32>) {
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, range), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let phantom = Phantom2d::shepp_logan();
    let scale = n as f64 / 2.0;
    let sino = phantom.project(&geometry, scale).insert_axis(Axis(0));
    let recon = fbp_sinograms(&CpuBackend::new(), sino.view(), &geometry, &grid, options).unwrap();
    let reference = phantom.rasterize(&grid, scale, 8);
    (recon.index_axis_move(Axis(0), 0), reference)
}

fn error_in_disc(recon: &Array2<f32>, reference: &Array2<f32>) -> f64 {
    let (ny, nx) = reference.dim();
    nrmse(
        recon.view(),
        reference.view(),
        Some(&disc_mask(ny, nx, 0.45)),
    )
    .unwrap()
}

fn options(kind: FilterKind, interpolation: Interpolation) -> FbpOptions {
    FbpOptions {
        filter: FilterSpec::new(kind),
        interpolation,
        ..FbpOptions::default()
    }
}

#[test]
fn ram_lak_linear_512_meets_the_reference_library_quality() {
    // ASTRA's FBP_CUDA reaches 0.0159 on this input.
    let (recon, reference) = shepp_logan_fbp(
        512,
        720,
        PI,
        &options(FilterKind::RamLak, Interpolation::Linear),
    );
    let e = error_in_disc(&recon, &reference);
    println!("512², 720 angles, ram-lak linear: NRMSE {e:.5}");
    assert!(e <= 0.016, "NRMSE {e}");
}

#[test]
fn every_filter_and_nearest_interpolation_reconstruct_the_phantom() {
    // Smaller: 256², 400 angles. Windows blur the edges, so their error is
    // higher than Ram-Lak's, but every one must show the phantom.
    let mut errors = Vec::new();
    for kind in FilterKind::ALL {
        for interp in [Interpolation::Linear, Interpolation::Nearest] {
            let (recon, reference) = shepp_logan_fbp(256, 400, PI, &options(kind, interp));
            let e = error_in_disc(&recon, &reference);
            println!("{kind:>12} {interp:>8}: NRMSE {e:.4}");
            errors.push((kind, interp, e));
        }
    }
    for &(kind, interp, e) in &errors {
        let bound = match (kind, interp) {
            (FilterKind::RamLak, Interpolation::Linear) => 0.03,
            (FilterKind::RamLak, Interpolation::Nearest) => 0.04,
            _ => 0.06,
        };
        assert!(e < bound, "{kind} {interp}: NRMSE {e} ≥ {bound}");
    }
    // Nearest interpolation adds no smoothing of its own: with a smooth
    // window it can even score slightly better, but it stays close to linear.
    for pair in errors.chunks(2) {
        assert!((pair[1].2 / pair[0].2 - 1.0).abs() < 0.2, "{:?}", pair);
    }
}

#[test]
fn a_full_turn_reconstructs_like_a_half_turn() {
    let opts = options(FilterKind::RamLak, Interpolation::Linear);
    let (half, reference) = shepp_logan_fbp(128, 200, PI, &opts);
    let (full, _) = shepp_logan_fbp(128, 400, 2.0 * PI, &opts);
    let (e_half, e_full) = (
        error_in_disc(&half, &reference),
        error_in_disc(&full, &reference),
    );
    println!("half turn {e_half:.4}, full turn {e_full:.4}");
    assert!(
        e_full < 0.05 && e_full < e_half * 1.1,
        "half {e_half}, full {e_full}"
    );
}

#[test]
fn per_projection_centres_follow_a_wobbling_axis() {
    // Projections of the phantom about an axis that moves from projection to
    // projection, reconstructed with those centres, equal the still case.
    let n = 128;
    let angles = uniform_angles(200, PI);
    let centres: Vec<f32> = (0..angles.len())
        .map(|i| 63.5 + 2.5 * (i as f32 * 0.21).sin())
        .collect();
    let moving = ParallelGeometry::new(angles.clone(), n)
        .unwrap()
        .with_centers(centres)
        .unwrap();
    let still = ParallelGeometry::new(angles, n).unwrap();
    let phantom = Phantom2d::shepp_logan();
    let grid = SliceGrid::for_geometry(&still);
    let opts = options(FilterKind::RamLak, Interpolation::Linear);
    let rec = |g: &ParallelGeometry| {
        let sino = phantom.project(g, 64.0).insert_axis(Axis(0));
        fbp_sinograms(&CpuBackend::new(), sino.view(), g, &grid, &opts).unwrap()
    };
    let (a, b) = (rec(&moving), rec(&still));
    let reference = phantom.rasterize(&grid, 64.0, 8);
    let ea = error_in_disc(&a.index_axis(Axis(0), 0).to_owned(), &reference);
    let eb = error_in_disc(&b.index_axis(Axis(0), 0).to_owned(), &reference);
    println!("moving axis {ea:.4}, still {eb:.4}");
    assert!(ea < eb * 1.15 && ea < 0.05, "moving {ea}, still {eb}");
}

#[test]
fn stack_fbp_equals_slice_by_slice_fbp() {
    let n = 48;
    let geometry = ParallelGeometry::new(uniform_angles(72, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let projections = Phantom3d::shepp_logan().project(&geometry, 19, 1.0, n as f64 / 2.0);
    let sinos = projections_to_sinograms(projections.view(), 0..19).unwrap();
    for interpolation in [Interpolation::Linear, Interpolation::Nearest] {
        let opts = FbpOptions {
            slab: 8,
            ..options(FilterKind::Hann, interpolation)
        };
        let stack =
            fbp_sinograms(&CpuBackend::new(), sinos.view(), &geometry, &grid, &opts).unwrap();
        for z in 0..19 {
            let one = fbp_sinograms(
                &CpuBackend::new(),
                sinos.slice(s![z..z + 1, .., ..]),
                &geometry,
                &grid,
                &opts,
            )
            .unwrap();
            let a = stack.index_axis(Axis(0), z);
            let b = one.index_axis(Axis(0), 0);
            let num: f64 = a
                .iter()
                .zip(b.iter())
                .map(|(x, y)| ((x - y) as f64).powi(2))
                .sum();
            let den: f64 = b
                .iter()
                .map(|y| (*y as f64).powi(2))
                .sum::<f64>()
                .max(1e-30);
            assert!(
                (num / den).sqrt() < 1e-5,
                "{interpolation} slice {z}: {}",
                (num / den).sqrt()
            );
        }
    }
}

#[test]
fn projections_become_sinograms() {
    let p = Array3::from_shape_fn((4, 3, 5), |(a, r, c)| (a * 100 + r * 10 + c) as f32);
    let s = projections_to_sinograms(p.view(), 1..3).unwrap();
    assert_eq!(s.dim(), (2, 4, 5));
    assert_eq!(s[[1, 3, 4]], 324.0);
    assert!(s.is_standard_layout());
    assert!(projections_to_sinograms(p.view(), 2..4).is_err());
}

#[test]
fn the_ramp_is_a_ramp_and_windows_lower_it() {
    let p = padded_len(300);
    assert!(p >= 600 && p.is_multiple_of(2));
    let ramp = FilterSpec::new(FilterKind::RamLak).frequency_response(p, 1.0);
    // Mid frequencies: |f| / P in cycles per bin, times 1/P of the inverse FFT.
    for f in [p / 8, p / 4, 3 * p / 8] {
        let ideal = f as f32 / p as f32 / p as f32;
        assert!(
            (ramp[f] - ideal).abs() < 0.01 * ideal,
            "f={f}: {} vs {ideal}",
            ramp[f]
        );
    }
    // DC of the band-limited ramp is tiny but not negative.
    assert!(ramp[0] >= 0.0 && ramp[0] < ramp[1]);
    for kind in FilterKind::ALL {
        let r = FilterSpec::new(kind).frequency_response(p, 1.0);
        assert!(r.iter().zip(&ramp).all(|(a, b)| *a <= *b + 1e-12), "{kind}");
        let cut = FilterSpec {
            kind,
            cutoff: 0.5,
            padding: Padding::Zero,
        }
        .frequency_response(p, 1.0);
        assert!(cut[p / 2 - 1] == 0.0 && cut[p / 8] > 0.0, "{kind} cutoff");
    }
    // The bin width scales the response as 1/width.
    let wide = FilterSpec::new(FilterKind::RamLak).frequency_response(p, 2.0);
    assert!((wide[p / 4] * 2.0 - ramp[p / 4]).abs() < 1e-9);
    assert!(FilterSpec {
        cutoff: 0.0,
        ..FilterSpec::default()
    }
    .validate()
    .is_err());
}

#[test]
fn edge_padding_removes_the_truncation_cupping() {
    // A constant row is what a detector narrower than the object sees at its
    // edges: zero padding turns it into a strongly bent row, edge padding
    // keeps it almost flat.
    let n = 64;
    let run = |padding| {
        let f = RowFilter::new(
            &FilterSpec {
                padding,
                ..FilterSpec::default()
            },
            n,
            1.0,
        )
        .unwrap();
        let mut rows = Array2::<f32>::from_elem((1, n), 1.0);
        f.apply(rows.view_mut()).unwrap();
        let row = rows.row(0);
        row.iter().fold(0.0f32, |m, &v| m.max(v.abs()))
    };
    let (zero, edge) = (run(Padding::Zero), run(Padding::Edge));
    println!("max |filtered constant|: zero {zero:.4}, edge {edge:.4}");
    assert!(edge < 0.2 * zero, "zero {zero}, edge {edge}");
}
