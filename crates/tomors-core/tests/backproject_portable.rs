//! The portable (non-SIMD) CPU kernels agree with the reference too
//! (`CpuBackend::with_simd(SimdChoice::Portable)`), as the default build.

use ndarray::{s, Array3};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tomors_core::cpu::{backproject_reference, CpuBackend, SimdChoice};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, Interpolation, ParallelGeometry, SliceGrid};

#[test]
fn portable_kernels_match_the_reference() {
    check_all_paths("portable", &CpuBackend::with_simd(SimdChoice::Portable));
    check_all_paths("default", &CpuBackend::new());
}

fn check_all_paths(mode: &str, backend: &CpuBackend) {
    let geometry = ParallelGeometry::new(uniform_angles(31, 3.0), 29)
        .unwrap()
        .with_center(13.71)
        .unwrap();
    let grid = SliceGrid::with_pixel_size(35, 22, 0.9).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for ns in [1, 6, 13] {
        let sino = Array3::from_shape_fn((ns, 31, 29), |_| rng.gen_range(-1.0f32..1.0));
        for interp in [Interpolation::Linear, Interpolation::Nearest] {
            let mut out = Array3::from_elem((ns, 22, 35), f32::NAN);
            backend
                .backproject(sino.view(), &geometry, &grid, interp, 1.0, out.view_mut())
                .unwrap();
            for z in 0..ns {
                let r = backproject_reference(sino.slice(s![z, .., ..]), &geometry, &grid, interp);
                let num: f64 = out
                    .slice(s![z, .., ..])
                    .iter()
                    .zip(r.iter())
                    .map(|(a, b)| ((a - b) as f64).powi(2))
                    .sum();
                let den: f64 = r.iter().map(|b| (*b as f64).powi(2)).sum();
                let err = (num / den).sqrt();
                assert!(err < 1e-5, "{mode}: {ns} slices {interp}: {err}");
            }
        }
    }
}
