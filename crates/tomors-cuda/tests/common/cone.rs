//! Cone-beam fixtures of the GPU tests: the geometries that exercise the
//! conventions, the CPU projectors applied to whole arrays, smooth
//! projections and a two-ball phantom.

use std::f64::consts::PI;

use ndarray::{Array2, Array3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{all_angles, Projector, Real};
use tomors_cuda::CudaConeJoseph;

use super::random;

/// A wide cone (outer rows steeper than 45°: z-dominant rays), centred and
/// mirror-symmetric, over a full turn of 8 angles, and its square 12 × 12
/// × 14 volume of unit voxels.
pub fn wide_cone() -> (ConeGeometry, ConeVolume) {
    let g = ConeGeometry::new(
        uniform_angles(8, 2.0 * PI as f32),
        14.0,
        6.0,
        24,
        16,
        1.5,
        3.0,
    )
    .unwrap();
    (g, ConeVolume::new(12, 12, 14, 1.0).unwrap())
}

/// Geometries that exercise the conventions (as tomors-core's cone tests):
/// an off-centre principal point, non-square pixels, a non-cubic volume of
/// non-unit voxels, irregular angles with 0, π/4, π/2 and π among them; a
/// wide cone whose outer rows are steeper than 45° (z-dominant rays); and a
/// plain small cone with a fitted volume.
pub fn cases() -> Vec<(String, ConeGeometry, ConeVolume)> {
    let mut angles: Vec<f32> = random(13, 77)
        .iter()
        .map(|v| (v + 1.0) * PI as f32)
        .collect();
    angles.extend([0.0, PI as f32 / 2.0, PI as f32 / 4.0, PI as f32]);
    let g1 = ConeGeometry::new(angles, 60.0, 35.0, 21, 27, 1.3, 1.7)
        .unwrap()
        .with_principal_point(14.2, 9.6)
        .unwrap();
    let v1 = ConeVolume::new(17, 13, 11, 0.8).unwrap();
    let (g2, v2) = wide_cone();
    let g3 = ConeGeometry::new(
        uniform_angles(30, 2.0 * PI as f32),
        80.0,
        40.0,
        20,
        32,
        1.0,
        1.0,
    )
    .unwrap();
    let v3 = g3.fitting_volume(24, 24, 16).unwrap();
    vec![
        (
            "off-centre, non-square pixels, non-cubic volume".into(),
            g1,
            v1,
        ),
        ("wide cone (z-dominant rays)".into(), g2, v2),
        ("small fitted cone".into(), g3, v3),
    ]
}

/// Mirror-symmetric geometries (centred detectors) for the folded kernels:
/// even rows and slices with a wide cone (z-dominant outer rays; a square
/// volume over a full turn of 8 angles: the quarter-turn weights), odd rows
/// and slices, odd rows with even slices; and one off-centre detector (not
/// symmetric). The flag says whether the geometry is mirror-symmetric.
pub fn mirror_cases() -> Vec<(String, ConeGeometry, ConeVolume, bool)> {
    let (wide, wide_volume) = wide_cone();
    let odd = ConeGeometry::new(
        uniform_angles(23, 2.0 * PI as f32),
        70.0,
        35.0,
        19,
        21,
        1.2,
        1.1,
    )
    .unwrap();
    let mixed =
        ConeGeometry::new(uniform_angles(17, PI as f32), 60.0, 45.0, 15, 22, 1.0, 1.3).unwrap();
    let off = ConeGeometry::new(
        uniform_angles(11, 2.0 * PI as f32),
        60.0,
        35.0,
        21,
        20,
        1.3,
        1.7,
    )
    .unwrap()
    .with_principal_point(10.0, 9.0)
    .unwrap();
    vec![
        (
            "wide cone, even rows and slices".into(),
            wide,
            wide_volume,
            true,
        ),
        (
            "odd rows and slices".into(),
            odd.clone(),
            odd.fitting_volume(18, 16, 13).unwrap(),
            true,
        ),
        (
            "odd rows, even slices".into(),
            mixed.clone(),
            mixed.fitting_volume(16, 17, 10).unwrap(),
            true,
        ),
        (
            "off-centre detector".into(),
            off,
            ConeVolume::new(15, 13, 11, 0.9).unwrap(),
            false,
        ),
    ]
}

/// `got` (a GPU output downloaded from poisoned, NaN, device memory) after
/// checking that every value was written.
fn written(got: Array3<f32>, name: &str, what: &str) -> Array3<f32> {
    assert!(
        got.iter().all(|x| x.is_finite()),
        "{name}: unwritten {what} values"
    );
    got
}

/// The GPU back projection of `y` into a poisoned (NaN) device volume;
/// every value must be written (`name` names the case in the failure).
pub fn gpu_back(gpu: &CudaConeJoseph, v: &ConeVolume, y: &Array3<f32>, name: &str) -> Array3<f32> {
    let yd = gpu.upload_projections(y.view()).unwrap();
    let mut vd = gpu.upload_volume(nan((v.nz, v.ny, v.nx)).view()).unwrap();
    gpu.back_dev(&yd, &mut vd).unwrap();
    written(gpu.download(&vd).unwrap(), name, "back")
}

/// The GPU forward projection of `x` into poisoned (NaN) device
/// projections of `dim`; every value must be written.
pub fn gpu_forward(
    gpu: &CudaConeJoseph,
    x: &Array3<f32>,
    dim: (usize, usize, usize),
    name: &str,
) -> Array3<f32> {
    let xd = gpu.upload_volume(x.view()).unwrap();
    let mut pd = gpu.upload_projections(nan(dim).view()).unwrap();
    gpu.forward_dev(&xd, &mut pd).unwrap();
    written(gpu.download(&pd).unwrap(), name, "forward")
}

fn nan(dim: (usize, usize, usize)) -> Array3<f32> {
    Array3::from_elem(dim, f32::NAN)
}

/// Forward projection of the volume (or slab) `x` with a CPU projector in
/// `T`.
pub fn cpu_forward<T: Real>(
    p: &impl Projector<T>,
    g: &ConeGeometry,
    x: &Array3<f32>,
) -> Array3<f32> {
    let (nz, ny, nx) = x.dim();
    let img = x
        .mapv(|v| T::from_f64(v as f64))
        .into_shape_with_order((nz * ny, nx))
        .unwrap();
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let mut out = Array2::<T>::from_elem((na, nr * nc), T::ZERO);
    p.forward_slice(img.view(), &all_angles(na), out.view_mut())
        .unwrap();
    out.mapv(|v| v.to_f64() as f32)
        .into_shape_with_order((na, nr, nc))
        .unwrap()
}

/// Back projection into `nz` slices of `v` (the whole volume or a slab of
/// it) with a CPU projector in `T`.
pub fn cpu_back_slices<T: Real>(
    p: &impl Projector<T>,
    nz: usize,
    v: &ConeVolume,
    y: &Array3<f32>,
) -> Array3<f32> {
    let (na, nr, nc) = y.dim();
    let s = y
        .mapv(|v| T::from_f64(v as f64))
        .into_shape_with_order((na, nr * nc))
        .unwrap();
    let mut out = Array2::<T>::from_elem((nz * v.ny, v.nx), T::ZERO);
    p.back_slice(s.view(), &all_angles(na), out.view_mut())
        .unwrap();
    out.mapv(|v| v.to_f64() as f32)
        .into_shape_with_order((nz, v.ny, v.nx))
        .unwrap()
}

/// Back projection into the whole volume with a CPU projector in `T`.
pub fn cpu_back<T: Real>(p: &impl Projector<T>, v: &ConeVolume, y: &Array3<f32>) -> Array3<f32> {
    cpu_back_slices(p, v.nz, v, y)
}

/// Smooth test projections: a positive field varying over the detector
/// and the angles, not symmetric in the rows (a fair test of the texture
/// unit's 8-bit bilinear weights).
pub fn smooth_projections(g: &ConeGeometry) -> Array3<f32> {
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        let (fa, fr, fc) = (
            a as f64 / na as f64,
            r as f64 / nr as f64,
            c as f64 / nc as f64,
        );
        (1.0 + (3.0 * fc + 2.0 * fa).sin() * (2.5 * fr + 1.0).cos() + 0.5 * fr) as f32
    })
}

/// A smooth non-negative test volume: a ball of 1 and a smaller ball of
/// 0.5, off-centre in x and y and by `dz` (a fraction of the volume) in z.
pub fn two_balls(v: &ConeVolume, dz: f64) -> Array3<f32> {
    Array3::from_shape_fn((v.nz, v.ny, v.nx), |(z, y, x)| {
        let (fx, fy, fz) = (
            x as f64 / v.nx as f64 - 0.5,
            y as f64 / v.ny as f64 - 0.5,
            z as f64 / v.nz as f64 - 0.5,
        );
        let r1 = fx * fx + fy * fy + fz * fz;
        let r2 = (fx - 0.1).powi(2) + (fy + 0.15).powi(2) + (fz - dz).powi(2);
        (if r1 < 0.16 { 1.0 } else { 0.0 }) + (if r2 < 0.02 { 0.5 } else { 0.0 })
    })
}

/// A centred ball of 1 (radius² 0.12 of the volume's unit cube).
pub fn centred_ball(v: &ConeVolume) -> Array3<f32> {
    Array3::from_shape_fn((v.nz, v.ny, v.nx), |(z, y, x)| {
        let f = |i: usize, n: usize| i as f64 / n as f64 - 0.5;
        let r = f(x, v.nx).powi(2) + f(y, v.ny).powi(2) + f(z, v.nz).powi(2);
        if r < 0.12 {
            1.0f32
        } else {
            0.0
        }
    })
}
