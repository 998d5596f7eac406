//! Latency statistics and throughput over a measurement window.

use serde::Serialize;

/// Percentile `p` (0-100) of `sorted` by linear interpolation between closest ranks (NumPy's
/// default), so P50 of an even count is the mean of the middle two.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let pos = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

/// Summary of request latencies (milliseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// None without samples.
    pub fn of(samples_ms: &[f64]) -> Option<Latency> {
        if samples_ms.is_empty() {
            return None;
        }
        let mut v = samples_ms.to_vec();
        v.sort_by(f64::total_cmp);
        let pct = |p| percentile(&v, p).expect("non-empty");
        Some(Latency {
            count: v.len(),
            mean_ms: v.iter().sum::<f64>() / v.len() as f64,
            p50_ms: pct(50.0),
            p95_ms: pct(95.0),
            p99_ms: pct(99.0),
            max_ms: *v.last().expect("non-empty"),
        })
    }
}

/// Items per second over `[from, to)`: each batch `(start, end, items)` counts for the part of
/// it inside the window (a batch half inside counts half), so that a window holding only a few
/// long batches is still measured fairly.
pub fn throughput(batches: &[(f64, f64, f64)], from: f64, to: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let items: f64 = batches
        .iter()
        .map(|&(s, e, n)| {
            if e <= s {
                return if (from..to).contains(&e) { n } else { 0.0 };
            }
            let overlap = (e.min(to) - s.max(from)).max(0.0);
            n * overlap / (e - s)
        })
        .sum();
    items / (to - from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert!((percentile(&v, 50.0).unwrap() - 50.5).abs() < 1e-9);
        assert!((percentile(&v, 99.0).unwrap() - 99.01).abs() < 1e-9);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, 101.0), None);
    }

    #[test]
    fn latency_summary() {
        let l = Latency::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(l.count, 4);
        assert_eq!(l.mean_ms, 2.5);
        assert_eq!(l.p50_ms, 2.5);
        assert_eq!(l.max_ms, 4.0);
        assert!(l.p99_ms > 3.9 && l.p99_ms <= 4.0);
        assert!(Latency::of(&[]).is_none());
    }

    #[test]
    fn throughput_counts_the_overlap() {
        // Two batches of 10 items, each 1 s long; the window covers the second half of the
        // first and all of the second.
        let b = [(0.0, 1.0, 10.0), (1.0, 2.0, 10.0)];
        assert!((throughput(&b, 0.5, 2.0) - 10.0).abs() < 1e-9);
        assert_eq!(throughput(&b, 3.0, 4.0), 0.0);
        assert_eq!(throughput(&b, 1.0, 1.0), 0.0);
    }
}
