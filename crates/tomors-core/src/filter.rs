//! FBP filters: ramp (Ram-Lak) with apodisation windows, padding, FFT.
//!
//! The ramp is built as the discrete transform of the band-limited spatial
//! ramp kernel (`h[0] = 1/4`, `h[k] = −1/(π²k²)` for odd `k`, 0 for even
//! `k ≠ 0`, in bin units; Kak & Slaney eq. 61), so the zero frequency is
//! right and FBP of an exact sinogram has the object's values. The window is
//! evaluated at the frequency ω as a fraction of Nyquist, and the response is
//! zero above `cutoff`.

use std::f64::consts::PI;
use std::sync::Arc;

use ndarray::{ArrayViewMut2, Axis};
use rayon::prelude::*;
use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::error::{CoreError, Result};

/// Apodisation window of the ramp filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FilterKind {
    /// Plain ramp, |ω|.
    #[default]
    RamLak,
    /// Ramp × sinc(ω / 2c).
    SheppLogan,
    /// Ramp × cos(πω / 2c).
    Cosine,
    /// Ramp × (0.54 + 0.46 cos(πω / c)).
    Hamming,
    /// Ramp × (0.5 + 0.5 cos(πω / c)).
    Hann,
}

impl FilterKind {
    /// Every filter, in documentation order.
    pub const ALL: [FilterKind; 5] = [
        Self::RamLak,
        Self::SheppLogan,
        Self::Cosine,
        Self::Hamming,
        Self::Hann,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::RamLak => "ram-lak",
            Self::SheppLogan => "shepp-logan",
            Self::Cosine => "cosine",
            Self::Hamming => "hamming",
            Self::Hann => "hann",
        }
    }

    /// Window value at frequency `w` (fraction of Nyquist) for cutoff `c`.
    fn window(self, w: f64, c: f64) -> f64 {
        if w > c {
            return 0.0;
        }
        let x = w / c;
        match self {
            Self::RamLak => 1.0,
            Self::SheppLogan => {
                let a = PI * x / 2.0;
                if a == 0.0 {
                    1.0
                } else {
                    a.sin() / a
                }
            }
            Self::Cosine => (PI * x / 2.0).cos(),
            Self::Hamming => 0.54 + 0.46 * (PI * x).cos(),
            Self::Hann => 0.5 + 0.5 * (PI * x).cos(),
        }
    }
}

impl std::str::FromStr for FilterKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let k = s.to_ascii_lowercase().replace(['_', ' '], "-");
        Self::ALL
            .into_iter()
            .find(|f| {
                f.name() == k
                    || (k == "ramlak" && *f == Self::RamLak)
                    || (k == "ramp" && *f == Self::RamLak)
                    || (k == "shepplogan" && *f == Self::SheppLogan)
                    || (k == "hanning" && *f == Self::Hann)
            })
            .ok_or_else(|| {
                format!(
                    "unknown filter '{s}' (use one of {})",
                    Self::ALL.map(|f| f.name()).join(", ")
                )
            })
    }
}

impl std::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a detector row is extended before the FFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// Zeros beyond the detector.
    #[default]
    Zero,
    /// The edge values repeated (reduces truncation artefacts when the object
    /// is wider than the detector).
    Edge,
}

impl std::str::FromStr for Padding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "zero" | "zeros" => Ok(Self::Zero),
            "edge" | "replicate" => Ok(Self::Edge),
            _ => Err(format!("unknown padding '{s}' (use zero or edge)")),
        }
    }
}

/// A complete description of the FBP filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterSpec {
    /// Apodisation window.
    pub kind: FilterKind,
    /// Frequency cutoff as a fraction of Nyquist, in (0, 1].
    pub cutoff: f32,
    /// How rows are padded.
    pub padding: Padding,
}

impl Default for FilterSpec {
    fn default() -> Self {
        Self {
            kind: FilterKind::RamLak,
            cutoff: 1.0,
            padding: Padding::Zero,
        }
    }
}

impl FilterSpec {
    /// A filter of the given kind with cutoff 1 and zero padding.
    pub fn new(kind: FilterKind) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(self.cutoff > 0.0 && self.cutoff <= 1.0) {
            return Err(CoreError::Parameter(format!(
                "filter cutoff {} must lie in (0, 1]",
                self.cutoff
            )));
        }
        Ok(())
    }

    /// Real frequency response for rows padded to `padded_len` (length
    /// `padded_len / 2 + 1`, one value per real-FFT bin), for bins of width
    /// `bin_width`. It includes the `1 / padded_len` of the unnormalised
    /// inverse FFT, so a backend computes `irfft(rfft(row) · response)`.
    pub fn frequency_response(&self, padded_len: usize, bin_width: f32) -> Vec<f32> {
        let p = padded_len;
        let mut planner = RealFftPlanner::<f64>::new();
        let fft = planner.plan_fft_forward(p);
        let mut kernel = fft.make_input_vec();
        for (j, v) in kernel.iter_mut().enumerate() {
            let k = if j <= p / 2 {
                j as i64
            } else {
                j as i64 - p as i64
            };
            *v = if k == 0 {
                0.25
            } else if k % 2 != 0 {
                -1.0 / (PI * PI * (k * k) as f64)
            } else {
                0.0
            };
        }
        let mut spectrum = fft.make_output_vec();
        fft.process(&mut kernel, &mut spectrum)
            .expect("buffers come from the plan");
        let scale = 1.0 / (bin_width as f64 * p as f64);
        let cutoff = self.cutoff as f64;
        spectrum
            .iter()
            .enumerate()
            .map(|(f, c)| {
                let w = f as f64 / (p as f64 / 2.0);
                (c.re * self.kind.window(w, cutoff) * scale) as f32
            })
            .collect()
    }
}

/// Padded row length for `n` bins: the smallest even 2^a·3^b·5^c ≥ 2n
/// (fast for rustfft and cuFFT alike).
pub fn padded_len(n: usize) -> usize {
    smooth_even(2 * n)
}

/// The smallest even 2^a·3^b·5^c ≥ `n` (at least 2): a transform length
/// that rustfft and cuFFT handle fast.
pub fn smooth_even(n: usize) -> usize {
    (n.max(2)..)
        .find(|&m| {
            let mut r = m;
            for f in [2, 3, 5] {
                while r % f == 0 {
                    r /= f;
                }
            }
            r == 1 && m % 2 == 0
        })
        .expect("a smooth number always exists")
}

/// A prepared filter for rows of one length: FFT plans and response
/// (plan once, apply to many rows, like rustfft's planner).
pub struct RowFilter {
    n: usize,
    padded: usize,
    padding: Padding,
    forward: Arc<dyn RealToComplex<f32>>,
    inverse: Arc<dyn ComplexToReal<f32>>,
    response: Vec<f32>,
}

impl RowFilter {
    /// Plans filtering of rows of `n` bins of width `bin_width`.
    pub fn new(spec: &FilterSpec, n: usize, bin_width: f32) -> Result<Self> {
        spec.validate()?;
        if n == 0 {
            return Err(CoreError::Shape("cannot filter rows of 0 bins".into()));
        }
        let padded = padded_len(n);
        let mut planner = RealFftPlanner::<f32>::new();
        Ok(Self {
            n,
            padded,
            padding: spec.padding,
            forward: planner.plan_fft_forward(padded),
            inverse: planner.plan_fft_inverse(padded),
            response: spec.frequency_response(padded, bin_width),
        })
    }

    /// Row length this filter was planned for.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether rows are empty (never for a constructed filter).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Padded FFT length.
    pub fn padded_len(&self) -> usize {
        self.padded
    }

    /// Filters every row (last axis) of `rows` in place, rows in parallel.
    pub fn apply(&self, mut rows: ArrayViewMut2<'_, f32>) -> Result<()> {
        if rows.ncols() != self.n {
            return Err(CoreError::Shape(format!(
                "rows of {} bins given to a filter planned for {}",
                rows.ncols(),
                self.n
            )));
        }
        rows.axis_iter_mut(Axis(0)).into_par_iter().for_each_init(
            || Scratch::new(self),
            |scratch, mut row| {
                let s = scratch;
                self.fill_padded(&mut s.real, row.iter().copied());
                self.forward
                    .process_with_scratch(&mut s.real, &mut s.spectrum, &mut s.fwd)
                    .expect("buffers come from the plan");
                for (c, &h) in s.spectrum.iter_mut().zip(&self.response) {
                    *c *= h;
                }
                // realfft requires purely real DC and Nyquist terms.
                s.spectrum[0].im = 0.0;
                if let Some(last) = s.spectrum.last_mut() {
                    last.im = 0.0;
                }
                self.inverse
                    .process_with_scratch(&mut s.spectrum, &mut s.real, &mut s.inv)
                    .expect("buffers come from the plan");
                for (dst, &src) in row.iter_mut().zip(&s.real) {
                    *dst = src;
                }
            },
        );
        Ok(())
    }

    fn fill_padded(&self, buf: &mut [f32], row: impl Iterator<Item = f32>) {
        let n = self.n;
        for (d, v) in buf.iter_mut().zip(row) {
            *d = v;
        }
        match self.padding {
            Padding::Zero => buf[n..].fill(0.0),
            Padding::Edge => {
                // Circular extension: right edge after the row, left edge
                // wrapping in from the end of the buffer.
                let (first, last) = (buf[0], buf[n - 1]);
                let half = n + (self.padded - n) / 2;
                buf[n..half].fill(last);
                buf[half..].fill(first);
            }
        }
    }
}

struct Scratch {
    real: Vec<f32>,
    spectrum: Vec<Complex<f32>>,
    fwd: Vec<Complex<f32>>,
    inv: Vec<Complex<f32>>,
}

impl Scratch {
    fn new(f: &RowFilter) -> Self {
        Self {
            real: f.forward.make_input_vec(),
            spectrum: f.forward.make_output_vec(),
            fwd: f.forward.make_scratch_vec(),
            inv: f.inverse.make_scratch_vec(),
        }
    }
}
