//! Measures cone-beam FDK on the 3D Shepp–Logan phantom against parallel-beam
//! FBP of the same phantom, and writes the figures of `docs/cone.md`.
//!
//! ```sh
//! cargo run --release -p tomors-cli --example cone_measure -- [N] [ANGLES] [OUT_DIR]
//! ```
//!
//! Defaults: N = 256 (volume N³ of unit voxels), 360 projections over 2π, a
//! (1.125·N)² detector of 2-unit pixels at magnification 2 (SOD = ODD =
//! 6.25·N), full cone angle ≈ 10.3°, figures into `docs/img`.

#[path = "../src/plot.rs"]
#[allow(dead_code, clippy::neg_cmp_op_on_partial_ord)]
mod plot;

use std::f64::consts::PI;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use ndarray::{s, Array2, Array3, Axis};
use plotters::style::RGBColor;
use tomors_core::cone::{
    backproject_cone, backproject_cone_with, fdk_filter, project_cone, uniform_angles_inclusive,
    ConeGeometry, ConeVolume, FdkOptions, ScanMode, DEFAULT_SUBPIXELS,
};
use tomors_core::cpu::{CpuBackend, SimdChoice};
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::Phantom3d;
use tomors_core::{ParallelGeometry, SliceGrid};

/// Per-slice RMS error inside `mask`, divided by `range` (the central
/// slice's reference range, so that the value of the central slice is its
/// NRMSE and slices where the phantom is empty stay defined).
fn per_slice_error(
    rec: &Array3<f32>,
    reference: &Array3<f32>,
    mask: &Array2<bool>,
    range: f64,
) -> Vec<f64> {
    rec.outer_iter()
        .zip(reference.outer_iter())
        .map(|(r, f)| {
            let (mut sum, mut count) = (0.0f64, 0usize);
            for ((&a, &b), &m) in r.iter().zip(f.iter()).zip(mask.iter()) {
                if m {
                    sum += (a as f64 - b as f64).powi(2);
                    count += 1;
                }
            }
            (sum / count as f64).sqrt() / range
        })
        .collect()
}

fn fdk_timed(
    proj: &Array3<f32>,
    g: &ConeGeometry,
    vol: &ConeVolume,
    scan: ScanMode,
) -> Result<(Array3<f32>, f64, f64)> {
    let backend = CpuBackend::new();
    let options = FdkOptions {
        scan,
        ..FdkOptions::default()
    };
    let t = Instant::now();
    let q = fdk_filter(&backend, proj.view(), g, &options)?;
    let t_filter = t.elapsed().as_secs_f64();
    let mut out = Array3::<f32>::zeros((vol.nz, vol.ny, vol.nx));
    let t = Instant::now();
    backproject_cone(q.view(), g, vol, 0..vol.nz, out.view_mut())?;
    Ok((out, t_filter, t.elapsed().as_secs_f64()))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(256);
    let n_angles: usize = args.get(2).map(|a| a.parse()).transpose()?.unwrap_or(360);
    let out_dir = PathBuf::from(args.get(3).cloned().unwrap_or_else(|| "docs/img".into()));
    std::fs::create_dir_all(&out_dir)?;
    let det = n + n / 8;
    let sod = 6.25 * n as f64;
    let phantom = Phantom3d::shepp_logan();
    let scale = n as f64 / 2.0;
    let vol = ConeVolume::new(n, n, n, 1.0)?;
    let geometry = |angles: Vec<f32>| ConeGeometry::new(angles, sod, sod, det, det, 2.0, 2.0);
    let full = geometry(uniform_angles(n_angles, 2.0 * PI as f32))?;
    full.check_volume(&vol)?;
    println!(
        "volume {n}³, {n_angles} projections over 360°, detector {det}², SOD = ODD = {sod}, \
         cone angle {:.2}°, fan angle {:.2}°, {} threads",
        full.cone_angle().to_degrees(),
        2.0 * full.half_fan_angle().to_degrees(),
        rayon::current_num_threads()
    );

    if args.get(4).is_some_and(|a| a == "speed") {
        return speed(&full, &vol);
    }
    let t = Instant::now();
    let proj = project_cone(&phantom, &full, scale, DEFAULT_SUBPIXELS)?;
    println!(
        "exact cone-beam projections: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let (rec, t_filter, t_bp) = fdk_timed(&proj, &full, &vol, ScanMode::Full)?;
    let gus = (vol.len() * n_angles) as f64 / t_bp / 1e9;
    println!(
        "FDK: weighting + filtering {t_filter:.2} s, back projection {t_bp:.2} s = {gus:.3} GU/s"
    );
    drop(proj);

    // Portable build of the z loop, for comparison.
    let small = ConeVolume::new(n, n, n / 4, 1.0)?;
    let q = fdk_filter(
        &CpuBackend::new(),
        project_cone(&phantom, &full, scale, 1)?.view(),
        &full,
        &FdkOptions::default(),
    )?;
    let mut tmp = Array3::<f32>::zeros((small.nz, n, n));
    let t = Instant::now();
    backproject_cone_with(
        q.view(),
        &full,
        &vol,
        0..n / 4,
        tmp.view_mut(),
        SimdChoice::Portable,
    )?;
    let gus_portable = (small.len() * n_angles) as f64 / t.elapsed().as_secs_f64() / 1e9;
    let t = Instant::now();
    backproject_cone(q.view(), &full, &vol, 0..n / 4, tmp.view_mut())?;
    let gus_quarter = (small.len() * n_angles) as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!(
        "back projection of {} slices: {gus_quarter:.3} GU/s (AVX2 build where available), \
         {gus_portable:.3} GU/s (portable build)",
        n / 4
    );
    drop(q);
    drop(tmp);

    // Parallel-beam FBP of the same phantom: n_angles exact projections over π.
    let pg = ParallelGeometry::new(uniform_angles(n_angles, PI as f32), n)?;
    let t = Instant::now();
    let pproj = phantom.project(&pg, n, 1.0, scale);
    let sino = projections_to_sinograms(pproj.view(), 0..n)?;
    drop(pproj);
    let grid = SliceGrid::new(n, n)?;
    let fbp = fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &pg,
        &grid,
        &FbpOptions::default(),
    )?;
    drop(sino);
    println!(
        "parallel FBP (projections + reconstruction): {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let reference = phantom.rasterize(&grid, n, scale, 3);
    println!("rasterised phantom: {:.2} s", t.elapsed().as_secs_f64());
    let mask = disc_mask(n, n, 0.45);
    let k = n / 2;
    let central = reference.index_axis(Axis(0), k);
    let (lo, hi) = central
        .iter()
        .zip(mask.iter())
        .filter(|(_, &m)| m)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (&v, _)| {
            (l.min(v as f64), h.max(v as f64))
        });
    let value_range = hi - lo;
    let e_fdk = per_slice_error(&rec, &reference, &mask, value_range);
    let e_fbp = per_slice_error(&fbp, &reference, &mask, value_range);
    let check = nrmse(rec.index_axis(Axis(0), k), central, Some(&mask))?;
    assert!((check - e_fdk[k]).abs() < 1e-9, "{check} vs {}", e_fdk[k]);
    println!(
        "central slice {k}: NRMSE FDK {:.5}, parallel FBP {:.5} (FDK/FBP = {:.3})",
        e_fdk[k],
        e_fbp[k],
        e_fdk[k] / e_fbp[k]
    );

    // Short scan, same angular step.
    let range = full.short_scan_range();
    let n_short = (range / (2.0 * PI / n_angles as f64)).ceil() as usize + 1;
    let short = geometry(uniform_angles_inclusive(n_short, range))?;
    let proj_s = project_cone(&phantom, &short, scale, DEFAULT_SUBPIXELS)?;
    let (rec_s, _, _) = fdk_timed(&proj_s, &short, &vol, ScanMode::Short)?;
    drop(proj_s);
    let e_short = per_slice_error(&rec_s, &reference, &mask, value_range);
    println!(
        "short scan: {n_short} projections over {:.2}°, central-slice NRMSE {:.5} ({:.3}× full scan)",
        range.to_degrees(),
        e_short[k],
        e_short[k] / e_fdk[k]
    );

    println!("\n| slice | z | FDK full | FDK short | parallel FBP | FDK − FBP |");
    println!("|---|---|---|---|---|---|");
    for kk in (0..n).step_by(n / 16).chain([n / 2, n - 1]) {
        let z = kk as f64 - (n as f64 - 1.0) / 2.0;
        println!(
            "| {kk} | {z:+.1} | {:.5} | {:.5} | {:.5} | {:+.5} |",
            e_fdk[kk],
            e_short[kk],
            e_fbp[kk],
            e_fdk[kk] - e_fbp[kk]
        );
    }

    // Figures.
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (a, b, c) = (f32s(&e_fdk), f32s(&e_short), f32s(&e_fbp));
    plot::save_profile(
        &out_dir.join("cone_nrmse_vs_z.png"),
        &format!(
            "RMS error in the disc / central-slice range, {n}³, cone angle {:.1}°",
            full.cone_angle().to_degrees()
        ),
        &format!(
            "slice (z index; the central plane lies between {} and {})",
            n / 2 - 1,
            n / 2
        ),
        &[
            plot::Series {
                label: "FDK full scan",
                values: &a,
                color: RGBColor(200, 30, 30),
            },
            plot::Series {
                label: "FDK short scan (Parker)",
                values: &b,
                color: RGBColor(230, 140, 0),
            },
            plot::Series {
                label: "parallel-beam FBP",
                values: &c,
                color: RGBColor(30, 60, 200),
            },
        ],
    )?;
    // Vertical (x–z) cut through the centre, and the error of FDK there.
    let iy = n / 2;
    let cut = |v: &Array3<f32>| v.slice(s![..;-1, iy, ..]).to_owned();
    let (ph, fd, fb) = (cut(&reference), cut(&rec), cut(&fbp));
    tomors_io::preview::write_gray_row(
        &out_dir.join("cone_xz.png"),
        &[ph.view(), fd.view(), fb.view()],
        (0.0, 0.4),
    )?;
    let diff = |a: &Array2<f32>| (a - &ph).mapv(|v| v + 0.5);
    tomors_io::preview::write_gray_row(
        &out_dir.join("cone_xz_error.png"),
        &[diff(&fd).view(), diff(&fb).view()],
        (0.4, 0.6),
    )?;
    let sl = |v: &Array3<f32>, k: usize| v.index_axis(Axis(0), k).to_owned();
    let kz = n / 2 + 3 * n / 10;
    tomors_io::preview::write_gray_row(
        &out_dir.join("cone_slices.png"),
        &[
            sl(&reference, k).view(),
            sl(&rec, k).view(),
            sl(&reference, kz).view(),
            sl(&rec, kz).view(),
            sl(&fbp, kz).view(),
        ],
        (0.0, 0.4),
    )?;
    println!("figures in {}", out_dir.display());
    Ok(())
}

/// Back-projection speed only (synthetic smooth projections), both builds
/// of the z loop, best of 2 runs each.
fn speed(g: &ConeGeometry, vol: &ConeVolume) -> Result<()> {
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let q = Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        ((a as f32 * 0.1).sin() + (r as f32 * 0.05).cos()) * (c as f32 * 0.07).sin()
    });
    let mut out = Array3::<f32>::zeros((vol.nz, vol.ny, vol.nx));
    for (build, choice) in [
        ("portable", SimdChoice::Portable),
        ("default", SimdChoice::Auto),
    ] {
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let t = Instant::now();
            backproject_cone_with(q.view(), g, vol, 0..vol.nz, out.view_mut(), choice)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "back projection {}³ × {na}, {} threads, {build} build: {best:.3} s = {:.3} GU/s",
            vol.nx,
            rayon::current_num_threads(),
            (vol.len() * na) as f64 / best / 1e9
        );
    }
    Ok(())
}
