//! GPU tests of the cone-beam back projector (`ConeBackend` for
//! `CudaBackend`): against the f64 reference (off-centre principal point,
//! rays leaving the detector, z sub-ranges, angle chunks), and FDK of a 64³
//! Shepp–Logan on the GPU against the CPU FDK. Each test skips with a
//! printed reason when no GPU is usable, and fails instead under
//! `TOMORS_REQUIRE_GPU=1`. The 512³ timing is the example `cone_bench`.

mod common;

use std::f64::consts::PI;
use std::time::Instant;

use common::{gpu_or_skip, random, rel_l2};
use ndarray::{s, Array3, Axis};
use tomors_core::cone::{
    backproject_cone_reference, fdk, project_cone, ConeBackend, ConeGeometry, ConeVolume,
    FdkOptions, DEFAULT_SUBPIXELS,
};
use tomors_core::cpu::CpuBackend;
use tomors_core::geometry::uniform_angles;
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::Phantom3d;
use tomors_core::SliceGrid;
use tomors_cuda::ConeKernel;

fn rel(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    let a = a.as_standard_layout();
    let b = b.as_standard_layout();
    rel_l2(a.as_slice().unwrap(), b.as_slice().unwrap())
}

/// Smooth projections (two plane waves per projection, slopes ≤ 0.4 per pixel).
fn smooth(na: usize, nr: usize, nc: usize) -> Array3<f32> {
    Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        let (a, r, c) = (a as f32, r as f32, c as f32);
        (0.3 * c + 0.2 * r + a).sin() + 0.5 * (0.17 * r - 0.11 * c + 0.3 * a).cos()
    })
}

/// The smooth projections on a detector with `nr` rows over the height of 29.
fn smooth_tall(na: usize, nr: usize, nc: usize) -> Array3<f32> {
    let f = 29.0 / nr as f32;
    Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        let (a, r, c) = (a as f32, r as f32 * f, c as f32);
        (0.3 * c + 0.2 * r + a).sin() + 0.5 * (0.17 * r - 0.11 * c + 0.3 * a).cos()
    })
}

/// Random projections, principal point off the centre, non-square pixels,
/// a volume larger than the fitting one (rays leave the detector at the top
/// and bottom and at the sides): the GPU equals the f64 reference to f32
/// rounding, for the whole volume, a z sub-range not a multiple of the
/// kernel's slice run, and in chunks of 5 angles.
#[test]
fn cone_backprojection_matches_the_reference() {
    let Some(mut be) = gpu_or_skip("cone_backprojection_matches_the_reference") else {
        return;
    };
    let seed = common::test_seed();
    let (na, nr, nc) = (37, 29, 35);
    let g = ConeGeometry::new(
        uniform_angles(na, 2.0 * PI as f32),
        60.0,
        45.0,
        nr,
        nc,
        1.7,
        1.3,
    )
    .unwrap()
    .with_principal_point(17.8, 13.1)
    .unwrap();
    let fit = g.fitting_volume(26, 22, 20).unwrap();
    let vol = ConeVolume::new(26, 22, 20, fit.voxel_size * 1.25).unwrap();
    let random_proj = Array3::from_shape_vec((na, nr, nc), random(na * nr * nc, seed)).unwrap();
    let smooth_proj = smooth(na, nr, nc);

    // Plain loads: f32 arithmetic, random data, the CPU back projector's
    // bound. Texture: 8-bit hardware interpolation weights; on iid random
    // texels their error would be ≈ 3e-3 of the signal, so smooth data
    // (slopes ≤ 0.4 per pixel) and the ~2e-3 bound of the issue.
    for (kernel, bound) in [(ConeKernel::Loads, 1e-5), (ConeKernel::Texture, 2e-3)] {
        be.set_cone_kernel(kernel);
        let proj = match kernel {
            ConeKernel::Loads => &random_proj,
            ConeKernel::Texture => &smooth_proj,
        };
        let reference = backproject_cone_reference(proj.view(), &g, &vol, 0..vol.nz).unwrap();
        // Voxels whose rays miss the detector somewhere are present.
        assert!(reference.slice(s![0, .., ..]).iter().any(|v| v.abs() > 0.0));
        let mut gpu = Array3::from_elem((vol.nz, vol.ny, vol.nx), f32::NAN);
        be.cone_backproject(proj.view(), &g, &vol, 0..vol.nz, gpu.view_mut())
            .unwrap();
        let e = rel(&gpu, &reference);
        println!("{kernel:?}: GPU vs reference cone back projection: rel L2 {e:.2e}");
        assert!(e <= bound, "{kernel:?} whole volume: {e}");

        let mut slab = Array3::from_elem((7, vol.ny, vol.nx), f32::NAN);
        be.cone_backproject(proj.view(), &g, &vol, 9..16, slab.view_mut())
            .unwrap();
        let e = rel(&slab, &reference.slice(s![9..16, .., ..]).to_owned());
        println!("{kernel:?}: slab 9..16: rel L2 {e:.2e}");
        assert!(e <= bound, "{kernel:?} slab: {e}");

        let mut chunked = Array3::from_elem((vol.nz, vol.ny, vol.nx), f32::NAN);
        let stats = be
            .cone_backproject_chunked(proj.view(), &g, &vol, 0..vol.nz, chunked.view_mut(), 5)
            .unwrap();
        assert_eq!(stats.chunks, 8);
        let e = rel(&chunked, &reference);
        println!("{kernel:?}: chunks of 5 angles: rel L2 {e:.2e}");
        assert!(e <= bound, "{kernel:?} chunked: {e}");

        // A non-contiguous output view (every other slice) is filled too.
        let mut wide = Array3::from_elem((2 * vol.nz, vol.ny, vol.nx), f32::NAN);
        be.cone_backproject(
            proj.view(),
            &g,
            &vol,
            0..vol.nz,
            wide.slice_mut(s![..;2, .., ..]),
        )
        .unwrap();
        let e = rel(&wide.slice(s![..;2, .., ..]).to_owned(), &reference);
        assert!(e <= bound, "{kernel:?} strided output: {e}");
    }
    // A tall detector: 1500 rows, so a texture holds 5 projections and one
    // launch reads 8 textures.
    let tall = ConeGeometry::new(
        uniform_angles(na, 2.0 * PI as f32),
        60.0,
        45.0,
        1500,
        nc,
        1.7,
        1.3 * 29.0 / 1500.0,
    )
    .unwrap()
    .with_principal_point(17.8, 13.1 * 1500.0 / 29.0)
    .unwrap();
    let proj = smooth_tall(na, 1500, nc);
    let reference = backproject_cone_reference(proj.view(), &tall, &vol, 0..vol.nz).unwrap();
    let mut gpu = Array3::from_elem((vol.nz, vol.ny, vol.nx), f32::NAN);
    be.cone_backproject(proj.view(), &tall, &vol, 0..vol.nz, gpu.view_mut())
        .unwrap();
    let e = rel(&gpu, &reference);
    println!("Texture, 1500-row detector (8 textures per launch): rel L2 {e:.2e}");
    assert!(e <= 2e-3, "tall detector: {e}");

    // Shapes that do not fit are errors, not panics.
    let proj = &random_proj;
    let mut slab = Array3::<f32>::zeros((7, vol.ny, vol.nx));
    let reversed = std::ops::Range { start: 5, end: 4 };
    assert!(be
        .cone_backproject(proj.view(), &g, &vol, reversed, slab.view_mut())
        .is_err());
    assert!(be
        .cone_backproject(proj.view(), &g, &vol, 0..6, slab.view_mut())
        .is_err());
}

/// FDK of exact projections of the 64³ Shepp–Logan (180 angles over 2π,
/// cone angle ≈ 10°) with the CUDA backend (GPU filtering and back
/// projection) equals the CPU FDK, whole volume and in slabs, and has the
/// CPU's NRMSE on the central slice.
#[test]
fn fdk_on_the_gpu_matches_the_cpu_fdk() {
    let Some(mut be) = gpu_or_skip("fdk_on_the_gpu_matches_the_cpu_fdk") else {
        return;
    };
    const N: usize = 64;
    let g = ConeGeometry::new(
        uniform_angles(180, 2.0 * PI as f32),
        400.0,
        400.0,
        72,
        72,
        2.0,
        2.0,
    )
    .unwrap();
    let vol = ConeVolume::new(N, N, N, 1.0).unwrap();
    let phantom = Phantom3d::shepp_logan();
    let scale = N as f64 / 2.0;
    let proj = project_cone(&phantom, &g, scale, DEFAULT_SUBPIXELS).unwrap();
    let opts = FdkOptions::default();
    let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();
    let k = N / 2;
    let grid = SliceGrid::new(N, N).unwrap();
    let truth = phantom
        .rasterize(&grid, N, scale, 4)
        .index_axis_move(Axis(0), k);
    let mask = disc_mask(N, N, 0.45);
    let e_cpu = nrmse(cpu.index_axis(Axis(0), k), truth.view(), Some(&mask)).unwrap();
    // Loads: f32 arithmetic throughout (GPU filter ≈ 1e-6 of the CPU's);
    // texture: 8-bit interpolation weights.
    for (kernel, bound) in [(ConeKernel::Loads, 1e-5), (ConeKernel::Texture, 2e-3)] {
        be.set_cone_kernel(kernel);
        let t = Instant::now();
        let gpu = fdk(&be, proj.view(), &g, &vol, &opts).unwrap();
        println!(
            "{kernel:?}: GPU FDK 64³: {:.3} s",
            t.elapsed().as_secs_f64()
        );
        let e = rel(&gpu, &cpu);
        let e_gpu = nrmse(gpu.index_axis(Axis(0), k), truth.view(), Some(&mask)).unwrap();
        println!(
            "{kernel:?}: GPU vs CPU FDK: rel L2 {e:.2e}; central slice NRMSE CPU {e_cpu:.4}, GPU {e_gpu:.4}"
        );
        assert!(e <= bound, "{kernel:?} GPU vs CPU FDK: {e}");
        let slabbed = FdkOptions { slab: 24, ..opts };
        let gpu_s = fdk(&be, proj.view(), &g, &vol, &slabbed).unwrap();
        let e = rel(&gpu_s, &cpu);
        assert!(e <= bound, "{kernel:?} slabs: {e}");
        assert!(
            (e_cpu - e_gpu).abs() <= 10.0 * bound * e_cpu.max(1e-3),
            "{kernel:?}: NRMSE {e_cpu} vs {e_gpu}"
        );
    }
    // The device pipeline with several upload chunks (7 angles, the last
    // one shorter) and download slabs (24 slices, the last one shorter):
    // the same volume.
    // The unfolded pipeline first (the folded one is `cone_fold_gpu`'s).
    be.set_cone_kernel(ConeKernel::Texture);
    be.set_fdk_chunk(7);
    be.set_fdk_fold(tomors_cuda::FdkFold {
        enabled: false,
        ..Default::default()
    });
    let mut piped = Array3::<f32>::zeros((N, N, N));
    let slabbed = FdkOptions { slab: 24, ..opts };
    let st = be
        .fdk_device(proj.view(), &g, &vol, &slabbed, piped.view_mut())
        .unwrap();
    println!("pipelined GPU FDK 64³: {st}");
    assert!(
        st.on_device && !st.folded && st.chunks == 26 && st.slabs == 3,
        "{st:?}"
    );
    let e = rel(&piped, &cpu);
    assert!(e <= 2e-3, "pipelined GPU FDK vs CPU: {e}");
    // The folded, overlapped pipeline with the same chunks: 12 upper
    // slices per slab rounded up to the kernel's 16, so 2 slab pairs.
    be.set_fdk_fold(tomors_cuda::FdkFold::default());
    let mut folded = Array3::<f32>::from_elem((N, N, N), f32::NAN);
    let st = be
        .fdk_device(proj.view(), &g, &vol, &slabbed, folded.view_mut())
        .unwrap();
    println!("folded GPU FDK 64³: {st}");
    assert!(
        st.on_device && st.folded && st.chunks == 26 && st.slabs == 2,
        "{st:?}"
    );
    let e = rel(&folded, &cpu);
    assert!(e <= 2e-3, "folded GPU FDK vs CPU: {e}");
}

/// A short scan (Parker weights) on the GPU equals the CPU's, and a
/// non-finite projection value is reported with its position (the device
/// pipeline's check) and leaves no result.
#[test]
fn fdk_on_the_gpu_short_scan_and_bad_values() {
    let Some(be) = gpu_or_skip("fdk_on_the_gpu_short_scan_and_bad_values") else {
        return;
    };
    const N: usize = 48;
    let probe = ConeGeometry::new(vec![0.0, 1.0], 300.0, 300.0, 56, 56, 2.0, 2.0).unwrap();
    let range = probe.short_scan_range();
    let g = ConeGeometry::new(
        tomors_core::cone::uniform_angles_inclusive(120, range),
        300.0,
        300.0,
        56,
        56,
        2.0,
        2.0,
    )
    .unwrap();
    let vol = ConeVolume::new(N, N, N, 1.0).unwrap();
    let phantom = Phantom3d::shepp_logan();
    let proj = project_cone(&phantom, &g, N as f64 / 2.0, DEFAULT_SUBPIXELS).unwrap();
    let opts = FdkOptions {
        scan: tomors_core::cone::ScanMode::Short,
        ..FdkOptions::default()
    };
    let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();
    let mut gpu = Array3::<f32>::zeros((N, N, N));
    let st = be
        .fdk_device(proj.view(), &g, &vol, &opts, gpu.view_mut())
        .unwrap();
    assert!(st.on_device, "{st:?}");
    let e = rel(&gpu, &cpu);
    println!("short scan: GPU vs CPU FDK rel L2 {e:.2e}");
    assert!(e <= 2e-3, "short scan GPU vs CPU: {e}");

    let mut bad = proj.clone();
    bad[[77, 3, 40]] = f32::NAN;
    let err = fdk(&be, bad.view(), &g, &vol, &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("non-finite") && err.contains("(77, 3, 40)"),
        "{err}"
    );
}
