//! A failing rank (ranks as threads): every rank ends with that rank's
//! error and no output or temporary output is left, for every format and
//! method. One test per process: the failure is injected through the
//! environment (`TOMORS_MPI_FAIL_RANK`).

mod common;

use common::*;
use tomors_core::cone::FdkOptions;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::FbpOptions;
use tomors_core::iterative::{IterativeOptions, ProjectorKind};
use tomors_io::tiffio::TiffDepth;
use tomors_io::{Preprocess, VolumeFormat};
use tomors_mpi::{run_job, Center, Failure, Method, ReconJob, ThreadComm};

fn job(
    input: &std::path::Path,
    out: &std::path::Path,
    format: VolumeFormat,
    method: Method,
) -> anyhow::Result<ReconJob> {
    let source = tomors_io::open(input, &Default::default())?;
    let [_, nr, _] = source.shape();
    Ok(ReconJob {
        angles: source.angles().to_vec(),
        source,
        rows: 0..nr,
        preprocess: Preprocess::default(),
        out: out.to_path_buf(),
        format,
        overwrite: false,
        memory: 1 << 30,
        quiet: true,
        method,
        provenance: None,
    })
}

fn fbp() -> Method {
    Method::Fbp {
        center: Center::Default,
        options: FbpOptions::default(),
        backend: Box::new(|_| Ok(Box::new(CpuBackend::new()))),
    }
}

#[test]
fn a_failing_rank_ends_every_rank_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = parallel_projections(30, 6, 32);
    let input = dir.path().join("proj.npy");
    write_npy(&input, &p);
    let cone = cone_problem(16, 12);
    let cone_in = dir.path().join("cone.npy");
    write_npy(&cone_in, &cone.proj);
    std::env::set_var("TOMORS_MPI_FAIL_RANK", "1");
    let expected = Failure {
        rank: 1,
        message: "failure injected by TOMORS_MPI_FAIL_RANK=1".into(),
    };
    let formats = [
        ("v.npy", VolumeFormat::Npy),
        ("v.h5", VolumeFormat::Hdf5),
        ("tif", VolumeFormat::TiffStack(TiffDepth::F32)),
    ];
    for (name, format) in formats {
        let out = dir.path().join(name);
        for ranks in [2, 3] {
            let r = ThreadComm::run(ranks, |c| run_job(c, || job(&input, &out, format, fbp())));
            for x in &r {
                assert_eq!(x.as_ref().err(), Some(&expected), "{name}, {ranks} ranks");
            }
            only_files(dir.path(), &["proj.npy", "cone.npy"]);
        }
    }
    let out = dir.path().join("x.npy");
    type MakeMethod<'a> = Box<dyn Fn() -> Method + Sync + 'a>;
    let methods: Vec<(&str, MakeMethod)> = vec![
        (
            "parallel sirt",
            Box::new(|| Method::Iterative {
                center: Center::Default,
                options: IterativeOptions {
                    iterations: 2,
                    ..Default::default()
                },
                projector: ProjectorKind::Joseph,
                gpu: None,
            }),
        ),
        (
            "cone sirt",
            Box::new(|| Method::ConeIterative {
                geometry: cone.g.clone(),
                volume: cone.v,
                options: IterativeOptions {
                    iterations: 2,
                    ..Default::default()
                },
                projector: ProjectorKind::Joseph,
                gpu: None,
            }),
        ),
        (
            "fdk",
            Box::new(|| Method::Fdk {
                geometry: cone.g.clone(),
                volume: cone.v,
                options: FdkOptions::default(),
                backend: Box::new(|_| Ok(Box::new(CpuBackend::new()))),
            }),
        ),
    ];
    for (name, method) in &methods {
        let src = if name.starts_with("parallel") {
            &input
        } else {
            &cone_in
        };
        let r = ThreadComm::run(2, |c| {
            run_job(c, || job(src, &out, VolumeFormat::Npy, method()))
        });
        for x in &r {
            assert_eq!(x.as_ref().err(), Some(&expected), "{name}");
        }
        only_files(dir.path(), &["proj.npy", "cone.npy"]);
    }
    // A rank whose job cannot be built (e.g. its input is unreadable
    // there) fails the job before anything is created.
    let r = ThreadComm::run(2, |c| {
        let rank = c.rank();
        run_job(c, || {
            if rank == 1 {
                anyhow::bail!("{}: cannot open", input.display())
            }
            job(&input, &out, VolumeFormat::Npy, fbp())
        })
    });
    for x in &r {
        let f = x.as_ref().expect_err("failed");
        assert_eq!(f.rank, 1);
        assert!(f.message.ends_with("proj.npy: cannot open"), "{f}");
    }
    only_files(dir.path(), &["proj.npy", "cone.npy"]);
    std::env::remove_var("TOMORS_MPI_FAIL_RANK");
}
