//! The rule for non-finite input values, the same for every reader: a NaN
//! or ±inf in the projections, flats or darks of a slab is an error naming
//! the file and the position (frame, detector row, column). tomors never
//! guesses a value for them (a clamp to a number would put a streak into the
//! reconstruction).

use std::path::Path;

use ndarray::{Array3, Zip};

use crate::error::{format_err, Result};
use crate::source::RawSlab;

/// The first non-finite value of `a` (index order), if any.
pub fn first_non_finite(a: &Array3<f32>) -> Option<((usize, usize, usize), f32)> {
    let all_finite = match a.as_slice_memory_order() {
        Some(s) => {
            use rayon::prelude::*;
            s.par_iter().all(|v| v.is_finite())
        }
        None => a.iter().all(|v| v.is_finite()),
    };
    if all_finite {
        return None;
    }
    let mut found = None;
    Zip::indexed(a).for_each(|i, &v| {
        if found.is_none() && !v.is_finite() {
            found = Some((i, v));
        }
    });
    found
}

/// Checks a raw slab read from `path`: every projection, flat and dark
/// value must be finite.
pub fn check_slab_finite(path: &Path, slab: &RawSlab) -> Result<()> {
    let r0 = slab.rows.start;
    if let Some(((a, r, c), v)) = first_non_finite(&slab.projections) {
        return Err(format_err(
            path,
            format!(
                "non-finite value {v} in projection {a}, detector row {}, column {c}; \
                 tomors does not guess values for NaN or inf (mask or repair the data)",
                r0 + r
            ),
        ));
    }
    for (kind, groups) in [("flat", &slab.flats), ("dark", &slab.darks)] {
        for (g, group) in groups.iter().enumerate() {
            if let Some(((f, r, c), v)) = first_non_finite(&group.frames) {
                return Err(format_err(
                    path,
                    format!(
                        "non-finite value {v} in {kind} frame {f} (group {g}), detector row {}, column {c}",
                        r0 + r
                    ),
                ));
            }
        }
    }
    Ok(())
}
