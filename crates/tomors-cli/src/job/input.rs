//! The input part of a job and its one loader: every method reads its
//! projections (HDF5 DXchange/NeXus, TIFF stack, `.npy`, raw) through the
//! same `tomors-io` readers and the same preprocessing (flats/darks, −log,
//! zingers, stripes), slab by slab for FBP, whole for the methods that need
//! every projection at once.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ndarray::{Array1, Array3, ArrayD};
use tomors_core::fbp::check_finite;
use tomors_io::preprocess::{Average, LogMode, Preprocess};
use tomors_io::source::{input_kind, InputKind, RawSpec};
use tomors_io::{OpenOptions, ProjectionSource, StripeMethod};

/// Unit of angles read from a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AngleUnit {
    /// Radians.
    Rad,
    /// Degrees.
    Deg,
}

impl AngleUnit {
    /// The reader's unit.
    pub fn to_io(self) -> tomors_io::AngleUnit {
        match self {
            Self::Rad => tomors_io::AngleUnit::Radians,
            Self::Deg => tomors_io::AngleUnit::Degrees,
        }
    }
}

/// Element type of a raw file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RawDtype {
    /// Unsigned 8-bit.
    U8,
    /// Unsigned 16-bit.
    U16,
    /// Unsigned 32-bit.
    U32,
    /// Signed 16-bit.
    I16,
    /// Signed 32-bit.
    I32,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

/// Byte order of a raw file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

/// The raw-file layout as given (`--raw-shape` and friends).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RawArgs {
    /// `--raw-shape`: angles, rows, cols.
    pub shape: Option<[usize; 3]>,
    /// `--raw-dtype` (default f32).
    pub dtype: Option<RawDtype>,
    /// `--raw-endian` (default little).
    pub endian: Option<Endian>,
    /// `--raw-offset` (default 0).
    pub offset: Option<u64>,
    /// `--raw-allow-trailing`: accept surplus bytes after the data.
    pub allow_trailing: bool,
}

impl RawArgs {
    /// The reader's layout, when `--raw-shape` was given.
    pub fn spec(&self) -> Option<RawSpec> {
        use tomors_io::source::{Endian as E, RawDtype as D};
        Some(RawSpec {
            shape: self.shape?,
            dtype: match self.dtype.unwrap_or(RawDtype::F32) {
                RawDtype::U8 => D::U8,
                RawDtype::U16 => D::U16,
                RawDtype::U32 => D::U32,
                RawDtype::I16 => D::I16,
                RawDtype::I32 => D::I32,
                RawDtype::F32 => D::F32,
                RawDtype::F64 => D::F64,
            },
            endian: match self.endian.unwrap_or(Endian::Little) {
                Endian::Little => E::Little,
                Endian::Big => E::Big,
            },
            offset: self.offset.unwrap_or(0),
            allow_trailing: self.allow_trailing,
        })
    }
}

/// Where the projections come from and how to read them.
#[derive(Clone, Debug, Default)]
pub struct InputSpec {
    /// The projections (file, directory or glob).
    pub path: PathBuf,
    /// HDF5 dataset paths and separate flat/dark stacks.
    pub open: OpenOptions,
    /// The raw-file layout.
    pub raw: RawArgs,
    /// `--angles`: a 1-D `.npy` of angles.
    pub angles: Option<PathBuf>,
    /// `--angles-unit`.
    pub angles_unit: Option<AngleUnit>,
    /// `--angle-range` in degrees.
    pub angle_range: Option<f32>,
    /// Region of interest and binning.
    pub roi: RoiSpec,
    /// `--half-acquisition`: the scan is stitched into the wide 180° scan
    /// as it is opened (the axis given or found).
    pub half: Option<super::half::HalfSpec>,
}

/// `--cols`, `--projections`, `--binning`, `--bin-angles` as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoiSpec {
    /// `--cols a:b`.
    pub cols: Option<(Option<usize>, Option<usize>)>,
    /// `--projections a:b[:step]`.
    pub projections: Option<(Option<usize>, Option<usize>, Option<usize>)>,
    /// `--binning rows,cols`.
    pub binning: Option<(usize, usize)>,
    /// `--bin-angles n`.
    pub bin_angles: Option<usize>,
}

impl RoiSpec {
    /// Each flag given, by name.
    pub fn given(&self) -> [(bool, &'static str); 4] {
        [
            (self.cols.is_some(), "--cols"),
            (self.projections.is_some(), "--projections"),
            (self.binning.is_some(), "--binning"),
            (self.bin_angles.is_some(), "--bin-angles"),
        ]
    }

    /// Whether any is given.
    pub fn any(&self) -> bool {
        self.given().iter().any(|g| g.0)
    }

    /// The subset of a scan of `[angles, rows, cols]`.
    fn subset(&self, shape: [usize; 3]) -> Result<tomors_io::subset::SubsetSpec> {
        let [na, _, nc] = shape;
        let (c0, c1) = self.cols.unwrap_or((None, None));
        let (c0, c1) = (c0.unwrap_or(0), c1.unwrap_or(nc));
        if c0 >= c1 || c1 > nc {
            bail!("--cols {c0}:{c1} is empty or outside the detector's {nc} columns");
        }
        let (p0, p1, step) = self.projections.unwrap_or((None, None, None));
        let (p0, p1) = (p0.unwrap_or(0), p1.unwrap_or(na));
        if p0 >= p1 || p1 > na {
            bail!("--projections {p0}:{p1} is empty or outside the scan's {na} projections");
        }
        let (br, bc) = self.binning.unwrap_or((1, 1));
        let ba = self.bin_angles.unwrap_or(1);
        if ba == 0 {
            bail!("--bin-angles must be at least 1");
        }
        Ok(tomors_io::subset::SubsetSpec {
            projections: p0..p1,
            step: step.unwrap_or(1),
            cols: c0..c1,
            bin: [ba, br, bc],
        })
    }
}

/// `--retrieve-phase`: the phase-retrieval method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PhaseMethod {
    /// Paganin et al. 2002, single material.
    Paganin,
}

/// Phase retrieval as given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseSpec {
    /// `--retrieve-phase`.
    pub method: Option<PhaseMethod>,
    /// `--delta-beta`.
    pub delta_beta: Option<f64>,
    /// `--energy` (keV).
    pub energy: Option<f64>,
    /// `--distance` (mm).
    pub distance: Option<f64>,
    /// `--detector-pixel` (µm, width and height).
    pub pixel: Option<(f64, f64)>,
    /// `--phase-pad`.
    pub pad: Option<usize>,
}

impl PhaseSpec {
    /// The retrieval, or `None`; refuses parameters without
    /// `--retrieve-phase` and a method without its parameters.
    pub fn paganin(&self) -> Result<Option<tomors_io::Paganin>> {
        let Some(PhaseMethod::Paganin) = self.method else {
            for (given, flag) in [
                (self.delta_beta.is_some(), "--delta-beta"),
                (self.energy.is_some(), "--energy"),
                (self.distance.is_some(), "--distance"),
                (self.pixel.is_some(), "--detector-pixel"),
                (self.pad.is_some(), "--phase-pad"),
            ] {
                if given {
                    bail!(
                        "{flag} is a phase-retrieval parameter and needs --retrieve-phase paganin"
                    );
                }
            }
            return Ok(None);
        };
        let need = |v: Option<f64>, flag: &str| {
            v.with_context(|| format!("--retrieve-phase paganin needs {flag}"))
        };
        let p = tomors_io::Paganin {
            delta_beta: need(self.delta_beta, "--delta-beta")?,
            energy_kev: need(self.energy, "--energy (keV)")?,
            distance_mm: need(self.distance, "--distance (mm)")?,
            pixel_um: self
                .pixel
                .context("--retrieve-phase paganin needs --detector-pixel (µm)")?,
            pad: self.pad,
        };
        p.validate().map_err(|e| {
            anyhow::anyhow!(
                "--retrieve-phase: {}",
                e.to_string().trim_start_matches("invalid parameter: ")
            )
        })?;
        Ok(Some(p))
    }
}

/// Preprocessing as given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PreSpec {
    /// `--rotate-proj` (degrees).
    pub rotate: Option<f64>,
    /// `--retrieve-phase` and its parameters.
    pub phase: PhaseSpec,
    /// `--flat-average`.
    pub flat_average: Option<Average>,
    /// `--log`.
    pub log: Option<LogMode>,
    /// `--no-flat-dark`.
    pub no_flat_dark: bool,
    /// `--zinger`.
    pub zinger: Option<f32>,
    /// `--stripe`.
    pub stripe: Option<StripeMethod>,
}

impl PreSpec {
    /// The preprocessing (validated).
    pub fn preprocess(&self) -> Result<Preprocess> {
        let p = Preprocess {
            flat_dark: !self.no_flat_dark,
            average: self.flat_average.unwrap_or_default(),
            log: self.log.unwrap_or_default(),
            zinger_threshold: self.zinger,
            stripe: self.stripe,
            rotate_deg: self.rotate,
            phase: self.phase.paganin()?,
            ..Default::default()
        };
        if let Some(d) = self.rotate {
            if !(d.is_finite() && d.abs() <= 45.0) {
                bail!("--rotate-proj {d} must be within ±45 degrees");
            }
        }
        if p.phase.is_some() && p.log == LogMode::Never {
            bail!("--retrieve-phase needs transmissions and −log (not --log never)");
        }
        p.validate()?;
        Ok(p)
    }
}

/// Where the angles of a scan came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnglesFrom {
    /// `--angles`.
    File,
    /// The input file itself (HDF5).
    Stored,
    /// Evenly over `--angle-range`.
    Range,
    /// Nothing says: evenly over 180° (parallel beam); cone beam replaces
    /// them with its own default.
    Default,
}

/// An opened scan: the reader, the angles and the preprocessing.
pub struct Scan {
    /// The reader.
    pub source: Box<dyn ProjectionSource>,
    /// The angles in radians, one per projection.
    pub angles: Vec<f32>,
    /// Where `angles` came from.
    pub angles_from: AnglesFrom,
    /// The preprocessing applied to every slab read.
    pub pre: Preprocess,
    /// `--cols`/`--binning`: a detector column of the whole detector in
    /// the scan's columns is `(c − offset − (bin − 1)/2) / bin`:
    /// `(offset, column bin)`.
    pub columns: (usize, usize),
    /// `--binning`: detector rows per row of the scan, and the detector's
    /// rows before binning.
    pub row_bin: (usize, usize),
    /// `--half-acquisition`: how the 360° scan was stitched (`source` and
    /// `angles` are then the stitched scan's).
    pub half: Option<super::half::Stitched>,
}

/// Name of an input kind, for messages.
fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Hdf5 => "an HDF5 file",
        InputKind::Tiff => "a TIFF stack",
        InputKind::Npy => "an .npy file",
        InputKind::Raw => "raw input",
    }
}

/// Opens the scan of `input` with the preprocessing `pre`, refusing the
/// flags that do not apply to its kind of file. `need_stored` asks to
/// distinguish angles stored in an HDF5 file from the reader's default
/// (cone beam has a default of its own).
pub fn open(input: &InputSpec, pre: &PreSpec, need_stored: bool) -> Result<Scan> {
    let path = &input.path;
    let pre_options = pre.preprocess()?;
    let mut opts = input.open.clone();
    opts.raw = input.raw.spec();
    let kind = input_kind(path, &opts)?;
    let what = kind_name(kind);
    if kind != InputKind::Hdf5 {
        for (given, flag) in [
            (opts.data_path.is_some(), "--data-path"),
            (opts.image_key_path.is_some(), "--image-key-path"),
            (opts.angles_path.is_some(), "--angles-path"),
        ] {
            if given {
                bail!("{flag} applies to HDF5 input; {} is {what}", path.display());
            }
        }
        if input.angles.is_none() && input.angles_unit.is_some() {
            bail!(
                "--angles-unit applies to --angles or to angles stored in an HDF5 input; {} is {what} \
                 without angles",
                path.display()
            );
        }
    } else {
        for (given, flag) in [
            (opts.flats.is_some(), "--flats"),
            (opts.darks.is_some(), "--darks"),
        ] {
            if given {
                bail!(
                    "{flag} applies to TIFF, .npy and raw input; {} is an HDF5 file, whose own \
                     flats and darks are used",
                    path.display()
                );
            }
        }
    }
    opts.angles_unit = input
        .angles
        .is_none()
        .then_some(input.angles_unit)
        .flatten()
        .map(AngleUnit::to_io);
    if let Some(r) = input.angle_range {
        opts.angle_range = Some(f64::from(r).to_radians());
    }
    let source = tomors_io::open(path, &opts)?;
    let n_angles = source.shape()[0];
    let stored = input.angles.is_none()
        && kind == InputKind::Hdf5
        && (input.angle_range.is_some() || need_stored)
        && stores_angles(path, &opts, source.angles())?;
    let (angles, angles_from) = if let Some(file) = &input.angles {
        let unit = input.angles_unit.unwrap_or(AngleUnit::Rad);
        (read_angles_file(file, n_angles, unit)?, AnglesFrom::File)
    } else if stored {
        if input.angle_range.is_some() {
            bail!(
                "--angle-range: {} stores its own angles (use --angles to replace them)",
                path.display()
            );
        }
        (source.angles().to_vec(), AnglesFrom::Stored)
    } else if input.angle_range.is_some() {
        (source.angles().to_vec(), AnglesFrom::Range)
    } else if kind == InputKind::Hdf5 && !need_stored {
        // Stored or the reader's default: parallel beam does not mind.
        (source.angles().to_vec(), AnglesFrom::Stored)
    } else {
        (source.angles().to_vec(), AnglesFrom::Default)
    };
    let mut pre_options = pre_options;
    if pre_options.phase.is_some()
        && pre.log.unwrap_or_default() == LogMode::Auto
        && source.n_flats() == 0
    {
        bail!(
            "--retrieve-phase needs flat-field normalised transmissions: {} has no flats \
             (give --flats, or --log always when the data are normalised already)",
            path.display()
        );
    }
    let [_, detector_rows, _] = source.shape();
    let (source, angles, columns, row_bin) = if input.roi.any() {
        let spec = input.roi.subset(source.shape())?;
        let columns = (spec.cols.start, spec.bin[2]);
        let row_bin = (spec.bin[1], detector_rows);
        if let Some(p) = pre_options.phase.as_mut() {
            p.pixel_um.0 *= spec.bin[2] as f64;
            p.pixel_um.1 *= spec.bin[1] as f64;
        }
        let sub = tomors_io::subset::Subset::new(source, &angles, spec)?;
        let angles = sub.angles().to_vec();
        let boxed: Box<dyn ProjectionSource> = Box::new(sub);
        (boxed, angles, columns, row_bin)
    } else {
        (source, angles, (0, 1), (1, detector_rows))
    };
    if source.n_flats() + source.n_darks() == 0 {
        for (given, flag) in [
            (pre.flat_average.is_some(), "--flat-average"),
            (pre.no_flat_dark, "--no-flat-dark"),
        ] {
            if given {
                bail!("{flag}: {} has no flats or darks", path.display());
            }
        }
    }
    let (source, angles, half) = match &input.half {
        Some(spec) => {
            let (s, a, h) = super::half::stitch(source, &angles, &pre_options, columns, spec)?;
            (s, a, Some(h))
        }
        None => (source, angles, None),
    };
    Ok(Scan {
        source,
        angles,
        angles_from,
        pre: pre_options,
        columns,
        row_bin,
        half,
    })
}

/// Whether an HDF5 file stores its angles: opened again with another
/// default range, a file without angles gives other angles.
fn stores_angles(path: &Path, opts: &OpenOptions, angles: &[f32]) -> Result<bool> {
    let mut other = opts.clone();
    let range = opts.angle_range.unwrap_or(std::f64::consts::PI);
    other.angle_range = Some(range * 0.5);
    let again = tomors_io::open(path, &other)?;
    Ok(again.angles() == angles)
}

impl Scan {
    /// A column position of the whole detector in the scan's columns
    /// (after `--cols` and `--binning`).
    pub fn to_scan_column(&self, c: f64) -> f64 {
        super::geometry::scan_column(self.columns, c)
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        self.source.path()
    }

    /// `[angles, rows, cols]`.
    pub fn shape(&self) -> [usize; 3] {
        self.source.shape()
    }

    /// Reads and preprocesses detector rows `rows` of every projection,
    /// whole (`[angle][row][col]`), after checking that `bytes` (what the
    /// method will hold, estimated by the caller) fit `budget`.
    pub fn read_whole(
        &self,
        rows: Range<usize>,
        bytes: usize,
        budget: Option<usize>,
        method: &str,
    ) -> Result<Array3<f32>> {
        if let Some(budget) = budget {
            if bytes > budget {
                bail!(
                    "{}: --memory {} MiB is too small: {method} holds the whole scan, about {} MiB",
                    self.path().display(),
                    budget >> 20,
                    bytes.div_ceil(1 << 20)
                );
            }
        }
        let projections = self.source.read_rows(rows, &self.pre)?;
        check_finite(projections.view(), "the preprocessed projections")
            .with_context(|| self.path().display().to_string())?;
        Ok(projections)
    }
}

/// Reads `n_angles` finite angles from a 1-D `.npy` file (any common
/// numeric type, read once in the type its header names), in radians.
pub fn read_angles_file(path: &Path, n_angles: usize, unit: AngleUnit) -> Result<Vec<f32>> {
    let values = read_npy_1d(path)?;
    if values.len() != n_angles {
        bail!(
            "{}: {} angles for {} projections",
            path.display(),
            values.len(),
            n_angles
        );
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        bail!("{}: angle {v} is not finite", path.display());
    }
    let (angles, io_unit): (Vec<f32>, _) = match unit {
        AngleUnit::Rad => (values.to_vec(), tomors_io::AngleUnit::Radians),
        AngleUnit::Deg => (
            values.iter().map(|d| d.to_radians()).collect(),
            tomors_io::AngleUnit::Degrees,
        ),
    };
    // What cannot be a scan (degrees given as radians, all equal, ...).
    tomors_io::angles::check_angles(&angles, io_unit)
        .map_err(|m| anyhow::anyhow!("{}: {m}", path.display()))?;
    Ok(angles)
}

/// A 1-D `.npy` array as f32: the header (through `tomors-io`) names the
/// element type, `ndarray-npy` reads the data in that type.
fn read_npy_1d(path: &Path) -> Result<Array1<f32>> {
    use ndarray_npy::ReadNpyExt;
    // An input: no output may replace it.
    tomors_io::output::register_input(path);
    let header = tomors_io::npy::read_npy_header(path)?;
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let reader = std::io::BufReader::new(file);
    let descr = header.descr.trim_start_matches(['<', '>', '|', '=']);
    macro_rules! read_as {
        ($t:ty) => {
            ArrayD::<$t>::read_npy(reader).map(|a| a.mapv(|v| v as f32))
        };
    }
    let values = match descr {
        "f4" => read_as!(f32),
        "f8" => read_as!(f64),
        "u1" => read_as!(u8),
        "u2" => read_as!(u16),
        "u4" => read_as!(u32),
        "i1" => read_as!(i8),
        "i2" => read_as!(i16),
        "i4" => read_as!(i32),
        "i8" => read_as!(i64),
        other => bail!(
            "{}: angles of element type '{other}' (use a float or integer type)",
            path.display()
        ),
    }
    .map_err(|e| anyhow::anyhow!("{}: not a readable .npy array ({e})", path.display()))?;
    if values.ndim() != 1 {
        bail!(
            "{}: angles must be a 1-D array, found shape {:?}",
            path.display(),
            values.shape()
        );
    }
    Ok(values.into_dimensionality()?)
}
