//! The registry of live temporaries (its own test binary: emptying it
//! closes the process to new outputs, as the interrupt handler does).

use ndarray::Array3;
use tomors_io::output::remove_live_temporaries;
use tomors_io::writer::{create_writer_with, temporaries_of};
use tomors_io::{VolumeFormat, VolumeMeta};

#[test]
fn removing_live_temporaries_clears_every_output_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let outs = [
        (dir.path().join("v.npy"), VolumeFormat::Npy),
        (dir.path().join("v.h5"), VolumeFormat::Hdf5),
        (
            dir.path().join("vd"),
            VolumeFormat::TiffStack(tomors_io::tiffio::TiffDepth::F32),
        ),
    ];
    let mut writers = Vec::new();
    for (p, f) in &outs {
        let mut w = create_writer_with(p, *f, [4, 2, 3], &VolumeMeta::default(), false).unwrap();
        w.write_slab(0, Array3::<f32>::ones((2, 2, 3)).view())
            .unwrap();
        writers.push(w);
    }
    for (p, _) in &outs {
        assert_eq!(temporaries_of(p).len(), 1);
    }
    assert_eq!(remove_live_temporaries(), 3);
    for (p, _) in &outs {
        assert!(temporaries_of(p).is_empty(), "{}", p.display());
    }
    // After an interrupt: no commit, no new output.
    for mut w in writers {
        let _ = w.write_slab(2, Array3::<f32>::ones((2, 2, 3)).view());
        assert!(w.finish().is_err());
    }
    let e = create_writer_with(
        &outs[0].0,
        outs[0].1,
        [1, 1, 1],
        &VolumeMeta::default(),
        false,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("interrupted"), "{e}");
    for (p, _) in &outs {
        assert!(!p.exists());
    }
}
