//! Reading scans (`tomors.read`), preprocessing (`normalize`, `minus_log`,
//! `remove_stripes`, `remove_zingers`), centre finding (`find_center`,
//! also the 360° half-acquisition axis), half-acquisition stitching
//! (`stitch_half`) and writing volumes (`tomors.write`), through `tomors-io`.

use std::path::PathBuf;

use ndarray::{Array3, ArrayD, Axis};
use numpy::{
    IntoPyArray, PyArray3, PyArrayDyn, PyReadonlyArray1, PyReadonlyArray3, PyReadonlyArrayDyn,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;
use tomors_io::preprocess::{
    average_groups, flat_dark_correct, remove_zingers as zingers, Average,
};
use tomors_io::source::{Endian, RawDtype, RawSpec};
use tomors_io::stripe::StripeMethod;
use tomors_io::tiffio::TiffDepth;
use tomors_io::writer::create_writer_with;
use tomors_io::{AngleUnit, CenterOptions, FrameGroup, OpenOptions, VolumeFormat, VolumeMeta};

use crate::args::parse_name;
use crate::boundary::{compute, value, Result};

/// `tomors.read`: the raw projections, flats and darks of detector rows
/// `rows` (all by default), the angles (radians) and what was read.
#[pyfunction]
#[pyo3(signature = (path, rows, data_path, image_key_path, angles_path, angles_unit, flats, darks, raw_shape, raw_dtype, raw_endian, raw_offset, angle_range, angles))]
#[allow(clippy::too_many_arguments)]
pub fn read<'py>(
    py: Python<'py>,
    path: PathBuf,
    rows: Option<(usize, usize)>,
    data_path: Option<String>,
    image_key_path: Option<String>,
    angles_path: Option<String>,
    angles_unit: Option<String>,
    flats: Option<PathBuf>,
    darks: Option<PathBuf>,
    raw_shape: Option<(usize, usize, usize)>,
    raw_dtype: &str,
    raw_endian: &str,
    raw_offset: u64,
    angle_range: Option<f64>,
    angles: Option<PyReadonlyArray1<'py, f32>>,
) -> PyResult<Bound<'py, PyDict>> {
    let angles = angles.map(|a| a.as_array().to_vec());
    let (slab, angles, format, shape) = compute(py, || {
        let raw = match raw_shape {
            None => None,
            Some((a, r, c)) => Some(RawSpec {
                shape: [a, r, c],
                dtype: parse_name::<RawDtype>(raw_dtype)?,
                endian: parse_name::<Endian>(raw_endian)?,
                offset: raw_offset,
                // Sizes must match exactly (the strict default of the CLI).
                allow_trailing: false,
            }),
        };
        let opts = OpenOptions {
            data_path,
            image_key_path,
            angles_path,
            angles_unit: angles_unit
                .as_deref()
                .map(parse_name::<AngleUnit>)
                .transpose()?,
            flats,
            darks,
            raw,
            angle_range: angle_range.map(f64::to_radians),
            angles,
        };
        let source = tomors_io::open(&path, &opts)?;
        let shape = source.shape();
        let rows = match rows {
            None => 0..shape[1],
            Some((a, b)) => a..b,
        };
        let slab = source.read_raw(rows)?;
        Ok((slab, source.angles().to_vec(), source.format(), shape))
    })?;
    let d = PyDict::new(py);
    let groups = |gs: Vec<FrameGroup>| -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for g in gs {
            list.append((g.position, g.frames.into_pyarray(py)))?;
        }
        Ok(list)
    };
    d.set_item("projections", slab.projections.into_pyarray(py))?;
    d.set_item("flats", groups(slab.flats)?)?;
    d.set_item("darks", groups(slab.darks)?)?;
    d.set_item("angles", ndarray::Array1::from(angles).into_pyarray(py))?;
    d.set_item("format", format)?;
    d.set_item("shape", (shape[0], shape[1], shape[2]))?;
    d.set_item("rows", (slab.rows.start, slab.rows.end))?;
    Ok(d)
}

/// Frames `[frame][row][col]` grouped by equal consecutive positions.
fn frame_groups(
    frames: &ndarray::ArrayView3<'_, f32>,
    positions: &[f64],
) -> Result<Vec<FrameGroup>> {
    let n = frames.len_of(Axis(0));
    if positions.len() != n {
        return Err(value(format!(
            "{} positions for {n} frames",
            positions.len()
        )));
    }
    let mut out: Vec<FrameGroup> = Vec::new();
    let mut start = 0;
    for i in 1..=n {
        if i == n || positions[i] != positions[start] {
            if !positions[start].is_finite() {
                return Err(value(format!(
                    "frame position {} is not finite",
                    positions[start]
                )));
            }
            out.push(FrameGroup {
                position: positions[start],
                frames: frames.slice(ndarray::s![start..i, .., ..]).to_owned(),
            });
            start = i;
        }
    }
    Ok(out)
}

/// `tomors.normalize`: `(proj − dark) / (flat − dark)`, flats and darks
/// averaged per group and interpolated over the projection index between
/// groups (as `tomors recon` does).
#[pyfunction]
#[pyo3(signature = (proj, flats, flat_positions, darks, dark_positions, average))]
pub fn normalize<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    flats: PyReadonlyArray3<'py, f32>,
    flat_positions: Vec<f64>,
    darks: PyReadonlyArray3<'py, f32>,
    dark_positions: Vec<f64>,
    average: &str,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let (proj, flats, darks) = (proj.as_array(), flats.as_array(), darks.as_array());
    let out = compute(py, || {
        let average = parse_name::<Average>(average)?;
        let (_, nr, nc) = proj.dim();
        for (what, f) in [("flats", &flats), ("darks", &darks)] {
            let (k, r, c) = f.dim();
            if k > 0 && (r, c) != (nr, nc) {
                return Err(value(format!(
                    "{what} are frames of {r}×{c}, the projections {nr}×{nc}"
                )));
            }
        }
        let f = average_groups(&frame_groups(&flats, &flat_positions)?, average);
        let d = average_groups(&frame_groups(&darks, &dark_positions)?, average);
        let mut out = proj.as_standard_layout().into_owned();
        flat_dark_correct(&mut out, &f, &d);
        Ok(out)
    })?;
    Ok(out.into_pyarray(py))
}

/// `tomors.minus_log`: `−log(max(x, epsilon))` (NaN also becomes epsilon),
/// as `tomors recon` does.
#[pyfunction]
#[pyo3(signature = (x, epsilon))]
pub fn minus_log<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, f32>,
    epsilon: f32,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let x = x.as_array();
    let out: ArrayD<f32> = compute(py, || {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(value(format!("epsilon {epsilon} must be positive")));
        }
        let mut out = x.as_standard_layout().into_owned();
        out.par_mapv_inplace(|v| {
            let v = if v > epsilon { v } else { epsilon };
            -v.ln()
        });
        Ok(out)
    })?;
    Ok(out.into_pyarray(py))
}

/// Runs `f` on every sinogram `[angle][bin]` of a copy of projections
/// `[angle][row][bin]`, rows in parallel.
fn per_sinogram(
    proj: ndarray::ArrayView3<'_, f32>,
    f: impl Fn(ndarray::ArrayViewMut2<'_, f32>) + Sync,
) -> Array3<f32> {
    let mut out = proj.as_standard_layout().into_owned();
    out.view_mut()
        .permuted_axes([1, 0, 2])
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .for_each(&f);
    out
}

/// `tomors.remove_stripes`: stripe (ring) removal on every sinogram with
/// the CLI's `--stripe METHOD[:params]` (`StripeMethod`: sorting,
/// filtering, fitting, large, dead, all, fw; a bare number is the
/// sorting window).
#[pyfunction]
#[pyo3(signature = (proj, method))]
pub fn remove_stripes<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    method: &str,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let proj = proj.as_array();
    let out = compute(py, || {
        let m = method.parse::<StripeMethod>().map_err(value)?;
        Ok(per_sinogram(proj, |s| m.apply(s)))
    })?;
    Ok(out.into_pyarray(py))
}

/// `tomors.remove_zingers`: 3×3 median outlier removal per sinogram.
#[pyfunction]
#[pyo3(signature = (proj, threshold))]
pub fn remove_zingers<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    threshold: f32,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let proj = proj.as_array();
    let out = compute(py, || {
        if !(threshold.is_finite() && threshold > 0.0) {
            return Err(value(format!(
                "zinger threshold {threshold} must be positive"
            )));
        }
        Ok(per_sinogram(proj, |s| zingers(s, threshold)))
    })?;
    Ok(out.into_pyarray(py))
}

/// `(centre, quality, [(row, centre, quality), …])` of [`find_center`].
pub type CenterFound = (f32, f32, Vec<(usize, f32, f32)>);

/// The detector rows a centre search uses: `rows`, or (as the CLI's
/// `--center auto`) up to 3 spread over the detector.
pub fn search_rows(rows: Option<Vec<usize>>, nr: usize) -> Result<Vec<usize>> {
    if nr == 0 {
        return Err(value("the projections have no detector rows"));
    }
    let rows = match rows {
        Some(r) if !r.is_empty() => r,
        Some(_) => return Err(value("rows is empty")),
        None => {
            let mut v: Vec<usize> = [nr / 4, nr / 2, (3 * nr) / 4]
                .iter()
                .map(|&k| k.min(nr - 1))
                .collect();
            v.dedup();
            v
        }
    };
    if let Some(&r) = rows.iter().find(|&&r| r >= nr) {
        return Err(value(format!("row {r} outside the detector's {nr} rows")));
    }
    Ok(rows)
}

/// `tomors.find_center`: the rotation centre (Vo et al. 2014) on detector
/// rows `rows` of preprocessed projections, searched `smin..smax` around
/// the detector's middle or over columns `range = (a, b)` (the CLI's
/// `--center-range a:b`); with `half`, the offset axis of a 360°
/// half-acquisition scan ([`tomors_io::half::find_axis_360`], as the CLI's
/// `--half-acquisition`; `range` limits it, default the whole detector).
/// Returns `(centre, quality, [(row, centre, quality), …])`, the centre
/// being the median over rows.
#[pyfunction]
#[pyo3(signature = (proj, theta, rows, smin, smax, range, half))]
#[allow(clippy::too_many_arguments)]
pub fn find_center(
    py: Python<'_>,
    proj: PyReadonlyArray3<'_, f32>,
    theta: PyReadonlyArray1<'_, f32>,
    rows: Option<Vec<usize>>,
    smin: f32,
    smax: f32,
    range: Option<(f32, f32)>,
    half: bool,
) -> PyResult<CenterFound> {
    let proj = proj.as_array();
    let theta = theta.as_array().to_vec();
    compute(py, || {
        let (na, nr, nc) = proj.dim();
        if theta.len() != na {
            return Err(value(format!(
                "theta has {} angles for {na} projections",
                theta.len()
            )));
        }
        let rows = search_rows(rows, nr)?;
        let mut found = Vec::new();
        if half {
            let options = tomors_io::half::AxisSearch {
                range: range.map(|(a, b)| (f64::from(a), f64::from(b))),
                ..Default::default()
            };
            for &r in &rows {
                let res =
                    tomors_io::half::find_axis_360(proj.index_axis(Axis(1), r), &theta, &options)
                        .map_err(|e| value(format!("row {r}: {}", io_message(e))))?;
                found.push((r, res.axis as f32, res.quality as f32));
            }
        } else {
            let options = match range {
                Some((a, b)) => CenterOptions::for_range(a, b, nc)
                    .map_err(|e| value(format!("range: {}", io_message(e))))?,
                None => CenterOptions {
                    smin,
                    smax,
                    ..CenterOptions::default()
                },
            };
            for &r in &rows {
                let sino = proj.index_axis(Axis(1), r);
                let res = tomors_io::find_center(sino, &theta, &options)?;
                found.push((r, res.center, res.quality));
            }
        }
        let mut cs: Vec<f32> = found.iter().map(|f| f.1).collect();
        let center = tomors_io::preprocess::median(&mut cs);
        let quality = found.iter().map(|f| f.2).sum::<f32>() / found.len() as f32;
        Ok((center, quality, found))
    })
}

/// An `IoError`'s message without its "invalid parameter: " prefix.
pub fn io_message(e: tomors_io::IoError) -> String {
    e.to_string()
        .trim_start_matches("invalid parameter: ")
        .to_string()
}

/// `tomors.stitch_half`: a 360° half-acquisition scan (projections
/// `[angle][row][col]`, preprocessed, angles covering a turn) stitched
/// with the rotation axis at column `axis` into the 180° scan of about
/// twice the width, as the CLI's `--half-acquisition` (tomors-io's
/// [`Stitch`](tomors_io::half::Stitch)): returns the stitched projections
/// `[pair][row][width]`, their angles (the first half turn's), the axis in
/// the stitched columns and the overlap (pixels).
#[pyfunction]
#[pyo3(signature = (proj, theta, axis))]
#[allow(clippy::type_complexity)]
pub fn stitch_half<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    axis: f64,
) -> PyResult<(
    Bound<'py, PyArray3<f32>>,
    Bound<'py, numpy::PyArray1<f32>>,
    f64,
    f64,
)> {
    use tomors_io::half::{pair_opposite, Stitch};
    let proj = proj.as_array();
    let theta = theta.as_array().to_vec();
    let (out, angles, center, overlap) = compute(py, || {
        let (na, nr, nc) = proj.dim();
        if theta.len() != na {
            return Err(value(format!(
                "theta has {} angles for {na} projections",
                theta.len()
            )));
        }
        let stitch = Stitch::new(axis, nc).map_err(|e| value(io_message(e)))?;
        let pairs = pair_opposite(&theta).map_err(|e| value(io_message(e)))?;
        let angles: Vec<f32> = pairs.iter().map(|p| theta[p.index]).collect();
        let mut out = Array3::<f32>::zeros((pairs.len(), nr, stitch.width()));
        out.view_mut()
            .permuted_axes([1, 0, 2])
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(
                proj.permuted_axes([1, 0, 2])
                    .axis_iter(Axis(0))
                    .into_par_iter(),
            )
            .for_each(|(mut o, s)| o.assign(&stitch.stitch(s, &pairs)));
        Ok((out, angles, stitch.center(), stitch.overlap()))
    })?;
    Ok((
        out.into_pyarray(py),
        numpy::PyArray1::from_vec(py, angles),
        center,
        overlap,
    ))
}

/// `tomors.write`: writes a volume `[z][y][x]` atomically (temporary name,
/// renamed when complete) as `.npy`, `.h5` (dataset `/volume`) or a
/// directory of TIFF slices.
#[pyfunction]
#[pyo3(signature = (path, volume, overwrite, tiff_bits, tiff_range, attributes))]
pub fn write(
    py: Python<'_>,
    path: PathBuf,
    volume: PyReadonlyArray3<'_, f32>,
    overwrite: bool,
    tiff_bits: u32,
    tiff_range: Option<(f32, f32)>,
    attributes: Option<Vec<(String, String)>>,
) -> PyResult<()> {
    let volume = volume.as_array();
    compute(py, || {
        let format = match (VolumeFormat::from_path(&path)?, tiff_bits) {
            (VolumeFormat::TiffStack(_), 32) => VolumeFormat::TiffStack(TiffDepth::F32),
            (VolumeFormat::TiffStack(_), b @ (16 | 8)) => {
                let (lo, hi) = tiff_range
                    .ok_or_else(|| value(format!("tiff_bits={b} needs tiff_range=(lo, hi)")))?;
                if b == 16 {
                    VolumeFormat::TiffStack(TiffDepth::U16 { lo, hi })
                } else {
                    VolumeFormat::TiffStack(TiffDepth::U8 { lo, hi })
                }
            }
            (VolumeFormat::TiffStack(_), b) => {
                return Err(value(format!("tiff_bits={b}: use 32, 16 or 8")))
            }
            (f, 32) => f,
            (_, b) => {
                return Err(value(format!(
                    "tiff_bits={b} applies to TIFF-stack outputs only"
                )))
            }
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(tomors_io::IoError::Os {
                path: path.clone(),
                error: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("directory {} does not exist", parent.display()),
                ),
            }
            .into());
        }
        if path.exists() && !overwrite {
            return Err(tomors_io::IoError::Os {
                path: path.clone(),
                error: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "already exists (pass overwrite=True to replace it)",
                ),
            }
            .into());
        }
        let mut meta =
            VolumeMeta::default().text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")));
        for (k, v) in attributes.unwrap_or_default() {
            meta = meta.text(&k, &v);
        }
        let (z, y, x) = volume.dim();
        let mut w = create_writer_with(&path, format, [z, y, x], &meta, overwrite)?;
        w.write_slab(0, volume.view())?;
        w.finish()?;
        Ok(())
    })
}
