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
    /// An LLM server's requests: their token times (empty for other workloads).
    pub decoded: Vec<Decoded>,
}

/// The token times of one LLM server request, device seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// When the request was due (it may have queued behind the previous one).
    pub arrival: f64,
    /// The end of its prefill: the first token.
    pub first: f64,
    /// The end of each decode step: one token each.
    pub steps: Vec<f64>,
}

/// TTFT (arrival to first token) of the requests that arrived in `[from, to)`, and TPOT (each
/// decode step's own time: from the previous token to this one) of the steps that began in
/// `[from, to)`, in milliseconds.
pub fn token_latencies(requests: &[Decoded], from: f64, to: f64) -> (Vec<f64>, Vec<f64>) {
    let window = from..to;
    let ttft = requests
        .iter()
        .filter(|r| window.contains(&r.arrival))
        .map(|r| (r.first - r.arrival) * 1e3)
        .collect();
    let tpot = requests
        .iter()
        .flat_map(|r| {
            std::iter::once(r.first).chain(r.steps.iter().copied()).zip(r.steps.iter().copied())
        })
        .filter(|(a, _)| window.contains(a))
        .map(|(a, b)| (b - a) * 1e3)
        .collect();
    (ttft, tpot)
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
    /// An LLM server's (hp) time to first token: arrival to the end of its prefill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Latency>,
    /// An LLM server's (hp) time per output token: each decode step from the previous token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Latency>,
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
                    let decoded: Vec<Decoded> =
                        streams.iter().flat_map(|x| x.decoded.iter().cloned()).collect();
                    let (ttft, tpot) = token_latencies(&decoded, from, to);
                    s.ttft = Latency::of(&ttft);
                    s.tpot = Latency::of(&tpot);
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
            decoded: vec![],
        };
        let lp = StreamResult {
            process: 1,
            stream: 0,
            role: Role::Lp,
            model: "b".into(),
            items: 100,
            unit: "img".into(),
            requests: vec![(0.0, 1.0), (1.0, 2.0)],
            decoded: vec![],
        };
        let r = PhaseResult { streams: vec![hp, lp], seconds: 3.0 };
        let s = r.summarize(1.0, 2.0);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(s.hp.as_ref().unwrap().count, 1);
        assert!((s.hp.unwrap().mean_ms - 4.0).abs() < 1e-6);
        assert!((s.lp_throughput_per_s.unwrap() - 100.0).abs() < 1e-9);
        assert!(json.get("ttft").is_none() && json.get("tpot").is_none(), "{json}");
    }

    fn req(arrival: f64, first: f64, steps: &[f64]) -> Decoded {
        Decoded { arrival, first, steps: steps.to_vec() }
    }

    #[test]
    fn ttft_and_tpot_from_token_times() {
        // Arrived at 1.0, first token at 1.05 (50 ms), steps of 10, 20 and 30 ms; the second
        // request queued 20 ms behind it: arrival 1.08, prefill from 1.10 to 1.15 (TTFT 70 ms).
        let r = [req(1.0, 1.05, &[1.06, 1.08, 1.11]), req(1.08, 1.15, &[1.16])];
        let near = |v: &[f64], want: &[f64]| {
            v.len() == want.len() && v.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9)
        };
        let (ttft, tpot) = token_latencies(&r, 0.0, 2.0);
        assert!(near(&ttft, &[50.0, 70.0]), "{ttft:?}");
        assert!(near(&tpot, &[10.0, 20.0, 30.0, 10.0]), "{tpot:?}");
        // The window takes a request by its arrival and a step by its start (the token before).
        let (ttft, tpot) = token_latencies(&r, 1.07, 1.155);
        assert!(near(&ttft, &[70.0]), "{ttft:?}");
        assert!(near(&tpot, &[30.0, 10.0]), "{tpot:?}");
        let (ttft, tpot) = token_latencies(&[], 0.0, 1.0);
        assert!(ttft.is_empty() && tpot.is_empty());
    }

    #[test]
    fn a_phase_summarises_its_servers_tokens() {
        let hp = StreamResult {
            process: 0,
            stream: 0,
            role: Role::Hp,
            model: "pre".into(),
            items: 1,
            unit: "req".into(),
            requests: (0..100).map(|i| (f64::from(i) * 0.1, f64::from(i) * 0.1 + 0.05)).collect(),
            decoded: (0..100)
                .map(|i| {
                    let a = f64::from(i) * 0.1;
                    // TTFT 20 ms; 4 steps of 5 ms, the last request's last step 15 ms.
                    let last = if i == 99 { 0.015 } else { 0.005 };
                    req(a, a + 0.02, &[a + 0.025, a + 0.03, a + 0.035, a + 0.035 + last])
                })
                .collect(),
        };
        let r = PhaseResult { streams: vec![hp], seconds: 10.0 };
        let s = r.summarize(0.0, 10.0);
        let json = serde_json::to_value(&s).unwrap();
        let (ttft, tpot) = (s.ttft.unwrap(), s.tpot.unwrap());
        assert_eq!((ttft.count, tpot.count), (100, 400));
        assert!((ttft.p50_ms - 20.0).abs() < 1e-6 && (ttft.p99_ms - 20.0).abs() < 1e-6);
        assert!((tpot.p50_ms - 5.0).abs() < 1e-6 && (tpot.max_ms - 15.0).abs() < 1e-6);
        // One slow step in 400: P99 interpolates between the 396th and 397th fastest, both 5 ms.
        assert!((tpot.p99_ms - 5.0).abs() < 1e-6, "{tpot:?}");
        assert_eq!(json["tpot"]["count"], 400);
    }
}
