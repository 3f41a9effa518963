//! A process-wide count of the bytes copied between host and device memory
//! through [`DeviceBuffer`](super::DeviceBuffer) (uploads and downloads of
//! data; constant-memory parameters are not counted). Callers use it to
//! check that a device-resident computation made no host round trip of
//! its data.

use std::sync::atomic::{AtomicU64, Ordering};

static BYTES: AtomicU64 = AtomicU64::new(0);

/// Adds `bytes` to the count.
pub(crate) fn count(bytes: usize) {
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Bytes copied host → device or device → host through device buffers
/// since the process started.
pub fn transfer_bytes() -> u64 {
    BYTES.load(Ordering::Relaxed)
}
