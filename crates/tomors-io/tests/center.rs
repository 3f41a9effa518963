//! Rotation-centre finding on a phantom with a known shifted centre and on
//! the tooth scan.

mod common;

use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::Phantom2d;
use tomors_core::ParallelGeometry;
use tomors_io::{find_center, open, CenterOptions, OpenOptions, Preprocess};

fn phantom_centre(n_angles: usize, n_bins: usize, range: f32, center: f32) -> f32 {
    let g = ParallelGeometry::new(uniform_angles(n_angles, range), n_bins)
        .unwrap()
        .with_center(center)
        .unwrap();
    let sino = Phantom2d::shepp_logan().project(&g, n_bins as f64 * 0.35);
    let r = find_center(sino.view(), g.angles(), &CenterOptions::default()).unwrap();
    assert!(r.quality > 0.05, "quality {}", r.quality);
    assert!(!r.at_edge);
    r.center
}

#[test]
fn finds_a_shifted_centre_on_a_phantom() {
    for &(nb, c) in &[
        (256usize, 139.3f32),
        (256, 117.75),
        (200, 99.5),
        (255, 127.0),
    ] {
        let got = phantom_centre(180, nb, std::f32::consts::PI, c);
        assert!(
            (got - c).abs() <= 0.5,
            "bins {nb}: true centre {c}, found {got}"
        );
    }
}

#[test]
fn finds_the_centre_of_a_360_degree_scan() {
    let c = 133.6f32;
    let got = phantom_centre(360, 256, 2.0 * std::f32::consts::PI, c);
    assert!((got - c).abs() <= 0.5, "true centre {c}, found {got}");
}

/// The best centre of the tooth by inspection is 295.5 ± 0.5 (see
/// docs/io.md: reconstructions of row 0 at centres 293…298 side by side;
/// 295 and 296 are the sharpest, 294 and 297 show doubled edges).
#[test]
fn finds_the_centre_of_the_tooth_scan() {
    let src = open(&common::tooth(), &OpenOptions::default()).unwrap();
    let p = src.read_rows(0..2, &Preprocess::default()).unwrap();
    for row in 0..2 {
        let sino = p.index_axis(ndarray::Axis(1), row);
        let r = find_center(sino, src.angles(), &CenterOptions::default()).unwrap();
        assert!(
            (r.center - 295.5).abs() <= 1.5,
            "row {row}: centre {}",
            r.center
        );
        assert!(r.quality > 0.1, "quality {}", r.quality);
    }
}

#[test]
fn finds_the_centre_of_a_noisy_phantom_scan() {
    // 10⁴ photons per bin, line integrals scaled to at most ≈2 (transmission
    // down to ≈13 %): a realistic noise level.
    for &(c, seed) in &[(131.25f32, 1u64), (121.5, 2)] {
        let g = ParallelGeometry::new(uniform_angles(180, std::f32::consts::PI), 256)
            .unwrap()
            .with_center(c)
            .unwrap();
        let scale = 256.0 * 0.35;
        let mut sino = Phantom2d::shepp_logan().project(&g, scale);
        let k = 2.0 / sino.iter().cloned().fold(0.0f32, f32::max) as f64;
        tomors_core::phantom::add_poisson_noise(sino.view_mut(), 1e4, k, seed).unwrap();
        let r = find_center(sino.view(), g.angles(), &CenterOptions::default()).unwrap();
        assert!(
            (r.center - c).abs() <= 0.5,
            "true centre {c}, found {}",
            r.center
        );
    }
}
