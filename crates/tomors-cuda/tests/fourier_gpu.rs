//! The GPU gridding (fourier) method against its CPU reference
//! (tomors-core's `fourier`, same plan and f32 gather): several geometries,
//! slab splits, odd slice counts, filters and padding. Skips with a printed
//! reason without a GPU; fails instead under `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{gpu_required, random, rel_l2};
use ndarray::{Array3, Axis};
use tomors_core::fourier::{fourier_sinograms, FourierOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::Phantom2d;
use tomors_core::{FilterKind, FilterSpec, Padding, ParallelGeometry, SliceGrid};
use tomors_cuda::fourier::GatherKind;
use tomors_cuda::CudaFourier;

const PI: f32 = std::f32::consts::PI;

fn fourier_or_skip(test: &str) -> Option<CudaFourier> {
    match tomors_cuda::device_count().and_then(|_| CudaFourier::new(0)) {
        Ok(f) => Some(f),
        Err(e) if gpu_required() => {
            panic!("{test}: TOMORS_REQUIRE_GPU=1 but no GPU is usable: {e}")
        }
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

/// Sinograms: the Shepp–Logan's exact projections plus random values.
fn sinograms(k: usize, geom: &ParallelGeometry, seed: u64) -> Array3<f32> {
    let (na, nb) = (geom.n_angles(), geom.n_bins());
    let p = Phantom2d::shepp_logan().project(geom, nb as f64 * 0.4);
    let noise = random(k * na * nb, seed);
    Array3::from_shape_fn((k, na, nb), |(s, j, b)| {
        p[[j, b]] * (1.0 + 0.3 * s as f32) + 0.2 * noise[(s * na + j) * nb + b]
    })
}

/// Relative L2 error of the GPU result against the CPU reference, worst slice.
const BOUND: f64 = 2e-5;

#[test]
fn gpu_fourier_matches_cpu_reference() {
    let Some(gpu) = fourier_or_skip("gpu_fourier_matches_cpu_reference") else {
        return;
    };
    let seed = common::test_seed();
    struct Case {
        name: &'static str,
        nb: usize,
        na: usize,
        range: f32,
        center: Option<f32>,
        grid: Option<(usize, usize, f32)>,
        k: usize,
        slab: usize,
        filter: FilterSpec,
        width: usize,
    }
    let base = Case {
        name: "",
        nb: 128,
        na: 120,
        range: PI,
        center: None,
        grid: None,
        k: 4,
        slab: 0,
        filter: FilterSpec::default(),
        width: 6,
    };
    let cases = vec![
        Case {
            name: "128 bins, 120 angles, 4 slices",
            ..base
        },
        Case {
            name: "odd: 101 bins, 91 angles, 3 slices, slabs of 2",
            nb: 101,
            na: 91,
            k: 3,
            slab: 2,
            ..base
        },
        Case {
            name: "360 degrees, centre 60.3, 5 slices, slabs of 3",
            range: 2.0 * PI,
            na: 200,
            center: Some(60.3),
            k: 5,
            slab: 3,
            ..base
        },
        Case {
            name: "grid 90x70 of 1.3 bins",
            grid: Some((90, 70, 1.3)),
            ..base
        },
        Case {
            name: "grid 150x160 of 0.7 bins, hann 0.8, edge",
            grid: Some((150, 160, 0.7)),
            filter: FilterSpec {
                kind: FilterKind::Hann,
                cutoff: 0.8,
                padding: Padding::Edge,
            },
            ..base
        },
        Case {
            name: "W=4, shepp-logan filter",
            width: 4,
            filter: FilterSpec::new(FilterKind::SheppLogan),
            ..base
        },
        Case {
            name: "1 slice",
            k: 1,
            ..base
        },
        // Every lane layout of the warp gather: W = 2 (16 samples in flight
        // per warp), 3 and 5 (idle lanes), 8, 12 (2 in flight).
        Case {
            name: "W=2, 2 slices",
            width: 2,
            k: 2,
            ..base
        },
        Case {
            name: "W=3, 2 slices",
            width: 3,
            k: 2,
            ..base
        },
        Case {
            name: "W=5, grid 90x70 of 1.3 bins",
            width: 5,
            grid: Some((90, 70, 1.3)),
            k: 2,
            ..base
        },
        Case {
            name: "W=8, 360 degrees, centre 60.3",
            width: 8,
            range: 2.0 * PI,
            na: 200,
            center: Some(60.3),
            k: 2,
            ..base
        },
        Case {
            name: "W=12, grid 150x160 of 0.7 bins",
            width: 12,
            grid: Some((150, 160, 0.7)),
            k: 2,
            ..base
        },
        Case {
            name: "7 slices in slabs of 2",
            k: 7,
            slab: 2,
            ..base
        },
    ];
    let mut failures = Vec::new();
    for c in cases {
        let mut geom = ParallelGeometry::new(uniform_angles(c.na, c.range), c.nb).unwrap();
        if let Some(ctr) = c.center {
            geom = geom.with_center(ctr).unwrap();
        }
        let grid = match c.grid {
            Some((nx, ny, h)) => SliceGrid::with_pixel_size(nx, ny, h).unwrap(),
            None => SliceGrid::for_geometry(&geom),
        };
        let opts = FourierOptions {
            filter: c.filter,
            width: c.width,
            ..FourierOptions::default()
        };
        let sino = sinograms(c.k, &geom, seed);
        let cpu = fourier_sinograms(sino.view(), &geom, &grid, &opts).unwrap();
        for kind in [GatherKind::Warp, GatherKind::Point] {
            gpu.set_gather(kind).unwrap();
            let mut out = Array3::from_elem((c.k, grid.ny, grid.nx), f32::NAN);
            gpu.set_slab(c.slab).unwrap();
            let r = gpu.reconstruct(sino.view(), &geom, &grid, &opts, out.view_mut());
            if let Err(e) = r {
                failures.push(format!("{} ({kind:?}): {e}", c.name));
                continue;
            }
            assert!(
                out.iter().all(|v| v.is_finite()),
                "{}: unwritten pixels",
                c.name
            );
            let worst = (0..c.k)
                .map(|s| {
                    let g = out.index_axis(Axis(0), s);
                    let r = cpu.index_axis(Axis(0), s);
                    rel_l2(g.as_slice().unwrap(), r.as_slice().unwrap())
                })
                .fold(0.0f64, f64::max);
            println!(
                "{} ({kind:?}): GPU vs CPU relative L2 {worst:.3e} ({})",
                c.name,
                gpu.last_stats()
            );
            if worst.is_nan() || worst > BOUND {
                failures.push(format!("{} ({kind:?}): {worst:.3e}", c.name));
            }
        }
    }
    gpu.set_slab(0).unwrap();
    gpu.set_gather(GatherKind::default()).unwrap();
    assert!(failures.is_empty(), "above {BOUND:e}: {failures:?}");
}

#[test]
fn gpu_fourier_refuses_uneven_angles_and_bad_shapes() {
    let Some(gpu) = fourier_or_skip("gpu_fourier_refuses_uneven_angles_and_bad_shapes") else {
        return;
    };
    let mut angles = uniform_angles(64, PI);
    angles[10] += 0.02;
    let geom = ParallelGeometry::new(angles, 64).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = Array3::<f32>::zeros((2, 64, 64));
    let mut out = Array3::<f32>::zeros((2, 64, 64));
    let e = gpu
        .reconstruct(
            sino.view(),
            &geom,
            &grid,
            &FourierOptions::default(),
            out.view_mut(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("evenly spaced"), "{e}");
    let geom = ParallelGeometry::new(uniform_angles(64, PI), 64).unwrap();
    let mut wrong = Array3::<f32>::zeros((3, 64, 64));
    assert!(gpu
        .reconstruct(
            sino.view(),
            &geom,
            &grid,
            &FourierOptions::default(),
            wrong.view_mut()
        )
        .is_err());
}

/// Page-locked input and output (copied by DMA without staging) give the
/// same volume as pageable arrays, over several slabs, bit for bit with
/// either gather (both add in a fixed order).
#[test]
fn gpu_fourier_page_locked_arrays_match_pageable() {
    let Some(gpu) = fourier_or_skip("gpu_fourier_page_locked_arrays_match_pageable") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(96, PI), 96).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let k = 9;
    let sino = sinograms(k, &geom, 11);
    let opts = FourierOptions::default();
    gpu.set_slab(4).unwrap();
    let mut pin_in = gpu.pinned(sino.len()).unwrap();
    pin_in
        .as_mut_slice()
        .copy_from_slice(sino.as_slice().unwrap());
    let mut pin_out = gpu.pinned(sino.len()).unwrap();
    for kind in [GatherKind::Point, GatherKind::Warp] {
        gpu.set_gather(kind).unwrap();
        let mut pageable = Array3::from_elem((k, 96, 96), f32::NAN);
        gpu.reconstruct(sino.view(), &geom, &grid, &opts, pageable.view_mut())
            .unwrap();
        assert!(!gpu.last_stats().pinned_in && !gpu.last_stats().pinned_out);
        pin_out.as_mut_slice().fill(f32::NAN);
        {
            let src = ndarray::ArrayView3::from_shape((k, 96, 96), pin_in.as_slice()).unwrap();
            let dst =
                ndarray::ArrayViewMut3::from_shape((k, 96, 96), pin_out.as_mut_slice()).unwrap();
            gpu.reconstruct(src, &geom, &grid, &opts, dst).unwrap();
        }
        let stats = gpu.last_stats();
        println!("page-locked ({kind:?}): {stats}");
        assert!(stats.pinned_in && stats.pinned_out, "{stats}");
        let e = rel_l2(pin_out.as_slice(), pageable.as_slice().unwrap());
        println!("page-locked vs pageable ({kind:?}): relative L2 {e:.3e}");
        assert_eq!(pin_out.as_slice(), pageable.as_slice().unwrap());
    }
    gpu.set_slab(0).unwrap();
    gpu.set_gather(GatherKind::default()).unwrap();
}

/// `CudaBackend`'s `Backend::fourier` (the CLI's path) with the gathers
/// of fixed summation order (the default warp gather, and the per-point
/// one) repeats bitwise and equals the CPU method to f32 rounding.
#[test]
fn backend_fourier_per_point_is_reproducible() {
    let Some(_) = fourier_or_skip("backend_fourier_per_point_is_reproducible") else {
        return;
    };
    for kind in [GatherKind::Point, GatherKind::Warp] {
        backend_reproducible(kind);
    }
}

fn backend_reproducible(kind: GatherKind) {
    use tomors_core::Backend;
    let opts = tomors_cuda::CudaOptions {
        fourier_gather: kind,
        ..tomors_cuda::CudaOptions::default()
    };
    let be = tomors_cuda::CudaBackend::with_options(0, opts).unwrap();
    let geom = ParallelGeometry::new(uniform_angles(80, PI), 72).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = sinograms(3, &geom, 5);
    let f = FourierOptions::default();
    let run = || {
        let mut out = Array3::from_elem((3, 72, 72), f32::NAN);
        be.fourier(sino.view(), &geom, &grid, &f, out.view_mut())
            .unwrap();
        out
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    let cpu = fourier_sinograms(sino.view(), &geom, &grid, &f).unwrap();
    let e = rel_l2(a.as_slice().unwrap(), cpu.as_slice().unwrap());
    println!("backend fourier ({kind:?}) vs CPU: relative L2 {e:.3e}");
    assert!(e <= BOUND, "{e:e}");
}
