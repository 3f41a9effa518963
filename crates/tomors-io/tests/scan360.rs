//! A 360° scan read through the I/O pipeline reconstructs with the object's
//! values: FBP's weight π/N holds for any number of half turns.

use ndarray::{Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::nrmse;
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::writer::write_volume;
use tomors_io::{open, OpenOptions, Preprocess, VolumeFormat, VolumeMeta};

/// Projects the phantom over `range` with `n` angles, writes the projections
/// as `.npy` (one detector row), reads them back with the angle range given
/// and reconstructs; returns the NRMSE against the phantom and the mean
/// reconstructed value inside the object.
fn recon_via_io(n: usize, range_deg: f64, center: f32) -> (f64, f64) {
    let bins = 128;
    let scale = bins as f64 * 0.45;
    let g = ParallelGeometry::new(uniform_angles(n, range_deg.to_radians() as f32), bins)
        .unwrap()
        .with_center(center)
        .unwrap();
    let sino = Phantom2d::shepp_logan().project(&g, scale);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.npy");
    let proj: Array3<f32> = sino.insert_axis(Axis(1)); // [angle][1 row][bin]
    write_volume(&p, VolumeFormat::Npy, proj.view(), &VolumeMeta::default()).unwrap();
    let src = open(
        &p,
        &OpenOptions {
            angle_range: Some(range_deg.to_radians()),
            ..Default::default()
        },
    )
    .unwrap();
    let rows = src.read_rows(0..1, &Preprocess::default()).unwrap();
    assert_eq!(rows, proj, "no −log or normalisation without flats");
    let geom = ParallelGeometry::new(src.angles().to_vec(), bins)
        .unwrap()
        .with_center(center)
        .unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let s = projections_to_sinograms(rows.view(), 0..1).unwrap();
    let rec = fbp_sinograms(
        &CpuBackend::new(),
        s.view(),
        &geom,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    let rec = rec.index_axis(Axis(0), 0).to_owned();
    let truth = Phantom2d::shepp_logan().rasterize(&grid, scale, 4);
    let inside: Vec<(f32, f32)> = rec
        .iter()
        .zip(truth.iter())
        .filter(|(_, t)| **t > 0.0)
        .map(|(r, t)| (*r, *t))
        .collect();
    let mean_r = inside.iter().map(|x| x.0 as f64).sum::<f64>() / inside.len() as f64;
    let mean_t = inside.iter().map(|x| x.1 as f64).sum::<f64>() / inside.len() as f64;
    (
        nrmse(rec.view(), truth.view(), None).unwrap(),
        mean_r / mean_t,
    )
}

#[test]
fn a_360_degree_scan_reconstructs_like_a_180_degree_scan() {
    let (e180, m180) = recon_via_io(200, 180.0, 64.0);
    let (e360, m360) = recon_via_io(400, 360.0, 64.0);
    // An off-centre axis: the two half turns see the object mirrored.
    let (e360c, m360c) = recon_via_io(400, 360.0, 60.5);
    eprintln!("NRMSE 180° {e180:.4}, 360° {e360:.4}, 360° off-centre {e360c:.4}; mean ratio {m180:.4} {m360:.4} {m360c:.4}");
    for (e, m) in [(e180, m180), (e360, m360), (e360c, m360c)] {
        // Values as the object's: the mean inside within 2 %.
        assert!((m - 1.0).abs() < 0.02, "mean ratio {m}");
        // As good as the 180° scan (twice the angles: usually better).
        assert!(e <= e180 * 1.05, "NRMSE {e} vs 180° {e180}");
    }
}
