//! Outputs under a temporary name: [`StagedFile`] and [`StagedDir`] are
//! created beside their target with a name unique to the run, registered in
//! the process-wide list of live temporaries (removed on interrupts, see
//! [`super::install_interrupt_cleanup`]), and moved to the target by
//! `commit`; dropped uncommitted, they are removed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::{TempDir, TempPath};

use super::target::{check_target, refused, OutputKind, MARKER};
use crate::error::{os_err, Result};

/// The live temporaries of this process.
pub(super) struct Live {
    next: u64,
    pub(super) entries: Vec<(u64, PathBuf)>,
    /// Set by the interrupt handler: no new temporaries, no commits.
    pub(super) closing: bool,
}

pub(super) static LIVE: Mutex<Live> = Mutex::new(Live {
    next: 0,
    entries: Vec::new(),
    closing: false,
});

pub(super) fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(target: &Path, temp: &Path) -> Result<u64> {
    let mut l = live();
    if l.closing {
        return Err(refused(target, "interrupted"));
    }
    l.next += 1;
    let id = l.next;
    l.entries.push((id, temp.to_path_buf()));
    Ok(id)
}

fn unregister(l: &mut Live, id: u64) {
    l.entries.retain(|e| e.0 != id);
}

/// The directory of `path` (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates the temporary for `target` with `make` on a builder naming it
/// `.NAME.XXXXXX.partial`.
/// The permissions are those of an ordinary new file or directory (0666 or
/// 0777 less the umask), not tempfile's private 0600.
fn make_temp<T>(
    target: &Path,
    dir_mode: bool,
    make: impl FnOnce(&tempfile::Builder<'_, '_>) -> std::io::Result<T>,
) -> Result<T> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let prefix = format!(".{name}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(".partial");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if dir_mode { 0o777 } else { 0o666 };
        b.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = dir_mode;
    let dir = parent_dir(target);
    make(&b).map_err(|e| os_err(&dir, e))
}

fn appeared(target: &Path) -> crate::IoError {
    refused(
        target,
        "appeared while this run was writing it; not replaced (use --overwrite to replace it)",
    )
}

/// A file output being written under a temporary name.
#[derive(Debug)]
pub struct StagedFile {
    target: PathBuf,
    kind: OutputKind,
    overwrite: bool,
    temp: Option<TempPath>,
    id: u64,
}

impl StagedFile {
    /// Checks `target` ([`check_target`]) and creates its temporary beside
    /// it; returns the stage and the temporary file, open for writing.
    pub fn create(target: &Path, kind: OutputKind, overwrite: bool) -> Result<(Self, File)> {
        check_target(target, kind, overwrite)?;
        let dir = parent_dir(target);
        let named = make_temp(target, false, |b| b.tempfile_in(&dir))?;
        let (file, temp) = named.into_parts();
        let id = register(target, &temp)?;
        Ok((
            Self {
                target: target.to_path_buf(),
                kind,
                overwrite,
                temp: Some(temp),
                id,
            },
            file,
        ))
    }

    /// The temporary file.
    pub fn path(&self) -> &Path {
        self.temp.as_deref().unwrap_or(Path::new(""))
    }

    /// The final name.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Moves the temporary to the target: never over an output that appeared
    /// meanwhile unless `overwrite`, and then only over a
    /// [replaceable](super::is_replaceable) one, atomically. On failure the
    /// temporary is removed.
    pub fn commit(mut self) -> Result<()> {
        let temp = self.temp.take().expect("a stage commits once");
        let mut l = live();
        unregister(&mut l, self.id);
        if l.closing {
            return Err(refused(&self.target, "interrupted"));
        }
        let result = if self.overwrite {
            check_target(&self.target, self.kind, true).and_then(|()| {
                temp.persist(&self.target)
                    .map_err(|e| os_err(&self.target, e.error))
            })
        } else {
            temp.persist_noclobber(&self.target).map_err(|e| {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    appeared(&self.target)
                } else {
                    os_err(&self.target, e.error)
                }
            })
        };
        drop(l);
        result
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if self.temp.is_some() {
            unregister(&mut live(), self.id);
        }
    }
}

/// A TIFF-stack directory being written under a temporary name; it holds
/// the [`MARKER`] from the start.
#[derive(Debug)]
pub struct StagedDir {
    target: PathBuf,
    overwrite: bool,
    temp: Option<TempDir>,
    id: u64,
}

impl StagedDir {
    /// Checks `target` ([`check_target`]) and creates its temporary
    /// directory beside it, with the marker inside.
    pub fn create(target: &Path, overwrite: bool) -> Result<Self> {
        check_target(target, OutputKind::TiffDir, overwrite)?;
        let dir = parent_dir(target);
        let temp = make_temp(target, true, |b| b.tempdir_in(&dir))?;
        let id = register(target, temp.path())?;
        let this = Self {
            target: target.to_path_buf(),
            overwrite,
            temp: Some(temp),
            id,
        };
        let marker = this.path().join(MARKER);
        std::fs::write(
            &marker,
            "written by tomors; `--overwrite` may replace this directory\n",
        )
        .map_err(|e| os_err(&marker, e))?;
        Ok(this)
    }

    /// The temporary directory.
    pub fn path(&self) -> &Path {
        self.temp.as_ref().map_or(Path::new(""), |t| t.path())
    }

    /// The final name.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Moves the temporary directory to the target, under the same rules as
    /// [`StagedFile::commit`]; an empty directory at the target is replaced
    /// without `overwrite`.
    pub fn commit(mut self) -> Result<()> {
        let temp = self.temp.take().expect("a stage commits once");
        let mut l = live();
        unregister(&mut l, self.id);
        if l.closing {
            return Err(refused(&self.target, "interrupted"));
        }
        let result = self.swap_in(temp.path());
        drop(l);
        // After an exchange the temporary name holds the old output, after
        // a failure the new one: dropping `temp` removes either; after a
        // plain rename nothing is left there.
        drop(temp);
        result
    }

    fn swap_in(&self, tmp: &Path) -> Result<()> {
        let target = &self.target;
        match std::fs::symlink_metadata(target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => rename_noreplace(tmp, target),
            Err(e) => Err(os_err(target, e)),
            Ok(m) => {
                if m.is_dir() && !m.file_type().is_symlink() && dir_is_empty(target) {
                    match std::fs::remove_dir(target) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(_) => return Err(appeared(target)),
                    }
                    return rename_noreplace(tmp, target);
                }
                if !self.overwrite {
                    return Err(appeared(target));
                }
                check_target(target, OutputKind::TiffDir, true)?;
                exchange(tmp, target)
            }
        }
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if self.temp.is_some() {
            unregister(&mut live(), self.id);
        }
    }
}

fn dir_is_empty(p: &Path) -> bool {
    std::fs::read_dir(p)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}

/// Renames `from` to `to`, failing when `to` exists.
fn rename_noreplace(from: &Path, to: &Path) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::EXIST || e == rustix::io::Errno::NOTEMPTY => {
                Err(appeared(to))
            }
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
                // File systems without RENAME_NOREPLACE.
                if std::fs::symlink_metadata(to).is_ok() {
                    return Err(appeared(to));
                }
                std::fs::rename(from, to).map_err(|e| os_err(to, e))
            }
            Err(e) => Err(os_err(to, e.into())),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        if std::fs::symlink_metadata(to).is_ok() {
            return Err(appeared(to));
        }
        std::fs::rename(from, to).map_err(|e| os_err(to, e))
    }
}

/// Swaps the directories `a` and `b` atomically where the platform can.
fn exchange(a: &Path, b: &Path) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {}
            Err(e) => return Err(os_err(b, e.into())),
        }
    }
    // Fallback: move the old output aside, the new one in, and the old one
    // to `a` (removed with the stage).
    let aside = a.with_extension("old");
    std::fs::rename(b, &aside).map_err(|e| os_err(b, e))?;
    if let Err(e) = std::fs::rename(a, b) {
        let _ = std::fs::rename(&aside, b);
        return Err(os_err(b, e));
    }
    std::fs::rename(&aside, a).map_err(|e| os_err(a, e))
}

/// Writes any array `ndarray-npy` can serialise as a `.npy` file at `path`
/// through a [`StagedFile`] (phantoms, angles).
pub fn write_npy_array<A, D>(
    path: &Path,
    array: &ndarray::ArrayBase<A, D>,
    overwrite: bool,
) -> Result<()>
where
    A: ndarray::Data,
    A::Elem: ndarray_npy::WritableElement,
    D: ndarray::Dimension,
{
    use ndarray_npy::WriteNpyExt;
    let (stage, file) = StagedFile::create(path, OutputKind::NPY, overwrite)?;
    let tmp = stage.path().to_path_buf();
    let mut w = std::io::BufWriter::new(file);
    array
        .write_npy(&mut w)
        .map_err(|e| crate::error::format_err(&tmp, format!("cannot write .npy: {e}")))?;
    let f = w.into_inner().map_err(|e| os_err(&tmp, e.into_error()))?;
    f.sync_all().map_err(|e| os_err(&tmp, e))?;
    drop(f);
    stage.commit()
}
