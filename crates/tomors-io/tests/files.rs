//! TIFF stacks, .npy and raw readers, and the volume writers.

mod common;

use std::path::Path;

use ndarray::{Array2, Array3};
use tomors_io::source::{Endian, RawDtype, RawSpec};
use tomors_io::tiffio::{write_image, write_image_u16, TiffDepth, TiffStack};
use tomors_io::writer::{
    create_writer, read_hdf5_volume, read_npy_volume, temporaries_of, write_volume, AttrValue,
};
use tomors_io::{open, IoError, OpenOptions, Preprocess, VolumeFormat, VolumeMeta};

fn ramp_u16(k: usize, r: usize, c: usize) -> Array2<u16> {
    Array2::from_shape_fn((r, c), |(i, j)| (k * 9973 + i * 257 + j * 31) as u16)
}

#[test]
fn tiff_stack_of_u16_round_trips_exactly_and_reads_slabs() {
    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("proj");
    std::fs::create_dir(&stack).unwrap();
    // Names that sort wrongly as plain text (proj_10 before proj_2).
    for k in 0..12 {
        write_image_u16(
            &stack.join(format!("proj_{k}.tif")),
            ramp_u16(k, 6, 7).view(),
        )
        .unwrap();
    }
    let src = open(&stack, &OpenOptions::default()).unwrap();
    assert_eq!(src.shape(), [12, 6, 7]);
    let raw = src.read_raw(2..5).unwrap();
    for k in 0..12 {
        let want = ramp_u16(k, 6, 7).mapv(f32::from);
        assert_eq!(
            raw.projections.index_axis(ndarray::Axis(0), k),
            want.slice(ndarray::s![2..5, ..])
        );
    }
    // Angles default to 180° without the endpoint.
    assert!((src.angles()[6] - std::f32::consts::FRAC_PI_2).abs() < 1e-6);
    // A glob selects the same files.
    let glob = stack.join("proj_*.tif");
    let g = open(&glob, &OpenOptions::default()).unwrap();
    assert_eq!(
        g.read_raw(0..6).unwrap().projections,
        src.read_raw(0..6).unwrap().projections
    );
}

#[test]
fn tiff_writer_round_trips_f32_exactly_and_u8_u16_with_the_stated_scaling() {
    let dir = tempfile::tempdir().unwrap();
    let vol = Array3::from_shape_fn((3, 5, 4), |(z, y, x)| {
        (z as f32 * 0.37 - y as f32 * 1.25 + x as f32 * 1e-3).sin() * 1e3
    });
    let out = dir.path().join("f32stack");
    write_volume(
        &out,
        VolumeFormat::TiffStack(TiffDepth::F32),
        vol.view(),
        &VolumeMeta::default(),
    )
    .unwrap();
    let back = TiffStack::open(&out)
        .unwrap()
        .read_rows(0..3, 0..5)
        .unwrap();
    assert_eq!(back, vol);
    assert!(out.join("tomors.txt").exists());

    // 16 bit: integers in [0, 65535] map to themselves with lo = 0, hi = 65535.
    let ints = Array3::from_shape_fn((2, 4, 3), |(z, y, x)| {
        ((z * 30011 + y * 7919 + x * 13) % 65536) as f32
    });
    let o16 = dir.path().join("u16stack");
    write_volume(
        &o16,
        VolumeFormat::TiffStack(TiffDepth::U16 {
            lo: 0.0,
            hi: 65535.0,
        }),
        ints.view(),
        &VolumeMeta::default(),
    )
    .unwrap();
    assert_eq!(
        TiffStack::open(&o16)
            .unwrap()
            .read_rows(0..2, 0..4)
            .unwrap(),
        ints
    );

    // 8 bit with a scaling: v ↦ round((v − lo)/(hi − lo)·255), clamped.
    let (lo, hi) = (-1.0f32, 3.0f32);
    let vals = Array3::from_shape_fn((1, 2, 4), |(_, y, x)| -2.0 + (y * 4 + x) as f32 * 0.7);
    let o8 = dir.path().join("u8stack");
    write_volume(
        &o8,
        VolumeFormat::TiffStack(TiffDepth::U8 { lo, hi }),
        vals.view(),
        &VolumeMeta::default(),
    )
    .unwrap();
    let b8 = TiffStack::open(&o8).unwrap().read_rows(0..1, 0..2).unwrap();
    for (v, b) in vals.iter().zip(b8.iter()) {
        let want = ((v - lo) / (hi - lo) * 255.0).round().clamp(0.0, 255.0);
        assert_eq!(*b, want, "value {v}");
    }
    let txt = std::fs::read_to_string(o8.join("tomors.txt")).unwrap();
    assert!(
        txt.contains("uint8 = round((value - lo) / (hi - lo) * 255)"),
        "{txt}"
    );
}

#[test]
fn multipage_tiff_and_separate_flat_dark_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj.tif");
    {
        let f = std::fs::File::create(&proj).unwrap();
        let mut enc = tiff::encoder::TiffEncoder::new(f).unwrap();
        for k in 0..5 {
            let img: Vec<f32> = (0..12).map(|i| 110.0 + k as f32 + i as f32 * 0.0).collect();
            enc.write_image::<tiff::encoder::colortype::Gray32Float>(4, 3, &img)
                .unwrap();
        }
    }
    let flats = dir.path().join("flats");
    let darks = dir.path().join("darks");
    std::fs::create_dir(&flats).unwrap();
    std::fs::create_dir(&darks).unwrap();
    for k in 0..3 {
        write_image(
            &flats.join(format!("f{k}.tif")),
            Array2::from_elem((3, 4), 210.0).view(),
            TiffDepth::F32,
        )
        .unwrap();
        write_image(
            &darks.join(format!("d{k}.tif")),
            Array2::from_elem((3, 4), 10.0).view(),
            TiffDepth::F32,
        )
        .unwrap();
    }
    let opts = OpenOptions {
        flats: Some(flats),
        darks: Some(darks),
        ..Default::default()
    };
    let src = open(&proj, &opts).unwrap();
    assert_eq!(src.format(), "multi-page TIFF");
    assert_eq!(src.shape(), [5, 3, 4]);
    assert_eq!((src.n_flats(), src.n_darks()), (3, 3));
    let li = src.read_rows(1..3, &Preprocess::default()).unwrap();
    for k in 0..5 {
        let want = -((100.0 + k as f32) / 200.0).ln();
        assert!((li[[k, 0, 0]] - want).abs() < 1e-6);
    }
    // Flats of another size are refused.
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    write_image(
        &small.join("s.tif"),
        Array2::from_elem((2, 4), 1.0).view(),
        TiffDepth::F32,
    )
    .unwrap();
    let e = open(
        &proj,
        &OpenOptions {
            flats: Some(small),
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert!(matches!(e, IoError::Shape { .. }), "{e}");
}

#[test]
fn corrupt_tiffs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.tif");
    write_image(&good, Array2::from_elem((8, 8), 1.5).view(), TiffDepth::F32).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    for cut in [4usize, 12, bytes.len() / 2, bytes.len() - 3] {
        let p = dir.path().join(format!("cut{cut}.tif"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let r = open(&p, &OpenOptions::default()).and_then(|s| s.read_raw(0..8).map(|_| ()));
        let e = r
            .err()
            .unwrap_or_else(|| panic!("truncation at {cut} not noticed"));
        assert!(e.to_string().contains(&format!("cut{cut}.tif")), "{e}");
    }
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(open(&empty, &OpenOptions::default()).is_err());
}

fn write_npy(path: &Path, descr: &str, fortran: bool, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {tuple}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

#[test]
fn npy_dtypes_orders_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [3usize, 4, 5];
    let val = |a: usize, r: usize, c: usize| (a * 100 + r * 10 + c) as f64;
    // f8, C order.
    let mut d = Vec::new();
    for a in 0..3 {
        for r in 0..4 {
            for c in 0..5 {
                d.extend_from_slice(&val(a, r, c).to_le_bytes());
            }
        }
    }
    let p = dir.path().join("c.npy");
    write_npy(&p, "<f8", false, &shape, &d);
    let s = open(&p, &OpenOptions::default()).unwrap();
    let got = s.read_raw(1..3).unwrap().projections;
    assert_eq!(got[[2, 1, 4]], val(2, 2, 4) as f32);
    // >u2, Fortran order: element (a, r, c) at a + 3·(r + 4·c).
    let mut d = vec![0u8; 3 * 4 * 5 * 2];
    for a in 0..3 {
        for r in 0..4 {
            for c in 0..5 {
                let k = a + 3 * (r + 4 * c);
                d[2 * k..2 * k + 2].copy_from_slice(&(val(a, r, c) as u16).to_be_bytes());
            }
        }
    }
    let p = dir.path().join("f.npy");
    write_npy(&p, ">u2", true, &shape, &d);
    let f = open(&p, &OpenOptions::default())
        .unwrap()
        .read_raw(0..4)
        .unwrap()
        .projections;
    assert_eq!(
        f,
        Array3::from_shape_fn((3, 4, 5), |(a, r, c)| val(a, r, c) as f32)
    );

    // Truncated data: an error naming the file, at open time.
    let p = dir.path().join("short.npy");
    write_npy(&p, "<f4", false, &shape, &[0u8; 100]);
    let e = open(&p, &OpenOptions::default()).err().unwrap();
    assert!(
        e.to_string().contains("short.npy") && e.to_string().contains("truncated"),
        "{e}"
    );
    // Truncated header.
    let p = dir.path().join("hdr.npy");
    std::fs::write(&p, b"\x93NUMPY\x01\x00\x76\x00{'descr'").unwrap();
    let e = open(&p, &OpenOptions::default()).err().unwrap();
    assert!(e.to_string().contains("hdr.npy"), "{e}");
    // Unsupported dtype.
    let p = dir.path().join("c16.npy");
    write_npy(&p, "<c16", false, &[2, 2, 2], &[0u8; 128]);
    let e = open(&p, &OpenOptions::default()).err().unwrap();
    assert!(matches!(e, IoError::Unsupported { .. }), "{e}");
    // 1-D arrays are refused.
    let p = dir.path().join("one.npy");
    write_npy(&p, "<f4", false, &[4], &[0u8; 16]);
    assert!(matches!(
        open(&p, &OpenOptions::default()).err().unwrap(),
        IoError::Shape { .. }
    ));
}

#[test]
fn raw_files_with_layout() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("scan.bin");
    let mut d = vec![0xEEu8; 16]; // a header
    for k in 0..(2 * 3 * 4) {
        d.extend_from_slice(&(k as i16 - 5).to_be_bytes());
    }
    std::fs::write(&p, &d).unwrap();
    let spec = RawSpec {
        shape: [2, 3, 4],
        dtype: RawDtype::I16,
        endian: Endian::Big,
        offset: 16,
        allow_trailing: false,
    };
    let s = open(
        &p,
        &OpenOptions {
            raw: Some(spec.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let v = s.read_raw(0..3).unwrap().projections;
    assert_eq!(v[[1, 2, 3]], 23.0 - 5.0);
    let big = RawSpec {
        shape: [3, 3, 4],
        ..spec
    };
    assert!(open(
        &p,
        &OpenOptions {
            raw: Some(big),
            ..Default::default()
        }
    )
    .is_err());
}

#[test]
fn npy_and_hdf5_volumes_round_trip_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let vol = Array3::from_shape_fn((4, 3, 5), |(z, y, x)| {
        z as f32 - 0.5 * y as f32 + 0.01 * x as f32
    });
    let meta = VolumeMeta::default()
        .float("center", 295.5)
        .int("n_angles", 181)
        .text("filter", "ramp");
    let npy = dir.path().join("v.npy");
    let mut w = create_writer(&npy, VolumeFormat::Npy, [4, 3, 5], &meta).unwrap();
    w.write_slab(0, vol.slice(ndarray::s![0..3, .., ..]))
        .unwrap();
    w.write_slab(3, vol.slice(ndarray::s![3..4, .., ..]))
        .unwrap();
    w.finish().unwrap();
    assert_eq!(read_npy_volume(&npy).unwrap(), vol);
    // ndarray-npy reads it too.
    let other: Array3<f32> = ndarray_npy::read_npy(&npy).unwrap();
    assert_eq!(other, vol);

    let h5 = dir.path().join("v.h5");
    write_volume(&h5, VolumeFormat::Hdf5, vol.view(), &meta).unwrap();
    assert_eq!(read_hdf5_volume(&h5).unwrap(), vol);
    let f = hdf5::File::open(&h5).unwrap();
    let ds = f.dataset("volume").unwrap();
    assert_eq!(
        ds.attr("center").unwrap().read_scalar::<f64>().unwrap(),
        295.5
    );
    assert_eq!(
        ds.attr("n_angles").unwrap().read_scalar::<i64>().unwrap(),
        181
    );
    let t: hdf5::types::VarLenUnicode = ds.attr("filter").unwrap().read_scalar().unwrap();
    assert_eq!(t.as_str(), "ramp");
    assert!(matches!(meta.attrs[0].1, AttrValue::Float(_)));
}

fn no_trace(final_path: &Path) {
    assert!(!final_path.exists(), "{} exists", final_path.display());
    assert!(
        temporaries_of(final_path).is_empty(),
        "partial file or directory left"
    );
}

#[test]
fn writers_leave_nothing_that_looks_finished_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let slab = Array3::<f32>::ones((2, 3, 3));
    for (name, fmt) in [
        ("a.npy", VolumeFormat::Npy),
        ("a.h5", VolumeFormat::Hdf5),
        ("tiffs", VolumeFormat::TiffStack(TiffDepth::F32)),
    ] {
        let out = dir.path().join(name);
        // Dropped midway (an error upstream, an interrupted run).
        {
            let mut w = create_writer(&out, fmt, [4, 3, 3], &VolumeMeta::default()).unwrap();
            w.write_slab(0, slab.view()).unwrap();
            let partial = temporaries_of(&out);
            assert_eq!(partial.len(), 1, "{name}: writes go to one partial name");
            assert!(partial[0].exists(), "{name}: writes go to the partial name");
            assert_eq!(
                partial[0].is_dir(),
                name == "tiffs",
                "{name}: a directory for TIFF stacks, a file otherwise"
            );
            assert!(!out.exists(), "{name}: no final name while writing");
        }
        no_trace(&out);
        // Finished with slices missing.
        let mut w = create_writer(&out, fmt, [4, 3, 3], &VolumeMeta::default()).unwrap();
        w.write_slab(0, slab.view()).unwrap();
        let e = w.finish().err().unwrap();
        assert!(e.to_string().contains("2 of 4 slices"), "{e}");
        no_trace(&out);
        // Out-of-order slab.
        let mut w = create_writer(&out, fmt, [4, 3, 3], &VolumeMeta::default()).unwrap();
        assert!(w.write_slab(2, slab.view()).is_err());
        drop(w);
        no_trace(&out);
        // Unwritable place: a directory that does not exist.
        let bad = dir.path().join("missing_dir").join(name);
        let e = create_writer(&bad, fmt, [4, 3, 3], &VolumeMeta::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("missing_dir"), "{e}");
        no_trace(&bad);
    }
    // An existing non-empty directory is not overwritten.
    let keep = dir.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    std::fs::write(keep.join("precious.txt"), "x").unwrap();
    assert!(create_writer(
        &keep,
        VolumeFormat::TiffStack(TiffDepth::F32),
        [1, 1, 1],
        &VolumeMeta::default()
    )
    .is_err());
    assert!(keep.join("precious.txt").exists());
}

#[test]
fn info_describes_files() {
    let s = tomors_io::info::describe(&common::tooth(), &OpenOptions::default()).unwrap();
    assert!(s.contains("/exchange/data  [181, 2, 640] float32"), "{s}");
    assert!(s.contains("read by tomors as: DXchange HDF5"), "{s}");
    assert!(s.contains("flats: 10, darks: 10"), "{s}");
    assert!(s.contains("181 angles × 2 rows × 640 columns"), "{s}");
}

#[test]
fn striped_tiffs_read_row_slabs_from_their_strips() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("strips.tif");
    let img: Vec<u16> = (0..9 * 5).map(|i| i as u16 * 3).collect();
    {
        let f = std::fs::File::create(&p).unwrap();
        let mut e = tiff::encoder::TiffEncoder::new(f).unwrap();
        let mut im = e
            .new_image::<tiff::encoder::colortype::Gray16>(5, 9)
            .unwrap();
        im.rows_per_strip(2).unwrap();
        im.write_data(&img).unwrap();
    }
    let full = Array2::from_shape_vec((9, 5), img.iter().map(|&v| f32::from(v)).collect()).unwrap();
    let stack = TiffStack::open(&p).unwrap();
    for rows in [0..9, 3..7, 8..9, 0..1, 4..6] {
        let got = stack.read_rows(0..1, rows.clone()).unwrap();
        assert_eq!(
            got.index_axis(ndarray::Axis(0), 0),
            full.slice(ndarray::s![rows.clone(), ..]),
            "rows {rows:?}"
        );
    }
}
