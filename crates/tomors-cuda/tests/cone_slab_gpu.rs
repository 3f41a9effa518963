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

use std::ops::Range;

use common::cone::{cases, cpu_back_slices, cpu_forward};
use common::{dot, flat, gpu_or_skip, rand3, rel_l2};
use ndarray::{s, Array3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{ConeJosephProjector, ConeVoxelProjector, Projector, VolumeBox};
use tomors_cuda::{ConeBackProjector, CudaBackend, CudaConeJoseph};

/// Partitions of the slices: two and three balanced slabs, and an uneven
/// one with a single-slice slab.
fn partitions(nz: usize) -> Vec<Vec<Range<usize>>> {
    vec![
        vec![0..nz / 2, nz / 2..nz],
        vec![0..nz / 3, nz / 3..2 * nz / 3, 2 * nz / 3..nz],
        vec![0..1, 1..nz - 2, nz - 2..nz],
    ]
}

/// One slab `z` of the pair `back` on the GPU: the slab's forward
/// projection `f` of its part `xs` of `x` and its back projection `b` of
/// `y`, with their relative L2 distances from the CPU pair `cpu` of the
/// same box (forward in f64, back in f32: `ef`, `eb`) and from the slab of
/// the whole volume's back projection `wb` (`ew`).
struct Slab {
    xs: Array3<f32>,
    f: Array3<f32>,
    b: Array3<f32>,
    ef: f64,
    eb: f64,
    ew: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_slab<P: Projector<f64> + Projector<f32>>(
    be: &CudaBackend,
    (g, v): (&ConeGeometry, &ConeVolume),
    z: Range<usize>,
    back: ConeBackProjector,
    cpu: &P,
    x: &Array3<f32>,
    y: &Array3<f32>,
    wb: &Array3<f32>,
) -> Slab {
    let gpu = CudaConeJoseph::slab(be, g, v, z.clone(), back).unwrap();
    assert_eq!(gpu.z_range(), z);
    assert_eq!(gpu.volume_dim(), (z.len(), v.ny, v.nx));
    let xs = x.slice(s![z.clone(), .., ..]).to_owned();
    let f = gpu.forward(xs.view()).unwrap();
    let b = gpu.back(y.view()).unwrap();
    let ef = rel_l2(&flat(&f), &flat(&cpu_forward::<f64>(cpu, g, &xs)));
    let eb = rel_l2(
        &flat(&b),
        &flat(&cpu_back_slices::<f32>(cpu, z.len(), v, y)),
    );
    let ew = rel_l2(&flat(&b), &flat(&wb.slice(s![z, .., ..]).to_owned()));
    Slab {
        xs,
        f,
        b,
        ef,
        eb,
        ew,
    }
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
                let cpu =
                    ConeJosephProjector::with_box(&g, &v, VolumeBox::slab(&v, z.clone())).unwrap();
                let Slab {
                    xs,
                    f,
                    b,
                    ef,
                    eb,
                    ew,
                } = run_slab(
                    &be,
                    (&g, &v),
                    z.clone(),
                    ConeBackProjector::Joseph,
                    &cpu,
                    &x,
                    &y,
                    &wb,
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
                let cpu =
                    ConeVoxelProjector::with_box(&g, &v, VolumeBox::slab(&v, z.clone())).unwrap();
                let Slab { f, ef, eb, ew, .. } = run_slab(
                    &be,
                    (&g, &v),
                    z.clone(),
                    ConeBackProjector::Voxel,
                    &cpu,
                    &x,
                    &y,
                    &wb,
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
