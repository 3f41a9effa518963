//! Balanced splits of detector rows (slices) over ranks.

use std::ops::Range;

/// The part of `rows` rank `rank` of `size` takes: consecutive, in rank
/// order, sizes differing by at most one (the first `len % size` ranks
/// take one more). Empty when there are more ranks than rows.
pub fn split_rows(rows: &Range<usize>, size: usize, rank: usize) -> Range<usize> {
    let n = rows.len();
    let size = size.max(1);
    let start = rows.start + rank * n / size;
    let end = rows.start + (rank + 1) * n / size;
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_rows_once_and_balance() {
        for n in [1usize, 5, 7, 64, 100] {
            for size in 1..=9 {
                let rows = 3..3 + n;
                let parts: Vec<_> = (0..size).map(|r| split_rows(&rows, size, r)).collect();
                assert_eq!(parts[0].start, 3);
                assert_eq!(parts[size - 1].end, 3 + n);
                for w in parts.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "n {n} size {size}: {lens:?}");
            }
        }
    }
}
