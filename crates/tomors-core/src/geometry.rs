//! Parallel-beam acquisition geometry and reconstruction grids.
//!
//! Conventions (identical to ASTRA's `parallel` / `parallel3d` geometries):
//! - a point at world position (x, y) — x to the right (image column), y up
//!   (image row 0 at the top), origin at the slice centre — lands on detector
//!   position `s = x·cos θ + y·sin θ` relative to the rotation axis;
//! - detector bin `k` is centred at bin coordinate `k`; the rotation axis sits
//!   at bin coordinate `center` (default `(n − 1)/2`), so `s` maps to bin
//!   coordinate `u = center + s / bin_width`;
//! - the ray of projection θ through `s` runs along `(−sin θ, cos θ)`;
//! - volume slice `z` is reconstructed from detector row `z`.
//!
//! Lengths are in world units; by default one world unit is one detector bin.

use crate::error::{CoreError, Result};

/// Position of the rotation axis on the detector, in bin-index units.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisPosition {
    /// One axis position for every projection.
    Fixed(f32),
    /// One axis position per projection (per-projection axis correction).
    PerProjection(Vec<f32>),
}

/// Constants of one projection used by every back projector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProjectionConstants {
    /// cos θ.
    pub cos: f32,
    /// sin θ.
    pub sin: f32,
    /// Rotation-axis position in bin-index units.
    pub center: f32,
}

/// Parallel-beam geometry of one detector row (shared by all rows of a scan).
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelGeometry {
    angles: Vec<f32>,
    n_bins: usize,
    bin_width: f32,
    axis: AxisPosition,
}

impl ParallelGeometry {
    /// Geometry with the given projection angles (radians) and detector bin
    /// count; unit bin width and the axis at the detector centre.
    pub fn new(angles: Vec<f32>, n_bins: usize) -> Result<Self> {
        if n_bins == 0 {
            return Err(CoreError::Geometry("the detector has no bins".into()));
        }
        if angles.len() < 2 {
            return Err(CoreError::Geometry(format!(
                "at least 2 projection angles are needed, got {}",
                angles.len()
            )));
        }
        if let Some(a) = angles.iter().find(|a| !a.is_finite()) {
            return Err(CoreError::Geometry(format!("angle {a} is not finite")));
        }
        Ok(Self {
            angles,
            n_bins,
            bin_width: 1.0,
            axis: AxisPosition::Fixed((n_bins as f32 - 1.0) / 2.0),
        })
    }

    /// Sets one rotation-axis position (bin-index units) for all projections.
    pub fn with_center(mut self, center: f32) -> Result<Self> {
        self.check_center(center)?;
        self.axis = AxisPosition::Fixed(center);
        Ok(self)
    }

    /// Sets one rotation-axis position per projection.
    pub fn with_centers(mut self, centers: Vec<f32>) -> Result<Self> {
        if centers.len() != self.angles.len() {
            return Err(CoreError::Geometry(format!(
                "{} axis positions given for {} projections",
                centers.len(),
                self.angles.len()
            )));
        }
        for &c in &centers {
            self.check_center(c)?;
        }
        self.axis = AxisPosition::PerProjection(centers);
        Ok(self)
    }

    /// Sets the detector bin width in world units.
    pub fn with_bin_width(mut self, width: f32) -> Result<Self> {
        if !(width.is_finite() && width > 0.0) {
            return Err(CoreError::Geometry(format!(
                "bin width {width} must be positive"
            )));
        }
        self.bin_width = width;
        Ok(self)
    }

    fn check_center(&self, center: f32) -> Result<()> {
        let last = self.n_bins as f32 - 1.0;
        if !center.is_finite() || center < 0.0 || center > last {
            return Err(CoreError::Geometry(format!(
                "rotation centre {center} lies outside the detector (bins 0..={last})"
            )));
        }
        Ok(())
    }

    /// Projection angles in radians.
    pub fn angles(&self) -> &[f32] {
        &self.angles
    }

    /// Number of projections.
    pub fn n_angles(&self) -> usize {
        self.angles.len()
    }

    /// Number of detector bins per row.
    pub fn n_bins(&self) -> usize {
        self.n_bins
    }

    /// Detector bin width in world units.
    pub fn bin_width(&self) -> f32 {
        self.bin_width
    }

    /// The rotation-axis description.
    pub fn axis(&self) -> &AxisPosition {
        &self.axis
    }

    /// Rotation-axis position of projection `i` in bin-index units.
    pub fn center(&self, i: usize) -> f32 {
        match &self.axis {
            AxisPosition::Fixed(c) => *c,
            AxisPosition::PerProjection(v) => v[i],
        }
    }

    /// cos, sin and axis position of every projection, computed in f64.
    pub fn projection_constants(&self) -> Vec<ProjectionConstants> {
        self.angles
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let a = a as f64;
                ProjectionConstants {
                    cos: a.cos() as f32,
                    sin: a.sin() as f32,
                    center: self.center(i),
                }
            })
            .collect()
    }

    /// The weight every projection gets in filtered back projection so that
    /// the reconstruction has the object's values: π / N. With N angles spread
    /// evenly over k half-turns, each ray is measured k times at an angular
    /// step of kπ/N, so the weight is (kπ/N)/k = π/N for every k (this is why
    /// 360° scans need no special case).
    pub fn fbp_weight(&self) -> f32 {
        (std::f64::consts::PI / self.angles.len() as f64) as f32
    }
}

/// `n` angles evenly spaced over `[0, range)` (endpoint excluded), radians.
pub fn uniform_angles(n: usize, range: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f64 * range as f64 / n as f64) as f32)
        .collect()
}

/// A reconstruction grid for one slice: `nx × ny` square pixels of side
/// `pixel_size` (world units), centred on the rotation axis. Image row 0 is
/// at the top (largest y).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SliceGrid {
    /// Pixels per row (x, columns).
    pub nx: usize,
    /// Rows (y).
    pub ny: usize,
    /// Pixel side in world units.
    pub pixel_size: f32,
}

impl SliceGrid {
    /// An `nx × ny` grid of unit pixels.
    pub fn new(nx: usize, ny: usize) -> Result<Self> {
        Self::with_pixel_size(nx, ny, 1.0)
    }

    /// An `nx × ny` grid of pixels of side `pixel_size`.
    pub fn with_pixel_size(nx: usize, ny: usize, pixel_size: f32) -> Result<Self> {
        if nx == 0 || ny == 0 {
            return Err(CoreError::Geometry(format!("empty slice grid {nx}×{ny}")));
        }
        if !(pixel_size.is_finite() && pixel_size > 0.0) {
            return Err(CoreError::Geometry(format!(
                "pixel size {pixel_size} must be positive"
            )));
        }
        Ok(Self { nx, ny, pixel_size })
    }

    /// The default grid for a geometry: n × n pixels of the bin width
    /// (as TomoPy and ASTRA do).
    pub fn for_geometry(geometry: &ParallelGeometry) -> Self {
        Self {
            nx: geometry.n_bins(),
            ny: geometry.n_bins(),
            pixel_size: geometry.bin_width(),
        }
    }

    /// World x of the centre of column `ix`.
    pub fn x(&self, ix: usize) -> f32 {
        (ix as f32 - (self.nx as f32 - 1.0) * 0.5) * self.pixel_size
    }

    /// World y of the centre of row `iy` (row 0 at the top).
    pub fn y(&self, iy: usize) -> f32 {
        ((self.ny as f32 - 1.0) * 0.5 - iy as f32) * self.pixel_size
    }

    /// Number of pixels.
    pub fn len(&self) -> usize {
        self.nx * self.ny
    }

    /// Whether the grid has no pixels (never true for a constructed grid).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
