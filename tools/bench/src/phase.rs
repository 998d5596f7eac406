//! What one phase (HP alone, LP alone, both together) produced, and its summary over the
//! measurement window. Times are device seconds from the phase's start.

use serde::Serialize;

use crate::scenario::Role;
use crate::stats::{self, Latency};

/// The requests of one stream: `(submitted, completed)` in device seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamResult {
    pub process: usize,
    pub stream: usize,
    pub role: Role,
    pub model: String,
    pub items: u32,
    pub unit: String,
    pub requests: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PhaseResult {
    pub streams: Vec<StreamResult>,
    /// Device seconds the phase ran (its window ends there).
    pub seconds: f64,
}

/// A phase's figures over `[from, to)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Latencies of the hp streams' requests submitted inside the window.
    pub hp: Option<Latency>,
    /// Items per second of the hp streams (window).
    pub hp_throughput_per_s: Option<f64>,
    /// Items per second of the lp streams together (window).
    pub lp_throughput_per_s: Option<f64>,
    /// Latencies of the lp streams' requests (batches) inside the window.
    pub lp_latency: Option<Latency>,
    pub lp_unit: Option<String>,
    pub hp_unit: Option<String>,
    pub window_s: f64,
}

impl PhaseResult {
    pub fn summarize(&self, from: f64, to: f64) -> Summary {
        let mut s = Summary { window_s: to - from, ..Default::default() };
        for role in [Role::Hp, Role::Lp] {
            let streams: Vec<&StreamResult> =
                self.streams.iter().filter(|x| x.role == role).collect();
            if streams.is_empty() {
                continue;
            }
            let lat: Vec<f64> = streams
                .iter()
                .flat_map(|x| x.requests.iter())
                .filter(|(a, _)| (from..to).contains(a))
                .map(|(a, b)| (b - a) * 1e3)
                .collect();
            let tput: f64 = streams
                .iter()
                .map(|x| {
                    let b: Vec<(f64, f64, f64)> =
                        x.requests.iter().map(|&(a, e)| (a, e, f64::from(x.items))).collect();
                    stats::throughput(&b, from, to)
                })
                .sum();
            let unit = Some(streams[0].unit.clone());
            match role {
                Role::Hp => {
                    s.hp = Latency::of(&lat);
                    s.hp_throughput_per_s = Some(tput);
                    s.hp_unit = unit;
                }
                Role::Lp => {
                    s.lp_latency = Latency::of(&lat);
                    s.lp_throughput_per_s = Some(tput);
                    s.lp_unit = unit;
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_selects_requests_and_prorates_batches() {
        let hp = StreamResult {
            process: 0,
            stream: 0,
            role: Role::Hp,
            model: "a".into(),
            items: 8,
            unit: "img".into(),
            requests: vec![(0.1, 0.103), (1.1, 1.104), (2.5, 2.6)],
        };
        let lp = StreamResult {
            process: 1,
            stream: 0,
            role: Role::Lp,
            model: "b".into(),
            items: 100,
            unit: "img".into(),
            requests: vec![(0.0, 1.0), (1.0, 2.0)],
        };
        let r = PhaseResult { streams: vec![hp, lp], seconds: 3.0 };
        let s = r.summarize(1.0, 2.0);
        assert_eq!(s.hp.as_ref().unwrap().count, 1);
        assert!((s.hp.unwrap().mean_ms - 4.0).abs() < 1e-6);
        assert!((s.lp_throughput_per_s.unwrap() - 100.0).abs() < 1e-9);
    }
}
