//! The conformance table: per suite, passed / failed / timed out per mode, the tests that fail
//! natively (emulator defects) and those that pass natively but not under libxhsa (libxhsa
//! defects).

use std::fmt::Write;

use crate::run::{End, Mode, Outcome};
use crate::suites::Suite;

/// A suite's results in every mode that ran.
pub struct SuiteResult<'a> {
    pub suite: &'a Suite,
    pub outcomes: Vec<Outcome>,
}

impl SuiteResult<'_> {
    fn native(&self) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.mode == Mode::Native)
    }

    /// Tests that passed natively and failed (or crashed, or timed out) in `o`.
    pub fn libxhsa_regressions(&self, o: &Outcome) -> Vec<String> {
        let Some(n) = self.native() else { return Vec::new() };
        let mut bad = o.failures();
        bad.extend(o.timed_out().map(str::to_string));
        bad.retain(|t| n.report.passed.contains(t));
        bad
    }
}

fn end_text(o: &Outcome) -> String {
    match o.end {
        End::Exited(0) => "exit 0".into(),
        End::Exited(c) => format!("exit {c}"),
        End::Signalled(s) => format!("signal {s}"),
        End::TimedOut => "time limit".into(),
    }
}

fn names(v: &[String], max: usize) -> String {
    if v.is_empty() {
        return "none".into();
    }
    let mut s = v.iter().take(max).cloned().collect::<Vec<_>>().join(", ");
    if v.len() > max {
        write!(s, " and {} more", v.len() - max).unwrap();
    }
    s
}

/// The plain-text table of one suite.
pub fn text(r: &SuiteResult) -> String {
    let s = r.suite;
    let mut out = String::new();
    let selection = match s.format {
        crate::suites::Format::Gtest => format!("--gtest_filter='{}'", s.filter),
        crate::suites::Format::Thrust => {
            format!("{} --verbose, the listed tests '{}' selects", crate::thrust::SIZES, s.filter)
        }
        crate::suites::Format::Sample { per_group } => {
            format!("at most {per_group} a test suite of the listed tests '{}' selects", s.filter)
        }
    };
    writeln!(out, "{}: {} {selection} (limit {} s a run)", s.name, s.binary, s.timeout.as_secs())
        .unwrap();
    writeln!(
        out,
        "  {:<14} {:>6} {:>7} {:>7} {:>10} {:>8} {:>8} {:>9}  end",
        "mode", "tests", "passed", "failed", "timed out", "not run", "skipped", "time"
    )
    .unwrap();
    for o in &r.outcomes {
        let rep = &o.report;
        let announced = rep.announced.map_or("?".into(), |n| n.to_string());
        let mut end = end_text(o);
        if o.mode != Mode::Native && !o.libxhsa_ran {
            end.push_str(", libxhsa did not report");
        }
        writeln!(
            out,
            "  {:<14} {:>6} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8.1}s  {end}",
            o.mode.label(),
            announced,
            rep.passed.len(),
            o.failures().len(),
            usize::from(o.timed_out().is_some()),
            rep.not_run(),
            rep.skipped.len(),
            o.elapsed.as_secs_f64(),
        )
        .unwrap();
    }
    for o in &r.outcomes {
        if let Some(s) = &o.isa {
            writeln!(
                out,
                "  interpreter ({}): {} dispatch parts, {:.1} M wave-instructions, {:.1} s of part time: {:.1} M wave-instructions/s per part-second, {:.1} M/s per interpreter CPU second ({:.1} s), {:.1} M/s over the run's {:.0} s",
                o.mode.label(),
                s.parts,
                s.instructions as f64 / 1e6,
                s.part_us as f64 / 1e6,
                s.rate() / 1e6,
                s.cpu_rate() / 1e6,
                s.cpu_us as f64 / 1e6,
                s.instructions as f64 / o.elapsed.as_secs_f64().max(1e-9) / 1e6,
                o.elapsed.as_secs_f64()
            )
            .unwrap();
            for (k, n, us) in s.top(3) {
                // Mangled names share long prefixes: the start and the end.
                let c: Vec<char> = k.chars().collect();
                let k: String = if c.len() > 72 {
                    format!(
                        "{}...{}",
                        c[..24].iter().collect::<String>(),
                        c[c.len() - 45..].iter().collect::<String>()
                    )
                } else {
                    k.to_string()
                };
                writeln!(
                    out,
                    "    {k}: {:.1} M in {:.2} s ({:.1} M/s)",
                    n as f64 / 1e6,
                    us as f64 / 1e6,
                    n as f64 / (us as f64).max(1.0)
                )
                .unwrap();
            }
        }
    }
    if let Some(n) = r.native() {
        writeln!(out, "  failing natively (emulator): {}", names(&n.failures(), 12)).unwrap();
        if let Some(t) = n.timed_out() {
            writeln!(out, "  timed out natively in: {t}").unwrap();
        }
    }
    // Without a native run nothing is known to pass natively: no comparison to print.
    let compared = r.native().is_some();
    for o in r.outcomes.iter().filter(|o| compared && o.mode != Mode::Native) {
        writeln!(
            out,
            "  passing natively, failing under {} (libxhsa): {}",
            o.mode.label(),
            names(&r.libxhsa_regressions(o), 12)
        )
        .unwrap();
    }
    out
}

/// One Markdown table of every suite (for docs/emulator.md): a row per suite and mode.
pub fn markdown(results: &[SuiteResult]) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "| suite | filter | mode | tests | passed | failed | timed out | not run | time |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|").unwrap();
    for r in results {
        for o in &r.outcomes {
            let rep = &o.report;
            writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {} | {} | {} | {:.0} s |",
                r.suite.name,
                r.suite.filter,
                o.mode.label(),
                rep.announced.map_or("?".into(), |n| n.to_string()),
                rep.passed.len(),
                o.failures().len(),
                usize::from(o.timed_out().is_some()),
                rep.not_run(),
                o.elapsed.as_secs_f64()
            )
            .unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtest::Report;
    use std::time::Duration;

    fn outcome(mode: Mode, text: &str, end: End) -> Outcome {
        let mut report = Report::default();
        text.lines().for_each(|l| report.line(l));
        Outcome {
            mode,
            report,
            end,
            elapsed: Duration::from_secs(2),
            libxhsa_ran: mode != Mode::Native,
            taken_off: None,
            off_us: 0,
            log: "x".into(),
            isa: None,
        }
    }

    #[test]
    fn regressions_are_the_native_passes_that_fail_under_libxhsa() {
        let suite = crate::suites::parse("s p/q 60 *\n").unwrap().remove(0);
        let all = "[==========] Running 3 tests from 1 test suite.\n[ RUN      ] s.a\n[       OK ] s.a (1 ms)\n[ RUN      ] s.b\n";
        let native = outcome(
            Mode::Native,
            &format!("{all}[  FAILED  ] s.b (1 ms)\n[ RUN      ] s.c\n[       OK ] s.c (1 ms)\n"),
            End::Exited(1),
        );
        // Under LD_PRELOAD: a passes... no, a crashes; b fails as natively; c never runs.
        let pre = outcome(
            Mode::LdPreload,
            "[==========] Running 3 tests from 1 test suite.\n[ RUN      ] s.a\n",
            End::Signalled(6),
        );
        let tools = outcome(
            Mode::HsaToolsLib,
            &format!("{all}[  FAILED  ] s.b (1 ms)\n[ RUN      ] s.c\n"),
            End::TimedOut,
        );
        let r = SuiteResult { suite: &suite, outcomes: vec![native, pre, tools] };
        assert_eq!(r.libxhsa_regressions(&r.outcomes[1]), vec!["s.a".to_string()]);
        assert_eq!(r.libxhsa_regressions(&r.outcomes[2]), vec!["s.c".to_string()]);
        let t = text(&r);
        assert!(t.contains("failing natively (emulator): s.b"), "{t}");
        // Without the native run there is nothing to compare with.
        let without = SuiteResult { suite: &suite, outcomes: r.outcomes[1..].to_vec() };
        assert!(!text(&without).contains("passing natively"), "{}", text(&without));
        assert!(t.contains("failing under LD_PRELOAD (libxhsa): s.a"), "{t}");
        assert!(t.contains("failing under HSA_TOOLS_LIB (libxhsa): s.c"), "{t}");
        assert!(t.contains("signal 6") && t.contains("time limit"), "{t}");
        let m = markdown(std::slice::from_ref(&r));
        assert_eq!(m.lines().count(), 5, "{m}");
        assert!(m.contains("| s | `*` | HSA_TOOLS_LIB | 3 | 1 | 1 | 1 | 0 | 2 s |"), "{m}");
    }
}
