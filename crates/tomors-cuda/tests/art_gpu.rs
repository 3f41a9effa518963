//! ART and the block-parallel method on the GPU (issue 16): the ray
//! batches of the device operators (rays of one projection whose pixel
//! sets are disjoint, so a Kaczmarz sweep over a batch is one simultaneous
//! step) run through tomors-core's shared `solve`, resident on the device.
//!
//! - The batches are disjoint: checked by brute force against the CPU
//!   projectors' rays (parallel and cone; no GPU needed).
//! - GPU SART, BLOCK-IT, block-parallel and ART reach the CPU's NRMSE after
//!   the same number of sweeps (within 2 %) on the exact 60-angle
//!   Shepp–Logan at 256².
//! - GPU ART equals Kaczmarz run on the host in the same ray order (a host
//!   operator with the same batches through the same solver).
//! - Cone beam: GPU ART and block-parallel (Joseph and voxel pairs) reach
//!   the CPU's NRMSE on a ball.
//!
//! GPU tests skip with a printed reason when no GPU is usable and fail
//! under `TOMORS_REQUIRE_GPU=1`.

mod common;

use std::collections::HashSet;

use common::cone::{centred_ball, cpu_forward};
use common::{
    assert_constraint, disc_and_zero_error, fixed_options, flat, gpu_or_skip, max_rel, rel_l2,
    sart_and_block_it, shepp_256,
};
use ndarray::{s, Array3, Axis};
use tomors_core::cone::ConeGeometry;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    ray_frames, reconstruct, reconstruct_cone, solve, Algorithm, ConeJosephProjector,
    ConeVoxelProjector, Constraint, JosephProjector, Projector, RayOrder, StackOperator,
};
use tomors_core::linalg::{LinearOperator, RayAccess, RayBatches};
use tomors_core::metrics::nrmse;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::cone::cone_art_stride;
use tomors_cuda::iterative::parallel::joseph_art_strides;
use tomors_cuda::{cone_sirt_cuda_with, sirt_cuda, ConeBackProjector, CudaJoseph, GpuSirtOptions};

const PI: f32 = std::f32::consts::PI;

/// `trace(a, k, visit)`: visits the pixels of ray `k` of projection `a`.
type Trace<'a> = &'a dyn Fn(usize, usize, &mut dyn FnMut(usize));

/// Pixels of the rays `k ≡ batch (mod s)` of projection `a`; panics naming
/// the first pixel two rays of the batch share.
fn assert_disjoint(trace: Trace<'_>, a: usize, rays: usize, s: usize, what: &str) {
    for batch in 0..s.min(rays) {
        let mut seen = HashSet::new();
        for k in (batch..rays).step_by(s) {
            let mut mine = HashSet::new();
            trace(a, k, &mut |i| {
                mine.insert(i);
            });
            for i in mine {
                assert!(
                    seen.insert(i),
                    "{what}: projection {a}, stride {s}: pixel {i} on two rays of batch {batch}"
                );
            }
        }
    }
}

/// The parallel-beam ART batches (bins `k ≡ β mod s`) touch disjoint
/// pixels: every projection of several geometries (bins as wide as,
/// narrower and wider than the pixels; angles at 0, 45° and 90° among
/// them, where rays are exactly one pixel apart per bin), checked against
/// the CPU Joseph projector's rays. No GPU needed.
#[test]
fn parallel_art_batches_are_disjoint() {
    for (na, nb, bw) in [(36, 64, 1.0f32), (20, 50, 0.6), (16, 40, 1.7)] {
        let geom = ParallelGeometry::new(uniform_angles(na, PI), nb)
            .unwrap()
            .with_bin_width(bw)
            .unwrap();
        let grid = SliceGrid::new(48, 48).unwrap();
        let cpu = JosephProjector::new(&geom, &grid).unwrap();
        let strides = joseph_art_strides(&geom, &grid);
        assert_eq!(strides.len(), na);
        let trace = |a: usize, k: usize, visit: &mut dyn FnMut(usize)| {
            Projector::<f64>::trace_ray(&cpu, a, k, &mut |i, w| {
                if w != 0.0 {
                    visit(i)
                }
            })
        };
        for (a, &s) in strides.iter().enumerate() {
            assert!((1..=nb).contains(&s));
            assert_disjoint(&trace, a, nb, s, &format!("{na} angles, bin width {bw}"));
        }
        eprintln!("bin width {bw}: strides {strides:?}");
    }
}

/// The cone-beam ART batches (detector pixels `(row, col) ≡ (pr, pc) mod
/// s`) touch disjoint voxels, checked against the CPU cone Joseph
/// projector's rays on two geometries (magnification 1.5 and 3). No GPU
/// needed.
#[test]
fn cone_art_batches_are_disjoint() {
    for (sod, odd, nr, nc, n) in [
        (80.0, 40.0, 20usize, 32usize, (24usize, 24usize, 16usize)),
        (30.0, 60.0, 24, 24, (16, 16, 12)),
    ] {
        let g = ConeGeometry::new(uniform_angles(8, 2.0 * PI), sod, odd, nr, nc, 1.0, 1.0).unwrap();
        let v = g.fitting_volume(n.0, n.1, n.2).unwrap();
        let cpu = ConeJosephProjector::new(&g, &v).unwrap();
        let frames = ray_frames(&g, &v);
        for (a, f) in frames.iter().enumerate() {
            let s = cone_art_stride(f, (v.nx, v.ny, v.nz), nr, nc);
            assert!(s >= 1 && s <= nr.max(nc));
            for pr in 0..s.min(nr) {
                for pc in 0..s.min(nc) {
                    let mut seen = HashSet::new();
                    for row in (pr..nr).step_by(s) {
                        for col in (pc..nc).step_by(s) {
                            let mut mine = HashSet::new();
                            Projector::<f64>::trace_ray(&cpu, a, row * nc + col, &mut |i, w| {
                                if w != 0.0 {
                                    mine.insert(i);
                                }
                            });
                            for i in mine {
                                assert!(
                                    seen.insert(i),
                                    "SOD {sod}: projection {a}, stride {s}: voxel {i} twice in \
                                     batch ({pr}, {pc})"
                                );
                            }
                        }
                    }
                }
            }
            if a == 0 {
                eprintln!("SOD {sod}, ODD {odd}: stride {s} ({} batches)", s * s);
            }
        }
    }
}

/// Issue 16's must-show: on the exact Shepp–Logan 256², 60 angles, GPU
/// SART, BLOCK-IT, block-parallel and ART reach the CPU's NRMSE (inside the
/// reconstruction disc) after the same number of sweeps, within 2 %. SART
/// and BLOCK-IT are the same method on both sides (equal within 2 %); ART
/// and the block-parallel method visit the bins of a projection in
/// interleaved batches on the GPU (one after the other on the CPU), a
/// different ray order, so the GPU's NRMSE must be at most 2 % above the
/// CPU's. Also: the iteration count, the residual history's length, the
/// relaxation, and the constraint.
#[test]
fn gpu_block_methods_and_art_reach_the_cpu_nrmse() {
    let Some(be) = gpu_or_skip("gpu_block_methods_and_art_reach_the_cpu_nrmse") else {
        return;
    };
    let (geom, grid, sino, truth) = shepp_256();
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    let (mask, e_zero) = disc_and_zero_error(&truth);
    let more = [
        (
            "block-parallel (blocks of 10)",
            Algorithm::BlockParallel {
                projections_per_block: 10,
            },
            None,
            Constraint::non_negative(),
            5,
        ),
        (
            "block-parallel (blocks of 4, λ 0.8, box)",
            Algorithm::BlockParallel {
                projections_per_block: 4,
            },
            Some(0.8),
            Constraint::bounded(0.0, 1.0),
            3,
        ),
        (
            "ART",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
            None,
            Constraint::non_negative(),
            3,
        ),
        (
            "ART (random order, λ 0.5)",
            Algorithm::Art {
                order: RayOrder::Random { seed: 7 },
            },
            Some(0.5),
            Constraint::none(),
            3,
        ),
    ];
    let sart_block_it = sart_and_block_it().map(|(name, algorithm, relaxation, constraint)| {
        (name, algorithm, relaxation, constraint, 5)
    });
    let cases = sart_block_it.into_iter().chain(more);
    for (name, algorithm, relaxation, constraint, iterations) in cases {
        let options = fixed_options(algorithm, iterations, relaxation, constraint);
        let t = std::time::Instant::now();
        let want = reconstruct::<f32, _>(&cpu, sino.view(), None, &options, &mut |_| true).unwrap();
        let t_cpu = t.elapsed().as_secs_f64();
        let (got, stats) = sirt_cuda(
            &be,
            &geom,
            &grid,
            sino.view(),
            None,
            &options,
            &GpuSirtOptions::default(),
            &|_| true,
        )
        .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        let e_cpu = nrmse(want.x.index_axis(Axis(0), 0), truth.view(), Some(&mask)).unwrap();
        let e_gpu = nrmse(got.x.index_axis(Axis(0), 0), truth.view(), Some(&mask)).unwrap();
        let half = got.x.index_axis(Axis(0), 1).to_owned();
        let e_half = nrmse(half.view(), truth.mapv(|v| 0.5 * v).view(), Some(&mask)).unwrap();
        let ex = rel_l2(&flat(&got.x), &flat(&want.x));
        eprintln!(
            "{name}: NRMSE GPU {e_gpu:.5} CPU {e_cpu:.5} ({:+.3} %), half slice {e_half:.5}, \
             iterate rel L2 {ex:.2e}, λ {:.4} (cpu {:.4}); CPU {t_cpu:.2} s, GPU loop {:.3} s",
            100.0 * (e_gpu - e_cpu) / e_cpu,
            got.relaxation,
            want.relaxation,
            stats.loop_s
        );
        assert_eq!(got.iterations, iterations, "{name}");
        assert_eq!(got.residuals.len(), iterations, "{name}");
        assert!(
            (got.relaxation - want.relaxation).abs() <= 1e-3 * want.relaxation,
            "{name}: λ"
        );
        // SART and BLOCK-IT are the same computation on both sides: equal
        // NRMSE within 2 %. ART and block-parallel use another ray order on
        // the GPU: it reaches the CPU's NRMSE (at most 2 % above it).
        let same_method = matches!(algorithm, Algorithm::BlockSequential { .. });
        if same_method {
            assert!(
                (e_gpu - e_cpu).abs() <= 0.02 * e_cpu,
                "{name}: NRMSE GPU {e_gpu} vs CPU {e_cpu}"
            );
        } else {
            assert!(
                e_gpu <= 1.02 * e_cpu,
                "{name}: NRMSE GPU {e_gpu} vs CPU {e_cpu}"
            );
        }
        // The method works: the error falls well below the zero image's
        // (CPU, H200 run: SART 0.025, BLOCK-IT 0.104, block-parallel 0.101
        // and 0.177 (3 sweeps of blocks of 4 at λ 0.8), against 0.297).
        assert!(
            e_gpu < 0.7 * e_zero,
            "{name}: NRMSE {e_gpu} (zero image {e_zero})"
        );
        // The second slice (half the data) is reconstructed as well: its
        // relative error is the first one's (the method is linear up to
        // the constraint, which the half slice meets too).
        assert!(
            (e_half - e_gpu).abs() <= 0.05 * e_gpu,
            "{name}: half slice {e_half} vs {e_gpu}"
        );
        assert_constraint(&got.x, constraint, name);
    }
}

/// The parallel Joseph CPU projector on stacks with the GPU operator's ray
/// batches, evaluated on the host with the CPU's rays: the solver's
/// batched path on host arrays, i.e. Kaczmarz in the GPU's ray order.
struct HostBatches<'a> {
    op: StackOperator<'a, f32, JosephProjector>,
    strides: Vec<usize>,
}

impl HostBatches<'_> {
    fn rays(&self) -> &dyn RayAccess<Array3<f32>, Array3<f32>> {
        self.op.rays().expect("the CPU projector has rays")
    }

    fn bins(&self, angle: usize, batch: usize) -> impl Iterator<Item = usize> {
        (batch..self.rays().n_bins()).step_by(self.strides[angle])
    }
}

impl LinearOperator for HostBatches<'_> {
    type Domain = Array3<f32>;
    type Range = Array3<f32>;
    fn n_projections(&self) -> usize {
        self.op.n_projections()
    }
    fn domain_zeros(&self) -> tomors_core::Result<Array3<f32>> {
        self.op.domain_zeros()
    }
    fn range_zeros(&self, angles: &[usize]) -> tomors_core::Result<Array3<f32>> {
        self.op.range_zeros(angles)
    }
    fn forward(
        &self,
        x: &Array3<f32>,
        angles: &[usize],
        y: &mut Array3<f32>,
    ) -> tomors_core::Result<()> {
        self.op.forward(x, angles, y)
    }
    fn backward(
        &self,
        y: &Array3<f32>,
        angles: &[usize],
        x: &mut Array3<f32>,
    ) -> tomors_core::Result<()> {
        self.op.backward(y, angles, x)
    }
    fn select_into(
        &self,
        y: &Array3<f32>,
        angles: &[usize],
        out: &mut Array3<f32>,
    ) -> tomors_core::Result<()> {
        self.op.select_into(y, angles, out)
    }
    fn select(&self, y: &Array3<f32>, angles: &[usize]) -> tomors_core::Result<Array3<f32>> {
        self.op.select(y, angles)
    }
    fn is_matched(&self) -> bool {
        true
    }
    fn row_norms_sq(&self, angles: &[usize]) -> tomors_core::Result<Array3<f32>> {
        self.op.row_norms_sq(angles)
    }
    fn ray_batches(&self) -> Option<&dyn RayBatches<Array3<f32>, Array3<f32>>> {
        Some(self)
    }
}

impl RayBatches<Array3<f32>, Array3<f32>> for HostBatches<'_> {
    fn batches(&self, angle: usize) -> usize {
        self.strides[angle]
    }
    fn forward_batch(
        &self,
        x: &Array3<f32>,
        angle: usize,
        batch: usize,
        y: &mut Array3<f32>,
    ) -> tomors_core::Result<()> {
        let nx = x.dim().2;
        for (s, img) in x.outer_iter().enumerate() {
            for k in self.bins(angle, batch) {
                let mut acc = 0.0f32;
                self.rays().trace_ray(angle, k, &mut |i, w| {
                    acc += w * img[[i / nx, i % nx]];
                });
                y[[s, 0, k]] = acc;
            }
        }
        Ok(())
    }
    fn update_batch(
        &self,
        r: &Array3<f32>,
        angle: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut Array3<f32>,
    ) -> tomors_core::Result<()> {
        let nx = x.dim().2;
        let (lo, hi) = (
            min.map_or(f32::NEG_INFINITY, |v| v as f32),
            max.map_or(f32::INFINITY, |v| v as f32),
        );
        for (s, mut img) in x.outer_iter_mut().enumerate() {
            for k in self.bins(angle, batch) {
                let c = lambda as f32 * r[[s, 0, k]];
                self.rays().trace_ray(angle, k, &mut |i, w| {
                    let v = &mut img[[i / nx, i % nx]];
                    *v = (*v + c * w).clamp(lo, hi);
                });
            }
        }
        Ok(())
    }
}

/// GPU ART and block-parallel equal Kaczmarz in the same ray order on the
/// host (the solver's batched path on a host operator with the GPU's
/// batches and the CPU projector's rays): iterate rel L2 ≤ 1e-4, on 3
/// slices of random non-negative data with a box (the projections agree to
/// ≤ 1e-5 per application; the measured value is printed).
#[test]
fn gpu_art_equals_kaczmarz_in_the_same_order() {
    let Some(be) = gpu_or_skip("gpu_art_equals_kaczmarz_in_the_same_order") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(30, PI), 64).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    let ns = 3;
    let truth = Array3::from_shape_vec(
        (ns, grid.ny, grid.nx),
        common::random(ns * grid.len(), 5)
            .into_iter()
            .map(|v| 0.5 + 0.5 * v)
            .collect(),
    )
    .unwrap();
    let mut b = Array3::<f32>::zeros((ns, 30, 64));
    cpu.forward(truth.view(), &(0..30).collect::<Vec<_>>(), b.view_mut())
        .unwrap();
    let host = HostBatches {
        op: StackOperator::new(&cpu, ns),
        strides: joseph_art_strides(&geom, &grid),
    };
    let gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
    let op = gpu.operator(ns).unwrap();
    assert!(op.rays().is_none() && op.ray_batches().is_some());
    for (t, &s) in host.strides.iter().enumerate() {
        assert_eq!(gpu.art_stride(t), s);
    }
    let bd = gpu.upload_sinograms(b.view()).unwrap();
    for algorithm in [
        Algorithm::Art {
            order: RayOrder::Sequential,
        },
        Algorithm::Art {
            order: RayOrder::Random { seed: 3 },
        },
        Algorithm::BlockParallel {
            projections_per_block: 5,
        },
    ] {
        let options = fixed_options(algorithm, 3, Some(0.9), Constraint::bounded(0.0, 0.8));
        let mut xh = Array3::<f32>::zeros((ns, grid.ny, grid.nx));
        let rh = solve(&host, &b, &mut xh, &options, &mut |_| true).unwrap();
        let mut xd = op.domain_zeros().unwrap();
        let rd = solve(&op, &bd, &mut xd, &options, &mut |_| true).unwrap();
        let got = gpu.download(&xd).unwrap();
        let e = rel_l2(&flat(&got), &flat(&xh));
        let er = max_rel(&rd.residuals, &rh.residuals);
        let moved = rel_l2(&flat(&xh), &vec![0.0; xh.len()]);
        eprintln!(
            "{algorithm:?}: GPU vs host Kaczmarz in the same order: iterate rel L2 {e:.2e}, \
             residuals {er:.2e} (last {:.4})",
            rh.residuals.last().unwrap()
        );
        assert!(moved > 0.1, "{algorithm:?}: the host iterate did not move");
        assert!(e <= 1e-4, "{algorithm:?}: iterate rel L2 {e:.3e}");
        assert!(er <= 1e-4, "{algorithm:?}: residuals differ by {er:.3e}");
        assert!(got.iter().all(|&v| (0.0..=0.8).contains(&v)));
    }
}

/// Cone beam: GPU ART and block-parallel (Joseph pair, and the voxel pair,
/// whose rows are Joseph's) reach the CPU's error against a ball after the
/// same number of sweeps (at most 2 % above it).
#[test]
fn gpu_cone_art_and_block_parallel_reach_the_cpu_nrmse() {
    let Some(be) = gpu_or_skip("gpu_cone_art_and_block_parallel_reach_the_cpu_nrmse") else {
        return;
    };
    let g = ConeGeometry::new(uniform_angles(24, 2.0 * PI), 80.0, 40.0, 24, 32, 1.0, 1.0).unwrap();
    let v = g.fitting_volume(24, 24, 16).unwrap();
    let cpu = ConeJosephProjector::new(&g, &v).unwrap();
    let cpu_voxel = ConeVoxelProjector::new(&g, &v).unwrap();
    let ball = centred_ball(&v);
    let b = cpu_forward::<f32>(&cpu, &g, &ball);
    let err = |x: &Array3<f32>| {
        let d = rel_l2(&flat(x), &flat(&ball));
        // Central slices only as a second view: the ends see few rays.
        let c = rel_l2(
            &x.slice(s![4..12, .., ..])
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            &ball
                .slice(s![4..12, .., ..])
                .iter()
                .copied()
                .collect::<Vec<_>>(),
        );
        (d, c)
    };
    for (name, algorithm, back) in [
        (
            "ART (Joseph)",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
            ConeBackProjector::Joseph,
        ),
        (
            "block-parallel (Joseph, blocks of 6)",
            Algorithm::BlockParallel {
                projections_per_block: 6,
            },
            ConeBackProjector::Joseph,
        ),
        (
            "ART (voxel pair)",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
            ConeBackProjector::Voxel,
        ),
    ] {
        let options = fixed_options(algorithm, 3, None, Constraint::non_negative());
        let want = match back {
            ConeBackProjector::Joseph => {
                reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true)
            }
            ConeBackProjector::Voxel => {
                reconstruct_cone::<f32, _>(&cpu_voxel, b.view(), None, &options, &mut |_| true)
            }
        }
        .unwrap();
        let (got, _) = cone_sirt_cuda_with(&be, &g, &v, b.view(), None, &options, back, &|_| true)
            .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        let (e_cpu, c_cpu) = err(&want.x);
        let (e_gpu, c_gpu) = err(&got.x);
        eprintln!(
            "cone {name}: rel L2 to the ball GPU {e_gpu:.5} CPU {e_cpu:.5} ({:+.3} %), central \
             GPU {c_gpu:.5} CPU {c_cpu:.5}; residual GPU {:.4} CPU {:.4}",
            100.0 * (e_gpu - e_cpu) / e_cpu,
            got.residuals.last().unwrap(),
            want.residuals.last().unwrap()
        );
        assert_eq!(got.iterations, 3, "{name}");
        // Another ray order within each projection (16 batches here):
        // the GPU reaches the CPU's error (at most 2 % above it; the first
        // H200 run measured ART 6 % below it).
        assert!(
            e_gpu <= 1.02 * e_cpu,
            "cone {name}: GPU {e_gpu} vs CPU {e_cpu}"
        );
        assert!(e_gpu < 0.5, "cone {name}: error {e_gpu}");
        assert!(got.x.iter().all(|&x| x >= 0.0), "cone {name}: below 0");
    }
}
