//! The gridding (fourier) method agrees with the direct FBP and with the
//! exact phantom, on the CPU.

use ndarray::{stack, Array2, Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::fourier::{fourier_sinograms, FourierOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::Phantom2d;
use tomors_core::{FilterKind, FilterSpec, Padding, ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

struct Case {
    n: usize,
    angles: usize,
    range: f32,
    center: Option<f32>,
    grid: Option<(usize, usize, f32)>,
    filter: FilterSpec,
}

impl Case {
    fn new(n: usize, angles: usize) -> Self {
        Self {
            n,
            angles,
            range: PI,
            center: None,
            grid: None,
            filter: FilterSpec::default(),
        }
    }
}

/// (fourier, direct, phantom) of two slices: the Shepp–Logan and a half-scaled, shifted copy.
fn run(c: &Case, width: usize) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
    let mut geometry = ParallelGeometry::new(uniform_angles(c.angles, c.range), c.n).unwrap();
    if let Some(ctr) = c.center {
        geometry = geometry.with_center(ctr).unwrap();
    }
    let grid = match c.grid {
        Some((nx, ny, h)) => SliceGrid::with_pixel_size(nx, ny, h).unwrap(),
        None => SliceGrid::for_geometry(&geometry),
    };
    let phantom = Phantom2d::shepp_logan();
    let scale = c.n as f64 * 0.45;
    let a = phantom.project(&geometry, scale);
    let b = phantom.project(&geometry, scale * 0.6).mapv(|v| 0.5 * v);
    let sino = stack(Axis(0), &[a.view(), b.view()]).unwrap();
    let opts = FourierOptions {
        filter: c.filter,
        width,
        ..FourierOptions::default()
    };
    let f = fourier_sinograms(sino.view(), &geometry, &grid, &opts).unwrap();
    let d = fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &geometry,
        &grid,
        &FbpOptions {
            filter: c.filter,
            ..FbpOptions::default()
        },
    )
    .unwrap();
    let pa = phantom.rasterize(&grid, scale, 8);
    let pb = phantom.rasterize(&grid, scale * 0.6, 8).mapv(|v| 0.5 * v);
    let p = stack(Axis(0), &[pa.view(), pb.view()]).unwrap();
    (f, d, p)
}

fn err(a: &Array2<f32>, b: &Array2<f32>, frac: f64) -> f64 {
    let (ny, nx) = b.dim();
    nrmse(a.view(), b.view(), Some(&disc_mask(ny, nx, frac))).unwrap()
}

/// NRMSE (inside the 0.45 disc) of fourier vs direct and of each vs the phantom, per slice.
fn errors(c: &Case, width: usize) -> Vec<(f64, f64, f64)> {
    let (f, d, p) = run(c, width);
    (0..2)
        .map(|s| {
            let (fs, ds, ps) = (
                f.index_axis(Axis(0), s).to_owned(),
                d.index_axis(Axis(0), s).to_owned(),
                p.index_axis(Axis(0), s).to_owned(),
            );
            (err(&fs, &ds, 0.45), err(&fs, &ps, 0.45), err(&ds, &ps, 0.45))
        })
        .collect()
}

#[test]
fn explore() {
    for w in [4, 6] {
        for (name, c) in [
            ("128/128", Case::new(128, 128)),
            ("101/90 odd", Case::new(101, 90)),
            ("128/256 360deg", Case { range: 2.0 * PI, ..Case::new(128, 256) }),
            ("128 center 60.3", Case { center: Some(60.3), ..Case::new(128, 128) }),
            ("grid 90x70 h0.8", Case { grid: Some((90, 70, 0.8)), ..Case::new(128, 128) }),
            ("hann edge", Case { filter: FilterSpec { kind: FilterKind::Hann, cutoff: 0.9, padding: Padding::Edge }, ..Case::new(128, 128) }),
        ] {
            println!("W={w} {name}: {:?}", errors(&c, w));
        }
    }
}
