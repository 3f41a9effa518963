//! Reconstructs one slice of a scan at several rotation centres and writes
//! a PNG strip, for judging the best centre by eye; prints Vo's centre.
//!
//! `cargo run --release -p tomors-io --example tooth_centres -- FILE ROW C0 C1 STEP OUT.png [HALF Y0 X0 [ZOOM]]`
//! (the optional crop shows a square of half-size HALF around row Y0, column X0).

use std::path::Path;

use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::preview::{hstack, percentiles, to_gray8, write_png};
use tomors_io::{find_center, open, CenterOptions, OpenOptions, Preprocess};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 7 {
        eprintln!("usage: tooth_centres FILE ROW C0 C1 STEP OUT.png [HALF Y0 X0 [ZOOM]]");
        std::process::exit(2);
    }
    let file = Path::new(&a[1]);
    let row: usize = a[2].parse()?;
    let (c0, c1, step): (f32, f32, f32) = (a[3].parse()?, a[4].parse()?, a[5].parse()?);
    let src = open(file, &OpenOptions::default())?;
    let proj = src.read_rows(row..row + 1, &Preprocess::default())?;
    let sino = projections_to_sinograms(proj.view(), 0..1)?;
    let angles = src.angles().to_vec();
    let r = find_center(
        sino.index_axis(ndarray::Axis(0), 0),
        &angles,
        &CenterOptions::default(),
    )?;
    println!(
        "Vo centre {:.2} quality {:.3} edge {}",
        r.center, r.quality, r.at_edge
    );
    let nb = src.shape()[2];
    let mut imgs = Vec::new();
    let mut c = c0;
    let mut recs = Vec::new();
    while c <= c1 + 1e-3 {
        let g = ParallelGeometry::new(angles.clone(), nb)?.with_center(c)?;
        let grid = SliceGrid::for_geometry(&g);
        let rec = fbp_sinograms(
            &CpuBackend::new(),
            sino.view(),
            &g,
            &grid,
            &FbpOptions::default(),
        )?;
        recs.push((c, rec.index_axis(ndarray::Axis(0), 0).to_owned()));
        c += step;
    }
    let (lo, hi) = percentiles(recs[recs.len() / 2].1.view(), 1.0, 99.5);
    for (c, rec) in &recs {
        // A sharpness figure: mean squared gradient.
        let mut g2 = 0f64;
        for i in 1..rec.nrows() {
            for j in 1..rec.ncols() {
                let dx = (rec[[i, j]] - rec[[i, j - 1]]) as f64;
                let dy = (rec[[i, j]] - rec[[i - 1, j]]) as f64;
                g2 += dx * dx + dy * dy;
            }
        }
        println!(
            "centre {c:.2}: mean squared gradient {:.6e}",
            g2 / rec.len() as f64
        );
        let img = match a.get(7).and_then(|h| h.parse::<usize>().ok()) {
            // Optional crop: a square of half-size h around (y0, x0) = a[8], a[9].
            Some(h) => {
                let y0: usize = a
                    .get(8)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(rec.nrows() / 2);
                let x0: usize = a
                    .get(9)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(rec.ncols() / 2);
                rec.slice(ndarray::s![y0 - h..y0 + h, x0 - h..x0 + h])
                    .to_owned()
            }
            None => rec.clone(),
        };
        // Optional nearest-neighbour magnification a[10].
        let zoom: usize = a.get(10).and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
        let img =
            ndarray::Array2::from_shape_fn((img.nrows() * zoom, img.ncols() * zoom), |(i, j)| {
                img[[i / zoom, j / zoom]]
            });
        imgs.push(to_gray8(img.view(), lo, hi));
    }
    write_png(Path::new(&a[6]), hstack(&imgs, 4).view())?;
    Ok(())
}
