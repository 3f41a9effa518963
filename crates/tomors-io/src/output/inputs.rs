//! The registry of input files read by this process, so that no output is
//! ever written onto one of them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An input file as it was identified when it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InputId {
    /// The canonical path (symbolic links resolved).
    pub canonical: PathBuf,
    /// `(device, inode)` where the platform has them (hard links).
    pub file_id: Option<(u64, u64)>,
}

static INPUTS: Mutex<Vec<InputId>> = Mutex::new(Vec::new());

/// `(device, inode)` of a path (following links), where the platform has them.
pub(crate) fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Records `path` (a file or a directory of inputs) as an input of this
/// process: outputs that resolve to it, or directories that contain it, are
/// refused from then on. A glob pattern registers the directory it lists.
/// Paths that do not exist are ignored (their reader reports them).
pub fn register_input(path: &Path) {
    let s = path.to_string_lossy();
    let path = if s.contains(['*', '?']) {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    } else {
        path
    };
    let Ok(canonical) = path.canonicalize() else {
        return;
    };
    let id = InputId {
        file_id: file_id(&canonical),
        canonical,
    };
    let mut inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    if !inputs.contains(&id) {
        inputs.push(id);
    }
}

/// The canonical paths of the inputs registered so far.
pub fn registered_inputs() -> Vec<PathBuf> {
    INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|i| i.canonical.clone())
        .collect()
}

/// The registered input that `output` would destroy: the same file (path
/// or inode), or an input inside the directory `output`.
pub(crate) fn input_hit(output: &Path) -> Option<PathBuf> {
    let canonical = output.canonicalize().ok()?;
    let id = file_id(&canonical);
    let inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    inputs
        .iter()
        .find(|i| {
            // The inode is compared only while the input still has it (a
            // deleted input's inode may be reused by a new file).
            let same_inode = id.is_some() && i.file_id == id && file_id(&i.canonical) == i.file_id;
            i.canonical == canonical || same_inode || i.canonical.starts_with(&canonical)
        })
        .map(|i| i.canonical.clone())
}
