//! The figures of one invocation: a table for people, JSON for tools.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::phase::Summary;
use crate::stats::Latency;

/// The three phases of a scenario (the lp ones are absent when it has no lp job).
#[derive(Clone, Debug)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub mode: String,
    /// "run" (measured on the emulated device) or "predict" (the HWS model in virtual time).
    pub source: String,
    pub time_scale: f64,
    pub hp_alone: Summary,
    pub lp_alone: Option<Summary>,
    /// The shared phase under `mode` (for a scenario without an lp job and a scheduler mode:
    /// the hp job alone under the scheduler).
    pub together: Option<Summary>,
    /// With a scheduler mode: the shared phase run natively in the same invocation.
    pub native_together: Option<Summary>,
}

fn lat(l: &Option<Latency>) -> Value {
    match l {
        Some(l) => json!({
            "count": l.count, "mean_ms": l.mean_ms, "p50_ms": l.p50_ms, "p95_ms": l.p95_ms,
            "p99_ms": l.p99_ms, "max_ms": l.max_ms,
        }),
        None => {
            json!({ "count": 0, "mean_ms": null, "p50_ms": null, "p95_ms": null, "p99_ms": null, "max_ms": null })
        }
    }
}

impl Report {
    /// The hp figures of the shared phase (the alone phase when there is no lp job).
    pub fn hp(&self) -> &Summary {
        self.together.as_ref().unwrap_or(&self.hp_alone)
    }

    pub fn hp_p99_ratio(&self) -> Option<f64> {
        Self::p99_ratio(&self.hp_alone, self.hp())
    }

    fn p99_ratio(alone: &Summary, with: &Summary) -> Option<f64> {
        let a = alone.hp.as_ref()?.p99_ms;
        let b = with.hp.as_ref()?.p99_ms;
        (a > 0.0).then(|| b / a)
    }

    /// The native comparison of a scheduler mode: (hp P99 ratio, lp throughput) of the native
    /// shared phase.
    fn native_json(&self) -> Value {
        let Some(n) = &self.native_together else { return Value::Null };
        let mut hp = lat(&n.hp);
        hp["throughput_per_s"] = json!(n.hp_throughput_per_s);
        let lp_ratio = match (
            self.together.as_ref().and_then(|t| t.lp_throughput_per_s),
            n.lp_throughput_per_s,
        ) {
            (Some(x), Some(nat)) if nat > 0.0 => Some(x / nat),
            _ => None,
        };
        json!({
            "hp": hp,
            "hp_p99_ratio": Self::p99_ratio(&self.hp_alone, n),
            "lp": { "throughput_per_s": n.lp_throughput_per_s },
            "lp_vs_native": lp_ratio,
        })
    }

    pub fn json(&self) -> Value {
        let hp = self.hp();
        let mut hp_v = lat(&hp.hp);
        hp_v["throughput_per_s"] = json!(hp.hp_throughput_per_s);
        hp_v["unit"] = json!(hp.hp_unit);
        let mut hp_alone = lat(&self.hp_alone.hp);
        hp_alone["throughput_per_s"] = json!(self.hp_alone.hp_throughput_per_s);
        let lp = self.together.as_ref();
        let mut phases = json!({ "hp_alone": self.hp_alone });
        if let Some(s) = &self.lp_alone {
            phases["lp_alone"] = json!(s);
        }
        if let Some(s) = &self.together {
            phases["together"] = json!(s);
        }
        if let Some(s) = &self.native_together {
            phases["together_native"] = json!(s);
        }
        json!({
            "scenario": self.scenario,
            "description": self.description,
            "mode": self.mode,
            "source": self.source,
            "time_scale": self.time_scale,
            "window_device_s": self.hp_alone.window_s,
            "hp": hp_v,
            "hp_alone": hp_alone,
            "hp_p99_ratio": self.hp_p99_ratio(),
            "lp": {
                "throughput_per_s": lp.and_then(|s| s.lp_throughput_per_s),
                "unit": lp.and_then(|s| s.lp_unit.clone()),
                "batch": lat(&lp.and_then(|s| s.lp_latency.clone())),
            },
            "lp_alone": {
                "throughput_per_s": self.lp_alone.as_ref().and_then(|s| s.lp_throughput_per_s),
                "batch": lat(&self.lp_alone.as_ref().and_then(|s| s.lp_latency.clone())),
            },
            "native": self.native_json(),
            "phases": phases,
        })
    }

    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario {} ({} mode, {}, time scale {}, window {:.2} device-s per phase)\n  {}",
            self.scenario,
            self.mode,
            if self.source == "run" {
                "measured on the emulated MI308X"
            } else {
                "HWS model, virtual time"
            },
            self.time_scale,
            self.hp_alone.window_s,
            self.description
        );
        let _ = writeln!(
            o,
            "  {:<21} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>14}",
            "", "n", "mean ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "throughput"
        );
        let row = |o: &mut String,
                   name: &str,
                   l: &Option<Latency>,
                   t: Option<f64>,
                   unit: &Option<String>| {
            let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
            let l2 = l.as_ref();
            let _ = writeln!(
                o,
                "  {:<21} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>14}",
                name,
                l2.map_or(0, |l| l.count),
                f(l2.map(|l| l.mean_ms)),
                f(l2.map(|l| l.p50_ms)),
                f(l2.map(|l| l.p95_ms)),
                f(l2.map(|l| l.p99_ms)),
                f(l2.map(|l| l.max_ms)),
                t.map_or("-".into(), |v| format!("{v:.1} {}/s", unit.as_deref().unwrap_or("item")))
            );
        };
        row(
            &mut o,
            "hp alone",
            &self.hp_alone.hp,
            self.hp_alone.hp_throughput_per_s,
            &self.hp_alone.hp_unit,
        );
        let native = self.native_together.is_some();
        let with_mode =
            |what: &str| if native { format!("{what} ({})", self.mode) } else { what.to_string() };
        if let Some(t) = &self.native_together {
            row(&mut o, "hp with lp (native)", &t.hp, t.hp_throughput_per_s, &t.hp_unit);
        }
        if let Some(t) = &self.together {
            let name = if self.lp_alone.is_some() {
                with_mode("hp with lp")
            } else {
                format!("hp alone ({})", self.mode)
            };
            row(&mut o, &name, &t.hp, t.hp_throughput_per_s, &t.hp_unit);
        }
        if let Some(s) = &self.lp_alone {
            row(&mut o, "lp alone", &s.lp_latency, s.lp_throughput_per_s, &s.lp_unit);
        }
        if let Some(t) = &self.native_together {
            row(&mut o, "lp with hp (native)", &t.lp_latency, t.lp_throughput_per_s, &t.lp_unit);
        }
        if let Some(t) = self.together.as_ref().filter(|_| self.lp_alone.is_some()) {
            row(&mut o, &with_mode("lp with hp"), &t.lp_latency, t.lp_throughput_per_s, &t.lp_unit);
        }
        if let Some(n) = &self.native_together {
            if let Some(r) = Self::p99_ratio(&self.hp_alone, n) {
                let _ = writeln!(o, "  hp P99 ratio (with lp / alone), native: {r:.2}x");
            }
        }
        if let Some(r) = self.hp_p99_ratio() {
            if self.lp_alone.is_none() && self.together.is_some() {
                let _ = writeln!(o, "  hp P99 ratio ({} / native): {r:.2}x", self.mode);
            } else {
                let what = if native { format!(", {}", self.mode) } else { String::new() };
                let _ = writeln!(o, "  hp P99 ratio (with lp / alone){what}: {r:.2}x");
            }
        }
        if let Some(x) = self.native_json().get("lp_vs_native").and_then(Value::as_f64) {
            let _ = writeln!(o, "  lp throughput with {} / native: {:.0} %", self.mode, x * 100.0);
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(p99: f64, tput: f64) -> Summary {
        Summary {
            hp: Latency::of(&[p99 / 2.0, p99]),
            hp_throughput_per_s: Some(1.0),
            lp_throughput_per_s: Some(tput),
            lp_latency: None,
            lp_unit: Some("img".into()),
            hp_unit: Some("img".into()),
            window_s: 1.0,
        }
    }

    #[test]
    fn json_has_the_keys() {
        let r = Report {
            scenario: "s".into(),
            description: "d".into(),
            mode: "native".into(),
            source: "run".into(),
            time_scale: 2.0,
            hp_alone: summary(2.0, 0.0),
            lp_alone: Some(summary(0.0, 100.0)),
            together: Some(summary(8.0, 90.0)),
            native_together: None,
        };
        let j = r.json();
        for k in ["mean_ms", "p50_ms", "p95_ms", "p99_ms"] {
            assert!(j["hp"][k].is_number(), "hp.{k}");
        }
        for k in ["mean_ms", "p99_ms"] {
            assert!(j["hp_alone"][k].is_number(), "hp_alone.{k}");
        }
        assert!((j["hp_p99_ratio"].as_f64().unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(j["lp"]["throughput_per_s"].as_f64(), Some(90.0));
        assert_eq!(j["lp_alone"]["throughput_per_s"].as_f64(), Some(100.0));
        assert!(r.table().contains("hp P99 ratio"));
    }

    #[test]
    fn a_scheduler_mode_is_compared_with_native_side_by_side() {
        let r = Report {
            scenario: "s".into(),
            description: "d".into(),
            mode: "xhsa".into(),
            source: "run".into(),
            time_scale: 2.0,
            hp_alone: summary(2.0, 0.0),
            lp_alone: Some(summary(0.0, 100.0)),
            together: Some(summary(3.0, 95.0)),
            native_together: Some(summary(15.0, 100.0)),
        };
        let j = r.json();
        assert!((j["hp_p99_ratio"].as_f64().unwrap() - 1.5).abs() < 1e-9);
        assert!((j["native"]["hp_p99_ratio"].as_f64().unwrap() - 7.5).abs() < 1e-9);
        assert!((j["native"]["lp_vs_native"].as_f64().unwrap() - 0.95).abs() < 1e-9);
        let t = r.table();
        for needle in [
            "hp with lp (native)",
            "hp with lp (xhsa)",
            "lp with hp (native)",
            "lp with hp (xhsa)",
            "native: 7.50x",
            "xhsa: 1.50x",
            "/ native: 95 %",
        ] {
            assert!(t.contains(needle), "{needle:?} in\n{t}");
        }
    }

    #[test]
    fn without_lp_the_hp_figures_are_the_alone_ones() {
        let r = Report {
            scenario: "s".into(),
            description: "d".into(),
            mode: "native".into(),
            source: "predict".into(),
            time_scale: 1.0,
            hp_alone: summary(3.0, 0.0),
            lp_alone: None,
            together: None,
            native_together: None,
        };
        let j = r.json();
        assert_eq!(j["hp"]["p99_ms"], j["hp_alone"]["p99_ms"]);
        assert_eq!(j["hp_p99_ratio"].as_f64(), Some(1.0));
        assert!(j["lp"]["throughput_per_s"].is_null());
    }
}
