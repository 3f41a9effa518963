//! DXchange and NXtomo readers.

mod common;

use std::path::Path;

use hdf5::types::VarLenUnicode;
use ndarray::{s, Array1, Array3};
use tomors_io::hdf5io::NxTomoSource;
use tomors_io::{open, IoError, OpenOptions, Preprocess};

#[test]
fn dxchange_tooth_reads_small_slabs() {
    let src = open(&common::tooth(), &OpenOptions::default()).unwrap();
    assert_eq!(src.format(), "DXchange HDF5");
    assert_eq!(src.shape(), [181, 2, 640]);
    assert_eq!((src.n_flats(), src.n_darks()), (10, 10));
    // The angles are /exchange/theta converted from degrees.
    let theta: Vec<f64> = hdf5::File::open(common::tooth())
        .unwrap()
        .dataset("/exchange/theta")
        .unwrap()
        .read_raw()
        .unwrap();
    assert_eq!(theta.len(), 181);
    assert!(theta[180] > 170.0, "theta in degrees");
    for (a, t) in src.angles().iter().zip(&theta) {
        assert!((a - t.to_radians() as f32).abs() < 1e-6);
    }
    let both = src.read_raw(0..2).unwrap();
    let one = src.read_raw(1..2).unwrap();
    assert_eq!(one.projections.dim(), (181, 1, 640));
    assert_eq!(one.projections, both.projections.slice(s![.., 1..2, ..]));
    assert_eq!(
        one.flats[0].frames,
        both.flats[0].frames.slice(s![.., 1..2, ..])
    );
    assert_eq!(one.darks[0].frames.dim(), (10, 1, 640));
    // Normalised and −log: finite, mostly small positive line integrals.
    let p = src.read_rows(1..2, &Preprocess::default()).unwrap();
    assert!(p.iter().all(|v| v.is_finite()));
    let mean = p.mean().unwrap();
    assert!(mean > 0.0 && mean < 3.0, "mean line integral {mean}");
    // Bad row ranges are errors, not panics.
    assert!(src.read_raw(1..3).is_err());
    assert!(src.read_raw(1..1).is_err());
}

fn nx_class(g: &hdf5::Group, class: &str) {
    let v: VarLenUnicode = class.parse().unwrap();
    g.new_attr::<VarLenUnicode>()
        .create("NX_class")
        .unwrap()
        .write_scalar(&v)
        .unwrap();
}

/// Frame values: projection p (counting projections) = 100 + p at every
/// pixel plus the row index; flats 1000 + 10·group; darks 10.
fn frames_for(keys: &[i32], rows: usize, cols: usize) -> Array3<u16> {
    let mut out = Array3::<u16>::zeros((keys.len(), rows, cols));
    let (mut p, mut g, mut last) = (0u16, 0u16, -1);
    for (i, &k) in keys.iter().enumerate() {
        if k == 1 && last != 1 {
            g += 1;
        }
        last = k;
        let base = match k {
            0 => {
                p += 1;
                100 + p - 1
            }
            1 => 1000 + 10 * g,
            2 => 10,
            _ => 60000,
        };
        for r in 0..rows {
            out.slice_mut(s![i, r, ..]).fill(base + r as u16);
        }
    }
    out
}

/// Writes an NXtomo file `main.h5` whose entry is called `scan_7`, with the
/// frames in `frames.h5` and the angles (degrees) in `angles.h5`, both
/// reached through external links with relative names.
fn write_nxtomo(
    dir: &Path,
    keys: &[i32],
    angles_deg: &[f64],
    rows: usize,
    cols: usize,
) -> std::path::PathBuf {
    let frames = frames_for(keys, rows, cols);
    {
        let f = hdf5::File::create(dir.join("frames.h5")).unwrap();
        f.new_dataset_builder()
            .with_data(&frames)
            .create("frames")
            .unwrap();
        let a = hdf5::File::create(dir.join("angles.h5")).unwrap();
        let ds = a
            .new_dataset_builder()
            .with_data(&Array1::from(angles_deg.to_vec()))
            .create("rot")
            .unwrap();
        let u: VarLenUnicode = "degree".parse().unwrap();
        ds.new_attr::<VarLenUnicode>()
            .create("units")
            .unwrap()
            .write_scalar(&u)
            .unwrap();
    }
    let main = dir.join("main.h5");
    let f = hdf5::File::create(&main).unwrap();
    let e = f.create_group("scan_7").unwrap();
    nx_class(&e, "NXentry");
    let def: VarLenUnicode = "NXtomo".parse().unwrap();
    e.new_dataset::<VarLenUnicode>()
        .create("definition")
        .unwrap()
        .write_scalar(&def)
        .unwrap();
    let inst = e.create_group("beamline").unwrap();
    nx_class(&inst, "NXinstrument");
    let det = inst.create_group("pco").unwrap();
    nx_class(&det, "NXdetector");
    det.link_external("frames.h5", "/frames", "data").unwrap();
    det.new_dataset_builder()
        .with_data(&Array1::from(
            keys.iter().map(|&k| k as u8).collect::<Vec<_>>(),
        ))
        .create("image_key")
        .unwrap();
    let sample = e.create_group("specimen").unwrap();
    nx_class(&sample, "NXsample");
    sample
        .link_external("angles.h5", "/rot", "rotation_angle")
        .unwrap();
    main
}

#[test]
fn nxtomo_with_external_links_and_image_keys() {
    let dir = tempfile::tempdir().unwrap();
    // Darks, flats before, projections with an invalid frame among them,
    // flats after.
    let keys = [2, 2, 1, 1, 1, 0, 0, 0, 3, 0, 0, 0, 1, 1, 1];
    let angles: Vec<f64> = keys
        .iter()
        .enumerate()
        .map(|(i, _)| i as f64 * 10.0)
        .collect();
    let main = write_nxtomo(dir.path(), &keys, &angles, 3, 5);
    let src = open(&main, &OpenOptions::default()).unwrap();
    assert_eq!(src.format(), "NeXus NXtomo HDF5");
    assert_eq!(src.shape(), [6, 3, 5]);
    assert_eq!((src.n_flats(), src.n_darks()), (6, 2));
    // Angles of the projection frames only (frames 5, 6, 7, 9, 10, 11), in radians.
    let want: Vec<f32> = [50.0f64, 60.0, 70.0, 90.0, 100.0, 110.0]
        .iter()
        .map(|d| d.to_radians() as f32)
        .collect();
    for (a, w) in src.angles().iter().zip(&want) {
        assert!((a - w).abs() < 1e-6, "{a} vs {w}");
    }
    let raw = src.read_raw(1..3).unwrap();
    // Projections in scan order, invalid frame skipped: 100..105 (+ row).
    for p in 0..6 {
        assert_eq!(
            raw.projections[[p, 0, 0]],
            100.0 + p as f32 + 1.0,
            "projection {p}"
        );
        assert_eq!(raw.projections[[p, 1, 4]], 100.0 + p as f32 + 2.0);
    }
    assert_eq!(raw.flats.len(), 2);
    assert_eq!(raw.flats[0].position, 0.0);
    assert_eq!(raw.flats[1].position, 6.0);
    assert_eq!(raw.flats[0].frames[[0, 0, 0]], 1011.0);
    assert_eq!(raw.flats[1].frames[[2, 1, 0]], 1022.0);
    assert_eq!(raw.darks.len(), 1);
    assert_eq!(raw.darks[0].frames.dim(), (2, 2, 5));
    assert_eq!(raw.darks[0].frames[[1, 0, 0]], 11.0);

    // The paths were found through NX_class (the entry is not /entry).
    let nx = NxTomoSource::open(&main, &OpenOptions::default()).unwrap();
    assert_eq!(nx.paths().data, "/scan_7/beamline/pco/data");
    assert_eq!(
        nx.paths().angles.as_deref(),
        Some("/scan_7/specimen/rotation_angle")
    );

    // Overrides: the unit, and the paths. The unit override is applied:
    // 50…110 read as radians span more than two turns, which cannot be a
    // scan, so it is refused with the hint to read them as degrees (issue 13,
    // item 8; before, the values were taken as they were).
    let rad = open(
        &main,
        &OpenOptions {
            angles_unit: Some(tomors_io::AngleUnit::Radians),
            ..Default::default()
        },
    );
    let e = rad.err().expect("50…110 rad is not a scan").to_string();
    assert!(e.contains("--angles-unit deg"), "{e}");
    let explicit = open(
        &main,
        &OpenOptions {
            data_path: Some("/scan_7/beamline/pco/data".into()),
            image_key_path: Some("/scan_7/beamline/pco/image_key".into()),
            angles_path: Some("/scan_7/specimen/rotation_angle".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(explicit.shape(), [6, 3, 5]);

    // A missing external file is a one-line error naming the file.
    std::fs::remove_file(dir.path().join("frames.h5")).unwrap();
    let e = open(&main, &OpenOptions::default())
        .err()
        .expect("missing frames must fail");
    let msg = e.to_string();
    assert!(msg.contains("main.h5") && !msg.contains('\n'), "{msg}");
}

#[test]
fn flats_before_and_after_are_interpolated_over_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (n, rows, cols) = (9usize, 2usize, 4usize);
    // Beam intensity drifts linearly from 1000 to 2000 over the scan; the
    // sample transmits exp(−0.5).
    let keys: Vec<i32> = [vec![2; 2], vec![1; 2], vec![0; n], vec![1; 2]].concat();
    let dark = 50.0f32;
    let beam = |pos: f32| 1000.0 + 1000.0 * pos / n as f32;
    let mut frames = Array3::<f32>::zeros((keys.len(), rows, cols));
    let mut p = 0;
    for (i, &k) in keys.iter().enumerate() {
        let v = match k {
            2 => dark,
            1 if p == 0 => dark + beam(0.0),
            1 => dark + beam(n as f32),
            _ => {
                p += 1;
                dark + beam((p - 1) as f32) * (-0.5f32).exp()
            }
        };
        frames.slice_mut(s![i, .., ..]).fill(v);
    }
    let path = dir.path().join("drift.h5");
    {
        let f = hdf5::File::create(&path).unwrap();
        let d = f.create_group("entry/instrument/detector").unwrap();
        d.new_dataset_builder()
            .with_data(&frames)
            .create("data")
            .unwrap();
        d.new_dataset_builder()
            .with_data(&Array1::from(keys.clone()))
            .create("image_key")
            .unwrap();
        f.create_group("entry/sample")
            .unwrap()
            .new_dataset_builder()
            .with_data(&Array1::from(
                (0..n).map(|i| i as f64 * 20.0).collect::<Vec<_>>(),
            ))
            .create("rotation_angle")
            .unwrap();
    }
    let src = open(&path, &OpenOptions::default()).unwrap();
    let li = src.read_rows(0..rows, &Preprocess::default()).unwrap();
    for v in li.iter() {
        assert!((v - 0.5).abs() < 1e-4, "line integral {v}, want 0.5");
    }
    // Without the interpolation (one mean flat) the error is large: check
    // that the test could fail.
    let raw = src.read_raw(0..rows).unwrap();
    let mut merged = raw.clone();
    let all = ndarray::concatenate(
        ndarray::Axis(0),
        &[raw.flats[0].frames.view(), raw.flats[1].frames.view()],
    )
    .unwrap();
    merged.flats = vec![tomors_io::FrameGroup {
        position: 0.0,
        frames: all,
    }];
    let flat_mean = Preprocess::default().apply(merged, &path).unwrap();
    assert!(flat_mean.iter().any(|v| (v - 0.5).abs() > 0.1));
}

#[test]
fn shape_disagreements_and_missing_datasets_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.h5");
    {
        let f = hdf5::File::create(&path).unwrap();
        let g = f.create_group("exchange").unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<f32>::zeros((4, 2, 3)))
            .create("data")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<f32>::zeros((2, 2, 5)))
            .create("data_white")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array1::<f32>::zeros(5))
            .create("theta")
            .unwrap();
    }
    let e = open(&path, &OpenOptions::default()).err().unwrap();
    assert!(matches!(e, IoError::Shape { .. }), "{e}");
    assert!(e.to_string().contains("bad.h5"), "{e}");

    let empty = dir.path().join("empty.h5");
    hdf5::File::create(&empty).unwrap();
    let e = open(&empty, &OpenOptions::default()).err().unwrap();
    assert!(e.to_string().contains("no /exchange/data"), "{e}");

    let e = open(
        &common::tooth(),
        &OpenOptions {
            data_path: Some("/exchange/nothing".into()),
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("/exchange/nothing"), "{e}");
}

#[test]
fn truncated_and_corrupt_hdf5_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(common::tooth()).unwrap();
    for (i, cut) in [100usize, 2048, bytes.len() / 2, bytes.len() - 1000]
        .into_iter()
        .enumerate()
    {
        let p = dir.path().join(format!("cut{i}.h5"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let r = open(&p, &OpenOptions::default()).and_then(|s| {
            let n = s.shape()[1];
            s.read_rows(0..n, &Preprocess::default()).map(|_| ())
        });
        let e = r
            .err()
            .unwrap_or_else(|| panic!("truncation at {cut} was not noticed"));
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("cut{i}.h5")) && !msg.contains('\n'),
            "{msg}"
        );
    }
    let p = dir.path().join("garbage.h5");
    std::fs::write(&p, b"this is not HDF5 at all").unwrap();
    let e = open(&p, &OpenOptions::default()).err().unwrap();
    assert!(e.to_string().contains("garbage.h5"), "{e}");
}

#[test]
fn unsupported_dtype_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strings.h5");
    {
        let f = hdf5::File::create(&path).unwrap();
        let g = f.create_group("exchange").unwrap();
        let v: Vec<VarLenUnicode> = (0..8).map(|_| "x".parse().unwrap()).collect();
        g.new_dataset_builder()
            .with_data(&ndarray::Array3::from_shape_vec((2, 2, 2), v).unwrap())
            .create("data")
            .unwrap();
    }
    let e = open(&path, &OpenOptions::default()).err().unwrap();
    assert!(matches!(e, IoError::Unsupported { .. }), "{e}");
}

#[test]
fn a_filter_without_its_plugin_is_named() {
    // HDF5 refuses to write with an unregistered filter, so the file is made
    // with deflate in the earliest format (version-1 object headers, no
    // checksums; version-1 filter pipeline message: id, name length, flags,
    // number of values, then the name "deflate") and the filter id is patched
    // to 32008, bitshuffle's: the file then needs a plugin that is not
    // installed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bshuf.h5");
    {
        let f = hdf5::File::with_options()
            .with_fapl(|p| p.libver_earliest())
            .create(&path)
            .unwrap();
        let g = f.create_group("exchange").unwrap();
        g.new_dataset_builder()
            .chunk((1, 2, 4))
            .deflate(4)
            .with_data(&Array3::<u16>::zeros((3, 2, 4)))
            .create("data")
            .unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let name = bytes
        .windows(8)
        .position(|w| w == b"deflate\0")
        .expect("the pipeline message names the filter");
    assert_eq!(
        &bytes[name - 8..name - 6],
        &[1, 0],
        "deflate's id precedes its name"
    );
    bytes[name - 8..name - 6].copy_from_slice(&32008u16.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert!(!tomors_io::hdf5::filters::Filter::user(32008, &[]).is_available());
    let e = open(&path, &OpenOptions::default())
        .err()
        .expect("missing filter must fail");
    assert!(matches!(e, IoError::MissingFilter { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("bitshuffle") && m.contains("bshuf.h5") && m.contains("HDF5_PLUGIN_PATH"),
        "{m}"
    );
}

#[test]
fn nxtomo_with_a_virtual_dataset_over_two_files() {
    // Diamond-style: the detector data are a virtual dataset whose frames
    // live in two other files (named relative to the virtual file).
    let dir = tempfile::tempdir().unwrap();
    let keys = [1, 0, 0, 0, 0, 0, 0, 1];
    let frames = frames_for(&keys, 3, 5);
    for (name, part) in [("part_a.h5", 0..4), ("part_b.h5", 4..8)] {
        let f = hdf5::File::create(dir.path().join(name)).unwrap();
        f.new_dataset_builder()
            .with_data(&frames.slice(s![part, .., ..]).to_owned())
            .create("frames")
            .unwrap();
    }
    let main = dir.path().join("vds.h5");
    {
        let f = hdf5::File::create(&main).unwrap();
        let det = f.create_group("entry/instrument/detector").unwrap();
        det.new_dataset::<u16>()
            .shape((8, 3, 5))
            .with_dcpl(|p| {
                p.virtual_map(
                    "part_a.h5",
                    "/frames",
                    (4, 3, 5),
                    (.., .., ..),
                    (8, 3, 5),
                    (0..4, .., ..),
                )
                .virtual_map(
                    "part_b.h5",
                    "/frames",
                    (4, 3, 5),
                    (.., .., ..),
                    (8, 3, 5),
                    (4..8, .., ..),
                )
            })
            .create("data")
            .unwrap();
        det.new_dataset_builder()
            .with_data(&Array1::from(keys.to_vec()))
            .create("image_key")
            .unwrap();
    }
    let src = open(&main, &OpenOptions::default()).unwrap();
    assert_eq!(src.shape(), [6, 3, 5]);
    let raw = src.read_raw(0..3).unwrap();
    for p in 0..6 {
        // Projections 100, 101, ... (+ row): frames 1..7 across both files.
        assert_eq!(
            raw.projections[[p, 2, 1]],
            100.0 + p as f32 + 2.0,
            "projection {p}"
        );
    }
    assert_eq!(raw.flats[0].frames[[0, 0, 0]], 1010.0);
    assert_eq!(raw.flats[1].frames[[0, 0, 0]], 1020.0);
    // HDF5 reads a missing source as fill values; tomors refuses.
    std::fs::remove_file(dir.path().join("part_b.h5")).unwrap();
    let e = open(&main, &OpenOptions::default())
        .err()
        .expect("missing source must fail");
    assert!(e.to_string().contains("part_b.h5 is missing"), "{e}");
}

#[test]
fn tiff_32_bit_integers_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("s");
    std::fs::create_dir(&stack).unwrap();
    for k in 0..3u32 {
        let f = std::fs::File::create(stack.join(format!("{k}.tif"))).unwrap();
        let mut e = tiff::encoder::TiffEncoder::new(f).unwrap();
        let u: Vec<u32> = (0..12).map(|i| 1_000_000 * k + i).collect();
        e.write_image::<tiff::encoder::colortype::Gray32>(4, 3, &u)
            .unwrap();
    }
    let src = open(&stack, &OpenOptions::default()).unwrap();
    let p = src.read_raw(0..3).unwrap().projections;
    assert_eq!(p[[2, 2, 3]], 2_000_011.0);
    let f = std::fs::File::create(stack.join("3.tif")).unwrap();
    let mut e = tiff::encoder::TiffEncoder::new(f).unwrap();
    let i: Vec<i32> = (0..12).map(|i| -i).collect();
    e.write_image::<tiff::encoder::colortype::GrayI32>(4, 3, &i)
        .unwrap();
    drop(e);
    let p = open(&stack, &OpenOptions::default())
        .unwrap()
        .read_raw(0..3)
        .unwrap()
        .projections;
    assert_eq!(p[[3, 2, 3]], -11.0);
}

#[test]
fn row_chunks_of_chunked_hdf5_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunked.h5");
    {
        let f = hdf5::File::create(&path).unwrap();
        f.create_group("exchange")
            .unwrap()
            .new_dataset_builder()
            .chunk((4, 8, 16))
            .with_data(&Array3::<f32>::zeros((10, 32, 16)))
            .create("data")
            .unwrap();
    }
    assert_eq!(
        open(&path, &OpenOptions::default()).unwrap().row_chunk(),
        Some(8)
    );
    // One frame per chunk: no row chunking to align to.
    assert_eq!(
        open(&common::tooth(), &OpenOptions::default())
            .unwrap()
            .row_chunk(),
        None
    );
}
