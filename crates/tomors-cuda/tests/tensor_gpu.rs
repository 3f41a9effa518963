//! GPU tests of the tensor-core back projector (`tensor`: hat-function
//! weights × values as `mma.m16n8k16`, both operands split in two f16
//! parts) against the exact f64 reference (1e-5 relative L2 per slice, as
//! the other ALU kernels) and against the exact `alu-float2` kernel, over
//! its parameter variants and the geometries it accepts: centre offsets,
//! per-projection centres, pixels smaller and somewhat larger than bins,
//! odd grids that are no multiple of a block, angles over a full turn in
//! random order, slice counts that fill no block, slices whose magnitudes
//! span 10^±16 (the per-slice power-of-two scaling) and all-positive data
//! (where a biased accumulation would show); filtered (FBP) as well.
//! Nearest interpolation and pixels too large for its 8 bins per block are
//! refused with an error. Skips without a GPU, fails instead under
//! `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{exact, gpu_or_skip, random};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::kernels::{AluParams, TensorParams};
use tomors_cuda::{BpConfig, CudaBackend, CudaOptions, KernelChoice, KernelKind, SliceMode};

fn variants() -> Vec<TensorParams> {
    let d = TensorParams::default();
    vec![
        TensorParams::tuned(),
        d,
        TensorParams {
            nt: 4,
            flush: 8,
            nt_outer: true,
            ..d
        },
        TensorParams {
            bx: 1,
            flush: 3,
            mask: true,
            ..d
        },
        TensorParams {
            by: 2,
            nt: 4,
            swizzle: 2,
            ..d
        },
        TensorParams {
            bx: 1,
            nt: 2,
            wx: 2,
            wy: 2,
            ap: 1,
            stages: 2,
            min_blocks: 2,
            mask: true,
            ..d
        },
        TensorParams {
            bx: 1,
            by: 1,
            nt: 1,
            wx: 1,
            wy: 3,
            ap: 3,
            stages: 4,
            ..d
        },
        // Interleaved chains (two and four tiles), four tiles of the flushed
        // accumulation (tiles outermost).
        TensorParams { interleave: 2, ..d },
        TensorParams { interleave: 4, ..d },
        TensorParams {
            nt: 4,
            flush: 8,
            nt_outer: true,
            interleave: 4,
            ..d
        },
        // Bulk staging (one copy-engine copy per projection and stage on an
        // mbarrier; c2 with the coefficients prefetched): the shipped shape,
        // 4 pairs in 2 stages, and a small block with 3 pairs in 4 stages.
        TensorParams {
            bulk: 1,
            ..TensorParams::tuned()
        },
        TensorParams {
            bulk: 2,
            ap: 4,
            stages: 2,
            ..TensorParams::tuned()
        },
        TensorParams {
            bx: 1,
            by: 1,
            nt: 1,
            wx: 1,
            wy: 3,
            ap: 3,
            stages: 4,
            bulk: 2,
            ..d
        },
        // Lean weights (masked split, clamping conversions): alone, with
        // bulk staging, and on a warp of 2x2 blocks (offsets along y too).
        TensorParams {
            weights: 1,
            ..TensorParams::tuned()
        },
        TensorParams {
            weights: 1,
            bulk: 2,
            ..d
        },
        TensorParams {
            by: 2,
            nt: 4,
            weights: 1,
            ..d
        },
        // Two pairs per chain (bulk staging, lean weights; 8 warps), and
        // four pairs per chain (4 pairs in 2 stages).
        TensorParams {
            pair_group: 2,
            bulk: 2,
            weights: 1,
            wx: 2,
            ..TensorParams::tuned()
        },
        TensorParams {
            pair_group: 4,
            ap: 4,
            stages: 2,
            ..d
        },
        // The previous shipped shape (v3) and the shipped shape with c1.
        TensorParams { wy: 3, ..d },
        TensorParams {
            bulk: 1,
            ..TensorParams::tuned()
        },
    ]
}

/// Slice z's data: random in [-1, 1) for even z, in [0.5, 2.5) for odd z,
/// times 10^(8 (z mod 5) - 16).
fn sinograms(k: usize, na: usize, nb: usize, seed: u64) -> Array3<f32> {
    let mut a = Array3::from_shape_vec((k, na, nb), random(k * na * nb, seed)).unwrap();
    for (z, mut plane) in a.outer_iter_mut().enumerate() {
        let f = 10f32.powi(8 * (z % 5) as i32 - 16);
        let off = if z % 2 == 1 { 1.5 } else { 0.0 };
        plane.mapv_inplace(|v| (v + off) * f);
    }
    a
}

fn configs() -> Vec<BpConfig> {
    variants()
        .into_iter()
        .map(|p| BpConfig {
            kernel: KernelKind::Tensor(p),
            mode: SliceMode::F32,
        })
        .collect()
}

#[test]
fn tensor_matches_the_exact_reference() {
    let Some(mut be) = gpu_or_skip("tensor_matches_the_exact_reference") else {
        return;
    };
    let seed = common::test_seed();
    exact::check_against_reference(
        &mut be,
        exact::geometries(seed, 0.9, 1.0),
        &configs(),
        seed,
        true,
        sinograms,
    );
}

#[test]
fn tensor_fbp_agrees_with_the_exact_alu_kernel() {
    let Some(mut be) = gpu_or_skip("tensor_fbp_agrees_with_the_exact_alu_kernel") else {
        return;
    };
    exact::check_fbp_against_exact_alu(&mut be, &configs(), common::test_seed());
}

/// Slabs of several slice groups (a slab option above a block's 64 slices,
/// so blocks along z read the entries of groups 1, 2 …: the group stride of
/// the entry layout, padded rows with bulk staging) against the f64
/// reference: the shipped shape, its `c1` twin and the previous shape.
#[test]
fn tensor_slabs_of_several_groups() {
    if gpu_or_skip("tensor_slabs_of_several_groups").is_none() {
        return;
    }
    let mut be = CudaBackend::with_options(
        0,
        CudaOptions {
            slab: 256,
            ..CudaOptions::default()
        },
    )
    .unwrap();
    let seed = common::test_seed();
    let geoms = exact::geometries(seed, 0.9, 1.0)
        .into_iter()
        .take(2)
        .collect();
    let t = TensorParams::tuned();
    let cfgs: Vec<BpConfig> = [
        t,
        TensorParams { bulk: 1, ..t },
        TensorParams {
            wy: 3,
            ..TensorParams::default()
        },
    ]
    .into_iter()
    .map(|p| BpConfig {
        kernel: KernelKind::Tensor(p),
        mode: SliceMode::F32,
    })
    .collect();
    exact::check_against_reference(&mut be, geoms, &cfgs, seed, true, sinograms);
}

/// The pipeline over many slabs with the tensor kernel: each slab is
/// filtered and packed on the filtering stream into one of two alternating
/// entry buffers while the previous slab is back projected. Three runs are
/// bit-equal (a missing wait between the streams would show as a moving
/// error), equal the serial path (filtering and packing on the compute
/// stream) bit for bit, and agree with the exact cache kernel within 2e-5
/// (both within 1e-5 of the f64 reference).
#[test]
fn tensor_pipeline_over_many_slabs() {
    if gpu_or_skip("tensor_pipeline_over_many_slabs").is_none() {
        return;
    }
    let seed = common::test_seed();
    let (na, nb, k) = (120, 96, 50);
    let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), nb)
        .unwrap()
        .with_center(47.3)
        .unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = Array3::from_shape_vec((k, na, nb), random(k * na * nb, seed ^ 11)).unwrap();
    let fbp = |kernel: KernelChoice, serial_filter: bool| {
        let be = CudaBackend::with_options(
            0,
            CudaOptions {
                kernel,
                slab: 16,
                serial_filter,
                ..CudaOptions::default()
            },
        )
        .unwrap();
        let mut out = Array3::from_elem((k, grid.ny, grid.nx), f32::NAN);
        be.fbp(
            sino.view(),
            &geom,
            &grid,
            &FilterSpec::default(),
            Interpolation::Linear,
            out.view_mut(),
        )
        .unwrap();
        assert!(out.iter().all(|v| v.is_finite()), "unwritten output");
        let st = be.last_stats();
        assert_eq!(st.slabs, 4, "{st}");
        out
    };
    let tensor: KernelChoice = "tensor".parse().unwrap();
    let first = fbp(tensor, false);
    for run in 1..3 {
        assert!(fbp(tensor, false) == first, "run {run} differs from run 0");
    }
    let serial = fbp(tensor, true);
    assert!(
        serial == first,
        "the serial path differs from the overlapped one"
    );
    let exact = fbp(
        KernelChoice::Fixed(BpConfig {
            kernel: KernelKind::Alu(AluParams::untuned()),
            mode: SliceMode::Float2,
        }),
        false,
    );
    let e = common::rel_l2(first.as_slice().unwrap(), exact.as_slice().unwrap());
    eprintln!("tensor FBP over 4 slabs vs the exact cache kernel: rel L2 {e:.2e}");
    assert!(e <= 2e-5, "{e:.2e} from the exact alu kernel");
}

#[test]
fn tensor_refuses_nearest_and_large_pixels() {
    let Some(mut be) = gpu_or_skip("tensor_refuses_nearest_and_large_pixels") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(16, std::f32::consts::PI), 16).unwrap();
    let sino = Array3::<f32>::ones((2, 16, 16));
    be.set_kernel("tensor".parse().unwrap());
    for (interp, pixel, what) in [
        (Interpolation::Nearest, 1.0, "tensor"),
        (Interpolation::Linear, 1.3, "4x4 pixel block"),
    ] {
        let grid = SliceGrid::with_pixel_size(16, 16, pixel).unwrap();
        let mut out = Array3::<f32>::zeros((2, 16, 16));
        let e = be
            .backproject(sino.view(), &geom, &grid, interp, 1.0, out.view_mut())
            .unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
}

/// `Auto` without a tuned choice: the tensor-core kernel for a linear job
/// of 64 slices or more where it can run, the exact cache kernel below that;
/// with or without one, not the tensor kernel for nearest interpolation or
/// for pixels too large for it; and an `Auto` FBP of such a job equals the
/// fixed tensor kernel's bit for bit. (A tuning file with entries for this
/// device decides instead: then only the refusals are checked, with a note.)
#[test]
fn auto_takes_the_tensor_kernel_where_it_can() {
    let Some(mut be) = gpu_or_skip("auto_takes_the_tensor_kernel_where_it_can") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(48, std::f32::consts::PI), 40).unwrap();
    let grid = SliceGrid::new(36, 36).unwrap();
    let big = SliceGrid::with_pixel_size(36, 36, 1.3).unwrap();
    let is_tensor = |c: BpConfig| matches!(c.kernel, KernelKind::Tensor(_));
    let lin = Interpolation::Linear;
    assert!(!is_tensor(be.kernel_for_job(200, lin, &geom, &big)));
    assert!(!is_tensor(be.kernel_for_job(
        200,
        Interpolation::Nearest,
        &geom,
        &grid
    )));
    let tuned = [63, 64, 200]
        .iter()
        .any(|&k| be.kernel_for(k, lin) != KernelChoice::Auto.resolve(k));
    if tuned {
        eprintln!(
            "auto_takes_the_tensor_kernel_where_it_can: a tuning file has entries for this \
             device, so Auto's default choice is not checked"
        );
        return;
    }
    assert!(is_tensor(be.kernel_for_job(64, lin, &geom, &grid)));
    assert!(is_tensor(be.kernel_for_job(200, lin, &geom, &grid)));
    assert!(!is_tensor(be.kernel_for_job(63, lin, &geom, &grid)));
    let k = 66;
    let sino = Array3::from_shape_vec((k, 48, 40), random(k * 48 * 40, 17)).unwrap();
    let mut run = |choice: KernelChoice| {
        be.set_kernel(choice);
        let mut out = Array3::from_elem((k, 36, 36), f32::NAN);
        be.fbp(
            sino.view(),
            &geom,
            &grid,
            &FilterSpec::default(),
            lin,
            out.view_mut(),
        )
        .unwrap();
        out
    };
    let auto = run(KernelChoice::Auto);
    let fixed = run("tensor".parse().unwrap());
    assert!(auto.iter().all(|v| v.is_finite()));
    assert_eq!(auto, fixed, "Auto's FBP differs from the tensor kernel's");
}
