//! The pipelined slab stream (`tomors_io::stream::run_stages`): the same
//! output bit for bit as the sequential stream on `.npy`, DXchange HDF5
//! (compressed, chunked) and TIFF inputs; errors of any stage stop the run
//! with that error and leave no output; compressed HDF5 chunks are
//! decompressed once (counted with a pass-through HDF5 filter).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{s, Array1, Array2, Array3, Axis};
use tomors_io::hdf5;
use tomors_io::preprocess::Preprocess;
use tomors_io::source::{open, OpenOptions, ProjectionSource, RawSlab};
use tomors_io::stream::{run_stages, slab_plan, Stages, StreamMode};
use tomors_io::writer::{create_writer, read_npy_volume, VolumeFormat, VolumeMeta, VolumeWriter};
use tomors_io::{IoError, Result};

const NA: usize = 24;
const NR: usize = 37;
const NC: usize = 20;

/// Raw counts of a smooth object with a column gain (flats correct it).
fn counts(a: usize, r: usize, c: usize) -> f32 {
    let x = (c as f32 - 9.5) / 8.0;
    let y = (r as f32 - 18.0) / 15.0;
    let t = (a as f32) * 0.13;
    let line = (1.0 - x * x - y * y).max(0.0) * (1.2 + 0.3 * (t + x).sin());
    let gain = 1.0 + 0.05 * ((c % 5) as f32 - 2.0);
    1000.0 * gain * (-line).exp() + 50.0
}

fn flats() -> Array3<f32> {
    Array3::from_shape_fn((3, NR, NC), |(_, _, c)| {
        1000.0 * (1.0 + 0.05 * ((c % 5) as f32 - 2.0)) + 50.0
    })
}

fn darks() -> Array3<f32> {
    Array3::from_elem((2, NR, NC), 50.0)
}

fn projections() -> Array3<f32> {
    Array3::from_shape_fn((NA, NR, NC), |(a, r, c)| counts(a, r, c))
}

/// DXchange HDF5, uint16, chunks of `chunk`, deflate when `deflate`.
fn write_dx(path: &Path, chunk: [usize; 3], filter: Option<i32>) {
    let f = hdf5::File::create(path).unwrap();
    let g = f.create_group("exchange").unwrap();
    let u16s = |a: Array3<f32>| a.mapv(|v| v.round() as u16);
    let data = u16s(projections());
    let mut b = g.new_dataset_builder().with_data(&data).chunk(chunk);
    b = match filter {
        Some(id) => b.add_filter(id as _, &[]),
        None => b.shuffle().deflate(3),
    };
    b.create("data").unwrap();
    g.new_dataset_builder()
        .with_data(&u16s(flats()))
        .create("data_white")
        .unwrap();
    g.new_dataset_builder()
        .with_data(&u16s(darks()))
        .create("data_dark")
        .unwrap();
    g.new_dataset_builder()
        .with_data(&Array1::from_shape_fn(NA, |i| i as f64 * 180.0 / NA as f64))
        .create("theta")
        .unwrap();
}

/// A directory of one uint16 TIFF per projection.
fn write_tiffs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let p = projections();
    for (a, img) in p.axis_iter(Axis(0)).enumerate() {
        let img: Array2<u16> = img.mapv(|v| v.round() as u16);
        tomors_io::tiffio::write_image_u16(&dir.join(format!("p_{a:03}.tif")), img.view()).unwrap();
    }
}

/// The "reconstruction" of the tests: a deterministic function of every
/// value of the slab (slices of NC × NC, `[z][y][x]`), in f32 arithmetic.
fn fake_recon(rows: Range<usize>, sino: Array3<f32>) -> Result<Array3<f32>> {
    let (nr, na, nc) = sino.dim();
    assert_eq!(nr, rows.len());
    let mut out = Array3::<f32>::zeros((nr, nc, nc));
    for z in 0..nr {
        for y in 0..nc {
            for x in 0..nc {
                let mut acc = 0.0f32;
                for a in 0..na {
                    acc += sino[[z, a, (x + y + a) % nc]] * (1.0 + (a as f32) * 1e-3);
                }
                out[[z, y, x]] = acc + (rows.start + z) as f32;
            }
        }
    }
    Ok(out)
}

fn sinograms(p: Array3<f32>) -> Array3<f32> {
    p.permuted_axes([1, 0, 2]).as_standard_layout().into_owned()
}

/// Streams `input` (rows `rows`, slabs of `per` rows) into `out` (.npy) in
/// `mode`, with `fail` making the reconstruction of a slab starting at that
/// row fail.
fn stream(
    input: &Path,
    out: &Path,
    rows: Range<usize>,
    per: usize,
    mode: StreamMode,
) -> Result<tomors_io::stream::StageTimes> {
    let mut src = open(input, &OpenOptions::default())?;
    let plan = slab_plan(rows.clone(), per, src.row_chunk());
    let w = create_writer(
        out,
        VolumeFormat::Npy,
        [rows.len(), NC, NC],
        &VolumeMeta::default(),
    )?;
    run_stages(
        src.as_mut(),
        &Preprocess::default(),
        &plan,
        w,
        Stages {
            prepare: |_, p| Ok(sinograms(p)),
            process: fake_recon,
        },
        |_, _| {},
        mode,
    )
}

fn same_bits(a: &Array3<f32>, b: &Array3<f32>) -> bool {
    a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn pipelined_output_is_bit_identical_to_sequential_on_npy_hdf5_and_tiff() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("scan.npy");
    ndarray_npy::write_npy(&npy, &projections()).unwrap();
    let h5 = dir.path().join("scan.h5");
    write_dx(&h5, [5, 8, NC], None);
    let tif = dir.path().join("tiffs");
    write_tiffs(&tif);
    for input in [&npy, &h5, &tif] {
        for (rows, per) in [(0..NR, 5), (3..NR - 2, 9), (0..NR, NR)] {
            let a = dir.path().join("seq.npy");
            let b = dir.path().join("pipe.npy");
            let ts = stream(input, &a, rows.clone(), per, StreamMode::Sequential).unwrap();
            let tp = stream(input, &b, rows.clone(), per, StreamMode::Pipelined).unwrap();
            assert!(!ts.pipelined && tp.pipelined);
            assert_eq!(ts.slabs, tp.slabs);
            assert_eq!(ts.read_bytes, tp.read_bytes);
            assert_eq!(tp.write_bytes, (rows.len() * NC * NC * 4) as u64);
            let (va, vb) = (read_npy_volume(&a).unwrap(), read_npy_volume(&b).unwrap());
            assert!(
                same_bits(&va, &vb),
                "{}: rows {rows:?}, slabs of {per}: outputs differ",
                input.display()
            );
            // And they are the slab-free computation.
            let mut all = open(input, &OpenOptions::default()).unwrap();
            let whole = all
                .as_mut()
                .read_rows(rows.clone(), &Preprocess::default())
                .unwrap();
            let want = fake_recon(rows.clone(), sinograms(whole)).unwrap();
            assert!(
                same_bits(&va, &want),
                "{}: not the whole-scan values",
                input.display()
            );
            std::fs::remove_file(&a).unwrap();
            std::fs::remove_file(&b).unwrap();
        }
    }
}

/// Nothing but `keep` in `dir`.
fn only(dir: &Path, keep: &[&str]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.iter().any(|k| p.file_name().unwrap() == *k))
        .collect()
}

/// A source that fails to read rows at and after `bad`.
struct Failing {
    inner: Box<dyn ProjectionSource>,
    bad: usize,
}

impl ProjectionSource for Failing {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn format(&self) -> &'static str {
        "test"
    }
    fn shape(&self) -> [usize; 3] {
        self.inner.shape()
    }
    fn angles(&self) -> &[f32] {
        self.inner.angles()
    }
    fn n_flats(&self) -> usize {
        self.inner.n_flats()
    }
    fn n_darks(&self) -> usize {
        self.inner.n_darks()
    }
    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
        if rows.end > self.bad {
            return Err(IoError::Parameter(format!("read failed at rows {rows:?}")));
        }
        self.inner.read_raw(rows)
    }
}

/// A writer that fails at slice `bad` and otherwise writes `inner`.
struct FailingWriter {
    inner: Box<dyn VolumeWriter>,
    bad: usize,
}

impl VolumeWriter for FailingWriter {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn shape(&self) -> [usize; 3] {
        self.inner.shape()
    }
    fn write_slab(&mut self, z0: usize, slab: ndarray::ArrayView3<'_, f32>) -> Result<()> {
        if z0 + slab.len_of(Axis(0)) > self.bad {
            return Err(IoError::Parameter(format!("write failed at slice {z0}")));
        }
        self.inner.write_slab(z0, slab)
    }
    fn finish(self: Box<Self>) -> Result<()> {
        self.inner.finish()
    }
}

#[test]
fn an_error_in_any_stage_stops_the_stream_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("scan.npy");
    ndarray_npy::write_npy(&npy, &projections()).unwrap();
    let out = dir.path().join("vol.npy");
    let plan = slab_plan(0..NR, 4, None);
    let meta = VolumeMeta::default();
    for mode in [StreamMode::Pipelined, StreamMode::Sequential] {
        // (stage, reader's bad row, prepare's bad row, process's bad row, writer's bad slice, message)
        let cases: [(&str, usize, usize, usize, usize, &str); 5] = [
            ("read", 13, NR, NR, NR, "read failed at rows 12..16"),
            ("preprocess", NR, 20, NR, NR, "prepare failed at row 20"),
            ("reconstruct", NR, NR, 8, NR, "process failed at row 8"),
            ("write", NR, NR, NR, 30, "write failed at slice 28"),
            // Several stages fail: the earliest slab's error wins.
            ("several", 30, NR, 16, 33, "process failed at row 16"),
        ];
        for (stage, rb, pb, cb, wb, msg) in cases {
            let inner = open(&npy, &OpenOptions::default()).unwrap();
            let mut src = Failing { inner, bad: rb };
            let w = Box::new(FailingWriter {
                inner: create_writer(&out, VolumeFormat::Npy, [NR, NC, NC], &meta).unwrap(),
                bad: wb,
            });
            let r = run_stages(
                &mut src,
                &Preprocess::default(),
                &plan,
                w,
                Stages {
                    prepare: |r: Range<usize>, p| {
                        if r.contains(&pb) {
                            return Err(IoError::Parameter(format!("prepare failed at row {pb}")));
                        }
                        Ok(sinograms(p))
                    },
                    process: |r: Range<usize>, x| {
                        if r.contains(&cb) {
                            return Err(IoError::Parameter(format!("process failed at row {cb}")));
                        }
                        fake_recon(r, x)
                    },
                },
                |_, _| {},
                mode,
            );
            let e = r.expect_err(stage).to_string();
            assert!(e.contains(msg), "{mode:?} {stage}: {e}");
            assert!(
                only(dir.path(), &["scan.npy"]).is_empty(),
                "{mode:?} {stage}: left {:?}",
                only(dir.path(), &["scan.npy"])
            );
        }
    }
}

#[test]
fn a_process_that_returns_the_wrong_number_of_slices_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("scan.npy");
    ndarray_npy::write_npy(&npy, &projections()).unwrap();
    let out = dir.path().join("vol.npy");
    let mut src = open(&npy, &OpenOptions::default()).unwrap();
    let w = create_writer(
        &out,
        VolumeFormat::Npy,
        [NR, NC, NC],
        &VolumeMeta::default(),
    )
    .unwrap();
    let e = run_stages(
        src.as_mut(),
        &Preprocess::default(),
        &slab_plan(0..NR, 10, None),
        w,
        Stages {
            prepare: |_, p| Ok(sinograms(p)),
            process: |r: Range<usize>, x| {
                fake_recon(r, x).map(|v| v.slice(s![1.., .., ..]).to_owned())
            },
        },
        |_, _| {},
        StreamMode::Pipelined,
    )
    .unwrap_err();
    assert!(e.to_string().contains("gave 9 slices"), "{e}");
    assert!(!out.exists());
}

// ---- decompression counting -------------------------------------------------

/// A pass-through HDF5 filter that counts how often a chunk is decoded.
const COUNTING_FILTER: i32 = 32600;
static DECODES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn counting_filter(
    flags: std::ffi::c_uint,
    _cd_nelmts: usize,
    _cd_values: *const std::ffi::c_uint,
    nbytes: usize,
    _buf_size: *mut usize,
    _buf: *mut *mut std::ffi::c_void,
) -> usize {
    if flags & hdf5_sys::h5z::H5Z_FLAG_REVERSE != 0 {
        DECODES.fetch_add(1, Ordering::SeqCst);
    }
    nbytes
}

fn register_counting_filter() {
    use hdf5_sys::h5z::{H5Z_class2_t, H5Zregister, H5Z_CLASS_T_VERS};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let class = H5Z_class2_t {
            version: H5Z_CLASS_T_VERS as _,
            id: COUNTING_FILTER as _,
            encoder_present: 1,
            decoder_present: 1,
            name: c"tomors decode counter".as_ptr(),
            can_apply: None,
            set_local: None,
            filter: Some(counting_filter),
        };
        // SAFETY: the class is fully initialised; HDF5 copies it.
        let r = hdf5::sync::sync(|| unsafe { H5Zregister((&class as *const H5Z_class2_t).cast()) });
        assert!(r >= 0, "H5Zregister failed");
    });
}

/// Reads `plan` through `src` and returns the chunks decoded meanwhile.
fn decodes(src: &dyn ProjectionSource, plan: &[Range<usize>]) -> usize {
    let before = DECODES.load(Ordering::SeqCst);
    for r in plan {
        src.read_raw(r.clone()).unwrap();
    }
    DECODES.load(Ordering::SeqCst) - before
}

#[test]
fn compressed_chunks_are_decompressed_once() {
    register_counting_filter();
    let dir = tempfile::tempdir().unwrap();
    let h5 = dir.path().join("counted.h5");
    // Chunks of 4 projections × 8 rows × all columns: 6 × 5 = 30 chunks.
    write_dx(&h5, [4, 8, NC], Some(COUNTING_FILTER));
    let n_chunks = NA.div_ceil(4) * NR.div_ceil(8);
    // One source at a time: HDF5 shares an open dataset, and its chunk
    // cache, between the handles of a process.
    let open_dx = |cache: Option<usize>| {
        let mut s = tomors_io::hdf5io::DxSource::open(&h5, &OpenOptions::default()).unwrap();
        assert_eq!(s.row_chunk(), Some(8));
        if let Some(b) = cache {
            assert!(s.set_chunk_cache(b).unwrap());
        }
        s
    };
    // The whole scan in one read: each chunk once.
    let whole = slab_plan(0..NR, NR, None);
    assert_eq!(decodes(&open_dx(None), &whole), n_chunks);
    // Slabs of 12 rows cut every 12 rows: chunks across slab boundaries are
    // decompressed again. (HDF5's default chunk cache of 1 MiB would hold
    // this small file's chunks; a cache too small for one chunk is HDF5's
    // behaviour with a detector's chunks, which are larger than 1 MiB.)
    let tiny = open_dx(Some(1));
    let naive: Vec<Range<usize>> = tomors_io::stream::slabs(0..NR, 12).collect();
    let twice = decodes(&tiny, &naive);
    assert!(
        twice > n_chunks,
        "naive slabs decoded {twice} chunks of {n_chunks}"
    );
    // Slabs aligned to the chunks (12 → 8 rows, cut at multiples of 8):
    // each chunk once, even without a cache.
    let aligned = slab_plan(0..NR, 12, tiny.row_chunk());
    assert_eq!(decodes(&tiny, &aligned), n_chunks, "{aligned:?}");
    // Also from a row that is not on a chunk boundary.
    let from3 = slab_plan(3..NR, 12, tiny.row_chunk());
    assert_eq!(decodes(&tiny, &from3), n_chunks, "{from3:?}");
    // Slabs smaller than a chunk (3 rows): each band of chunks is read by
    // three slabs, and decompressed by each without a cache...
    let small = slab_plan(0..NR, 3, tiny.row_chunk());
    assert!(decodes(&tiny, &small) >= 2 * n_chunks);
    let uncached = tiny.read_raw(5..17).unwrap().projections;
    drop(tiny);
    // ...and once with a cache of one band.
    let probe = open_dx(None);
    let band = probe.row_band_cache_bytes().unwrap();
    drop(probe);
    // 6 chunks of 4 × 8 × 20 uint16 (the flats and darks are not chunked).
    assert_eq!(band, 6 * 4 * 8 * NC * 2);
    let cached = open_dx(Some(band));
    assert_eq!(decodes(&cached, &small), n_chunks, "{small:?}");
    // The values are those of the uncached read.
    assert_eq!(cached.read_raw(5..17).unwrap().projections, uncached);
}

// ---- direct reads of contiguous datasets ------------------------------------

/// A DXchange file whose contiguous projections are `data` (any type HDF5
/// converts to f32), with a user block of `userblock` bytes.
fn write_contiguous<T: hdf5::H5Type>(path: &Path, data: &Array3<T>, userblock: u64) {
    let f = hdf5::File::with_options()
        .with_fcpl(|p| p.userblock(userblock))
        .create(path)
        .unwrap();
    let g = f.create_group("exchange").unwrap();
    g.new_dataset_builder()
        .with_data(data)
        .create("data")
        .unwrap();
}

#[test]
fn direct_reads_of_contiguous_projections_give_the_values_hdf5_gives() {
    let dir = tempfile::tempdir().unwrap();
    let p = projections();
    type Writer<'a> = Box<dyn Fn(&Path, u64) + 'a>;
    let cases: Vec<(&str, Writer<'_>)> = vec![
        (
            "u16",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| v as u16), u)),
        ),
        (
            "i16",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| (v - 600.0) as i16), u)),
        ),
        (
            "u8",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| (v / 5.0) as u8), u)),
        ),
        (
            "i8",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| (v / 10.0 - 60.0) as i8), u)),
        ),
        (
            "f32",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| v * 1.37e-3), u)),
        ),
        (
            "f64",
            Box::new(|f: &Path, u| write_contiguous(f, &p.mapv(|v| f64::from(v) * 1.37e-3), u)),
        ),
    ];
    for (name, write) in &cases {
        for userblock in [0, 1024] {
            let f = dir.path().join(format!("{name}-{userblock}.h5"));
            write(&f, userblock);
            let want: Array3<f32> = hdf5::File::open(&f)
                .unwrap()
                .dataset("/exchange/data")
                .unwrap()
                .read_slice::<f32, _, ndarray::Ix3>(s![.., 5..17, ..])
                .unwrap();
            let src = tomors_io::hdf5io::DxSource::open(&f, &OpenOptions::default()).unwrap();
            // float64 → float32 rounds: left to HDF5.
            assert_eq!(src.reads_directly(), *name != "f64", "{name}");
            let got = src.read_raw(5..17).unwrap().projections;
            assert!(
                same_bits(&got, &want),
                "{name}, user block {userblock}: the direct read differs from HDF5's"
            );
        }
    }
}

#[test]
fn a_truncated_contiguous_file_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cut.h5");
    write_contiguous(&f, &projections().mapv(|v| v as u16), 0);
    let src = tomors_io::hdf5io::DxSource::open(&f, &OpenOptions::default()).unwrap();
    // Cut the file after opening: the end of the projections is gone.
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(len - 4000)
        .unwrap();
    let e = src.read_raw(30..NR).unwrap_err().to_string();
    assert!(e.contains("cut.h5") && !e.contains('\n'), "{e}");
}

#[test]
fn direct_writes_of_uncompressed_volumes_read_back_exactly() {
    use tomors_io::writer::{read_hdf5_volume, Hdf5Writer, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    let vol = Array3::from_shape_fn((11, 13, 7), |(z, y, x)| {
        (z * 1000 + y * 10 + x) as f32 * 0.37 - 5.0
    });
    for compression in [
        tomors_io::Compression::None,
        tomors_io::Compression::Deflate(1),
    ] {
        let out = dir.path().join(format!("{compression:?}.h5"));
        let options = WriteOptions {
            compression,
            ..Default::default()
        };
        let mut w =
            Hdf5Writer::create_opts(&out, [11, 13, 7], &VolumeMeta::default(), &options).unwrap();
        assert_eq!(
            w.writes_directly(),
            compression == tomors_io::Compression::None
        );
        for (z0, z1) in [(0, 4), (4, 5), (5, 11)] {
            w.write_slab(z0, vol.slice(s![z0..z1, .., ..])).unwrap();
        }
        Box::new(w).finish().unwrap();
        let back = read_hdf5_volume(&out).unwrap();
        assert!(same_bits(&back, &vol), "{compression:?}");
        let f = hdf5::File::open(&out).unwrap();
        assert_eq!(f.dataset("volume").unwrap().chunk(), Some(vec![1, 13, 7]));
    }
}
