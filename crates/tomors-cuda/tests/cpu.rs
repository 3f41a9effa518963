//! Tests that need no GPU: hashing and cache keys, parsing and validation,
//! the CPU model of the texture kernels, graceful failure without a driver,
//! and (when libnvrtc is present) run-time compilation of every kernel.

mod common;

use common::{random, reference_bp, rel_l2};
use ndarray::Array2;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::compile::{
    build_source, cache_file_name, compile_cubin, fnv1a64, nvrtc_available, nvrtc_options,
};
use tomors_cuda::kernels::{
    bp_defines, bp_defines_mapped, projection_coefficients, BACKPROJECT_CU, FILTER_CU,
};
use tomors_cuda::model::{backproject_model, to_half, WeightModel};
use tomors_cuda::{parse_devices, BpConfig, KernelChoice, KernelKind, SliceMode};

#[test]
fn fnv_hash_is_the_published_function() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn cache_names_change_with_every_input() {
    let o = vec!["--gpu-architecture=sm_90".to_string()];
    let base = cache_file_name("backproject", "NVIDIA H100 80GB HBM3", 13000, "src", &o);
    assert_eq!(
        base,
        cache_file_name("backproject", "NVIDIA H100 80GB HBM3", 13000, "src", &o)
    );
    assert!(base.starts_with("backproject-NVIDIA_H100_80GB_HBM3-drv13000-"));
    assert!(base.ends_with(".cubin"));
    assert!(base
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
    let others = [
        cache_file_name("backproject", "NVIDIA H200", 13000, "src", &o),
        cache_file_name("backproject", "NVIDIA H100 80GB HBM3", 13010, "src", &o),
        cache_file_name("backproject", "NVIDIA H100 80GB HBM3", 13000, "src2", &o),
        cache_file_name(
            "backproject",
            "NVIDIA H100 80GB HBM3",
            13000,
            "src",
            &["--gpu-architecture=sm_80".to_string()],
        ),
    ];
    for x in others {
        assert_ne!(x, base);
    }
}

#[test]
fn defines_come_first_and_are_complete() {
    let grid = SliceGrid::new(70, 50).unwrap();
    let cfg = BpConfig {
        kernel: KernelKind::TexOpt,
        mode: SliceMode::Float2,
    };
    let d = bp_defines(cfg, &grid, 90, 4);
    let s = build_source(&d, BACKPROJECT_CU);
    assert!(s.starts_with(
        "#define SMAP 2\n#define STD_ILP 16\n#define NX 70\n#define NY 50\n#define NPROJ 90\n#define SPT 2\n#define CMEM 1\n"
    ));
    let big = bp_defines(cfg, &grid, 6000, 4);
    assert!(big.contains(&("CMEM".to_string(), "0".to_string())));
    assert!(nvrtc_options((9, 0)).contains(&"--gpu-architecture=sm_90".to_string()));
}

#[test]
fn kernel_names_parse_and_half_needs_nearest() {
    let p = |s: &str| s.parse::<KernelChoice>().unwrap();
    assert_eq!(p("auto"), KernelChoice::Auto);
    assert_eq!(
        p("standard"),
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::Standard,
            mode: SliceMode::F32
        })
    );
    assert_eq!(
        p("tex-opt"),
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::F32
        })
    );
    assert_eq!(
        p("float2"),
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::Float2
        })
    );
    assert_eq!(
        p("half4"),
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::Half4
        })
    );
    assert_eq!(
        p("standard-float2"),
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::Standard,
            mode: SliceMode::Float2
        })
    );
    let e = "fastest".parse::<KernelChoice>().unwrap_err().to_string();
    assert!(e.contains("fastest") && e.contains("tex-opt"), "{e}");
    let half = BpConfig {
        kernel: KernelKind::TexOpt,
        mode: SliceMode::Half4,
    };
    assert!(half.check(Interpolation::Linear).is_err());
    assert!(half.check(Interpolation::Nearest).is_ok());
    for c in BpConfig::ALL {
        let name = c.to_string();
        assert_eq!(
            name.parse::<KernelChoice>().unwrap(),
            KernelChoice::Fixed(c),
            "{name}"
        );
    }
    assert_eq!(KernelChoice::Auto.resolve(1).mode, SliceMode::F32);
    assert_eq!(KernelChoice::Auto.resolve(8).mode, SliceMode::Float2);
}

#[test]
fn device_lists_are_validated() {
    assert_eq!(parse_devices(None, 3).unwrap(), vec![0, 1, 2]);
    assert_eq!(parse_devices(Some("all"), 2).unwrap(), vec![0, 1]);
    assert_eq!(parse_devices(Some("1, 0"), 2).unwrap(), vec![1, 0]);
    assert!(parse_devices(Some("2"), 2).is_err());
    assert!(parse_devices(Some("0,0"), 2).is_err());
    assert!(parse_devices(Some("x"), 2).is_err());
    assert!(parse_devices(Some("0,"), 2).is_err());
}

#[test]
fn no_gpu_is_a_clear_error_not_a_panic() {
    match tomors_cuda::device_count() {
        Ok(n) => assert!(n > 0),
        Err(e) => {
            let s = e.to_string();
            assert!(!s.is_empty() && !s.contains('\n'), "{s:?}");
            eprintln!("device_count: {s}");
            let b = tomors_cuda::CudaBackend::new(0);
            assert!(b.is_err());
        }
    }
}

#[test]
fn coefficients_give_the_bin_coordinate_plus_half() {
    let angles = uniform_angles(37, 3.0);
    let geom = ParallelGeometry::new(angles, 101)
        .unwrap()
        .with_center(48.3)
        .unwrap()
        .with_bin_width(0.9)
        .unwrap();
    let grid = SliceGrid::with_pixel_size(60, 45, 1.3).unwrap();
    let c = projection_coefficients(&geom, &grid);
    let na = geom.n_angles();
    for (p, k) in geom.projection_constants().iter().enumerate() {
        for &(ix, iy) in &[(0usize, 0usize), (59, 44), (13, 30)] {
            let x = grid.x(ix) as f64;
            let y = grid.y(iy) as f64;
            let u = k.center as f64 + (x * k.cos as f64 + y * k.sin as f64) / 0.9;
            let t = c[p] as f64 + ix as f64 * c[na + p] as f64 + iy as f64 * c[2 * na + p] as f64;
            assert!((t - (u + 0.5)).abs() < 1e-3, "p {p}: {t} vs {}", u + 0.5);
        }
    }
}

#[test]
fn model_without_quantisation_matches_the_reference() {
    let geom = ParallelGeometry::new(uniform_angles(45, std::f32::consts::PI), 40)
        .unwrap()
        .with_center(20.7)
        .unwrap();
    let grid = SliceGrid::new(36, 30).unwrap();
    let sino = Array2::from_shape_vec((45, 40), random(45 * 40, 3)).unwrap();
    let r = reference_bp(sino.view(), &geom, &grid, Interpolation::Linear);
    let m = backproject_model(
        sino.view(),
        &geom,
        &grid,
        Interpolation::Linear,
        WeightModel::Exact,
        false,
    );
    let e = rel_l2(m.as_slice().unwrap(), r.as_slice().unwrap());
    assert!(e < 1e-5, "exact-weight model vs reference: {e}");
    let q = backproject_model(
        sino.view(),
        &geom,
        &grid,
        Interpolation::Linear,
        WeightModel::Round256,
        false,
    );
    let eq = rel_l2(q.as_slice().unwrap(), r.as_slice().unwrap());
    // 8-bit weights: each sample's weight is off by at most 1/512.
    assert!(eq > 1e-6 && eq < 3e-3, "quantised model vs reference: {eq}");
    let rn = reference_bp(sino.view(), &geom, &grid, Interpolation::Nearest);
    let mn = backproject_model(
        sino.view(),
        &geom,
        &grid,
        Interpolation::Nearest,
        WeightModel::Exact,
        false,
    );
    let en = rel_l2(mn.as_slice().unwrap(), rn.as_slice().unwrap());
    assert!(en < 1e-3, "nearest model vs reference (ties only): {en}");
}

#[test]
fn half_rounding() {
    assert_eq!(to_half(1.0), 1.0);
    assert_eq!(to_half(1.0 / 3.0), 0.333_251_95);
    assert_eq!(to_half(-2.5), -2.5);
    assert_eq!(to_half(1000.3), 1000.5);
    assert!((to_half(0.1) - 0.1).abs() < 0.1 / 1024.0);
}

/// Compiles every kernel configuration with NVRTC when the library is
/// present (no GPU needed); skips with a reason otherwise.
#[test]
fn every_kernel_compiles_with_nvrtc() {
    if !nvrtc_available() {
        assert!(
            !common::gpu_required(),
            "every_kernel_compiles_with_nvrtc: TOMORS_REQUIRE_GPU=1 but libnvrtc could not be loaded"
        );
        eprintln!("skipping every_kernel_compiles_with_nvrtc: libnvrtc not found");
        return;
    }
    let opts = nvrtc_options((9, 0));
    let cubin = compile_cubin("filter", &build_source(&[], FILTER_CU), &opts).unwrap();
    assert_eq!(&cubin[..4], b"\x7fELF");
    let grid = SliceGrid::new(70, 50).unwrap();
    for c in BpConfig::ALL {
        for nproj in [90, 6000] {
            let src = build_source(&bp_defines(c, &grid, nproj, 4), BACKPROJECT_CU);
            let cubin =
                compile_cubin("backproject", &src, &opts).unwrap_or_else(|e| panic!("{c}: {e}"));
            assert_eq!(&cubin[..4], b"\x7fELF");
        }
        for map in [2 + 16 * 4, 16, 1 + 16, 2 + 16, 2 + 16 * 8, 2 + 16 * 16] {
            let src = build_source(&bp_defines_mapped(c, &grid, 90, 4, map), BACKPROJECT_CU);
            compile_cubin("backproject", &src, &opts)
                .unwrap_or_else(|e| panic!("{c} map {map}: {e}"));
        }
    }
    // The alu kernel: the quick tuning candidates, linear and nearest, and
    // the non-default caching variants.
    let alu = tomors_cuda::tune::candidates(true)
        .into_iter()
        .filter(|c| matches!(c.kernel, tomors_cuda::KernelKind::Alu(_)));
    let mut jobs = Vec::new();
    for c in alu {
        let tomors_cuda::KernelKind::Alu(p) = c.kernel else {
            unreachable!()
        };
        for (linear, advanced, loads) in [
            (true, true, false),
            (true, false, false),
            (false, false, false),
            (true, true, true),
            (false, false, true),
        ] {
            if loads && p.oversample {
                continue;
            }
            let p = tomors_cuda::kernels::AluParams {
                advanced,
                loads,
                ..p
            };
            let mut defines = bp_defines(c, &grid, 90, p.min_blocks as u32);
            defines.extend(tomors_cuda::kernels::alu_defines(p, linear, 50, 64));
            jobs.push((
                format!("{c} linear {linear} advanced {advanced} loads {loads}"),
                build_source(&defines, BACKPROJECT_CU),
            ));
        }
    }
    // Compiled in parallel (NVRTC is thread-safe; the tuner does the same).
    {
        use rayon::prelude::*;
        jobs.par_iter().for_each(|(label, src)| {
            compile_cubin("backproject", src, &opts).unwrap_or_else(|e| panic!("{label}: {e}"));
        });
    }
    // The line-sweep kernel: its tuning candidates and the test variants'
    // shapes on an odd geometry (a full turn, pixels ≠ bins).
    let sweep_geom = ParallelGeometry::new(uniform_angles(97, 2.0 * std::f32::consts::PI), 61)
        .unwrap()
        .with_bin_width(0.8)
        .unwrap();
    let sweep_grid = SliceGrid::with_pixel_size(53, 37, 0.7).unwrap();
    let d = tomors_cuda::kernels::SweepParams::default();
    let mut sweeps: Vec<_> = tomors_cuda::tune::candidates(true)
        .into_iter()
        .filter_map(|c| match c.kernel {
            KernelKind::Sweep(p) => Some(p),
            _ => None,
        })
        .collect();
    assert!(!sweeps.is_empty(), "no line-sweep tuning candidates");
    sweeps.extend([
        tomors_cuda::kernels::SweepParams { spl: 1, ..d },
        tomors_cuda::kernels::SweepParams {
            spl: 2,
            tx: 8,
            ty: 8,
            wx: 2,
            wy: 4,
            axis: true,
            ..d
        },
    ]);
    for p in sweeps {
        let src = build_source(
            &tomors_cuda::kernels::sweep_defines(p, &sweep_geom, &sweep_grid),
            tomors_cuda::kernels::SWEEP_CU,
        );
        let cubin = compile_cubin("backproject_sweep", &src, &opts)
            .unwrap_or_else(|e| panic!("sweep@{}: {e}", p.spec()));
        assert_eq!(&cubin[..4], b"\x7fELF");
    }
    // The tensor-core kernel: its tuning candidates and a small odd shape
    // (one warp column, one slice tile, 3 projection pairs per stage) on the
    // same geometry (pixels 0.7 / 0.8 of a bin: accepted).
    let mut tensors: Vec<_> = tomors_cuda::tune::candidates(true)
        .into_iter()
        .filter_map(|c| match c.kernel {
            KernelKind::Tensor(p) => Some(p),
            _ => None,
        })
        .collect();
    assert!(!tensors.is_empty(), "no tensor tuning candidates");
    tensors.push(tomors_cuda::kernels::TensorParams {
        bx: 1,
        nt: 1,
        wx: 1,
        wy: 3,
        ap: 3,
        stages: 4,
        swizzle: 3,
        ..Default::default()
    });
    // Bulk staging with prefetched coefficients and lean weights on the
    // small odd shape; pairs per chain with bulk staging on 2x2 blocks.
    tensors.push(tomors_cuda::kernels::TensorParams {
        bx: 1,
        nt: 1,
        wx: 1,
        wy: 3,
        ap: 3,
        stages: 4,
        bulk: 2,
        weights: 1,
        ..Default::default()
    });
    tensors.push(tomors_cuda::kernels::TensorParams {
        by: 2,
        nt: 4,
        bulk: 1,
        weights: 1,
        pair_group: 2,
        ..Default::default()
    });
    // Interleaved chains, tiles outermost (issue 15 part 3).
    for (nt, flush, interleave, nt_outer) in [
        (8, 1, 2, false),
        (8, 1, 4, false),
        (8, 1, 1, true),
        (4, 1, 2, true),
        (4, 8, 4, true),
        (2, 0, 2, false),
    ] {
        tensors.push(tomors_cuda::kernels::TensorParams {
            nt,
            flush,
            interleave,
            nt_outer,
            ..Default::default()
        });
    }
    for p in tensors {
        let src = build_source(
            &tomors_cuda::kernels::tensor_defines(p, &sweep_geom, &sweep_grid),
            tomors_cuda::kernels::TENSOR_CU,
        );
        let cubin = compile_cubin("backproject_tensor", &src, &opts)
            .unwrap_or_else(|e| panic!("tensor@{}: {e}", p.spec()));
        assert_eq!(&cubin[..4], b"\x7fELF");
    }
    for sg in [4, 8] {
        for km in [0, 1, 3] {
            let defines = vec![
                ("SG".to_string(), sg.to_string()),
                ("KM".to_string(), km.to_string()),
            ];
            let src = build_source(&defines, tomors_cuda::iterative::JOSEPH_CU);
            let cubin = compile_cubin("joseph", &src, &opts)
                .unwrap_or_else(|e| panic!("joseph SG={sg} KM={km}: {e}"));
            assert_eq!(&cubin[..4], b"\x7fELF");
        }
    }
    let src = build_source(&[], tomors_cuda::cone_iterative::CONE_JOSEPH_CU);
    let cubin =
        compile_cubin("cone_joseph", &src, &opts).unwrap_or_else(|e| panic!("cone_joseph: {e}"));
    assert_eq!(&cubin[..4], b"\x7fELF");
    let src = build_source(&[], tomors_cuda::cone_iterative::CONE_SIRT_HALF_CU);
    let cubin = compile_cubin("cone_sirt_half", &src, &opts)
        .unwrap_or_else(|e| panic!("cone_sirt_half: {e}"));
    assert_eq!(&cubin[..4], b"\x7fELF");
    // The line sweeps' shapes (forward groups of 8 and 32 quads, reuse on
    // and off, back tiles and blocks).
    for (r, wpb, reuse, fq, tile) in [
        (8, 4, 0, 8, (8, 2, 4, 2, 1)),
        (4, 8, 1, 32, (16, 1, 4, 4, 0)),
        (16, 2, 0, 8, (8, 4, 4, 2, 1)),
    ] {
        let (tx, ty, bwx, bwy, breuse) = tile;
        let defines: Vec<(String, String)> = [
            ("R", r),
            ("WPB", wpb),
            ("REUSE", reuse),
            ("FQ", fq),
            ("TX", tx),
            ("TY", ty),
            ("BWX", bwx),
            ("BWY", bwy),
            ("BREUSE", breuse),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let src = build_source(&defines, tomors_cuda::iterative::JOSEPH_SWEEP_CU);
        let cubin = compile_cubin("joseph_sweep", &src, &opts)
            .unwrap_or_else(|e| panic!("joseph_sweep {defines:?}: {e}"));
        assert_eq!(&cubin[..4], b"\x7fELF");
    }
}

#[test]
fn errors_map_to_core_errors_with_their_reason() {
    use tomors_cuda::CudaError;
    let oom = CudaError::OutOfMemory {
        what: "allocating slab sinograms".into(),
        bytes: 1 << 30,
    };
    assert!(oom.is_out_of_memory());
    let fft_oom = CudaError::Fft {
        call: "cufftPlanMany".into(),
        message: "CUFFT_ALLOC_FAILED".into(),
    };
    assert!(fft_oom.is_out_of_memory());
    let launch = CudaError::Launch {
        kernel: "bp_texopt (tex-opt-float2)".into(),
        dims: "grid (128, 128, 6); 12 slices of 2048×2048 from 2048 angles".into(),
        message: "CUDA_ERROR_LAUNCH_FAILED".into(),
    };
    assert!(!launch.is_out_of_memory());
    let core: tomors_core::CoreError = launch.into();
    let text = core.to_string();
    assert!(
        text.contains("bp_texopt")
            && text.contains("2048×2048")
            && text.starts_with("cuda backend"),
        "{text}"
    );
    let shape: tomors_core::CoreError =
        CudaError::Core(tomors_core::CoreError::Shape("x".into())).into();
    assert!(matches!(shape, tomors_core::CoreError::Shape(_)));
}

/// The hybrid split by block index (`g`), the exact hybrid texture path
/// (`x`) and the half arithmetic of the half cache (`m`) survive the text
/// form, and only the exact hybrid counts as exact for `Auto`.
#[test]
fn alu_split_exact_and_half_math_keys() {
    use tomors_cuda::kernels::AluParams;
    use tomors_cuda::tuning::is_exact;
    let p = AluParams::parse("t64,s16,a1,r1,b2,h2,g1,x1").unwrap();
    assert!(p.by_block && p.hybrid_exact && p.hybrid == 2 && p.half_math == 0);
    assert_eq!(AluParams::parse(&p.spec()).unwrap(), p);
    let m = AluParams::parse("t32,m2").unwrap();
    assert_eq!(m.half_math, 2);
    assert_eq!(AluParams::parse(&m.spec()).unwrap(), m);
    assert!(AluParams::parse("m3").is_err());
    let name = "hybrid-float2@t64,s16,a1,r1,b2,h2,g1,x1";
    let KernelChoice::Fixed(exact) = name.parse::<KernelChoice>().unwrap() else {
        panic!("{name} is fixed");
    };
    assert_eq!(
        exact.to_string().parse::<KernelChoice>().unwrap(),
        KernelChoice::Fixed(exact)
    );
    assert!(is_exact(&exact));
    let KernelChoice::Fixed(lerp) = "hybrid-float2@t64,h2".parse::<KernelChoice>().unwrap() else {
        panic!("fixed");
    };
    assert!(
        !is_exact(&lerp),
        "the texture unit's 8-bit weights are not exact"
    );
    // The exact texture path interpolates half texels itself: linear allowed.
    let KernelChoice::Fixed(h) = "hybrid-half4@t32,h2,x1".parse::<KernelChoice>().unwrap() else {
        panic!("fixed");
    };
    assert!(h.check(Interpolation::Linear).is_ok());
    let KernelChoice::Fixed(h) = "hybrid-half4@t32,h2".parse::<KernelChoice>().unwrap() else {
        panic!("fixed");
    };
    assert!(h.check(Interpolation::Linear).is_err());
    let KernelChoice::Fixed(hm) = "alu-half4@t32,m1".parse::<KernelChoice>().unwrap() else {
        panic!("fixed");
    };
    assert!(!is_exact(&hm));
    let KernelChoice::Fixed(fast) = "fast".parse::<KernelChoice>().unwrap() else {
        panic!("fast is fixed");
    };
    assert_eq!(fast, tomors_cuda::BpConfig::fast());
    assert!(!is_exact(&fast) && fast.check(Interpolation::Linear).is_ok());
}
