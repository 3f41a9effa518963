//! Phantoms: exact projections against brute-force integration, orientation
//! against the geometry convention, 3D/2D consistency, Poisson noise.

use std::f64::consts::PI;

use ndarray::{s, Array1, Array2, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::{add_poisson_noise, Ellipse, Ellipsoid, Phantom2d, Phantom3d};
use tomors_core::{ParallelGeometry, SliceGrid};

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// Brute-force bin average of the line integrals of one ellipse (normalised
/// coordinates, placed with `scale`): `m` rays at the midpoints of `m`
/// sub-strips of the bin, each integrated by `n` midpoint steps of the
/// inside/outside indicator along the ray over the ellipse's bounding
/// circle.
#[allow(clippy::too_many_arguments)]
fn brute_force_bin(
    e: &Ellipse,
    scale: f64,
    theta: f64,
    center: f64,
    bin_width: f64,
    k: usize,
    m: usize,
    n: usize,
) -> f64 {
    let (c, s) = (theta.cos(), theta.sin());
    let (ca, sa) = (e.angle_rad.cos(), e.angle_rad.sin());
    let (cx, cy) = (e.center.0 * scale, e.center.1 * scale);
    let (ia, ib) = (1.0 / (e.axes.0 * scale), 1.0 / (e.axes.1 * scale));
    let rmax = e.axes.0.max(e.axes.1) * scale * 1.001;
    // Ray parameter of the point closest to the ellipse centre.
    let t_mid = -cx * s + cy * c;
    let dt = 2.0 * rmax / n as f64;
    let mut total = 0.0;
    for j in 0..m {
        let u = k as f64 - 0.5 + (j as f64 + 0.5) / m as f64;
        let sd = (u - center) * bin_width;
        let mut inside = 0usize;
        for i in 0..n {
            let t = t_mid - rmax + (i as f64 + 0.5) * dt;
            let (x, y) = (sd * c - t * s - cx, sd * s + t * c - cy);
            let p = (x * ca + y * sa) * ia;
            let q = (-x * sa + y * ca) * ib;
            if p * p + q * q <= 1.0 {
                inside += 1;
            }
        }
        total += inside as f64 * dt;
    }
    e.value * total / m as f64
}

#[test]
fn ellipse_projection_matches_brute_force_integration() {
    let scale = 20.0;
    let ellipses = [
        // A centred circle.
        Ellipse {
            center: (0.0, 0.0),
            axes: (0.5, 0.5),
            angle_rad: 0.0,
            value: 1.0,
        },
        // A rotated, off-centre ellipse.
        Ellipse {
            center: (0.31, -0.22),
            axes: (0.45, 0.2),
            angle_rad: 0.7,
            value: -0.8,
        },
    ];
    let angles = vec![0.0f32, 0.4, 1.3, 2.5, 4.0];
    let geom = ParallelGeometry::new(angles.clone(), 64)
        .unwrap()
        .with_bin_width(0.7)
        .unwrap()
        .with_center(30.3)
        .unwrap();
    for e in &ellipses {
        let analytic = Phantom2d::new(vec![*e]).project(&geom, scale);
        let mut exact = Vec::new();
        let mut brute = Vec::new();
        for (i, &theta) in angles.iter().enumerate() {
            for k in 0..geom.n_bins() {
                exact.push(analytic[(i, k)] as f64);
                brute.push(brute_force_bin(
                    e,
                    scale,
                    theta as f64,
                    30.3,
                    0.7,
                    k,
                    128,
                    20_000,
                ));
            }
        }
        let err = rel_l2(&exact, &brute);
        assert!(err <= 1e-4, "relative L2 error {err:e} for {e:?}");
        // Mass: every projection integrates to value × area.
        let area = PI * e.axes.0 * e.axes.1 * scale * scale * e.value;
        for i in 0..angles.len() {
            let mass = analytic.row(i).iter().map(|&v| v as f64).sum::<f64>() * 0.7;
            assert!(
                (mass - area).abs() <= 1e-5 * area.abs(),
                "mass {mass} vs {area}"
            );
        }
    }
}

#[test]
fn per_projection_centres_shift_each_projection() {
    let phantom = Phantom2d::shepp_logan();
    let angles = uniform_angles(6, std::f32::consts::PI);
    let n = 96;
    let centres: Vec<f32> = (0..6).map(|i| 45.0 + i as f32 * 0.75).collect();
    let per = ParallelGeometry::new(angles.clone(), n)
        .unwrap()
        .with_centers(centres.clone())
        .unwrap();
    let per_sino = per.clone();
    let p = phantom.project(&per_sino, 40.0);
    for (i, &c) in centres.iter().enumerate() {
        let fixed = ParallelGeometry::new(angles.clone(), n)
            .unwrap()
            .with_center(c)
            .unwrap();
        let q = phantom.project(&fixed, 40.0);
        assert_eq!(p.row(i), q.row(i), "projection {i}");
    }
    // Moving the axis by a whole number of bins shifts the row by as much.
    let base = ParallelGeometry::new(angles.clone(), n)
        .unwrap()
        .with_center(45.0)
        .unwrap();
    let moved = ParallelGeometry::new(angles, n)
        .unwrap()
        .with_center(48.0)
        .unwrap();
    let (a, b) = (phantom.project(&base, 40.0), phantom.project(&moved, 40.0));
    let max = a.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
    for i in 0..6 {
        for k in 0..n - 3 {
            assert!(
                (a[(i, k)] - b[(i, k + 3)]).abs() <= 1e-5 * max,
                "angle {i} bin {k}"
            );
        }
    }
    // And the projections are not all the same (the shift is real).
    assert!(p.row(0) != p.row(5));
}

/// Bin values of the rasterised image for the four axis-aligned angles
/// 0, π/2, π, 3π/2 (unit pixels and bins, axis at the centre): θ = 0 rays run
/// along +y so bin k sums column k; θ = π/2 rays run along −x and s = y, so
/// bin k sums row n − 1 − k; θ = π sums column n − 1 − k; θ = 3π/2 row k.
fn aligned_projections(img: &Array2<f32>) -> Array2<f64> {
    let n = img.nrows();
    let img = img.mapv(|v| v as f64);
    let cols: Array1<f64> = img.sum_axis(Axis(0));
    let rows: Array1<f64> = img.sum_axis(Axis(1));
    Array2::from_shape_fn((4, n), |(i, k)| match i {
        0 => cols[k],
        1 => rows[n - 1 - k],
        2 => cols[n - 1 - k],
        _ => rows[k],
    })
}

#[test]
fn rasterised_phantom_projects_like_the_analytic_projection() {
    let n = 128;
    let scale = n as f64 / 2.0;
    let phantom = Phantom2d::shepp_logan();
    let grid = SliceGrid::new(n, n).unwrap();
    let angles: Vec<f32> = (0..4).map(|i| (i as f64 * PI / 2.0) as f32).collect();
    let geom = ParallelGeometry::new(angles, n).unwrap();
    let analytic = phantom.project(&geom, scale).mapv(|v| v as f64);
    let exact: Vec<f64> = analytic.iter().copied().collect();
    let rms = (exact.iter().map(|v| v * v).sum::<f64>() / exact.len() as f64).sqrt();

    let mut errors = Vec::new();
    for s in [2usize, 8] {
        let img = phantom.rasterize(&grid, scale, s);
        let raster = aligned_projections(&img);
        // Error bound per bin: along each of the s sub-columns (sub-rows) of
        // a bin, the midpoint rule on the indicator of an ellipse misplaces
        // each of its two boundary crossings by at most half a sub-step
        // (1/(2s) pixels), so an ellipse of value v contributes at most
        // |v|/s to the error of the bin average. Summing over the ellipses
        // bounds the error of every bin; the relative L2 error is at most
        // that bound divided by the RMS bin value.
        let bound_abs: f64 = phantom.ellipses.iter().map(|e| e.value.abs()).sum::<f64>() / s as f64;
        let max_err = raster
            .iter()
            .zip(&analytic)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        let err = rel_l2(&raster.iter().copied().collect::<Vec<_>>(), &exact);
        assert!(
            max_err <= bound_abs,
            "s = {s}: max error {max_err} > {bound_abs}"
        );
        assert!(
            err <= bound_abs / rms,
            "s = {s}: rel L2 {err:e} > {:e}",
            bound_abs / rms
        );
        errors.push(err);
        if s == 8 {
            // A mirrored image (wrong orientation) is far off.
            let flipped = aligned_projections(&img.slice(s![..;-1, ..]).to_owned());
            let wrong = rel_l2(&flipped.iter().copied().collect::<Vec<_>>(), &exact);
            assert!(
                wrong > 20.0 * err,
                "flip not detected: {wrong:e} vs {err:e}"
            );
            let mirrored = aligned_projections(&img.slice(s![.., ..;-1]).to_owned());
            let wrong = rel_l2(&mirrored.iter().copied().collect::<Vec<_>>(), &exact);
            assert!(
                wrong > 20.0 * err,
                "mirror not detected: {wrong:e} vs {err:e}"
            );
        }
    }
    // Finer supersampling converges.
    assert!(errors[1] < 0.5 * errors[0], "{errors:?}");
}

#[test]
fn a_small_disc_projects_at_center_plus_x_cos_plus_y_sin() {
    // World units = normalised units (scale 1); bins of width 0.5.
    let (x0, y0, r) = (13.5, -7.25, 1.5);
    let disc = Phantom2d::new(vec![Ellipse {
        center: (x0, y0),
        axes: (r, r),
        angle_rad: 0.0,
        value: 1.0,
    }]);
    let angles = uniform_angles(16, 2.0 * std::f32::consts::PI);
    let (n, center, bw) = (160usize, 81.3f64, 0.5f64);
    let geom = ParallelGeometry::new(angles.clone(), n)
        .unwrap()
        .with_bin_width(bw as f32)
        .unwrap()
        .with_center(center as f32)
        .unwrap();
    let p = disc.project(&geom, 1.0);
    for (i, &a) in angles.iter().enumerate() {
        let a = a as f64;
        let u = center + (x0 * a.cos() + y0 * a.sin()) / bw;
        let row = p.row(i);
        let total: f64 = row.iter().map(|&v| v as f64).sum();
        let centroid: f64 = row
            .iter()
            .enumerate()
            .map(|(k, &v)| k as f64 * v as f64)
            .sum::<f64>()
            / total;
        assert!(
            (centroid - u).abs() < 0.02,
            "angle {a}: centroid {centroid} vs {u}"
        );
        let peak = row
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (k, &v)| if v > b.1 { (k, v) } else { b })
            .0;
        assert!(
            (peak as f64 - u).abs() <= 1.0,
            "angle {a}: peak {peak} vs {u}"
        );
    }
}

#[test]
fn shepp_logan_is_drawn_the_usual_way_up() {
    let phantom = Phantom2d::shepp_logan();
    let n = 128;
    let grid = SliceGrid::new(n, n).unwrap();
    let img = phantom.rasterize(&grid, n as f64 / 2.0, 4);
    // Normalised (x, y) → pixel (row, column), y up.
    let pix = |x: f64, y: f64| {
        let col = (x * 64.0 + 63.5).round() as usize;
        let row = (63.5 - y * 64.0).round() as usize;
        img[(row, col)]
    };
    // The three small ellipses sit at the bottom (rows > n/2).
    assert!((pix(-0.08, -0.605) - 0.3).abs() < 1e-6);
    assert!((pix(0.0, -0.606) - 0.3).abs() < 1e-6);
    assert!((pix(0.06, -0.605) - 0.3).abs() < 1e-6);
    assert!((pix(0.0, 0.7) - 0.2).abs() < 1e-6);
    // The ellipse at y = 0.35 is at the top.
    assert!((pix(0.0, 0.35) - 0.3).abs() < 1e-6);
    // The dark ellipses tilt outwards at the top ("\ /"): the right one
    // (x0 = 0.22, −18°) reaches up and to the right, not up and to the left.
    let (dx, dy) = (
        0.25 * 18f64.to_radians().sin(),
        0.25 * 18f64.to_radians().cos(),
    );
    assert!(pix(0.22 + dx, dy).abs() < 1e-6);
    assert!(pix(0.22 - dx, -dy).abs() < 1e-6);
    assert!((pix(0.22 + dx, -dy) - 0.2).abs() < 1e-6);
    assert!(pix(-0.22 - dx, dy).abs() < 1e-6);
    assert!(pix(-0.22 + dx, -dy).abs() < 1e-6);
    assert!((pix(-0.22 - dx, -dy) - 0.2).abs() < 1e-6);
    // The left dark ellipse is the larger one.
    let (dx, dy) = (
        0.38 * 18f64.to_radians().sin(),
        0.38 * 18f64.to_radians().cos(),
    );
    assert!(pix(-0.22 - dx, dy).abs() < 1e-6);
    assert!((pix(0.22 + dx, dy) - 0.2).abs() < 1e-6);
    // Values of the modified phantom lie in [0, 1] (up to rounding).
    assert!(img.iter().all(|&v| (-1e-6..=1.0 + 1e-6).contains(&v)));
    assert_eq!(img[(0, 0)], 0.0);
}

/// Brute-force pixel average of one ellipsoid's line integrals: `m × m`
/// rays at the midpoints of sub-pixels, each line integral taken from the
/// ray/ellipsoid intersection (a quadratic equation in the ray parameter).
#[allow(clippy::too_many_arguments)]
fn brute_force_pixel(
    e: &Ellipsoid,
    scale: f64,
    theta: f64,
    center: f64,
    bw: f64,
    n_rows: usize,
    h: f64,
    row: usize,
    k: usize,
    m: usize,
) -> f64 {
    let (c, s) = (theta.cos(), theta.sin());
    let (ca, sa) = (e.angle_rad.cos(), e.angle_rad.sin());
    let ax = [e.axes[0] * scale, e.axes[1] * scale, e.axes[2] * scale];
    let cen = [
        e.center[0] * scale,
        e.center[1] * scale,
        e.center[2] * scale,
    ];
    // Ray direction in the ellipsoid frame.
    let (dx, dy) = (-s, c);
    let (du, dv) = ((dx * ca + dy * sa) / ax[0], (-dx * sa + dy * ca) / ax[1]);
    let mut total = 0.0;
    for j in 0..m {
        let z = (row as f64 - (n_rows as f64 - 1.0) / 2.0 - 0.5 + (j as f64 + 0.5) / m as f64) * h;
        for i in 0..m {
            let u = k as f64 - 0.5 + (i as f64 + 0.5) / m as f64;
            let sd = (u - center) * bw;
            let (px, py, pz) = (sd * c - cen[0], sd * s - cen[1], z - cen[2]);
            let (pu, pv, pw) = (
                (px * ca + py * sa) / ax[0],
                (-px * sa + py * ca) / ax[1],
                pz / ax[2],
            );
            // |p + t d|² = 1 in the unit-ball frame (d has no z part).
            let qa = du * du + dv * dv;
            let qb = 2.0 * (pu * du + pv * dv);
            let qc = pu * pu + pv * pv + pw * pw - 1.0;
            let disc = qb * qb - 4.0 * qa * qc;
            if disc > 0.0 {
                total += disc.sqrt() / qa; // chord length (|d| = 1 in the world)
            }
        }
    }
    e.value * total / (m * m) as f64
}

#[test]
fn ellipsoid_projection_matches_brute_force_integration() {
    let e = Ellipsoid {
        center: [0.2, -0.15, 0.25],
        axes: [0.5, 0.3, 0.6],
        angle_rad: -0.6,
        value: 0.7,
    };
    let (scale, n, bw, n_rows, h) = (12.0, 40usize, 0.8, 30usize, 0.9);
    let angles = vec![0.3f32, 1.9, 3.7];
    // One axis position per projection.
    let centres = [18.7f32, 19.4, 17.9];
    let geom = ParallelGeometry::new(angles.clone(), n)
        .unwrap()
        .with_bin_width(bw as f32)
        .unwrap()
        .with_centers(centres.to_vec())
        .unwrap();
    let proj = Phantom3d::new(vec![e]).project(&geom, n_rows, h, scale);
    let mut exact = Vec::new();
    let mut brute = Vec::new();
    for (i, &a) in angles.iter().enumerate() {
        for row in 0..n_rows {
            for k in 0..n {
                exact.push(proj[(i, row, k)] as f64);
                brute.push(brute_force_pixel(
                    &e,
                    scale,
                    a as f64,
                    centres[i] as f64,
                    bw,
                    n_rows,
                    h,
                    row,
                    k,
                    48,
                ));
            }
        }
    }
    let err = rel_l2(&exact, &brute);
    assert!(err <= 1e-4, "relative L2 error {err:e}");
    // Mass: value × volume per projection.
    let volume = 4.0 / 3.0 * PI * e.axes.iter().product::<f64>() * scale.powi(3) * e.value;
    for i in 0..angles.len() {
        let mass = proj
            .index_axis(Axis(0), i)
            .iter()
            .map(|&v| v as f64)
            .sum::<f64>()
            * bw
            * h;
        assert!(
            (mass - volume).abs() <= 1e-5 * volume,
            "mass {mass} vs {volume}"
        );
    }
}

#[test]
fn thin_central_row_of_3d_projection_is_the_2d_projection_of_the_cut() {
    let phantom = Phantom3d::shepp_logan();
    let n = 96;
    let scale = n as f64 / 2.0;
    let geom = ParallelGeometry::new(uniform_angles(7, std::f32::consts::PI), n)
        .unwrap()
        .with_center(47.2)
        .unwrap();
    let p3 = phantom.project(&geom, 1, 1e-3, scale);
    let p2 = phantom.cross_section(0.0).project(&geom, scale);
    let a: Vec<f64> = p3.iter().map(|&v| v as f64).collect();
    let b: Vec<f64> = p2.iter().map(|&v| v as f64).collect();
    let err = rel_l2(&a, &b);
    // Averaging over ±0.5e-3 world units changes the cut by O((h/c)²) ≈ 1e-6
    // for the thinnest ellipsoid (c = 0.02·48 ≈ 1); f32 rounding is 6e-8.
    assert!(err <= 2e-6, "relative L2 {err:e}");
    // The central cut of the 3D phantom is the 2D phantom.
    let p2d = Phantom2d::shepp_logan().project(&geom, scale);
    assert_eq!(p2, p2d);
    // A thin row at another height is the projection of that cut.
    let rows = 201;
    let p3 = phantom.project(&geom, rows, 0.05, scale);
    let z = (150.0 - 100.0) * 0.05; // world z of row 150
    let cut = phantom.cross_section(z / scale).project(&geom, scale);
    let a: Vec<f64> = p3
        .index_axis(Axis(1), 150)
        .iter()
        .map(|&v| v as f64)
        .collect();
    let b: Vec<f64> = cut.iter().map(|&v| v as f64).collect();
    assert!(rel_l2(&a, &b) <= 1e-4, "{:e}", rel_l2(&a, &b));
}

#[test]
fn rasterised_3d_slices_are_2d_rasterisations_of_the_cuts() {
    let phantom = Phantom3d::shepp_logan();
    let (n, nz) = (64usize, 33usize);
    let scale = 32.0;
    let grid = SliceGrid::new(n, n).unwrap();
    let vol = phantom.rasterize(&grid, nz, scale, 1);
    // Slice 16 is at z = 0: the 2D Shepp–Logan phantom exactly.
    let mid = vol.index_axis(Axis(0), 16);
    assert_eq!(mid, phantom.cross_section(0.0).rasterize(&grid, scale, 1));
    assert_eq!(mid, Phantom2d::shepp_logan().rasterize(&grid, scale, 1));
    // Slice 24 is at world z = 8 (y up, z up: the phantom's upper part).
    let cut = phantom
        .cross_section(8.0 / scale)
        .rasterize(&grid, scale, 1);
    assert_eq!(vol.index_axis(Axis(0), 24), cut);
    assert!(vol.index_axis(Axis(0), 24) != mid);
    // Supersampled: the mean of the 2D rasterisations at the sub-slices.
    let s = 3;
    let vol = phantom.rasterize(&grid, nz, scale, s);
    let mut mean = Array2::<f64>::zeros((n, n));
    for r in 0..s {
        let z = 8.0 + (r as f64 + 0.5) / s as f64 - 0.5;
        mean += &phantom
            .cross_section(z / scale)
            .rasterize(&grid, scale, s)
            .mapv(|v| v as f64);
    }
    mean /= s as f64;
    let diff = vol
        .index_axis(Axis(0), 24)
        .iter()
        .zip(mean.iter())
        .fold(0.0f64, |m, (&a, &b)| m.max((a as f64 - b).abs()));
    assert!(diff < 1e-6, "max difference {diff}");
}

#[test]
fn poisson_noise_has_the_right_mean_and_variance() {
    let (i0, p, scale) = (1000.0f64, 1.0f32, 1.0f64);
    let mut sino = Array2::<f32>::from_elem((400, 500), p);
    add_poisson_noise(sino.view_mut(), i0, scale, 7).unwrap();
    let lambda = i0 * (-(p as f64) * scale).exp();
    let counts: Vec<f64> = sino
        .iter()
        .map(|&v| i0 * (-(v as f64) * scale).exp())
        .collect();
    // The counts are integers (up to f32 rounding of the log).
    assert!(counts.iter().all(|c| (c - c.round()).abs() < 1e-3));
    let n = counts.len() as f64;
    let mean = counts.iter().sum::<f64>() / n;
    let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0);
    // 5 standard errors: sqrt(λ/N) for the mean, λ·sqrt(2/N) for the variance.
    assert!(
        (mean - lambda).abs() < 5.0 * (lambda / n).sqrt(),
        "mean {mean} vs {lambda}"
    );
    assert!(
        (var - lambda).abs() < 5.0 * lambda * (2.0 / n).sqrt(),
        "variance {var} vs {lambda}"
    );
}

#[test]
fn poisson_noise_is_deterministic_per_seed() {
    let base = Array2::<f32>::from_shape_fn((300, 257), |(i, j)| 0.01 * ((i + 2 * j) % 300) as f32);
    let noisy = |seed: u64| {
        let mut a = base.clone();
        add_poisson_noise(a.view_mut(), 5e3, 0.5, seed).unwrap();
        a
    };
    let a = noisy(42);
    assert_eq!(a, noisy(42));
    assert!(a != noisy(43));
    assert!(a != base);
    // The same on one thread (chunk seeds do not depend on scheduling).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    assert_eq!(a, pool.install(|| noisy(42)));
    // A strided view gets the same noise as a contiguous copy of it.
    let mut strided = base.clone();
    add_poisson_noise(strided.slice_mut(s![.., ..;2]), 5e3, 0.5, 9).unwrap();
    let mut copy = base.slice(s![.., ..;2]).to_owned();
    add_poisson_noise(copy.view_mut(), 5e3, 0.5, 9).unwrap();
    assert_eq!(strided.slice(s![.., ..;2]), copy);
    assert_eq!(strided.slice(s![.., 1..;2]), base.slice(s![.., 1..;2]));
}

#[test]
fn poisson_noise_edge_cases() {
    // Total absorption: zero counts become ½ photon.
    let mut a = Array1::<f32>::from_elem(10, 1000.0);
    add_poisson_noise(a.view_mut(), 100.0, 1.0, 1).unwrap();
    assert!(a.iter().all(|&v| (v as f64 - (200.0f64).ln()).abs() < 1e-5));
    // Bad parameters and data are errors, and leave the data alone.
    let mut b = Array1::<f32>::from_elem(4, 0.5);
    assert!(add_poisson_noise(b.view_mut(), 0.0, 1.0, 1).is_err());
    assert!(add_poisson_noise(b.view_mut(), 100.0, -1.0, 1).is_err());
    b[2] = f32::NAN;
    assert!(add_poisson_noise(b.view_mut(), 100.0, 1.0, 1).is_err());
    assert_eq!(b[0], 0.5);
    let mut c = Array1::<f32>::from_elem(4, -1e6);
    assert!(add_poisson_noise(c.view_mut(), 100.0, 1.0, 1).is_err());
}
