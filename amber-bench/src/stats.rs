//! Order statistics of a sample: median and p99 (nearest rank), min, max. Pure.

use std::time::Duration;

/// Summary of one measured quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub n: usize,
    pub median: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for an empty sample. NaNs are dropped.
    pub(crate) fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            n,
            median,
            p99: percentile_sorted(&v, 99.0),
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Nearest-rank percentile of a sorted, non-empty sample: the smallest value with at least
/// `p`% of the sample at or below it.
pub(crate) fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    // Nearest rank: ceil(p/100 * n), 1-based; the float is at most n, so the cast is exact.
    let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as usize;
    sorted[rank.min(n) - 1]
}

/// Milliseconds as a float.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (s.median, s.p99, s.min, s.max, s.n),
            (2.0, 3.0, 1.0, 3.0, 3)
        );
        let even = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(even.median, 2.5);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(Summary::of(&hundred).unwrap().p99, 99.0);
        let thousand: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(Summary::of(&thousand).unwrap().p99, 990.0);
        assert!(Summary::of(&[]).is_none());
        assert_eq!(Summary::of(&[5.0]).unwrap().p99, 5.0);
    }
}
