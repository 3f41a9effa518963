//! The per-block kernel tables of a device operator: those of all
//! projections built once, those of other blocks built on first use and
//! cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tomors_core::CoreError;

use crate::error::{CudaError, Result};

/// Tables `T` per block of projections (any subset of `0..n`, any order).
pub(crate) struct BlockCache<T> {
    n: usize,
    full: Arc<T>,
    map: Mutex<HashMap<Vec<usize>, Arc<T>>>,
}

impl<T> BlockCache<T> {
    /// The cache of an operator of `n` projections, with the tables `full`
    /// of `0..n` in order.
    pub(crate) fn new(n: usize, full: T) -> Self {
        Self {
            n,
            full: Arc::new(full),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The tables of all projections in order.
    pub(crate) fn full(&self) -> &Arc<T> {
        &self.full
    }

    /// The tables of the block `angles`, built by `build` on first use.
    ///
    /// Errors: an empty block, a projection index out of range, those of
    /// `build`.
    pub(crate) fn get(
        &self,
        angles: &[usize],
        build: impl FnOnce(&[usize]) -> Result<T>,
    ) -> Result<Arc<T>> {
        if angles.len() == self.n && angles.iter().enumerate().all(|(i, &a)| i == a) {
            return Ok(self.full.clone());
        }
        if angles.is_empty() {
            return Err(CudaError::Parameter("an empty block of projections".into()));
        }
        if let Some(a) = angles.iter().find(|&&a| a >= self.n) {
            return Err(CoreError::Parameter(format!(
                "projection index {a} out of range (the geometry has {})",
                self.n
            ))
            .into());
        }
        let mut map = self
            .map
            .lock()
            .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
        if let Some(t) = map.get(angles) {
            return Ok(t.clone());
        }
        let t = Arc::new(build(angles)?);
        map.insert(angles.to_vec(), t.clone());
        Ok(t)
    }
}
