//! GPU tests of the cone-beam projector restricted to a z-slab
//! (`CudaConeJoseph::slab`): the slab's forward and back projections
//! against tomors-core's projectors restricted to the same `VolumeBox`
//! (Joseph pair and voxel pair), against the whole-volume GPU operator
//! (the slab forward projections of a partition sum to the whole forward
//! projection, the slab back projections are the slabs of the whole back
//! projection), and the adjointness of the slab pair. They skip with a
//! printed reason when no GPU is usable (and fail under
//! `TOMORS_REQUIRE_GPU=1`); the argument check runs everywhere it can open
//! a device.

mod common;

use std::f64::consts::PI;
use std::ops::Range;

use common::{gpu_or_skip, random, rel_l2};
use ndarray::{s, Array2, Array3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, ConeJosephProjector, ConeVoxelProjector, Projector, VolumeBox,
};
use tomors_cuda::{ConeBackProjector, CudaConeJoseph};

fn flat(a: &Array3<f32>) -> Vec<f32> {
    a.as_standard_layout().iter().copied().collect()
}

fn rand3(dim: (usize, usize, usize), seed: u64) -> Array3<f32> {
    Array3::from_shape_vec(dim, random(dim.0 * dim.1 * dim.2, seed)).unwrap()
}

/// An off-centre geometry with non-square pixels on a non-cubic volume,
/// a wide cone with z-dominant rays, and a small fitted cone.
fn cases() -> Vec<(String, ConeGeometry, ConeVolume)> {
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
    let g2 = ConeGeometry::new(
        uniform_angles(8, 2.0 * PI as f32),
        14.0,
        6.0,
        24,
        16,
        1.5,
        3.0,
    )
    .unwrap();
    let v2 = ConeVolume::new(12, 12, 14, 1.0).unwrap();
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
        ("off-centre, non-square pixels".into(), g1, v1),
        ("wide cone (z-dominant rays)".into(), g2, v2),
        ("small fitted cone".into(), g3, v3),
    ]
}

/// Partitions of the slices: two and three balanced slabs, and an uneven
/// one with a single-slice slab.
fn partitions(nz: usize) -> Vec<Vec<Range<usize>>> {
    vec![
        vec![0..nz / 2, nz / 2..nz],
        vec![0..nz / 3, nz / 3..2 * nz / 3, 2 * nz / 3..nz],
        vec![0..1, 1..nz - 2, nz - 2..nz],
    ]
}

/// Forward projection of the slab `x` with a CPU projector (f64).
fn cpu_forward(p: &impl Projector<f64>, g: &ConeGeometry, x: &Array3<f32>) -> Array3<f32> {
    let (nz, ny, nx) = x.dim();
    let img = x
        .mapv(f64::from)
        .into_shape_with_order((nz * ny, nx))
        .unwrap();
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let mut out = Array2::<f64>::zeros((na, nr * nc));
    p.forward_slice(img.view(), &all_angles(na), out.view_mut())
        .unwrap();
    out.mapv(|v| v as f32)
        .into_shape_with_order((na, nr, nc))
        .unwrap()
}

/// Back projection into a slab of `nz` slices with a CPU projector in f32
/// (the voxel pair's f32 path is the fast FDK kernel the GPU mirrors).
fn cpu_back(p: &impl Projector<f32>, nz: usize, v: &ConeVolume, y: &Array3<f32>) -> Array3<f32> {
    let (na, nr, nc) = y.dim();
    let sino = y.clone().into_shape_with_order((na, nr * nc)).unwrap();
    let mut out = Array2::<f32>::zeros((nz * v.ny, v.nx));
    p.back_slice(sino.view(), &all_angles(na), out.view_mut())
        .unwrap();
    out.into_shape_with_order((nz, v.ny, v.nx)).unwrap()
}

fn dot(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    a.iter().zip(b).map(|(&u, &v)| u as f64 * v as f64).sum()
}

/// Joseph pair: every slab's forward and back projection equals the CPU
/// projector of the same box (1e-5, the GPU-vs-CPU bound of the whole
/// volume; measured on an H200 ≤ 9.9e-7); the slabs' forward projections
/// sum to the whole volume's GPU forward projection and the slab back
/// projections are its slabs (f32 rounding of the positions and the order
/// of the additions: measured ≤ 5.5e-7 and ≤ 8.1e-7, bound 2e-6); the slab
/// pair is adjoint (1e-4; measured ≤ 5e-9).
#[test]
fn joseph_slabs_match_the_cpu_box_and_the_whole_volume() {
    let Some(be) = gpu_or_skip("joseph_slabs_match_the_cpu_box_and_the_whole_volume") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v) in cases() {
        let whole = CudaConeJoseph::new(&be, &g, &v).unwrap();
        let x = rand3((v.nz, v.ny, v.nx), seed);
        let y = rand3((g.n_angles(), g.n_rows(), g.n_cols()), seed ^ 5);
        let wf = whole.forward(x.view()).unwrap();
        let wb = whole.back(y.view()).unwrap();
        let mut worst = [0f64; 5];
        for part in partitions(v.nz) {
            let mut sum = Array3::<f32>::zeros(wf.dim());
            for z in part {
                let gpu = CudaConeJoseph::slab(&be, &g, &v, z.clone(), ConeBackProjector::Joseph)
                    .unwrap();
                assert_eq!(gpu.z_range(), z);
                assert_eq!(gpu.volume_dim(), (z.len(), v.ny, v.nx));
                let xs = x.slice(s![z.clone(), .., ..]).to_owned();
                let f = gpu.forward(xs.view()).unwrap();
                let b = gpu.back(y.view()).unwrap();
                let cpu =
                    ConeJosephProjector::with_box(&g, &v, VolumeBox::slab(&v, z.clone())).unwrap();
                let ef = rel_l2(&flat(&f), &flat(&cpu_forward(&cpu, &g, &xs)));
                let eb = rel_l2(&flat(&b), &flat(&cpu_back(&cpu, z.len(), &v, &y)));
                let ew = rel_l2(
                    &flat(&b),
                    &flat(&wb.slice(s![z.clone(), .., ..]).to_owned()),
                );
                let gap = (dot(&f, &y) - dot(&xs, &b)).abs()
                    / (dot(&f, &f).sqrt() * dot(&y, &y).sqrt()).max(1e-300);
                eprintln!(
                    "{name}, slab {z:?}: vs CPU box forward {ef:.2e}, back {eb:.2e}; \
                     back vs whole {ew:.2e}; adjointness gap {gap:.2e}"
                );
                assert!(ef <= 1e-5, "{name} {z:?}: forward vs CPU box {ef:.3e}");
                assert!(eb <= 1e-5, "{name} {z:?}: back vs CPU box {eb:.3e}");
                assert!(ew <= 2e-6, "{name} {z:?}: back vs whole {ew:.3e}");
                assert!(gap <= 1e-4, "{name} {z:?}: adjointness gap {gap:.3e}");
                for (w, e) in worst.iter_mut().zip([ef, eb, ew, gap]) {
                    *w = w.max(e);
                }
                sum += &f;
            }
            let es = rel_l2(&flat(&sum), &flat(&wf));
            eprintln!("{name}: sum of slab forwards vs whole {es:.2e}");
            assert!(es <= 2e-6, "{name}: sum of slab forwards vs whole {es:.3e}");
            worst[4] = worst[4].max(es);
        }
        eprintln!(
            "{name}: worst of forward vs CPU, back vs CPU, back vs whole, gap, sum vs whole: \
             {worst:?}"
        );
    }
}

/// Voxel pair: the slab's texture forward projection and voxel-driven back
/// projection against the CPU voxel pair of the same box (texture
/// interpolation with 8-bit weights; measured on an H200 ≤ 2.1e-3 forward,
/// ≤ 8.7e-4 back on random positive data: bounds 5e-3 and 2e-3, the back
/// projection's the whole volume's bound) and against the whole volume on
/// the GPU (the same texture fetches up to the rounding of their
/// coordinates, which may move an 8-bit weight by one step: measured
/// ≤ 1.2e-5 back and ≤ 7.6e-6 for the sum of the forwards; bounds 5e-5 and
/// 3e-5).
#[test]
fn voxel_slabs_match_the_cpu_box_and_the_whole_volume() {
    let Some(be) = gpu_or_skip("voxel_slabs_match_the_cpu_box_and_the_whole_volume") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v) in cases() {
        let mut whole = CudaConeJoseph::with_back(&be, &g, &v, ConeBackProjector::Voxel).unwrap();
        // The slabs run the unfolded kernels; so does the whole volume here
        // (the folded ones are compared with them in cone_fold_iterative_gpu).
        whole.set_fold(false).unwrap();
        let x = rand3((v.nz, v.ny, v.nx), seed ^ 7).mapv(|a| a + 1.0);
        let y = rand3((g.n_angles(), g.n_rows(), g.n_cols()), seed ^ 9).mapv(|a| a + 1.0);
        let wf = whole.forward(x.view()).unwrap();
        let wb = whole.back(y.view()).unwrap();
        for part in partitions(v.nz) {
            let mut sum = Array3::<f32>::zeros(wf.dim());
            for z in part {
                let gpu =
                    CudaConeJoseph::slab(&be, &g, &v, z.clone(), ConeBackProjector::Voxel).unwrap();
                let xs = x.slice(s![z.clone(), .., ..]).to_owned();
                let f = gpu.forward(xs.view()).unwrap();
                let b = gpu.back(y.view()).unwrap();
                let cpu =
                    ConeVoxelProjector::with_box(&g, &v, VolumeBox::slab(&v, z.clone())).unwrap();
                let ef = rel_l2(&flat(&f), &flat(&cpu_forward(&cpu, &g, &xs)));
                let eb = rel_l2(&flat(&b), &flat(&cpu_back(&cpu, z.len(), &v, &y)));
                let ew = rel_l2(
                    &flat(&b),
                    &flat(&wb.slice(s![z.clone(), .., ..]).to_owned()),
                );
                eprintln!(
                    "{name}, voxel slab {z:?}: vs CPU box forward {ef:.2e}, back {eb:.2e}; \
                     back vs whole {ew:.2e}"
                );
                assert!(ef <= 5e-3, "{name} {z:?}: forward vs CPU box {ef:.3e}");
                assert!(eb <= 2e-3, "{name} {z:?}: back vs CPU box {eb:.3e}");
                assert!(ew <= 5e-5, "{name} {z:?}: back vs whole {ew:.3e}");
                sum += &f;
            }
            let es = rel_l2(&flat(&sum), &flat(&wf));
            eprintln!("{name}: voxel pair, sum of slab forwards vs whole {es:.2e}");
            assert!(es <= 3e-5, "{name}: sum of slab forwards vs whole {es:.3e}");
        }
    }
}

/// An empty slab or one beyond the volume is refused with an error naming
/// the slices.
#[test]
fn bad_slabs_are_refused() {
    let Some(be) = gpu_or_skip("bad_slabs_are_refused") else {
        return;
    };
    let (_, g, v) = cases().remove(2);
    for z in [3..3, 0..v.nz + 1] {
        let err = CudaConeJoseph::slab(&be, &g, &v, z.clone(), ConeBackProjector::Joseph)
            .err()
            .unwrap_or_else(|| panic!("slab {z:?} accepted"));
        assert!(err.to_string().contains("slab"), "{err}");
    }
}
