//! Safe outputs: every volume and array tomors writes goes through here.
//!
//! The rules (see `docs/reliability.md`):
//!
//! - **Temporary, then rename.** An output is written under a temporary name
//!   unique to the run (`.NAME.XXXXXX.partial`, made by `tempfile`) in the
//!   output's own directory, and moved to its name only when complete. Two
//!   runs writing the same output never share a temporary.
//! - **No clobbering.** The final move never replaces an output that
//!   appeared while the run was writing (`renameat2(RENAME_NOREPLACE)` on
//!   Linux) unless `overwrite` is set; with `overwrite` the replacement is
//!   atomic (`rename` for files, `renameat2(RENAME_EXCHANGE)` for TIFF
//!   directories), so readers see the old or the new output, never a mix.
//! - **Overwrite replaces only what tomors wrote**: a regular file whose
//!   first bytes are of the output's format (`.npy`, HDF5) or empty, or a
//!   directory holding tomors's marker [`MARKER`] and nothing but TIFF
//!   slices and `tomors.txt`. Never another directory, never an input.
//! - **Symbolic links are refused** as outputs (overwrite included): tomors
//!   neither writes through a link nor replaces the link with a file.
//! - **Never onto an input.** An output that resolves (canonical path, or
//!   the same device and inode for hard links) to a file this process read
//!   as input ([`register_input`]; every reader of this crate registers its
//!   files), or a directory that contains one, is refused.
//! - **Interrupts.** Every temporary is in a process-wide registry;
//!   [`install_interrupt_cleanup`] makes SIGINT, SIGTERM and SIGHUP remove
//!   them and exit with 130, 143 and 129.

mod inputs;
mod interrupt;
mod staged;
mod target;

pub use inputs::{register_input, registered_inputs};
pub use interrupt::{install_interrupt_cleanup, remove_live_temporaries};
pub use staged::{write_npy_array, StagedDir, StagedFile};
pub use target::{check_target, is_replaceable, OutputKind, MARKER};
