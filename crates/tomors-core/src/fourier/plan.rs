//! Every constant of one gridding reconstruction, derived once from the
//! geometry, the grid and the options, and shared by the CPU and CUDA
//! implementations (which must agree to f32 rounding).

use std::f64::consts::PI;

use super::kernel::EsKernel;
use super::FourierOptions;
use crate::error::{CoreError, Result};
use crate::filter::{padded_len, smooth_even};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// The constants of a gridding reconstruction (see the module docs for the
/// formulas they enter).
#[derive(Clone, Debug)]
pub struct FourierPlan {
    /// Detector bins per row.
    pub n_bins: usize,
    /// Projections.
    pub n_angles: usize,
    /// Padded row length `P` of the 1D FFT (the FBP's `padded_len`).
    pub padded: usize,
    /// Side `G` of the oversampled Cartesian frequency grid.
    pub grid: usize,
    /// Output columns and rows.
    pub nx: usize,
    /// Output rows.
    pub ny: usize,
    /// Radial sample spacing in grid cells, `α = h·G / (b·P)`.
    pub alpha: f32,
    /// Largest sample radius in cells, `α·(P/2 − 1)`.
    pub rmax: f32,
    /// The gridding kernel.
    pub kernel: EsKernel,
    /// First angle and angular step (radians) of the evenly spaced scan.
    pub theta0: f32,
    /// Angular step (radians, > 0).
    pub dtheta: f32,
    /// cos θ of every projection.
    pub cos: Vec<f32>,
    /// sin θ of every projection.
    pub sin: Vec<f32>,
    /// Phase shift of every projection in bins: the rotation axis plus the
    /// half-pixel offset of even grids, `t_j` in `e^{2πi k t_j / P}`.
    pub shift: Vec<f64>,
    /// The FBP filter response for bins `0..=P/2` (including `1/(b·P)`)
    /// times the FBP weight π/N; zero at `P/2` (see the module docs).
    pub response: Vec<f32>,
    /// `1 / φ̂(m_x / G)` for every output column.
    pub deapod_x: Vec<f32>,
    /// `1 / φ̂(m_y / G)` for every output row.
    pub deapod_y: Vec<f32>,
}

impl FourierPlan {
    /// Plans the reconstruction of sinograms of `geometry` on `grid`.
    /// Errors when the angles are not evenly spaced and increasing.
    pub fn new(
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        options: &FourierOptions,
    ) -> Result<Self> {
        options.validate()?;
        let angles = geometry.angles();
        let na = angles.len();
        let (theta0, dtheta) = even_spacing(angles)?;
        let n = geometry.n_bins();
        let p = padded_len(n);
        let m0 = grid.nx.max(grid.ny);
        let g = smooth_even((options.oversampling as f64 * m0 as f64).ceil() as usize);
        let (bw, h) = (geometry.bin_width() as f64, grid.pixel_size as f64);
        let alpha = h * g as f64 / (bw * p as f64);
        let kernel = EsKernel::new(options.width, options.oversampling as f64);
        // Integer pixel offsets m = i − floor(n/2) leave a half-pixel shift
        // for even sides: x = (m_x + δx)·h, y = (m_y + δy)·h.
        let dx = (grid.nx / 2) as f64 - (grid.nx as f64 - 1.0) / 2.0;
        let dy = (grid.ny as f64 - 1.0) / 2.0 - (grid.ny / 2) as f64;
        let consts = geometry.projection_constants();
        let (mut cos, mut sin, mut shift) = (vec![], vec![], vec![]);
        for (i, &a) in angles.iter().enumerate() {
            let (s, c) = (a as f64).sin_cos();
            cos.push(c as f32);
            sin.push(s as f32);
            shift.push(consts[i].center as f64 + (c * dx + s * dy) * h / bw);
        }
        let weight = geometry.fbp_weight() as f64;
        let mut response: Vec<f32> = options
            .filter
            .frequency_response(p, geometry.bin_width())
            .iter()
            .map(|&r| (r as f64 * weight) as f32)
            .collect();
        response[p / 2] = 0.0;
        let deapod = |count: usize, sign: f64| -> Vec<f32> {
            let xi: Vec<f64> = (0..count)
                .map(|i| sign * (i as f64 - (count / 2) as f64) / g as f64)
                .collect();
            kernel
                .fourier(&xi)
                .iter()
                .map(|&f| (1.0 / f) as f32)
                .collect()
        };
        Ok(Self {
            n_bins: n,
            n_angles: na,
            padded: p,
            grid: g,
            nx: grid.nx,
            ny: grid.ny,
            alpha: alpha as f32,
            rmax: (alpha * (p / 2 - 1) as f64) as f32,
            kernel,
            theta0: theta0 as f32,
            dtheta: dtheta as f32,
            cos,
            sin,
            shift,
            response,
            deapod_x: deapod(grid.nx, 1.0),
            deapod_y: deapod(grid.ny, -1.0),
        })
    }

    /// The filter factor of FFT bin `f` (0..P) of projection `j`: response
    /// times the phase `e^{2πi k t_j / P}` with `k` the signed frequency, as
    /// (re, im), computed in f64.
    pub fn factor(&self, j: usize, f: usize) -> (f32, f32) {
        let p = self.padded;
        let k = if f <= p / 2 {
            f as i64
        } else {
            f as i64 - p as i64
        };
        let r = self.response[k.unsigned_abs() as usize] as f64;
        let x = k as f64 * self.shift[j] / p as f64;
        let x = x - x.round();
        let (s, c) = (2.0 * PI * x).sin_cos();
        ((r * c) as f32, (r * s) as f32)
    }

    /// How many periodic images of the grid a grid point must look at
    /// on each side (1 unless pixels are much larger than bins).
    pub fn images(&self) -> i32 {
        ((self.rmax + self.kernel.width as f32) / self.grid as f32).ceil() as i32
    }
}

/// First angle and step of evenly spaced increasing angles; an error
/// otherwise (the gather finds the angles near a grid point by index).
pub fn even_spacing(angles: &[f32]) -> Result<(f64, f64)> {
    let na = angles.len();
    if na < 2 {
        return Err(CoreError::Geometry(
            "the fourier method needs at least 2 angles".into(),
        ));
    }
    let a0 = angles[0] as f64;
    let step = (angles[na - 1] as f64 - a0) / (na - 1) as f64;
    if step.is_nan() || step <= 0.0 {
        return Err(CoreError::Geometry(
            "the fourier method needs increasing, evenly spaced angles".into(),
        ));
    }
    for (i, &a) in angles.iter().enumerate() {
        let dev = (a as f64 - (a0 + i as f64 * step)).abs();
        if dev > 0.01 * step {
            return Err(CoreError::Geometry(format!(
                "the fourier method needs evenly spaced angles: angle {i} ({a} rad) is {:.3} steps \
                 off an even spacing of {step:.6} rad (use --method direct)",
                dev / step
            )));
        }
    }
    Ok((a0, step))
}
