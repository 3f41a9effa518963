//! Writes a DXchange-like HDF5 scan for the disk-to-disk benchmark
//! (`scripts/bench-disk.sh`): uint16 projections of a few spheres with
//! flats, darks and angles, generated on all cores, written a block of
//! projections at a time.
//!
//! ```sh
//! disk_scan OUT.h5 ANGLES ROWS COLS [--chunk A,R,C] [--deflate LEVEL]
//! ```
//!
//! Without `--chunk` the projections are stored contiguously; with it in
//! chunks of A projections × R rows × C columns, compressed with deflate
//! (and the byte shuffle) when `--deflate` is given.

use std::time::Instant;

use ndarray::{s, Array1, Array3, Axis};
use rayon::prelude::*;
use tomors_io::hdf5;

const FLAT: f64 = 30000.0;
const DARK: f64 = 100.0;

/// Spheres in units of the detector width: (x, y, z, radius, μ per pixel).
const SPHERES: [(f64, f64, f64, f64, f64); 6] = [
    (0.0, 0.0, 0.0, 0.40, 0.0015),
    (0.15, 0.05, 0.10, 0.12, 0.0040),
    (-0.18, 0.02, -0.12, 0.10, -0.0010),
    (0.05, -0.20, 0.05, 0.06, 0.0080),
    (-0.05, 0.22, -0.20, 0.05, 0.0060),
    (0.25, -0.10, 0.25, 0.04, 0.0100),
];

/// Column gain (a stripe pattern the flats correct).
fn gain(c: usize) -> f64 {
    1.0 + 0.03 * ((c % 17) as f64 / 17.0 - 0.5)
}

fn projection(theta: f64, nr: usize, nc: usize, out: &mut ndarray::ArrayViewMut2<'_, u16>) {
    let w = nc as f64;
    let (cu, cv) = (nc as f64 / 2.0, nr as f64 / 2.0);
    let (ct, st) = (theta.cos(), theta.sin());
    let spheres: Vec<(f64, f64, f64, f64)> = SPHERES
        .iter()
        .map(|&(x, y, z, r, mu)| (cu + w * (x * ct + y * st), cv + w * z, w * r, mu))
        .collect();
    for (r, mut row) in out.axis_iter_mut(Axis(0)).enumerate() {
        let v = r as f64 + 0.5;
        let active: Vec<(f64, f64, f64)> = spheres
            .iter()
            .filter_map(|&(u0, v0, rad, mu)| {
                let rr = rad * rad - (v - v0) * (v - v0);
                (rr > 0.0).then_some((u0, rr, mu))
            })
            .collect();
        for (c, px) in row.iter_mut().enumerate() {
            let u = c as f64 + 0.5;
            let mut line = 0.0;
            for &(u0, rr, mu) in &active {
                let d = rr - (u - u0) * (u - u0);
                if d > 0.0 {
                    line += 2.0 * mu * d.sqrt();
                }
            }
            *px = (FLAT * gain(c) * (-line).exp() + DARK).round() as u16;
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: disk_scan OUT.h5 ANGLES ROWS COLS [--chunk A,R,C] [--deflate LEVEL]";
    if args.len() < 4 {
        return Err(usage.into());
    }
    let out = std::path::PathBuf::from(&args[0]);
    let na: usize = args[1].parse()?;
    let nr: usize = args[2].parse()?;
    let nc: usize = args[3].parse()?;
    let mut chunk: Option<[usize; 3]> = None;
    let mut deflate: Option<u8> = None;
    let mut rest = args[4..].iter();
    while let Some(a) = rest.next() {
        let v = rest.next().ok_or(usage)?;
        match a.as_str() {
            "--chunk" => {
                let p: Vec<usize> = v.split(',').map(str::parse).collect::<Result<_, _>>()?;
                if p.len() != 3 || p.contains(&0) {
                    return Err(usage.into());
                }
                chunk = Some([p[0], p[1], p[2]]);
            }
            "--deflate" => deflate = Some(v.parse()?),
            _ => return Err(usage.into()),
        }
    }
    let t0 = Instant::now();
    let f = hdf5::File::create(&out)?;
    let g = f.create_group("exchange")?;
    let mut b = g.new_dataset::<u16>().shape([na, nr, nc]);
    if let Some(c) = chunk {
        b = b.chunk(c);
        if let Some(l) = deflate {
            b = b.shuffle().deflate(l);
        }
    }
    let data = b.create("data")?;
    let flats = Array3::from_shape_fn((4, nr, nc), |(_, _, c)| {
        (FLAT * gain(c) + DARK).round() as u16
    });
    let darks = Array3::from_elem((4, nr, nc), DARK as u16);
    g.new_dataset_builder()
        .with_data(&flats)
        .create("data_white")?;
    g.new_dataset_builder()
        .with_data(&darks)
        .create("data_dark")?;
    let theta = Array1::from_shape_fn(na, |i| i as f64 * 180.0 / na as f64);
    let th = g.new_dataset_builder().with_data(&theta).create("theta")?;
    let unit: hdf5::types::VarLenUnicode = "degrees".parse().expect("no NUL");
    th.new_attr::<hdf5::types::VarLenUnicode>()
        .create("units")?
        .write_scalar(&unit)?;
    // Blocks of about 256 MiB of projections.
    let block = (256usize << 20) / (2 * nr * nc).max(1);
    let block = block.clamp(1, na);
    let (mut t_gen, mut t_write) = (0.0, 0.0);
    let mut buf = Array3::<u16>::zeros((block, nr, nc));
    let mut a0 = 0;
    while a0 < na {
        let a1 = (a0 + block).min(na);
        let t = Instant::now();
        buf.slice_mut(s![..a1 - a0, .., ..])
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(|(k, mut p)| {
                projection(theta[a0 + k].to_radians(), nr, nc, &mut p);
            });
        t_gen += t.elapsed().as_secs_f64();
        let t = Instant::now();
        data.write_slice(buf.slice(s![..a1 - a0, .., ..]), s![a0..a1, .., ..])?;
        t_write += t.elapsed().as_secs_f64();
        a0 = a1;
    }
    drop(data);
    f.close()?;
    let bytes = (na * nr * nc * 2) as f64;
    println!(
        "wrote {} ({na} × {nr} × {nc} uint16, {:.2} GB{}{}) in {:.1} s: generating {:.1} s, writing {:.1} s ({:.0} MB/s)",
        out.display(),
        bytes / 1e9,
        chunk.map(|c| format!(", chunks {c:?}")).unwrap_or_default(),
        deflate.map(|l| format!(", deflate {l}")).unwrap_or_default(),
        t0.elapsed().as_secs_f64(),
        t_gen,
        t_write,
        bytes / t_write.max(1e-9) / 1e6
    );
    Ok(())
}
