//! Several GPUs of one host: cone FDK and back projection in z-slabs from
//! each slab's detector rows, and parallel FBP over slabs, against one
//! device. The slab-from-rows path is checked on one device too (it is
//! what each device of several runs). Tests needing two devices skip with a
//! printed reason on a machine with fewer; each test skips without a GPU and
//! fails instead under `TOMORS_REQUIRE_GPU=1`. Timings: the example
//! `multi_gpu_bench`.

mod common;

use std::f64::consts::PI;

use common::{gpu_or_skip, random, rel_l2};
use ndarray::{s, Array3};
use tomors_core::cone::{fdk, project_cone, ConeBackend, ConeGeometry, ConeVolume, FdkOptions};
use tomors_core::cpu::CpuBackend;
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::Phantom3d;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::cone::{fdk_slab_slices, slab_parts};
use tomors_cuda::{CudaBackend, CudaOptions, FdkFold, MultiCudaBackend};

/// The agreement of several devices with one: the kernels read the same
/// texture coordinates, so only the row filter's batching may differ
/// (f32 rounding); measured 0 on H200s (docs/multi-gpu.md). Bound: f32
/// rounding, 10× below the ALU kernels' 1e-5.
const SAME: f64 = 1e-6;

/// The unfolded FDK pipeline (what each z-slab of several devices runs).
fn unfolded() -> FdkFold {
    FdkFold {
        enabled: false,
        ..FdkFold::default()
    }
}

fn rel(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    rel_l2(a.as_slice().unwrap(), b.as_slice().unwrap())
}

fn max_abs(a: &Array3<f32>, b: &Array3<f32>) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A wide cone (SOD 150, ODD 150, detector 80² of pixel 2 for a 64³ volume
/// of voxel 0.95, whose shadow just fits the detector): a half of the
/// volume needs about half the detector rows.
fn cone_case(na: usize) -> (ConeGeometry, ConeVolume, Array3<f32>) {
    let g = ConeGeometry::new(
        uniform_angles(na, 2.0 * PI as f32),
        150.0,
        150.0,
        80,
        80,
        2.0,
        2.0,
    )
    .unwrap();
    let v = ConeVolume::new(64, 64, 64, 0.95).unwrap();
    g.check_volume(&v).unwrap();
    let p = project_cone(&Phantom3d::shepp_logan(), &g, 30.0, 2).unwrap();
    (g, v, p)
}

/// Two GPUs, or `None` with a printed reason (one device would be compared
/// with itself).
fn two_devices(test: &str) -> Option<MultiCudaBackend> {
    gpu_or_skip(test)?;
    let n = tomors_cuda::device_count().unwrap();
    if n < 2 {
        eprintln!(
            "skipping {test}: {n} CUDA device found, the test needs at least 2 (it would \
             compare device 0 with itself)"
        );
        return None;
    }
    Some(MultiCudaBackend::new(&[0, 1], CudaOptions::default()).unwrap())
}

/// On one device: FDK of each slab from its detector rows only
/// (`fdk_slab_device`, three slabs at multiples of the download slab)
/// equals the same slices of the whole FDK, and the rows are a real part of
/// the detector.
#[test]
fn fdk_slabs_from_their_rows_equal_the_whole() {
    let Some(mut be) = gpu_or_skip("fdk_slabs_from_their_rows_equal_the_whole") else {
        return;
    };
    // Slabs from their rows take the unfolded kernel; so does the whole here
    // (the folded kernel reads other texels: `cone_fold_gpu` bounds it).
    be.set_fdk_fold(unfolded());
    let (g, v, p) = cone_case(90);
    let opts = FdkOptions {
        slab: 16,
        ..FdkOptions::default()
    };
    let mut whole = Array3::<f32>::from_elem((v.nz, v.ny, v.nx), f32::NAN);
    be.fdk_device(p.view(), &g, &v, &opts, whole.view_mut())
        .unwrap();
    let parts = slab_parts(&g, &v, 0..v.nz, 3, fdk_slab_slices(&v, opts.slab));
    assert_eq!(parts.len(), 3);
    let mut slabs = Array3::<f32>::from_elem(whole.dim(), f32::NAN);
    for part in &parts {
        assert!(part.rows.len() < g.n_rows(), "{part:?}");
        let st = be
            .fdk_slab_device(
                p.slice(s![.., part.rows.clone(), ..]),
                &g,
                part.rows.clone(),
                &v,
                part.z.clone(),
                &opts,
                slabs.slice_mut(s![part.z.clone(), .., ..]),
            )
            .unwrap();
        assert!(st.on_device, "{part:?}: {st}");
    }
    let (e, m) = (rel(&slabs, &whole), max_abs(&slabs, &whole));
    eprintln!("FDK slabs from rows {parts:?} vs whole: rel L2 {e:.3e}, max |diff| {m:.3e}");
    assert!(e <= SAME, "{e}");
    // And the whole is the CPU's FDK to the texture bound.
    let cpu = fdk(&CpuBackend::new(), p.view(), &g, &v, &opts).unwrap();
    let ec = rel(&whole, &cpu);
    eprintln!("GPU FDK vs CPU FDK: {ec:.3e}");
    assert!(ec < 2e-3, "{ec}");
}

/// Two devices (z-slabs, each from its rows, one thread per device) equal
/// one device, for FDK with automatic and small download slabs, and both
/// the CPU's FDK to the texture bound.
#[test]
fn fdk_on_two_devices_equals_one() {
    let Some(multi) = two_devices("fdk_on_two_devices_equals_one") else {
        return;
    };
    let mut one = CudaBackend::new(0).unwrap();
    // Device slabs are not folded; the one-device reference neither.
    one.set_fdk_fold(unfolded());
    let (g, v, p) = cone_case(120);
    eprintln!("devices: {}", multi.name());
    for slab in [0, 16] {
        let opts = FdkOptions {
            slab,
            ..FdkOptions::default()
        };
        let a = fdk(&one, p.view(), &g, &v, &opts).unwrap();
        let mut b = Array3::<f32>::from_elem(a.dim(), f32::NAN);
        let parts = multi
            .fdk_multi(p.view(), &g, &v, &opts, b.view_mut())
            .unwrap();
        let (e, m) = (rel(&b, &a), max_abs(&b, &a));
        eprintln!(
            "slab {slab}: parts {parts:?}\n  2 GPUs vs 1: rel L2 {e:.3e}, max |diff| {m:.3e}"
        );
        if slab == 16 {
            assert_eq!(parts.len(), 2, "{parts:?}");
            assert!(parts
                .iter()
                .all(|(p, st)| p.rows.len() < g.n_rows() && st.on_device));
        }
        assert!(e <= SAME, "slab {slab}: {e}");
        // Through the trait too (what the CLI calls).
        let c = fdk(&multi, p.view(), &g, &v, &opts).unwrap();
        assert_eq!(c, b, "slab {slab}");
    }
    let opts = FdkOptions::default();
    let cpu = fdk(&CpuBackend::new(), p.view(), &g, &v, &opts).unwrap();
    let b = fdk(&multi, p.view(), &g, &v, &opts).unwrap();
    let ec = rel(&b, &cpu);
    eprintln!("2 GPUs vs CPU FDK: {ec:.3e}");
    assert!(ec < 2e-3, "{ec}");
}

/// The cone back projection of random data on two devices equals one
/// device, for the whole volume and a z sub-range.
#[test]
fn cone_backprojection_on_two_devices_equals_one() {
    let Some(multi) = two_devices("cone_backprojection_on_two_devices_equals_one") else {
        return;
    };
    let one = CudaBackend::new(0).unwrap();
    let (g, v, _) = cone_case(8);
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let p =
        Array3::from_shape_vec((na, nr, nc), random(na * nr * nc, common::test_seed())).unwrap();
    for z in [0..v.nz, 5..58] {
        let shape = (z.len(), v.ny, v.nx);
        let mut a = Array3::<f32>::from_elem(shape, f32::NAN);
        let mut b = Array3::<f32>::from_elem(shape, f32::NAN);
        one.cone_backproject(p.view(), &g, &v, z.clone(), a.view_mut())
            .unwrap();
        multi
            .cone_backproject(p.view(), &g, &v, z.clone(), b.view_mut())
            .unwrap();
        let e = rel(&b, &a);
        eprintln!("cone back projection {z:?}: 2 GPUs vs 1: rel L2 {e:.3e}");
        assert!(e <= SAME, "{z:?}: {e}");
    }
}

/// Parallel-beam FBP of 200 slices on two devices (slabs of 64
/// round-robin) equals one device.
#[test]
fn fbp_on_two_devices_equals_one() {
    let Some(multi) = two_devices("fbp_on_two_devices_equals_one") else {
        return;
    };
    let one = CudaBackend::new(0).unwrap();
    let (k, na, nb) = (200, 90, 64);
    let geom = ParallelGeometry::new(uniform_angles(na, PI as f32), nb).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino =
        Array3::from_shape_vec((k, na, nb), random(k * na * nb, common::test_seed())).unwrap();
    let mut a = Array3::<f32>::from_elem((k, nb, nb), f32::NAN);
    let mut b = a.clone();
    let f = FilterSpec::default();
    one.fbp(
        sino.view(),
        &geom,
        &grid,
        &f,
        Interpolation::Linear,
        a.view_mut(),
    )
    .unwrap();
    multi
        .fbp(
            sino.view(),
            &geom,
            &grid,
            &f,
            Interpolation::Linear,
            b.view_mut(),
        )
        .unwrap();
    let (e, m) = (rel(&b, &a), max_abs(&b, &a));
    eprintln!("FBP 2 GPUs vs 1: rel L2 {e:.3e}, max |diff| {m:.3e}");
    assert!(e <= SAME, "{e}");
}
