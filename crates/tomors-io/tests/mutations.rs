//! Readers on mutated files (a small in-test fuzzer): random byte changes
//! and truncations of valid HDF5 (DXchange and NXtomo), TIFF, `.npy` and
//! raw files. Every outcome is either data or an error naming the file,
//! never a panic. Seeded, so failures reproduce; `TOMORS_MUTATIONS=N` runs N
//! cases per file instead of the default, `TOMORS_FUZZ_SECONDS=S` bounds
//! the time per file (default 5 s, so the whole target stays within about
//! 30 s in CI), and `TOMORS_FUZZ_SEED=K` shifts the seeds (a longer run
//! explores new cases). See docs/reliability.md.

mod common;

use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, Array3};
use rand::{Rng, SeedableRng};
use tomors_io::tiffio::{write_image, TiffDepth};
use tomors_io::writer::write_volume;
use tomors_io::{open, OpenOptions, Preprocess, VolumeFormat, VolumeMeta};

fn seconds_per_file() -> f64 {
    std::env::var("TOMORS_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0)
}

fn seed_shift() -> u64 {
    std::env::var("TOMORS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn cases() -> usize {
    std::env::var("TOMORS_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

/// Opens and reads everything; returns whether it succeeded. Panics only if
/// the reader panics or returns an error that does not name the file.
fn exercise(path: &Path) -> bool {
    exercise_with(path, &OpenOptions::default())
}

fn exercise_with(path: &Path, options: &OpenOptions) -> bool {
    let r = open(path, options).and_then(|s| {
        let [_, rows, _] = s.shape();
        if rows == 0 || rows > 1 << 16 {
            return Ok(());
        }
        s.read_raw(0..rows)?;
        s.read_rows(0..1, &Preprocess::default()).map(|a| {
            // The non-finite rule: data that read are finite.
            assert!(
                a.iter().all(|v| v.is_finite()),
                "{}: non-finite values passed the reader",
                path.display()
            );
        })
    });
    match r {
        Ok(()) => true,
        Err(e) => {
            let m = e.to_string();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(m.contains(&name), "error without the file name: {m}");
            assert!(!m.contains('\n'), "multi-line error: {m}");
            false
        }
    }
}

fn mutate(src: &[u8], rng: &mut rand::rngs::StdRng) -> Vec<u8> {
    let mut b = src.to_vec();
    match rng.gen_range(0..4) {
        0 => {
            let cut = rng.gen_range(0..b.len());
            b.truncate(cut);
        }
        1 => {
            for _ in 0..rng.gen_range(1..8) {
                let i = rng.gen_range(0..b.len());
                b[i] = rng.gen();
            }
        }
        2 => {
            // Damage the first kilobyte (headers, superblocks, IFDs).
            let n = b.len().min(1024);
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..n);
                b[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        _ => {
            let i = rng.gen_range(0..b.len());
            let n = rng.gen_range(1..64).min(b.len() - i);
            for v in &mut b[i..i + n] {
                *v = 0xFF;
            }
        }
    }
    b
}

fn fuzz(original: &Path, ext: &str, seed: u64) {
    fuzz_with(original, ext, seed, &OpenOptions::default());
}

fn fuzz_with(original: &Path, ext: &str, seed: u64, options: &OpenOptions) {
    let bytes = std::fs::read(original).unwrap();
    assert!(
        exercise_with(original, options),
        "the unmutated file must read"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed + seed_shift());
    let (mut ok, mut n) = (0, 0);
    let t = std::time::Instant::now();
    for k in 0..cases() {
        if t.elapsed().as_secs_f64() > seconds_per_file() {
            break;
        }
        let p: PathBuf = dir.path().join(format!("m{k}.{ext}"));
        std::fs::write(&p, mutate(&bytes, &mut rng)).unwrap();
        if exercise_with(&p, options) {
            ok += 1;
        }
        n += 1;
        let _ = std::fs::remove_file(&p);
    }
    eprintln!("{ext}: {ok} of {n} mutated files still read");
}

#[test]
fn mutated_raw_files() {
    use tomors_io::source::{Endian, RawDtype, RawSpec};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.raw");
    let data: Vec<u8> = (0..6 * 3 * 8)
        .flat_map(|k| (k as u16 * 97).to_be_bytes())
        .collect();
    let mut bytes = vec![0xABu8; 32]; // a header
    bytes.extend_from_slice(&data);
    std::fs::write(&p, &bytes).unwrap();
    for allow_trailing in [false, true] {
        let options = OpenOptions {
            raw: Some(RawSpec {
                shape: [6, 3, 8],
                dtype: RawDtype::U16,
                endian: Endian::Big,
                offset: 32,
                allow_trailing,
            }),
            ..Default::default()
        };
        fuzz_with(&p, "raw", 8 + allow_trailing as u64, &options);
    }
    // Raw f32 data with NaNs and infinities from the mutations: the
    // non-finite rule must hold (an error naming the file, never data).
    let f = dir.path().join("f.raw");
    let v: Vec<u8> = (0..6 * 3 * 8)
        .flat_map(|k| (k as f32).to_le_bytes())
        .collect();
    std::fs::write(&f, &v).unwrap();
    let options = OpenOptions {
        raw: Some(RawSpec {
            shape: [6, 3, 8],
            dtype: RawDtype::F32,
            endian: Endian::Little,
            offset: 0,
            allow_trailing: false,
        }),
        ..Default::default()
    };
    fuzz_with(&f, "raw", 10, &options);
}

#[test]
fn mutated_npy_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.npy");
    let v = Array3::from_shape_fn((6, 3, 8), |(a, r, c)| (a + r * c) as f32);
    write_volume(&p, VolumeFormat::Npy, v.view(), &VolumeMeta::default()).unwrap();
    fuzz(&p, "npy", 1);
}

#[test]
fn mutated_tiff_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("i.tif");
    write_image(
        &p,
        Array2::from_shape_fn((9, 7), |(i, j)| (i * j) as f32).view(),
        TiffDepth::F32,
    )
    .unwrap();
    fuzz(&p, "tif", 2);
    let p16 = dir.path().join("i16.tif");
    write_image(
        &p16,
        Array2::from_shape_fn((9, 7), |(i, j)| (i * j) as f32).view(),
        TiffDepth::U16 { lo: 0.0, hi: 100.0 },
    )
    .unwrap();
    fuzz(&p16, "tif", 3);
    // Several strips (rows read strip by strip).
    let ps = dir.path().join("strips.tif");
    {
        let f = std::fs::File::create(&ps).unwrap();
        let mut e = tiff::encoder::TiffEncoder::new(f).unwrap();
        let mut im = e
            .new_image::<tiff::encoder::colortype::Gray16>(7, 9)
            .unwrap();
        im.rows_per_strip(2).unwrap();
        im.write_data(&(0..63).collect::<Vec<u16>>()).unwrap();
    }
    fuzz(&ps, "tif", 7);
}

#[test]
fn mutated_hdf5_files() {
    let dir = tempfile::tempdir().unwrap();
    // A small DXchange file.
    let dx = dir.path().join("dx.h5");
    {
        let f = hdf5::File::create(&dx).unwrap();
        let g = f.create_group("exchange").unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<u16>::from_elem((8, 2, 6), 500))
            .create("data")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<u16>::from_elem((2, 2, 6), 900))
            .create("data_white")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<u16>::from_elem((2, 2, 6), 10))
            .create("data_dark")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array1::from(
                (0..8).map(|i| i as f64 * 22.5).collect::<Vec<_>>(),
            ))
            .create("theta")
            .unwrap();
    }
    fuzz(&dx, "h5", 4);
    // A small NXtomo file (chunked, compressed frames).
    let nx = dir.path().join("nx.h5");
    {
        let f = hdf5::File::create(&nx).unwrap();
        let d = f.create_group("entry/instrument/detector").unwrap();
        d.new_dataset_builder()
            .deflate(4)
            .chunk((1, 2, 6))
            .with_data(&Array3::<f32>::from_shape_fn((10, 2, 6), |(i, r, c)| {
                (i + r + c) as f32 + 1.0
            }))
            .create("data")
            .unwrap();
        d.new_dataset_builder()
            .with_data(&Array1::from(vec![2u8, 1, 0, 0, 0, 0, 0, 0, 0, 1]))
            .create("image_key")
            .unwrap();
        f.create_group("entry/sample")
            .unwrap()
            .new_dataset_builder()
            .with_data(&Array1::from(
                (0..10).map(|i| i as f32 * 20.0).collect::<Vec<_>>(),
            ))
            .create("rotation_angle")
            .unwrap();
    }
    fuzz(&nx, "h5", 5);
    // The real tooth file, fewer cases (it is 1 MB).
    let bytes = std::fs::read(common::tooth()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(6 + seed_shift());
    let t = std::time::Instant::now();
    for k in 0..(cases() / 5).max(5) {
        if t.elapsed().as_secs_f64() > seconds_per_file() {
            break;
        }
        let p = dir.path().join(format!("tooth{k}.h5"));
        std::fs::write(&p, mutate(&bytes, &mut rng)).unwrap();
        exercise(&p);
        let _ = std::fs::remove_file(&p);
    }
}
