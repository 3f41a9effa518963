//! Measurements for docs/iterative.md (a measurement program, not a test):
//! `cargo run --release -p tomors-core --example iterative_measure -- [NAME...]`
//! runs the named measurements (all when none is named).
//!
//! - `convergence_256`: NRMSE per iteration of every method on the 256²
//!   modified Shepp–Logan from 60 exact projections over π, and again with
//!   Poisson noise; writes CSV and PNG plots to `$TOMORS_ITER_OUT`
//!   (default `docs/img`, relative to the workspace root).
//! - `export_for_astra`: the exact sinogram and our ASTRA-style SIRT result
//!   as raw little-endian f32 for `scripts/iterative_astra_compare.py`.
//! - `projector_speed`: GU/s of the forward and back projectors.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use ndarray::{Array2, Array3, Axis};
use plotters::prelude::*;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, projector, reconstruct, Algorithm, Constraint, IterativeOptions, ProjectorKind,
    RayOrder, Weighting,
};
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::{add_poisson_noise, Phantom2d};
use tomors_core::{ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;
const FONT: &[u8] = include_bytes!("../../tomors-cli/assets/fonts/DejaVuSansMono.ttf");

fn out_dir() -> PathBuf {
    let d = std::env::var_os("TOMORS_ITER_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/img")));
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Setup {
    geometry: ParallelGeometry,
    grid: SliceGrid,
    sino: Array3<f32>,
    truth: Array2<f32>,
    mask: Array2<bool>,
}

/// Photons per detector pixel of the noisy case, and optical depth per
/// world unit of line integral (so the densest ray has optical depth ≈ 0.9).
const PHOTONS: f64 = 1e4;

fn setup(n: usize, n_angles: usize, noisy: bool) -> Setup {
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let phantom = Phantom2d::shepp_logan();
    let scale = n as f64 / 2.0;
    let mut sino = phantom.project(&geometry, scale).insert_axis(Axis(0));
    if noisy {
        add_poisson_noise(sino.view_mut(), PHOTONS, 4.0 / n as f64, 2024).unwrap();
    }
    Setup {
        truth: phantom.rasterize(&grid, scale, 4),
        mask: disc_mask(n, n, 0.45),
        geometry,
        grid,
        sino,
    }
}

fn methods() -> Vec<(&'static str, Algorithm, usize)> {
    vec![
        ("Landweber", Algorithm::Sirt(Weighting::Landweber), 200),
        ("Cimmino", Algorithm::Sirt(Weighting::Cimmino), 200),
        (
            "SIRT (ASTRA)",
            Algorithm::Sirt(Weighting::RowColumnSums),
            200,
        ),
        (
            "BLOCK-IT (2/block)",
            Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: 2,
            },
            50,
        ),
        (
            "SART (1/block)",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 1,
            },
            50,
        ),
        (
            "block-parallel (6/block)",
            Algorithm::BlockParallel {
                projections_per_block: 6,
            },
            50,
        ),
        (
            "ART",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
            50,
        ),
        (
            "ART random",
            Algorithm::Art {
                order: RayOrder::Random { seed: 7 },
            },
            50,
        ),
    ]
}

struct Run {
    name: String,
    errors: Vec<f64>,
    seconds: f64,
    relaxation: f64,
}

fn run(s: &Setup, kind: ProjectorKind, name: &str, alg: Algorithm, iterations: usize) -> Run {
    let p = projector::<f32>(kind, &s.geometry, &s.grid, None).unwrap();
    let opts = IterativeOptions {
        algorithm: alg,
        iterations,
        constraint: Constraint::non_negative(),
        track_residual: false,
        ..IterativeOptions::default()
    };
    let mut errors = Vec::new();
    let mut measure = 0.0;
    let t = Instant::now();
    let r = reconstruct(p.as_ref(), s.sino.view(), None, &opts, &mut |info| {
        let t0 = Instant::now();
        errors.push(nrmse(info.x.index_axis(Axis(0), 0), s.truth.view(), Some(&s.mask)).unwrap());
        measure += t0.elapsed().as_secs_f64();
        true
    })
    .unwrap();
    Run {
        name: name.to_string(),
        errors,
        seconds: t.elapsed().as_secs_f64() - measure,
        relaxation: r.relaxation,
    }
}

fn plot(path: &PathBuf, title: &str, runs: &[Run], fbp: f64) {
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let (w, h) = (900u32, 560u32);
    let mut buffer = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buffer, (w, h)).into_drawing_area();
        root.fill(&WHITE).unwrap();
        let ymax = runs.iter().map(|r| r.errors[0]).fold(fbp, f64::max) * 1.05;
        let ymin = runs
            .iter()
            .flat_map(|r| r.errors.iter().cloned())
            .fold(f64::INFINITY, f64::min)
            * 0.9;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((1f64..200f64).log_scale(), ymin..ymax)
            .unwrap();
        chart
            .configure_mesh()
            .x_desc("iteration (sweeps for ART and block methods)")
            .y_desc("NRMSE in the disc r = 0.45 n")
            .draw()
            .unwrap();
        for (i, r) in runs.iter().enumerate() {
            let color = Palette99::pick(i).mix(0.9);
            chart
                .draw_series(LineSeries::new(
                    r.errors
                        .iter()
                        .enumerate()
                        .map(|(k, &e)| ((k + 1) as f64, e)),
                    color.stroke_width(2),
                ))
                .unwrap()
                .label(r.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .draw_series(LineSeries::new(
                vec![(1.0, fbp), (200.0, fbp)],
                BLACK.stroke_width(1),
            ))
            .unwrap()
            .label("FBP (Ram-Lak)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", 14))
            .draw()
            .unwrap();
        root.present().unwrap();
    }
    image::RgbImage::from_raw(w, h, buffer)
        .unwrap()
        .save(path)
        .unwrap();
}

fn at(errors: &[f64], k: usize) -> String {
    errors.get(k - 1).map_or("–".into(), |e| format!("{e:.4}"))
}

fn convergence_256() {
    let dir = out_dir();
    let mut csv = std::fs::File::create(dir.join("iterative_convergence.csv")).unwrap();
    writeln!(csv, "case,projector,method,iteration,nrmse").unwrap();
    for noisy in [false, true] {
        let case = if noisy { "noisy" } else { "exact" };
        let s = setup(256, 60, noisy);
        let fbp = fbp_sinograms(
            &CpuBackend::new(),
            s.sino.view(),
            &s.geometry,
            &s.grid,
            &FbpOptions::default(),
        )
        .unwrap();
        let fbp = nrmse(fbp.index_axis(Axis(0), 0), s.truth.view(), Some(&s.mask)).unwrap();
        println!("\n### {case} data (256², 60 projections), FBP Ram-Lak NRMSE {fbp:.4}\n");
        println!("| method | λ | 1 | 2 | 5 | 10 | 20 | 50 | 100 | 200 | best (iteration) | first ≤ FBP | s/iteration |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        let mut runs = Vec::new();
        for (name, alg, iterations) in methods() {
            let r = run(&s, ProjectorKind::Joseph, name, alg, iterations);
            let (bi, best) =
                r.errors
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f64::INFINITY),
                        |(bi, b), (i, &e)| if e < b { (i, e) } else { (bi, b) },
                    );
            let first = r
                .errors
                .iter()
                .position(|&e| e <= fbp)
                .map_or("never".into(), |i| (i + 1).to_string());
            println!(
                "| {} | {:.3e} | {} | {} | {} | {} | {} | {} | {} | {} | {best:.4} ({}) | {first} | {:.4} |",
                r.name, r.relaxation, at(&r.errors, 1), at(&r.errors, 2), at(&r.errors, 5), at(&r.errors, 10),
                at(&r.errors, 20), at(&r.errors, 50), at(&r.errors, 100), at(&r.errors, 200), bi + 1,
                r.seconds / r.errors.len() as f64
            );
            for (k, e) in r.errors.iter().enumerate() {
                writeln!(csv, "{case},joseph,{},{},{e:.6}", r.name, k + 1).unwrap();
            }
            runs.push(r);
        }
        plot(
            &dir.join(format!("iterative_{case}.png")),
            &format!("256² Shepp-Logan, 60 {case} projections, Joseph projector, x ≥ 0"),
            &runs,
            fbp,
        );
        // The projection models under the same two methods.
        println!(
            "\n| projector | method | 1 | 5 | 20 | 50 | 200 | best (iteration) | s/iteration |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for kind in [
            ProjectorKind::Joseph,
            ProjectorKind::Line,
            ProjectorKind::Voxel,
        ] {
            for (name, alg, iterations) in methods()
                .into_iter()
                .filter(|m| m.0.starts_with("SIRT") || m.0.starts_with("BLOCK-IT"))
            {
                let r = run(&s, kind, name, alg, iterations);
                let (bi, best) =
                    r.errors
                        .iter()
                        .enumerate()
                        .fold(
                            (0, f64::INFINITY),
                            |(bi, b), (i, &e)| if e < b { (i, e) } else { (bi, b) },
                        );
                println!(
                    "| {kind:?} | {name} | {} | {} | {} | {} | {} | {best:.4} ({}) | {:.4} |",
                    at(&r.errors, 1),
                    at(&r.errors, 5),
                    at(&r.errors, 20),
                    at(&r.errors, 50),
                    at(&r.errors, 200),
                    bi + 1,
                    r.seconds / r.errors.len() as f64
                );
                if kind != ProjectorKind::Joseph {
                    for (k, e) in r.errors.iter().enumerate() {
                        writeln!(csv, "{case},{kind:?},{},{},{e:.6}", r.name, k + 1).unwrap();
                    }
                }
            }
        }
    }
}

fn write_raw(path: PathBuf, data: impl Iterator<Item = f32>) {
    let bytes: Vec<u8> = data.flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

fn export_for_astra() {
    let dir = std::env::var_os("TOMORS_ASTRA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/tomors-iter-astra"));
    std::fs::create_dir_all(&dir).unwrap();
    let s = setup(256, 60, false);
    let iterations = 100;
    write_raw(dir.join("sino.f32"), s.sino.iter().cloned());
    write_raw(dir.join("angles.f32"), s.geometry.angles().iter().cloned());
    write_raw(dir.join("phantom.f32"), s.truth.iter().cloned());
    for kind in [ProjectorKind::Joseph, ProjectorKind::Line] {
        let p = projector::<f32>(kind, &s.geometry, &s.grid, None).unwrap();
        let opts = IterativeOptions {
            algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
            iterations,
            relaxation: Some(1.0),
            ..IterativeOptions::default()
        };
        let r = reconstruct(p.as_ref(), s.sino.view(), None, &opts, &mut |_| true).unwrap();
        write_raw(
            dir.join(format!("tomors_{kind:?}.f32").to_lowercase()),
            r.x.iter().cloned(),
        );
    }
    std::fs::write(
        dir.join("meta.txt"),
        format!("n 256\nangles 60\niterations {iterations}\n"),
    )
    .unwrap();
    println!("wrote {}", dir.display());
}

fn projector_speed() {
    let n = 512;
    let n_angles = 512;
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let slices = 4;
    let vol = Array3::from_elem((slices, n, n), 1.0f32);
    let sino = Array3::from_elem((slices, n_angles, n), 1.0f32);
    let angles = all_angles(n_angles);
    let gu = (slices * n * n * n_angles) as f64 / 1e9;
    println!(
        "\n{slices} slices of {n}², {n_angles} projections, {} threads",
        rayon::current_num_threads()
    );
    println!("| projector | forward GU/s | back GU/s |");
    println!("|---|---|---|");
    for kind in [
        ProjectorKind::Joseph,
        ProjectorKind::Line,
        ProjectorKind::Voxel,
    ] {
        let p = projector::<f32>(kind, &geometry, &grid, None).unwrap();
        let mut out = Array3::zeros((slices, n_angles, n));
        p.forward(vol.view(), &angles, out.view_mut()).unwrap();
        let t = Instant::now();
        p.forward(vol.view(), &angles, out.view_mut()).unwrap();
        let f = gu / t.elapsed().as_secs_f64();
        let mut img = Array3::zeros((slices, n, n));
        p.back(sino.view(), &angles, img.view_mut()).unwrap();
        let t = Instant::now();
        p.back(sino.view(), &angles, img.view_mut()).unwrap();
        let b = gu / t.elapsed().as_secs_f64();
        println!("| {kind:?} | {f:.3} | {b:.3} |");
    }
}

fn joseph_angle_ranges() {
    // Single thread, one 512² slice: column-stepping (θ near 90°) against
    // row-stepping (θ near 0) angles.
    let n = 512;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (label, lo, hi) in [
        ("θ in [−20°, 20°] (row steps)", -0.35f32, 0.35f32),
        ("θ in [70°, 110°] (column steps)", 1.22, 1.92),
    ] {
        let angles: Vec<f32> = (0..64).map(|i| lo + (hi - lo) * i as f32 / 64.0).collect();
        let geometry = ParallelGeometry::new(angles, n).unwrap();
        let grid = SliceGrid::for_geometry(&geometry);
        let p = projector::<f32>(ProjectorKind::Joseph, &geometry, &grid, None).unwrap();
        let vol = Array3::from_elem((1, n, n), 1.0f32);
        let mut out = Array3::zeros((1, 64, n));
        let idx = all_angles(64);
        pool.install(|| p.forward(vol.view(), &idx, out.view_mut()).unwrap());
        let t = Instant::now();
        pool.install(|| p.forward(vol.view(), &idx, out.view_mut()).unwrap());
        let dt = t.elapsed().as_secs_f64();
        println!(
            "{label}: forward {:.3} GU/s ({:.2} ns per step)",
            (n * n * 64) as f64 / dt / 1e9,
            dt * 1e9 / (64.0 * n as f64 * n as f64)
        );
    }
}

fn main() {
    let measurements: [(&str, fn()); 4] = [
        ("convergence_256", convergence_256),
        ("export_for_astra", export_for_astra),
        ("projector_speed", projector_speed),
        ("joseph_angle_ranges", joseph_angle_ranges),
    ];
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    for (name, run) in measurements {
        if wanted.is_empty() || wanted.iter().any(|w| w == name) {
            println!("== {name}");
            run();
        }
    }
}
