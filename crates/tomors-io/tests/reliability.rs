//! The library side of issue 13: the safe output writer (unique
//! temporaries, no clobbering, permissions), files that shrink while read,
//! raw sizes, the non-finite rule, bad flat pixels, centre options.

use ndarray::{Array1, Array2, Array3};
use tomors_io::output::{self, OutputKind, StagedFile};
use tomors_io::preprocess::{bad_gain_mask, interpolate_masked};
use tomors_io::source::{Endian, RawDtype, RawSpec};
use tomors_io::writer::{create_writer_with, read_npy_volume, temporaries_of};
use tomors_io::{open, CenterOptions, OpenOptions, Preprocess, VolumeFormat, VolumeMeta};

fn vol(k: f32) -> Array3<f32> {
    Array3::from_shape_fn((3, 4, 5), |(z, y, x)| k * (z * 20 + y * 5 + x) as f32)
}

#[test]
fn two_writers_of_one_output_never_share_a_temporary() {
    let dir = tempfile::tempdir().unwrap();
    for (name, fmt) in [
        ("v.npy", VolumeFormat::Npy),
        ("v.h5", VolumeFormat::Hdf5),
        (
            "vd",
            VolumeFormat::TiffStack(tomors_io::tiffio::TiffDepth::F32),
        ),
    ] {
        let out = dir.path().join(name);
        let meta = VolumeMeta::default();
        let mut a = create_writer_with(&out, fmt, [3, 4, 5], &meta, false).unwrap();
        let mut b = create_writer_with(&out, fmt, [3, 4, 5], &meta, false).unwrap();
        assert_eq!(temporaries_of(&out).len(), 2, "{name}: one temporary each");
        a.write_slab(0, vol(1.0).view()).unwrap();
        b.write_slab(0, vol(2.0).view()).unwrap();
        a.finish().unwrap();
        let e = b.finish().unwrap_err().to_string();
        assert!(e.contains("appeared while this run"), "{name}: {e}");
        assert!(temporaries_of(&out).is_empty(), "{name}");
        // The first one's output, whole.
        if fmt == VolumeFormat::Npy {
            assert_eq!(read_npy_volume(&out).unwrap(), vol(1.0));
        }
        // With overwrite the later one replaces it, whole.
        let mut c = create_writer_with(&out, fmt, [3, 4, 5], &meta, true).unwrap();
        c.write_slab(0, vol(3.0).view()).unwrap();
        c.finish().unwrap();
        if fmt == VolumeFormat::Npy {
            assert_eq!(read_npy_volume(&out).unwrap(), vol(3.0));
        }
        if fmt != VolumeFormat::Npy && fmt != VolumeFormat::Hdf5 {
            assert!(out.join(output::MARKER).is_file());
        }
        assert!(temporaries_of(&out).is_empty(), "{name}");
    }
}

#[cfg(unix)]
#[test]
fn outputs_get_ordinary_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::File::create(&plain).unwrap();
    let want = std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
    let out = dir.path().join("a.npy");
    output::write_npy_array(&out, &Array1::<f32>::zeros(4), false).unwrap();
    let got = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(got, want, "{got:o} vs {want:o}");
}

#[test]
fn outputs_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A missing directory, a bare directory name for a file.
    let e = StagedFile::create(&d.join("no/v.npy"), OutputKind::NPY, false).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    // An input of this process (registered by its reader).
    let p = d.join("p.npy");
    output::write_npy_array(&p, &Array3::<f32>::ones((4, 2, 8)), false).unwrap();
    open(&p, &OpenOptions::default()).unwrap();
    let e = StagedFile::create(&p, OutputKind::NPY, true).unwrap_err();
    assert!(e.to_string().contains("is an input"), "{e}");
    let e = output::check_target(d, OutputKind::TiffDir, true).unwrap_err();
    assert!(e.to_string().contains("contains the input"), "{e}");
    assert!(temporaries_of(&p).is_empty());
}

#[test]
fn an_hdf5_file_that_shrinks_while_read_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("growing.h5");
    {
        let f = hdf5::File::create(&p).unwrap();
        f.create_group("exchange")
            .unwrap()
            .new_dataset_builder()
            .with_data(&Array3::<f32>::from_elem((32, 16, 64), 7.0))
            .create("data")
            .unwrap();
    }
    let src = open(&p, &OpenOptions::default()).unwrap();
    assert!(src.read_rows(0..16, &Preprocess::raw()).is_ok());
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let e = src
        .read_rows(0..16, &Preprocess::raw())
        .unwrap_err()
        .to_string();
    assert!(e.contains("growing.h5") && e.contains("shrank"), "{e}");
}

#[test]
fn raw_files_must_match_their_layout() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.bin");
    std::fs::write(&p, vec![0u8; 2 * 3 * 4 * 4 + 8]).unwrap();
    let spec = |allow_trailing| RawSpec {
        shape: [2, 3, 4],
        dtype: RawDtype::F32,
        endian: Endian::Little,
        offset: 0,
        allow_trailing,
    };
    let opts = |s| OpenOptions {
        raw: Some(s),
        ..Default::default()
    };
    let e = open(&p, &opts(spec(false))).err().unwrap().to_string();
    assert!(e.contains("8 bytes too many"), "{e}");
    assert!(open(&p, &opts(spec(true))).is_ok());
    let mut s = spec(false);
    s.offset = 8;
    assert!(open(&p, &opts(s.clone())).is_ok());
    s.offset = u64::MAX;
    let e = open(&p, &opts(s)).err().unwrap().to_string();
    assert!(e.contains("beyond the end"), "{e}");
}

#[test]
fn bad_flat_pixels_are_masked_and_interpolated_along_the_row() {
    let mut flat = Array2::<f32>::from_elem((2, 6), 100.0);
    flat[[0, 2]] = 5.0; // below the dark
    flat[[1, 0]] = 10.0; // equal to the dark
    let dark = Array2::<f32>::from_elem((2, 6), 10.0);
    let mask = bad_gain_mask(&[(0.0, flat)], &[(0.0, dark)]).unwrap();
    assert_eq!(mask.iter().filter(|&&b| b).count(), 2);
    assert!(mask[[0, 2]] && mask[[1, 0]]);
    let mut p = Array3::from_shape_fn((1, 2, 6), |(_, _, c)| c as f32);
    p[[0, 0, 2]] = 1e9;
    p[[0, 1, 0]] = -7.0;
    interpolate_masked(&mut p, &mask);
    assert_eq!(p[[0, 0, 2]], 2.0); // between columns 1 and 3
    assert_eq!(p[[0, 1, 0]], 1.0); // the nearest good pixel at the edge
}

#[test]
fn centre_options_are_checked() {
    let bad = CenterOptions {
        smin: 100.0,
        smax: -100.0,
        ..Default::default()
    };
    assert!(bad.validate().is_err());
    let sino = Array2::from_shape_fn((90, 64), |(a, b)| ((a + b) % 7) as f32);
    let angles: Vec<f32> = (0..90)
        .map(|i| i as f32 * std::f32::consts::PI / 90.0)
        .collect();
    let e = tomors_io::find_center(sino.view(), &angles, &bad).unwrap_err();
    assert!(e.to_string().contains("smin"), "{e}");
    let flat = Array2::<f32>::from_elem((90, 64), 3.0);
    let e = tomors_io::find_center(flat.view(), &angles, &CenterOptions::default()).unwrap_err();
    assert!(e.to_string().contains("constant"), "{e}");
    let quarter: Vec<f32> = angles.iter().map(|a| a / 2.0).collect();
    let e = tomors_io::find_center(sino.view(), &quarter, &CenterOptions::default()).unwrap_err();
    assert!(e.to_string().contains("180°"), "{e}");
}

#[test]
fn npy_headers_through_ndarray_npy_keep_the_strict_checks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    output::write_npy_array(&p, &Array3::<u16>::ones((2, 3, 4)), false).unwrap();
    let h = tomors_io::npy::read_npy_header(&p).unwrap();
    assert_eq!(h.descr, "<u2");
    assert_eq!(h.shape, vec![2, 3, 4]);
    assert_eq!(h.data_offset % 64, 0);
    // A v2 header that declares 4 GiB is refused before allocating it.
    let mut b = std::fs::read(&p).unwrap();
    b[6] = 2;
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let q = dir.path().join("huge.npy");
    std::fs::write(&q, &b).unwrap();
    let e = tomors_io::npy::read_npy_header(&q).unwrap_err().to_string();
    assert!(e.contains("implausible"), "{e}");
    // Truncated data.
    let t = dir.path().join("t.npy");
    std::fs::write(&t, &std::fs::read(&p).unwrap()[..100]).unwrap();
    let e = tomors_io::npy::read_npy_f32(&t).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
    // Read whole, any type.
    let a = tomors_io::npy::read_npy_f32(&p).unwrap();
    assert_eq!(a.shape(), &[2, 3, 4]);
    assert!(a.iter().all(|&v| v == 1.0));
}
