//! `tomors phantom`: exact projections of a Shepp-Logan phantom as `.npy`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::{Array3, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::{add_poisson_noise, Phantom2d, Phantom3d};
use tomors_core::{ParallelGeometry, SliceGrid};

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
    pub cone: super::cone::ConeArgs,
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
    if args.cone.is_cone() {
        return super::cone::run_phantom(&args);
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
