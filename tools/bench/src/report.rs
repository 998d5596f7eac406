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

/// Samples a P99 needs to be reported as one (the table marks those over fewer).
pub const MIN_P99_SAMPLES: usize = 200;

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

/// Prints one row of the table: name, latency figures, throughput and its unit.
type RowFn<'a> = dyn Fn(&mut String, &str, &Option<Latency>, Option<f64>, &Option<String>) + 'a;

fn ttft(s: &Summary) -> &Option<Latency> {
    &s.ttft
}

fn tpot(s: &Summary) -> &Option<Latency> {
    &s.tpot
}

impl Report {
    /// The hp figures of the shared phase (the alone phase when there is no lp job).
    pub fn hp(&self) -> &Summary {
        self.together.as_ref().unwrap_or(&self.hp_alone)
    }

    pub fn hp_p99_ratio(&self) -> Option<f64> {
        Self::p99_ratio(&self.hp_alone, self.hp())
    }

    /// The hp job's P50 with lp over alone: what a scheduler adds to the typical request, which
    /// a host's tail in the alone phase does not hide.
    pub fn hp_p50_ratio(&self) -> Option<f64> {
        Self::p50_ratio(&self.hp_alone, self.hp())
    }

    fn p99_ratio(alone: &Summary, with: &Summary) -> Option<f64> {
        Self::hp_ratio(alone, with, |l| l.p99_ms)
    }

    fn p50_ratio(alone: &Summary, with: &Summary) -> Option<f64> {
        Self::hp_ratio(alone, with, |l| l.p50_ms)
    }

    fn hp_ratio(alone: &Summary, with: &Summary, at: fn(&Latency) -> f64) -> Option<f64> {
        let a = at(alone.hp.as_ref()?);
        let b = at(with.hp.as_ref()?);
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
            "hp_p50_ratio": Self::p50_ratio(&self.hp_alone, n),
            "lp": { "throughput_per_s": n.lp_throughput_per_s },
            "lp_vs_native": lp_ratio,
        })
    }

    /// Whether the hp job is an LLM server (its phases have TTFT and TPOT figures).
    pub fn is_llm(&self) -> bool {
        self.hp_alone.ttft.is_some() || self.hp_alone.tpot.is_some()
    }

    /// `(P50, P99)` of `with` over those of `alone`.
    fn ratios(alone: &Option<Latency>, with: &Option<Latency>) -> (Option<f64>, Option<f64>) {
        let r = |a: f64, b: f64| (a > 0.0).then(|| b / a);
        match (alone, with) {
            (Some(a), Some(w)) => (r(a.p50_ms, w.p50_ms), r(a.p99_ms, w.p99_ms)),
            _ => (None, None),
        }
    }

    /// The lp throughput of a shared phase over that of the lp job alone.
    fn lp_vs_alone(&self, with: Option<&Summary>) -> Option<f64> {
        let alone = self.lp_alone.as_ref()?.lp_throughput_per_s?;
        let with = with?.lp_throughput_per_s?;
        (alone > 0.0).then(|| with / alone)
    }

    /// An LLM server's figures (added to the JSON only for one): TTFT and TPOT alone, in the
    /// shared phase under the mode, natively together, and their P50/P99 ratios to alone.
    fn llm_json(&self) -> Value {
        let hp = self.hp();
        let one = |get: fn(&Summary) -> &Option<Latency>| {
            let (p50, p99) = Self::ratios(get(&self.hp_alone), get(hp));
            let mut v = json!({
                "alone": lat(get(&self.hp_alone)),
                "with_lp": lat(get(hp)),
                "p50_ratio": p50,
                "p99_ratio": p99,
            });
            if let Some(n) = &self.native_together {
                let (p50, p99) = Self::ratios(get(&self.hp_alone), get(n));
                v["native"] = json!({ "with_lp": lat(get(n)), "p50_ratio": p50, "p99_ratio": p99 });
            }
            v
        };
        json!({
            "ttft": one(ttft),
            "tpot": one(tpot),
            "tpot_definition": "each decode step's own time: from the previous token to this one",
            "lp_vs_alone": self.lp_vs_alone(self.together.as_ref()),
            "native_lp_vs_alone": self.lp_vs_alone(self.native_together.as_ref()),
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
        let mut v = json!({
            "scenario": self.scenario,
            "description": self.description,
            "mode": self.mode,
            "source": self.source,
            "time_scale": self.time_scale,
            "window_device_s": self.hp_alone.window_s,
            "hp": hp_v,
            "hp_alone": hp_alone,
            "hp_p99_ratio": self.hp_p99_ratio(),
            "hp_p50_ratio": self.hp_p50_ratio(),
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
        });
        if self.is_llm() {
            v["llm"] = self.llm_json();
        }
        v
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
        // A P99 over fewer than MIN_P99_SAMPLES is marked: it is the tail of a few samples.
        let few = std::cell::Cell::new(false);
        let row = |o: &mut String,
                   name: &str,
                   l: &Option<Latency>,
                   t: Option<f64>,
                   unit: &Option<String>| {
            let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
            let l2 = l.as_ref();
            let mark = l2.is_some_and(|l| l.count > 0 && l.count < MIN_P99_SAMPLES);
            few.set(few.get() || mark);
            let p99 = f(l2.map(|l| l.p99_ms)) + if mark { "*" } else { "" };
            let _ = writeln!(
                o,
                "  {:<21} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>14}",
                name,
                l2.map_or(0, |l| l.count),
                f(l2.map(|l| l.mean_ms)),
                f(l2.map(|l| l.p50_ms)),
                f(l2.map(|l| l.p95_ms)),
                p99,
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
        // Without an lp job the shared phase is the hp job alone under the mode: its ratios
        // are to the native alone phase.
        let mode_alone = self.lp_alone.is_none() && self.together.is_some();
        if let Some(r) = self.hp_p99_ratio() {
            if mode_alone {
                let _ = writeln!(o, "  hp P99 ratio ({} / native): {r:.2}x", self.mode);
            } else {
                let what = if native { format!(", {}", self.mode) } else { String::new() };
                let _ = writeln!(o, "  hp P99 ratio (with lp / alone){what}: {r:.2}x");
            }
        }
        if let (Some(r), false) = (self.hp_p50_ratio(), self.is_llm()) {
            let native_r =
                self.native_together.as_ref().and_then(|n| Self::p50_ratio(&self.hp_alone, n));
            let mine = format!("{r:.2}x");
            let figures = match native_r {
                Some(n) => format!("native {n:.2}x, {} {mine}", self.mode),
                None => mine,
            };
            let what = if mode_alone {
                format!("{} / native", self.mode)
            } else {
                "with lp / alone".to_string()
            };
            let _ = writeln!(o, "  hp P50 ratio ({what}): {figures}");
        }
        if let Some(x) = self.native_json().get("lp_vs_native").and_then(Value::as_f64) {
            let _ = writeln!(o, "  lp throughput with {} / native: {:.0} %", self.mode, x * 100.0);
        }
        if self.is_llm() {
            self.llm_table(&mut o, &row);
        }
        if few.get() {
            let _ = writeln!(
                o,
                "  * a P99 over fewer than {MIN_P99_SAMPLES} samples: the tail of a few, not a P99 to compare (run longer)"
            );
        }
        o
    }

    /// The LLM server's rows: TTFT and TPOT per phase, their ratios to alone, and the lp
    /// throughput against the lp job alone.
    fn llm_table(&self, o: &mut String, row: &RowFn<'_>) {
        let mode = &self.mode;
        let native = self.native_together.is_some();
        let shared = self.together.as_ref().filter(|_| self.lp_alone.is_some());
        for (what, get) in [("TTFT", ttft as fn(&Summary) -> &Option<Latency>), ("TPOT", tpot)] {
            row(o, &format!("{what} alone"), get(&self.hp_alone), None, &None);
            if let Some(n) = &self.native_together {
                row(o, &format!("{what} with lp (native)"), get(n), None, &None);
            }
            if let Some(t) = shared {
                let name = if native {
                    format!("{what} with lp ({mode})")
                } else {
                    format!("{what} with lp")
                };
                row(o, &name, get(t), None, &None);
            } else if let Some(t) = &self.together {
                row(o, &format!("{what} alone ({mode})"), get(t), None, &None);
            }
        }
        let f = |(p50, p99): (Option<f64>, Option<f64>)| {
            let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
            format!("{} / {}", x(p50), x(p99))
        };
        for (what, get) in [("TTFT", ttft as fn(&Summary) -> &Option<Latency>), ("TPOT", tpot)] {
            let mut parts = Vec::new();
            if let Some(n) = &self.native_together {
                parts.push(format!("native {}", f(Self::ratios(get(&self.hp_alone), get(n)))));
            }
            if let Some(t) = &self.together {
                parts.push(format!("{mode} {}", f(Self::ratios(get(&self.hp_alone), get(t)))));
            }
            let how =
                if self.lp_alone.is_some() { "with lp / alone" } else { "mode / native alone" };
            if !parts.is_empty() {
                let _ = writeln!(o, "  {what} P50 / P99 ({how}): {}", parts.join(", "));
            }
        }
        let pct = |x: Option<f64>| x.map(|x| format!("{:.0} %", x * 100.0));
        let mut parts = Vec::new();
        if let Some(x) = pct(self.lp_vs_alone(self.native_together.as_ref())) {
            parts.push(format!("native {x}"));
        }
        if let Some(x) = pct(self.lp_vs_alone(shared)) {
            parts.push(format!("{mode} {x}"));
        }
        if !parts.is_empty() {
            let _ = writeln!(o, "  lp throughput with hp / lp alone: {}", parts.join(", "));
        }
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
            ttft: None,
            tpot: None,
        }
    }

    fn llm(ttft_p99: f64, tpot_p99: f64, tput: f64) -> Summary {
        Summary {
            ttft: Latency::of(&[ttft_p99 / 2.0, ttft_p99]),
            tpot: Latency::of(&[tpot_p99 / 2.0, tpot_p99]),
            ..summary(ttft_p99 * 4.0, tput)
        }
    }

    #[test]
    fn an_llm_server_gets_ttft_and_tpot_rows_and_ratios() {
        let r = Report {
            scenario: "llm".into(),
            description: "d".into(),
            mode: "xhsa".into(),
            source: "run".into(),
            time_scale: 20.0,
            hp_alone: llm(40.0, 6.0, 0.0),
            lp_alone: Some(summary(0.0, 1000.0)),
            together: Some(llm(44.0, 6.6, 850.0)),
            native_together: Some(llm(160.0, 30.0, 1000.0)),
        };
        let j = r.json();
        let near = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
        assert!(near(&j["llm"]["ttft"]["p99_ratio"], 1.1), "{j}");
        assert!(near(&j["llm"]["tpot"]["p99_ratio"], 1.1), "{j}");
        assert!(near(&j["llm"]["tpot"]["native"]["p99_ratio"], 5.0), "{j}");
        assert!(near(&j["llm"]["ttft"]["native"]["p50_ratio"], 4.0), "{j}");
        assert!(near(&j["llm"]["lp_vs_alone"], 0.85), "{j}");
        assert!(near(&j["native"]["lp_vs_native"], 0.85), "{j}");
        assert_eq!(j["phases"]["hp_alone"]["tpot"]["count"], 2);
        let t = r.table();
        for needle in [
            "TTFT alone",
            "TTFT with lp (native)",
            "TTFT with lp (xhsa)",
            "TPOT alone",
            "TPOT with lp (xhsa)",
            "TTFT P50 / P99 (with lp / alone): native 4.00x / 4.00x, xhsa 1.10x / 1.10x",
            "TPOT P50 / P99 (with lp / alone): native 5.00x / 5.00x, xhsa 1.10x / 1.10x",
            "lp throughput with hp / lp alone: native 100 %, xhsa 85 %",
            "lp throughput with xhsa / native: 85 %",
        ] {
            assert!(t.contains(needle), "{needle:?} in\n{t}");
        }
    }

    /// A native run of a scenario without LLM figures: hp 2 ms alone, 8 ms with lp.
    fn native_report() -> Report {
        Report {
            scenario: "s".into(),
            description: "d".into(),
            mode: "native".into(),
            source: "run".into(),
            time_scale: 2.0,
            hp_alone: summary(2.0, 0.0),
            lp_alone: Some(summary(0.0, 100.0)),
            together: Some(summary(8.0, 90.0)),
            native_together: None,
        }
    }

    #[test]
    fn a_p99_over_fewer_than_200_samples_is_marked() {
        let mut r = native_report();
        let t = r.table();
        assert!(t.contains("1.99*") && t.contains("fewer than 200 samples"), "{t}");
        let many: Vec<f64> = (0..200).map(|i| 1.0 + f64::from(i) / 100.0).collect();
        for s in [&mut r.hp_alone, r.together.as_mut().unwrap()] {
            s.hp = Latency::of(&many);
        }
        r.lp_alone.as_mut().unwrap().lp_latency = Latency::of(&many);
        r.together.as_mut().unwrap().lp_latency = Latency::of(&many);
        let t = r.table();
        assert!(!t.contains('*'), "200 samples make a P99\n{t}");
    }

    #[test]
    fn other_scenarios_get_no_llm_figures() {
        let r = native_report();
        let j = r.json();
        assert!(j.get("llm").is_none());
        assert!(j["phases"]["hp_alone"].get("ttft").is_none());
        assert!(!r.table().contains("TTFT") && !r.table().contains("TPOT"));
    }

    #[test]
    fn json_has_the_keys() {
        let r = native_report();
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
        // P50s: alone 1.5, natively together 11.25, with the scheduler 2.25.
        assert!((j["hp_p50_ratio"].as_f64().unwrap() - 1.5).abs() < 1e-9);
        assert!((j["native"]["hp_p50_ratio"].as_f64().unwrap() - 7.5).abs() < 1e-9);
        let t = r.table();
        for needle in [
            "hp P50 ratio (with lp / alone): native 7.50x, xhsa 1.50x",
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
