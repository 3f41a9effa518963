//! Image-quality metrics: known values, masks, shapes and errors.

use ndarray::{s, Array2};
use tomors_core::metrics::{disc_mask, line_profile, nrmse, psnr, ssim};
use tomors_core::CoreError;

/// A deterministic image with structure: a ramp plus a smooth pattern.
fn pattern(ny: usize, nx: usize) -> Array2<f32> {
    Array2::from_shape_fn((ny, nx), |(y, x)| {
        (x as f32 * 0.5 + y as f32 * 0.25)
            + 10.0 * ((x as f32 * 0.3).sin() * (y as f32 * 0.2).cos())
    })
}

/// Deterministic pseudo-random noise in [−1, 1] (an LCG; no rand needed).
fn noise(ny: usize, nx: usize, seed: u64) -> Array2<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    Array2::from_shape_simple_fn((ny, nx), || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
    })
}

#[test]
fn nrmse_and_psnr_of_known_offsets() {
    // Integer values 0..=99 and an offset of 0.5 are exact in f32.
    let reference = Array2::from_shape_fn((10, 10), |(y, x)| (10 * y + x) as f32);
    let recon = reference.mapv(|v| v + 0.5);
    assert_eq!(
        nrmse(reference.view(), reference.view(), None).unwrap(),
        0.0
    );
    let e = nrmse(recon.view(), reference.view(), None).unwrap();
    assert!((e - 0.5 / 99.0).abs() < 1e-15, "{e}");
    let p = psnr(recon.view(), reference.view(), None).unwrap();
    assert!((p - 20.0 * (99.0f64 / 0.5).log10()).abs() < 1e-12, "{p}");
    assert_eq!(
        psnr(reference.view(), reference.view(), None).unwrap(),
        f64::INFINITY
    );
    // RMS of a ±1 error pattern is 1.
    let alt = Array2::from_shape_fn((10, 10), |(y, x)| {
        reference[(y, x)] + if (x + y) % 2 == 0 { 1.0 } else { -1.0 }
    });
    assert!((nrmse(alt.view(), reference.view(), None).unwrap() - 1.0 / 99.0).abs() < 1e-15);
}

#[test]
fn masks_restrict_error_and_range() {
    let reference = Array2::from_shape_fn((10, 10), |(y, x)| (10 * y + x) as f32);
    let mut recon = reference.mapv(|v| v + 2.0);
    let mut mask = Array2::from_elem((10, 10), false);
    mask.slice_mut(s![2..5, 3..7]).fill(true);
    // Outside the mask the reconstruction is wildly wrong: it must not count.
    recon.slice_mut(s![6.., ..]).fill(1e6);
    // Masked reference values: rows 2..5, columns 3..7 → 23..=46, range 23.
    let e = nrmse(recon.view(), reference.view(), Some(&mask)).unwrap();
    assert!((e - 2.0 / 23.0).abs() < 1e-15, "{e}");
    let p = psnr(recon.view(), reference.view(), Some(&mask)).unwrap();
    assert!((p - 20.0 * (23.0f64 / 2.0).log10()).abs() < 1e-12);
    let empty = Array2::from_elem((10, 10), false);
    assert!(matches!(
        nrmse(recon.view(), reference.view(), Some(&empty)),
        Err(CoreError::Data(_))
    ));
    let wrong = Array2::from_elem((10, 9), true);
    assert!(matches!(
        nrmse(recon.view(), reference.view(), Some(&wrong)),
        Err(CoreError::Shape(_))
    ));
}

#[test]
fn shape_and_data_errors_do_not_panic() {
    let a = Array2::<f32>::zeros((8, 8));
    let b = Array2::<f32>::zeros((8, 9));
    let e = Array2::<f32>::zeros((0, 0));
    assert!(matches!(
        nrmse(a.view(), b.view(), None),
        Err(CoreError::Shape(_))
    ));
    assert!(matches!(
        psnr(a.view(), b.view(), None),
        Err(CoreError::Shape(_))
    ));
    assert!(matches!(ssim(a.view(), b.view()), Err(CoreError::Shape(_))));
    assert!(matches!(
        nrmse(e.view(), e.view(), None),
        Err(CoreError::Shape(_))
    ));
    assert!(matches!(ssim(e.view(), e.view()), Err(CoreError::Shape(_))));
    // A constant reference has no range to normalise by.
    assert!(matches!(
        nrmse(a.view(), a.view(), None),
        Err(CoreError::Data(_))
    ));
    // SSIM needs one full 11 × 11 window.
    let small = pattern(10, 40);
    assert!(matches!(
        ssim(small.view(), small.view()),
        Err(CoreError::Shape(_))
    ));
    let flat = Array2::<f32>::ones((20, 20));
    assert!(matches!(
        ssim(flat.view(), flat.view()),
        Err(CoreError::Data(_))
    ));
    assert!(line_profile(e.view(), (0.0, 0.0), (1.0, 1.0), 3).is_err());
    assert!(line_profile(a.view(), (0.0, 0.0), (1.0, 1.0), 0).is_err());
    assert!(line_profile(a.view(), (f64::NAN, 0.0), (1.0, 1.0), 4).is_err());
}

#[test]
fn ssim_is_one_for_identical_images_and_drops_with_noise() {
    let reference = pattern(64, 80);
    let same = ssim(reference.view(), reference.view()).unwrap();
    assert!((same - 1.0).abs() < 1e-12, "{same}");
    let n = noise(64, 80, 3);
    let mut last = 1.0;
    for amp in [0.5f32, 2.0, 8.0] {
        let noisy = &reference + &n.mapv(|v| v * amp);
        let v = ssim(noisy.view(), reference.view()).unwrap();
        assert!(
            v < last,
            "SSIM {v} did not drop below {last} at noise {amp}"
        );
        last = v;
    }
    assert!(last < 0.6, "{last}");
}

#[test]
fn ssim_of_one_window_matches_the_formula() {
    // An 11 × 11 image has exactly one window: compute it directly.
    let x = pattern(11, 11);
    let y = &x * 0.8 + &noise(11, 11, 5).mapv(|v| v * 2.0) + 1.5;
    let w1: Vec<f64> = (0..11)
        .map(|i| (-((i as f64 - 5.0).powi(2)) / 4.5).exp())
        .collect();
    let total: f64 = w1.iter().sum::<f64>().powi(2);
    let (mut mx, mut my, mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in 0..11 {
        for j in 0..11 {
            let w = w1[i] * w1[j] / total;
            let (a, b) = (x[(i, j)] as f64, y[(i, j)] as f64);
            mx += w * a;
            my += w * b;
            sxx += w * a * a;
            syy += w * b * b;
            sxy += w * a * b;
        }
    }
    let (vx, vy, cxy) = (sxx - mx * mx, syy - my * my, sxy - mx * my);
    // The reference is `y`; its range sets C1, C2.
    let (lo, hi) = y.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| {
        (l.min(v as f64), h.max(v as f64))
    });
    let (c1, c2) = ((0.01 * (hi - lo)).powi(2), (0.03 * (hi - lo)).powi(2));
    let expected =
        ((2.0 * mx * my + c1) * (2.0 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
    let got = ssim(x.view(), y.view()).unwrap();
    assert!((got - expected).abs() < 1e-10, "{got} vs {expected}");
    assert!(got < 0.99);
}

#[test]
fn disc_mask_counts_pi_r_squared() {
    for &(ny, nx, f) in &[
        (200usize, 200usize, 0.4f64),
        (101, 160, 0.5),
        (64, 64, 0.25),
    ] {
        let m = disc_mask(ny, nx, f);
        assert_eq!(m.dim(), (ny, nx));
        let count = m.iter().filter(|&&b| b).count() as f64;
        let r = f * nx.min(ny) as f64;
        // Unit squares around the counted centres cover the disc of radius
        // r − √½ and lie inside the disc of radius r + √½.
        let h = 0.5f64.sqrt();
        let (lo, hi) = (
            std::f64::consts::PI * (r - h).powi(2),
            std::f64::consts::PI * (r + h).powi(2),
        );
        assert!(lo <= count && count <= hi, "{count} not in [{lo}, {hi}]");
        // Symmetric about the centre.
        let flipped = m.slice(s![..;-1, ..;-1]);
        assert_eq!(m.view(), flipped);
    }
    let m = disc_mask(9, 9, 0.5);
    assert!(m[(4, 4)] && m[(0, 4)] && m[(4, 8)] && !m[(0, 0)]);
    assert_eq!(disc_mask(0, 5, 0.5).len(), 0);
}

#[test]
fn line_profile_of_a_linear_ramp_is_exact() {
    // f(x, y) = 2x + 3y + 1 with x = column, y = row.
    let img = Array2::from_shape_fn((12, 16), |(y, x)| (2 * x + 3 * y + 1) as f32);
    let (from, to) = ((1.25, 2.5), (7.75, 5.0));
    let p = line_profile(img.view(), from, to, 11).unwrap();
    assert_eq!(p.len(), 11);
    for (i, &v) in p.iter().enumerate() {
        let t = i as f64 / 10.0;
        let (x, y) = (from.0 + t * (to.0 - from.0), from.1 + t * (to.1 - from.1));
        let expected = 2.0 * x + 3.0 * y + 1.0;
        assert!(
            (v as f64 - expected).abs() < 1e-5,
            "sample {i}: {v} vs {expected}"
        );
    }
    // Along the last row and column, end points included.
    let p = line_profile(img.view(), (0.0, 11.0), (15.0, 11.0), 16).unwrap();
    for (x, &v) in p.iter().enumerate() {
        assert_eq!(v, img[(11, x)]);
    }
    let p = line_profile(img.view(), (15.0, 0.0), (15.0, 11.0), 12).unwrap();
    for (y, &v) in p.iter().enumerate() {
        assert_eq!(v, img[(y, 15)]);
    }
    // One sample: the start point. Far outside: zero.
    assert_eq!(
        line_profile(img.view(), (3.0, 4.0), (9.0, 9.0), 1).unwrap(),
        vec![img[(4, 3)]]
    );
    assert_eq!(
        line_profile(img.view(), (-50.0, 1e300), (-40.0, 3.0), 2).unwrap(),
        vec![0.0, 0.0]
    );
}
