#![allow(dead_code)]
//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// The tooth scan (DXchange) of the test data.
pub fn tooth() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tooth.h5")
}
