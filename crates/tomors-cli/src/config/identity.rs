//! The identity of an input file: path, size, modification time and a
//! BLAKE3 hash of its size, first MiB and last MiB (cheap for any file
//! size; catches a replaced or rewritten file, not a change in the middle
//! of a file whose size and ends stay the same). A directory (TIFF stack)
//! is identified by its sorted entry names and sizes.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Bytes hashed at each end of a file.
pub const END_BYTES: u64 = 1 << 20;

/// One input of a run as recorded in its outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputIdentity {
    /// The option naming it: `input`, `angles`, `flats`, `darks`.
    pub role: String,
    /// Absolute path.
    pub path: String,
    /// Bytes (files), or the sum of the entries' bytes (directories).
    pub size: u64,
    /// Modification time, seconds since 1970 (informative: copies change it).
    pub mtime: f64,
    /// BLAKE3 (hex) of the size and the first and last MiB (files), or of
    /// the sorted entry names and sizes (directories).
    pub blake3: String,
}

impl InputIdentity {
    /// The identity of `path` now, under `role`; `None` for a path that is
    /// no file or directory (a glob pattern).
    pub fn of(role: &str, path: &Path) -> Result<Option<Self>> {
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(None);
        };
        let name = || path.display().to_string();
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        let mut h = blake3::Hasher::new();
        let size = if meta.is_dir() {
            let mut entries = Vec::new();
            for e in std::fs::read_dir(path).with_context(name)? {
                let e = e.with_context(name)?;
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                entries.push((e.file_name().to_string_lossy().into_owned(), len));
            }
            entries.sort();
            for (n, len) in &entries {
                h.update(n.as_bytes());
                h.update(&[0]);
                h.update(&len.to_le_bytes());
            }
            entries.iter().map(|e| e.1).sum()
        } else {
            let size = meta.len();
            h.update(&size.to_le_bytes());
            let mut f = std::fs::File::open(path).with_context(name)?;
            let mut buf = Vec::new();
            (&mut f)
                .take(END_BYTES)
                .read_to_end(&mut buf)
                .with_context(name)?;
            h.update(&buf);
            if size > END_BYTES {
                buf.clear();
                f.seek(SeekFrom::Start(
                    size.saturating_sub(END_BYTES).max(END_BYTES),
                ))
                .with_context(name)?;
                f.read_to_end(&mut buf).with_context(name)?;
                h.update(&buf);
            }
            size
        };
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Some(Self {
            role: role.into(),
            path: abs.display().to_string(),
            size,
            mtime,
            blake3: h.finalize().to_hex().to_string(),
        }))
    }

    /// Fails, naming the file and `output`, when the file at the recorded
    /// path is gone or differs in size or hash from the recorded one.
    pub fn verify(&self, output: &Path) -> Result<()> {
        let path = Path::new(&self.path);
        let now = Self::of(&self.role, path)?;
        let Some(now) = now else {
            bail!(
                "{}: the {} recorded in {} is gone",
                self.path,
                self.role,
                output.display()
            );
        };
        if now.size != self.size || now.blake3 != self.blake3 {
            bail!(
                "{}: the {} changed since {} was written (size {} → {}, content hash differs: {}); \
                 the run would not repeat it",
                self.path,
                self.role,
                output.display(),
                self.size,
                now.size,
                now.blake3 != self.blake3
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_sees_changed_ends_and_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        let mut data = vec![7u8; 3 << 20];
        std::fs::write(&p, &data).unwrap();
        let a = InputIdentity::of("input", &p).unwrap().unwrap();
        assert_eq!(a.size, 3 << 20);
        a.verify(Path::new("out.h5")).unwrap();
        // The last byte changes: caught.
        *data.last_mut().unwrap() = 8;
        std::fs::write(&p, &data).unwrap();
        let e = a.verify(Path::new("out.h5")).unwrap_err().to_string();
        assert!(e.contains("changed since out.h5"), "{e}");
        // A longer file: caught.
        data.push(1);
        std::fs::write(&p, &data).unwrap();
        assert!(a.verify(Path::new("out.h5")).is_err());
        std::fs::remove_file(&p).unwrap();
        let e = a.verify(Path::new("out.h5")).unwrap_err().to_string();
        assert!(e.contains("is gone"), "{e}");
        assert!(InputIdentity::of("input", &dir.path().join("*.tif"))
            .unwrap()
            .is_none());
    }
}
