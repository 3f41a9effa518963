//! GPU tests of the folded FDK pipeline (`cone_bp_fold`: one `float2`
//! fetch for slice k and its mirror, back projection overlapped with the
//! uploads and downloads): against the CPU FDK and the unfolded texture
//! pipeline, over odd and even slice counts, odd and even detector rows,
//! launch shapes, chunk/group/slab splits; geometries that cannot fold take
//! the unfolded path. Each test skips with a printed reason when no GPU is
//! usable, and fails instead under `TOMORS_REQUIRE_GPU=1`.

mod common;

use std::f64::consts::PI;

use common::{gpu_or_skip, rel_l2};
use ndarray::Array3;
use tomors_core::cone::{
    fdk, project_cone, ConeGeometry, ConeVolume, FdkOptions, DEFAULT_SUBPIXELS,
};
use tomors_core::cpu::CpuBackend;
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::Phantom3d;
use tomors_cuda::{CudaBackend, FdkFold, FoldShape};

/// Texture kernels: the hardware's 8-bit interpolation weights (the bound
/// of the unfolded texture kernel, `cone_gpu`).
const TEX_BOUND: f64 = 2e-3;

/// Half texels against `float2` texels, same configuration: each folded
/// texel rounded to half (relative ≤ 2^-11 after the per-projection
/// power-of-two scale), averaged over the projections of each voxel;
/// measured 7.3·10⁻⁵–1.04·10⁻⁴ on these scans (H200, 2026-11-27), bound
/// with a margin of about 10.
const HALF_VS_FLOAT: f64 = 1e-3;

fn rel(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    rel_l2(a.as_slice().unwrap(), b.as_slice().unwrap())
}

/// A cone scan of the Shepp–Logan: `na` angles over 2π, `nr` × `nc`
/// detector (centred principal point unless `crow` is given).
fn scan(na: usize, nr: usize, nc: usize, crow: Option<f64>) -> (ConeGeometry, Array3<f32>) {
    let mut g = ConeGeometry::new(
        uniform_angles(na, 2.0 * PI as f32),
        300.0,
        250.0,
        nr,
        nc,
        1.6,
        1.5,
    )
    .unwrap();
    if let Some(r) = crow {
        g = g.with_principal_point((nc as f64 - 1.0) * 0.5, r).unwrap();
    }
    let proj = project_cone(&Phantom3d::shepp_logan(), &g, 14.0, DEFAULT_SUBPIXELS).unwrap();
    (g, proj)
}

/// FDK on the device into a NaN-poisoned volume; the stats' fold flag.
fn device_fdk(
    be: &CudaBackend,
    proj: &Array3<f32>,
    g: &ConeGeometry,
    vol: &ConeVolume,
    opts: &FdkOptions,
) -> (Array3<f32>, bool) {
    let mut out = Array3::from_elem((vol.nz, vol.ny, vol.nx), f32::NAN);
    let st = be
        .fdk_device(proj.view(), g, vol, opts, out.view_mut())
        .unwrap();
    assert!(st.on_device, "{st:?}");
    assert!(out.iter().all(|v| v.is_finite()), "unwritten voxels ({st})");
    (out, st.folded)
}

/// Odd and even slice counts and detector rows, non-square volumes, every
/// launch shape and pipeline split: the folded FDK equals the CPU FDK and
/// the unfolded texture pipeline to the texture's weights.
#[test]
fn folded_fdk_matches_the_cpu_and_the_unfolded_pipeline() {
    let Some(mut be) = gpu_or_skip("folded_fdk_matches_the_cpu_and_the_unfolded_pipeline") else {
        return;
    };
    let opts = FdkOptions::default();
    // (angles, rows, cols, nx, ny, nz): rows even (half-pixel centre) and
    // odd (whole-pixel centre), slices odd and even.
    for (na, nr, nc, nx, ny, nz) in [
        (90, 40, 44, 36, 30, 25),
        (90, 41, 44, 36, 30, 26),
        (64, 33, 38, 28, 28, 33),
    ] {
        let (g, proj) = scan(na, nr, nc, None);
        let fit = g.fitting_volume(nx, ny, nz).unwrap();
        let vol = ConeVolume::new(nx, ny, nz, fit.voxel_size).unwrap();
        let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();

        be.set_fdk_chunk(0);
        be.set_fdk_fold(FdkFold {
            enabled: false,
            ..FdkFold::default()
        });
        let (plain, folded) = device_fdk(&be, &proj, &g, &vol, &opts);
        assert!(!folded);
        let e_plain = rel(&plain, &cpu);
        assert!(e_plain <= TEX_BOUND, "unfolded vs CPU {e_plain}");

        // float2 texels, no register cap, in order on the compute stream:
        // the base of most rows.
        let d = FdkFold {
            half: false,
            min_blocks: 0,
            separate_stream: false,
            priority: false,
            ..FdkFold::default()
        };
        let shape = |zb, bx| FoldShape { zb, bx };
        // (upload chunk, configuration): every option, shape and split.
        let configs = [
            (0, FdkFold::default()),
            (0, d),
            (
                7,
                FdkFold {
                    buffers: 2,
                    first: 14,
                    taper: true,
                    ..FdkFold::default()
                },
            ),
            (0, FdkFold { arrays: true, ..d }),
            (0, FdkFold { half: true, ..d }),
            (
                0,
                FdkFold {
                    half: true,
                    arrays: true,
                    min_blocks: 4,
                    ..d
                },
            ),
            (
                0,
                FdkFold {
                    separate_stream: true,
                    priority: true,
                    ..d
                },
            ),
            (
                7,
                FdkFold {
                    shape: shape(8, 32),
                    group: 10,
                    last: 20,
                    slab: 5,
                    arrays: true,
                    ..d
                },
            ),
            (
                7,
                FdkFold {
                    shape: shape(8, 32),
                    group: 10,
                    last: 20,
                    slab: 5,
                    separate_stream: true,
                    ..d
                },
            ),
            (
                7,
                FdkFold {
                    shape: shape(8, 32),
                    group: 10,
                    last: 20,
                    slab: 5,
                    separate_stream: true,
                    half: true,
                    priority: true,
                    min_blocks: 4,
                    first: 7,
                    taper: true,
                    ..d
                },
            ),
            (
                5,
                FdkFold {
                    shape: shape(4, 8),
                    group: 5,
                    last: na,
                    slab: 3,
                    half: true,
                    taper: true,
                    ..d
                },
            ),
            (
                11,
                FdkFold {
                    shape: shape(32, 64),
                    group: 30,
                    last: 1,
                    separate_stream: true,
                    arrays: true,
                    first: 11,
                    ..d
                },
            ),
            (
                3,
                FdkFold {
                    group: 60,
                    min_blocks: 4,
                    first: 3,
                    taper: true,
                    ..d
                },
            ),
        ];
        for (chunk, cfg) in configs {
            be.set_fdk_chunk(chunk);
            be.set_fdk_fold(cfg);
            let (out, folded) = device_fdk(&be, &proj, &g, &vol, &opts);
            assert!(folded, "{na}×{nr}×{nc} → {nx}×{ny}×{nz} did not fold");
            let e_cpu = rel(&out, &cpu);
            let e_plain = rel(&out, &plain);
            println!(
                "{na}×{nr}×{nc} → {nx}×{ny}×{nz}, chunk {chunk}, {cfg:?}: folded vs CPU \
                 {e_cpu:.2e}, vs unfolded {e_plain:.2e}"
            );
            assert!(e_cpu <= TEX_BOUND, "folded vs CPU {e_cpu}");
            assert!(e_plain <= TEX_BOUND, "folded vs unfolded {e_plain}");
            // Again on the same device state (resident volume, textures).
            let (again, _) = device_fdk(&be, &proj, &g, &vol, &opts);
            assert_eq!(again, out, "a second call differs");
            if cfg.half {
                // The same configuration with float2 texels.
                be.set_fdk_fold(FdkFold { half: false, ..cfg });
                let (full, _) = device_fdk(&be, &proj, &g, &vol, &opts);
                let e_half = rel(&out, &full);
                println!("    half vs float2 texels {e_half:.2e}");
                assert!(e_half <= HALF_VS_FLOAT, "half vs float2 texels {e_half}");
            }
        }
    }
}

/// A principal point off the half-pixel grid cannot fold: the unfolded
/// pipeline runs and equals the CPU FDK; so does a slab of the volume.
#[test]
fn unfoldable_fdk_uses_the_unfolded_pipeline() {
    let Some(be) = gpu_or_skip("unfoldable_fdk_uses_the_unfolded_pipeline") else {
        return;
    };
    let opts = FdkOptions::default();
    let (g, proj) = scan(72, 40, 44, Some(19.3));
    let fit = g.fitting_volume(30, 30, 24).unwrap();
    let vol = ConeVolume::new(30, 30, 24, fit.voxel_size).unwrap();
    let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();
    let (out, folded) = device_fdk(&be, &proj, &g, &vol, &opts);
    assert!(!folded, "an off-grid principal point folded");
    let e = rel(&out, &cpu);
    println!("off-grid principal point: GPU vs CPU FDK {e:.2e}");
    assert!(e <= TEX_BOUND, "{e}");

    let (g, proj) = scan(72, 40, 44, None);
    let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();
    let mut slab = Array3::from_elem((10, vol.ny, vol.nx), f32::NAN);
    let st = be
        .fdk_slab_device(
            proj.view(),
            &g,
            0..g.n_rows(),
            &vol,
            5..15,
            &opts,
            slab.view_mut(),
        )
        .unwrap();
    assert!(st.on_device && !st.folded, "{st:?}");
    let e = rel_l2(
        slab.as_slice().unwrap(),
        cpu.slice(ndarray::s![5..15, .., ..])
            .as_standard_layout()
            .as_slice()
            .unwrap(),
    );
    println!("slab 5..15 of a foldable scan: GPU vs CPU FDK {e:.2e}");
    assert!(e <= TEX_BOUND, "{e}");
}

/// `prepare_fdk` (kernels, buffers, FFT plans before the data) changes
/// nothing in the result: an FDK after it equals one on a fresh backend
/// bit for bit, and preparing for one shape then reconstructing another
/// still gives that shape's FDK.
#[test]
fn prepared_fdk_equals_the_unprepared() {
    let Some(fresh) = gpu_or_skip("prepared_fdk_equals_the_unprepared") else {
        return;
    };
    let Some(prepared) = gpu_or_skip("prepared_fdk_equals_the_unprepared") else {
        return;
    };
    use tomors_core::cone::ConeBackend;
    let opts = FdkOptions::default();
    let (g, proj) = scan(80, 40, 44, None);
    let fit = g.fitting_volume(32, 32, 28).unwrap();
    let vol = ConeVolume::new(32, 32, 28, fit.voxel_size).unwrap();
    let (want, folded) = device_fdk(&fresh, &proj, &g, &vol, &opts);
    assert!(folded);
    prepared.prepare_fdk(&g, &vol, &opts).unwrap();
    let (got, folded) = device_fdk(&prepared, &proj, &g, &vol, &opts);
    assert!(folded);
    assert_eq!(got, want, "the prepared FDK differs");

    // Prepared for a larger problem, then a smaller one is reconstructed.
    let (g2, proj2) = scan(60, 33, 38, None);
    let fit2 = g2.fitting_volume(20, 24, 17).unwrap();
    let vol2 = ConeVolume::new(20, 24, 17, fit2.voxel_size).unwrap();
    prepared.prepare_fdk(&g, &vol, &opts).unwrap();
    let (got2, _) = device_fdk(&prepared, &proj2, &g2, &vol2, &opts);
    let (want2, _) = device_fdk(&fresh, &proj2, &g2, &vol2, &opts);
    assert_eq!(
        got2, want2,
        "a smaller FDK after preparing a larger one differs"
    );
}

/// Half texels hold each projection scaled by a power of two, so the FDK
/// stays linear far outside half's range (largest 65504, smallest normal
/// 6.1·10⁻⁵): projections times 10⁸ and 10⁻⁸ give the half FDK of the
/// scan times the same factor, as close to the `float2` one as at scale 1.
#[test]
fn half_texels_keep_their_precision_at_any_scale() {
    let Some(mut be) = gpu_or_skip("half_texels_keep_their_precision_at_any_scale") else {
        return;
    };
    let opts = FdkOptions::default();
    let (g, proj) = scan(72, 40, 44, None);
    let fit = g.fitting_volume(30, 30, 24).unwrap();
    let vol = ConeVolume::new(30, 30, 24, fit.voxel_size).unwrap();
    let cpu = fdk(&CpuBackend::new(), proj.view(), &g, &vol, &opts).unwrap();
    for factor in [1.0f32, 1e8, 1e-8] {
        let scaled = proj.mapv(|v| v * factor);
        be.set_fdk_fold(FdkFold {
            half: false,
            ..FdkFold::default()
        });
        let (full, _) = device_fdk(&be, &scaled, &g, &vol, &opts);
        be.set_fdk_fold(FdkFold {
            half: true,
            ..FdkFold::default()
        });
        let (half, folded) = device_fdk(&be, &scaled, &g, &vol, &opts);
        assert!(folded);
        let e_half = rel(&half, &full);
        let want = cpu.mapv(|v| v * factor);
        let e_cpu = rel(&half, &want);
        println!("scale {factor:e}: half vs float2 texels {e_half:.2e}, vs CPU {e_cpu:.2e}");
        assert!(
            e_half <= HALF_VS_FLOAT,
            "scale {factor}: half vs float2 {e_half}"
        );
        assert!(e_cpu <= TEX_BOUND, "scale {factor}: half vs CPU {e_cpu}");
    }
}
