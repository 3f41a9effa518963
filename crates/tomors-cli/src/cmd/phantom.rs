//! `tomors phantom`: exact projections of a Shepp-Logan phantom as `.npy`,
//! parallel beam or (`--geometry cone`) cone beam.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::{Array1, Array3, Axis};
use tomors_core::cone::{project_cone, DEFAULT_SUBPIXELS};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::{add_poisson_noise, Phantom2d, Phantom3d};
use tomors_core::{ParallelGeometry, SliceGrid};

use crate::job::geometry::GeometryKind;

use crate::output::{check_npy_target, write_npy_atomic};

/// Arguments of `tomors phantom`.
#[derive(clap::Args, Debug)]
pub struct PhantomArgs {
    /// Detector width and slice size n (n × n pixels).
    #[arg(long, default_value_t = 256)]
    pub size: usize,
    /// Number of projections (default: ⌈π/2 · size⌉).
    #[arg(long)]
    pub angles: Option<usize>,
    /// Detector rows; 1 gives the 2D modified Shepp-Logan, more the 3D phantom.
    #[arg(long, default_value_t = 1)]
    pub rows: usize,
    /// Angular range in degrees, angles evenly spaced with the end excluded.
    #[arg(long, default_value_t = 180.0)]
    pub angle_range: f32,
    /// Add Poisson noise for this many incident photons per detector bin.
    #[arg(long)]
    pub photons: Option<f64>,
    /// Output directory (receives projections.npy, angles.npy, phantom.npy).
    #[arg(long, default_value = "phantom-out")]
    pub out_dir: PathBuf,
    /// Replace existing files.
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub cone: super::args::ConeArgs,
}

/// Default projection count for an n-bin detector: ⌈π/2 · n⌉.
pub fn default_angles(size: usize) -> usize {
    (std::f64::consts::FRAC_PI_2 * size as f64).ceil() as usize
}

/// A phantom's exact projections `[angle][row][col]` and the phantom itself
/// rasterised `[z][y][x]`, filling the slice (scale = n/2 bins).
pub struct PhantomData {
    /// Geometry of the projections.
    pub geometry: ParallelGeometry,
    /// Exact projections `[angle][row][col]`.
    pub projections: Array3<f32>,
    /// Rasterised phantom `[z][y][x]`.
    pub volume: Array3<f32>,
}

/// Makes the phantom data of `size` bins, `n_angles` over `range` radians
/// and `rows` detector rows.
pub fn make_phantom(size: usize, n_angles: usize, range: f32, rows: usize) -> Result<PhantomData> {
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, range), size)?;
    let grid = SliceGrid::for_geometry(&geometry);
    let scale = size as f64 / 2.0;
    let (projections, volume) = if rows == 1 {
        let p = Phantom2d::shepp_logan();
        let sino = p.project(&geometry, scale).insert_axis(Axis(1));
        let image = p.rasterize(&grid, scale, 8).insert_axis(Axis(0));
        (sino, image)
    } else {
        let p = Phantom3d::shepp_logan();
        (
            p.project(&geometry, rows, 1.0, scale),
            p.rasterize(&grid, rows, scale, 2),
        )
    };
    Ok(PhantomData {
        geometry,
        projections,
        volume,
    })
}

/// Runs `tomors phantom`.
pub fn run(args: PhantomArgs) -> Result<()> {
    if args.cone.geometry == GeometryKind::Cone {
        return run_cone(&args);
    }
    if let Some((_, flag)) = args.cone.spec().given().iter().find(|(given, _)| *given) {
        bail!("{flag} applies to cone beam only (--geometry cone)");
    }
    if args.size < 2 {
        bail!("--size must be at least 2");
    }
    if args.rows == 0 {
        bail!("--rows must be at least 1");
    }
    if let Some(p) = args.photons {
        if !(p.is_finite() && p > 0.0) {
            bail!("--photons must be positive");
        }
    }
    // Everything that can be refused is refused before the directory exists.
    let n_angles = args.angles.unwrap_or_else(|| default_angles(args.size));
    if n_angles < 2 {
        bail!("--angles {n_angles}: a scan needs at least 2 projections");
    }
    if !(args.angle_range.is_finite() && args.angle_range > 0.0 && args.angle_range <= 720.0) {
        bail!(
            "--angle-range {}: use a range in (0, 720] degrees",
            args.angle_range
        );
    }
    let m = tomors_io::memory::f32_bytes;
    let bytes =
        m(&[n_angles, args.rows, args.size]).saturating_add(m(&[args.rows, args.size, args.size]));
    tomors_io::memory::ensure_fits_param(bytes, "the phantom and its projections")?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("{}: cannot create directory", args.out_dir.display()))?;
    let files = ["projections.npy", "angles.npy", "phantom.npy"].map(|f| args.out_dir.join(f));
    for f in &files {
        check_npy_target(f, args.overwrite)?;
    }
    let t = Instant::now();
    let spinner = crate::progress::spinner("projecting the phantom");
    let mut data = make_phantom(
        args.size,
        n_angles,
        args.angle_range.to_radians(),
        args.rows,
    )?;
    spinner.finish_and_clear();
    tracing::info!(
        "projected {} angles × {} rows × {} bins in {:.2} s",
        n_angles,
        args.rows,
        args.size,
        t.elapsed().as_secs_f64()
    );
    if let Some(photons) = args.photons {
        // Attenuation scale: the densest ray transmits e^-2 of the beam.
        let max = data
            .projections
            .iter()
            .fold(0.0f32, |m, &v| m.max(v))
            .max(1e-6);
        let scale = 2.0 / max as f64;
        add_poisson_noise(data.projections.view_mut(), photons, scale, 1)?;
        tracing::info!("added Poisson noise: {photons} photons, attenuation scale {scale:.3e}");
    }
    let angles = ndarray::Array1::from(data.geometry.angles().to_vec());
    write_npy_atomic(&files[0], &data.projections, args.overwrite)?;
    write_npy_atomic(&files[1], &angles, args.overwrite)?;
    write_npy_atomic(&files[2], &data.volume, args.overwrite)?;
    println!(
        "wrote {} ([angle][row][col] = {:?}), {} (radians), {}",
        files[0].display(),
        data.projections.dim(),
        files[1].display(),
        files[2].display()
    );
    Ok(())
}

/// `tomors phantom --geometry cone`: exact cone-beam projections of the 3D
/// modified Shepp–Logan phantom on a `size × size` detector (or `rows ×
/// size` with --rows > 1), 360° (or, with --short-scan, π + fan angle with
/// both ends), the phantom filling the default volume of `size³` voxels.
fn run_cone(args: &PhantomArgs) -> Result<()> {
    let cone = args.cone.spec();
    if args.size < 2 {
        bail!("--size must be at least 2");
    }
    if args.photons.is_some() {
        bail!("--photons is not available with --geometry cone");
    }
    if args.angle_range != 180.0 {
        bail!(
            "--angle-range is for parallel geometry; cone-beam phantoms cover 360° \
             or, with --short-scan, π + the fan angle"
        );
    }
    let n_rows = if args.rows > 1 { args.rows } else { args.size };
    let n_angles = args.angles.unwrap_or_else(|| default_angles(args.size));
    if n_angles < 2 {
        bail!("--angles {n_angles}: a scan needs at least 2 projections");
    }
    let m = tomors_io::memory::f32_bytes;
    let bytes =
        m(&[n_angles, n_rows, args.size]).saturating_add(m(&[args.size, args.size, args.size]));
    tomors_io::memory::ensure_fits_param(bytes, "the phantom and its projections")?;
    let angles = cone.default_angles(n_angles, n_rows, args.size)?;
    let g = cone.geometry(angles, n_rows, args.size)?;
    let vol = cone.volume(&g)?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("{}: cannot create directory", args.out_dir.display()))?;
    let files = ["projections.npy", "angles.npy", "phantom.npy"].map(|f| args.out_dir.join(f));
    for f in &files {
        check_npy_target(f, args.overwrite)?;
    }
    let phantom = Phantom3d::shepp_logan();
    let scale = vol.nx.min(vol.nz) as f64 * vol.voxel_size as f64 / 2.0;
    let t = Instant::now();
    let projections = project_cone(&phantom, &g, scale, DEFAULT_SUBPIXELS)?;
    tracing::info!(
        "cone-beam projections {:?} in {:.2} s (cone angle {:.2}°, fan angle {:.2}°)",
        projections.dim(),
        t.elapsed().as_secs_f64(),
        g.cone_angle().to_degrees(),
        2.0 * g.half_fan_angle().to_degrees()
    );
    let volume = phantom.rasterize(&vol.slice_grid(), vol.nz, scale, 2);
    write_npy_atomic(&files[0], &projections, args.overwrite)?;
    write_npy_atomic(
        &files[1],
        &Array1::from(g.angles().to_vec()),
        args.overwrite,
    )?;
    write_npy_atomic(&files[2], &volume, args.overwrite)?;
    println!(
        "wrote {} ([angle][row][col] = {:?}), {} (radians), {} ([z][y][x], voxel size {})",
        files[0].display(),
        projections.dim(),
        files[1].display(),
        files[2].display(),
        vol.voxel_size
    );
    Ok(())
}
