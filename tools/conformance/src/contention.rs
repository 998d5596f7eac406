//! The contention run (`./x conformance --contention HIGH:LOW`): two suites at once on one
//! emulated GPU (one device process, one libxhsa board), both under libxhsa (`LD_PRELOAD`), one
//! at `XHSA_PRIORITY=10`, the other at `-10`. libxhsa takes the low one's queues off the GPU
//! while the high one has work (KFD queue deactivation) and puts them back after: each
//! suite's per-test results must be those of its solo run (the same program under libxhsa at the
//! same level, alone on a device of its own, in the same invocation). The low suite's exit
//! summary says how many times its queues were taken off; a run where that never happened does
//! not demonstrate contention and says so.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use crate::run::{self, End, Mode, Outcome, RunOpts, Setup, SharedGpu};
use crate::suites::Suite;

/// `XHSA_PRIORITY` of the high suite.
pub const HIGH_LEVEL: i32 = 10;
/// `XHSA_PRIORITY` of the low suite.
pub const LOW_LEVEL: i32 = -10;

/// Which side of the pair a suite is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    High,
    Low,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::High => "high",
            Role::Low => "low",
        }
    }

    /// Its `XHSA_PRIORITY`.
    pub fn level(self) -> i32 {
        match self {
            Role::High => HIGH_LEVEL,
            Role::Low => LOW_LEVEL,
        }
    }
}

/// Parses `--contention`'s value, `HIGH:LOW[,HIGH:LOW]...`, against the suites' names: the
/// indices into `suites` of each pair.
pub fn parse_pairs(text: &str, suites: &[Suite]) -> Result<Vec<(usize, usize)>, String> {
    let names = || suites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
    let find = |n: &str| {
        suites.iter().position(|s| s.name == n).ok_or_else(|| {
            format!("--contention: no suite '{n}' in the selection; accepted: {}", names())
        })
    };
    let mut out = Vec::new();
    for pair in text.split(',') {
        let Some((h, l)) = pair.split_once(':') else {
            return Err(format!(
                "--contention: '{pair}' is not a pair; accepted: HIGH:LOW[,HIGH:LOW]... with suite names (e.g. rocrand-basic:rocrand-philox)"
            ));
        };
        let (h, l) = (find(h.trim())?, find(l.trim())?);
        if h == l {
            return Err(format!(
                "--contention: '{pair}' pairs a suite with itself; name two different suites"
            ));
        }
        out.push((h, l));
    }
    Ok(out)
}

/// How one test ended in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TestEnd {
    Passed,
    Failed,
    Skipped,
    /// The program was killed at its time limit in it.
    TimedOut,
    /// The program died in it.
    Crashed,
    /// Not seen: the program did not get to it (or, in the other run, it was not announced).
    Absent,
}

impl TestEnd {
    fn label(self) -> &'static str {
        match self {
            TestEnd::Passed => "passed",
            TestEnd::Failed => "failed",
            TestEnd::Skipped => "skipped",
            TestEnd::TimedOut => "timed out",
            TestEnd::Crashed => "crashed",
            TestEnd::Absent => "not run",
        }
    }
}

/// Every test `o` names, with how it ended.
pub fn test_ends(o: &Outcome) -> BTreeMap<String, TestEnd> {
    let r = &o.report;
    let mut m = BTreeMap::new();
    m.extend(r.passed.iter().map(|t| (t.clone(), TestEnd::Passed)));
    m.extend(r.failed.iter().map(|t| (t.clone(), TestEnd::Failed)));
    m.extend(r.skipped.iter().map(|t| (t.clone(), TestEnd::Skipped)));
    if let Some(t) = o.timed_out() {
        m.insert(t.to_string(), TestEnd::TimedOut);
    }
    if let Some(t) = o.crashed() {
        m.insert(t.to_string(), TestEnd::Crashed);
    }
    m
}

/// One suite of the pair: its solo run and its run beside the other.
#[derive(Debug, Clone)]
pub struct Side<'a> {
    pub suite: &'a Suite,
    pub role: Role,
    pub solo: Outcome,
    pub together: Outcome,
}

impl Side<'_> {
    /// The tests that ended differently beside the other suite than alone: `(test, solo,
    /// together)`; and a differing count of tests announced (as the test `"(tests announced)"`)
    /// or of tests never reached.
    pub fn differences(&self) -> Vec<(String, String, String)> {
        let (a, b) = (test_ends(&self.solo), test_ends(&self.together));
        let mut out: Vec<(String, String, String)> = Vec::new();
        for t in a.keys().chain(b.keys().filter(|t| !a.contains_key(*t))) {
            let (x, y) = (
                a.get(t).copied().unwrap_or(TestEnd::Absent),
                b.get(t).copied().unwrap_or(TestEnd::Absent),
            );
            if x != y {
                out.push((t.clone(), x.label().into(), y.label().into()));
            }
        }
        let (sr, tr) = (&self.solo.report, &self.together.report);
        if sr.announced != tr.announced {
            let n = |a: Option<usize>| a.map_or("?".into(), |n| n.to_string());
            out.push(("(tests announced)".into(), n(sr.announced), n(tr.announced)));
        }
        if sr.not_run() != tr.not_run() {
            out.push((
                "(tests not reached)".into(),
                sr.not_run().to_string(),
                tr.not_run().to_string(),
            ));
        }
        out
    }
}

/// The pair's results.
#[derive(Debug, Clone)]
pub struct PairResult<'a> {
    pub high: Side<'a>,
    pub low: Side<'a>,
    /// From the start of both programs to the end of the later one.
    pub together_wall: Duration,
}

impl PairResult<'_> {
    /// The low suite's queues were taken off the GPU at least once beside the high one.
    pub fn demonstrated(&self) -> bool {
        self.low.together.taken_off.unwrap_or(0) > 0
    }

    /// Every test of both suites ended beside the other as it did alone.
    pub fn identical(&self) -> bool {
        self.high.differences().is_empty() && self.low.differences().is_empty()
    }

    /// Both suites ran libxhsa in all four runs (its exit summary was seen).
    pub fn libxhsa_ran(&self) -> bool {
        [&self.high, &self.low].iter().all(|s| s.solo.libxhsa_ran && s.together.libxhsa_ran)
    }
}

fn priority_env(role: Role) -> Vec<(String, String)> {
    vec![("XHSA_PRIORITY".to_string(), role.level().to_string())]
}

/// Runs `high` and `low` each alone under libxhsa at its level, then both at once on one
/// emulated GPU. The runs beside the other have both suites' time limits added (the low one
/// waits while the high one runs).
pub fn run_pair<'a>(
    high: &'a Suite,
    low: &'a Suite,
    setup: &Setup,
) -> std::io::Result<PairResult<'a>> {
    let mode = Mode::LdPreload;
    let (he, le) = (priority_env(Role::High), priority_env(Role::Low));
    let solo = |s: &Suite, role: Role, env: &[(String, String)]| {
        tracing::info!("{} ({}, XHSA_PRIORITY={}) alone ...", s.name, role.label(), role.level());
        let label = format!("solo-{}", role.label());
        run::run_with(s, mode, setup, RunOpts { label: Some(&label), env, ..Default::default() })
    };
    let high_solo = solo(high, Role::High, &he)?;
    let low_solo = solo(low, Role::Low, &le)?;

    tracing::info!("{} (high) and {} (low) together on one emulated GPU ...", high.name, low.name);
    let gpu = SharedGpu::new(&setup.log_dir)?;
    let limit = high.timeout + low.timeout;
    let start = Instant::now();
    let gpu_ref = &gpu;
    let (h, l) = std::thread::scope(|sc| {
        let go = move |s: &'a Suite, role: Role, env: &[(String, String)]| {
            let label = format!("together-{}", role.label());
            run::run_with(
                s,
                mode,
                setup,
                RunOpts { label: Some(&label), env, gpu: Some(gpu_ref), timeout: Some(limit) },
            )
        };
        let lt = sc.spawn(move || go(low, Role::Low, &le));
        let h = go(high, Role::High, &he);
        let l = lt.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (h, l)
    });
    let together_wall = start.elapsed();
    drop(gpu);
    Ok(PairResult {
        high: Side { suite: high, role: Role::High, solo: high_solo, together: h? },
        low: Side { suite: low, role: Role::Low, solo: low_solo, together: l? },
        together_wall,
    })
}

fn counts(o: &Outcome) -> (usize, usize, usize) {
    (o.report.passed.len(), o.failures().len(), usize::from(o.timed_out().is_some()))
}

fn end_note(o: &Outcome) -> Option<String> {
    match o.end {
        End::Exited(0) => None,
        End::Exited(c) => Some(format!("exit {c}")),
        End::Signalled(s) => Some(format!("signal {s}")),
        End::TimedOut => Some("time limit".into()),
    }
}

fn off_text(o: &Outcome) -> String {
    match o.taken_off {
        Some(n) => n.to_string(),
        None => "?".into(),
    }
}

/// One suite's row of a pair, as both tables show it.
struct Row {
    /// Passed, failed, timed out: alone and together.
    solo: (usize, usize, usize),
    together: (usize, usize, usize),
    /// The tests the suite announced ("?" when it did not say).
    tests: String,
    solo_s: f64,
    together_s: f64,
    /// Times taken off together ("?" without libxhsa's summary), and seconds off.
    taken_off: String,
    off_s: f64,
    /// "identical" or "N differ".
    results: String,
}

impl Row {
    fn of(s: &Side<'_>) -> Row {
        let d = s.differences();
        Row {
            solo: counts(&s.solo),
            together: counts(&s.together),
            tests: s.solo.report.announced.map_or("?".into(), |n| n.to_string()),
            solo_s: s.solo.elapsed.as_secs_f64(),
            together_s: s.together.elapsed.as_secs_f64(),
            taken_off: off_text(&s.together),
            off_s: s.together.off_us as f64 / 1e6,
            results: if d.is_empty() { "identical".into() } else { format!("{} differ", d.len()) },
        }
    }
}

/// The plain-text table of one pair, with the verdict.
pub fn text(r: &PairResult) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "contention: {} (high, XHSA_PRIORITY={HIGH_LEVEL}) beside {} (low, XHSA_PRIORITY={LOW_LEVEL}), LD_PRELOAD, one emulated GPU; {:.1} s together",
        r.high.suite.name,
        r.low.suite.name,
        r.together_wall.as_secs_f64()
    )
    .unwrap();
    // The suite column fits the longer name.
    let w = r.high.suite.name.len().max(r.low.suite.name.len()).max(18);
    writeln!(out, "  {:<w$}|{:^31}|{:^31}|", "", "alone", "together", w = w + 12).unwrap();
    writeln!(
        out,
        "  {:<w$} {:<4} {:>5} | {:>6} {:>6} {:>6} {:>8} | {:>6} {:>6} {:>6} {:>8} | {:>9} {:>8}  results",
        "suite", "role", "tests", "passed", "failed", "t.out", "time", "passed", "failed", "t.out",
        "time", "taken off", "off"
    )
    .unwrap();
    for s in [&r.high, &r.low] {
        let row = Row::of(s);
        let ((sp, sf, st), (tp, tf, tt)) = (row.solo, row.together);
        let mut verdict = row.results;
        for (what, o) in [("alone", &s.solo), ("together", &s.together)] {
            if let Some(e) = end_note(o) {
                write!(verdict, "; {what}: {e}").unwrap();
            }
            if !o.libxhsa_ran {
                write!(verdict, "; {what}: libxhsa did not report").unwrap();
            }
        }
        writeln!(
            out,
            "  {:<w$} {:<4} {:>5} | {sp:>6} {sf:>6} {st:>6} {:>7.1}s | {tp:>6} {tf:>6} {tt:>6} {:>7.1}s | {:>9} {:>7.1}s  {verdict}",
            s.suite.name,
            s.role.label(),
            row.tests,
            row.solo_s,
            row.together_s,
            row.taken_off,
            row.off_s,
        )
        .unwrap();
    }
    for s in [&r.high, &r.low] {
        for (t, a, b) in s.differences().iter().take(12) {
            writeln!(out, "  {} ({}): {t}: {a} alone, {b} together", s.suite.name, s.role.label())
                .unwrap();
        }
    }
    if r.demonstrated() {
        let n = r.low.together.taken_off.unwrap_or(0);
        writeln!(
            out,
            "  the low suite was taken off the GPU {n} time{} ({:.1} s off in all): contention demonstrated",
            if n == 1 { "" } else { "s" },
            r.low.together.off_us as f64 / 1e6
        )
        .unwrap();
    } else {
        writeln!(
            out,
            "  the low suite was never taken off the GPU (its exit summary: {}): this run does not demonstrate contention",
            match r.low.together.taken_off {
                Some(_) => "0 taken off",
                None => "no preemption reported",
            }
        )
        .unwrap();
    }
    out
}

/// One Markdown table of every pair (for docs/emulator.md): a row per suite of a pair.
pub fn markdown(results: &[PairResult]) -> String {
    let mut out = String::new();
    writeln!(out, "| suite | role | tests | alone: passed / failed / timed out | time | together: passed / failed / timed out | time | taken off | time off | results |").unwrap();
    writeln!(out, "|---|---|---:|---|---:|---|---:|---:|---:|---|").unwrap();
    for r in results {
        for s in [&r.high, &r.low] {
            let row = Row::of(s);
            let ((sp, sf, st), (tp, tf, tt)) = (row.solo, row.together);
            writeln!(
                out,
                "| {} | {} | {} | {sp} / {sf} / {st} | {:.0} s | {tp} / {tf} / {tt} | {:.0} s | {} | {:.1} s | {} |",
                s.suite.name,
                s.role.label(),
                row.tests,
                row.solo_s,
                row.together_s,
                row.taken_off,
                row.off_s,
                row.results
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

    fn suites() -> Vec<Suite> {
        crate::suites::parse("a p/a 10 *\nb p/b 20 *\nc p/c 30 *\n").unwrap()
    }

    #[test]
    fn pairs_name_two_suites_of_the_selection() {
        let s = suites();
        assert_eq!(parse_pairs("a:b", &s).unwrap(), vec![(0, 1)]);
        assert_eq!(parse_pairs("c:a, b:c", &s).unwrap(), vec![(2, 0), (1, 2)]);
        let e = parse_pairs("a", &s).unwrap_err();
        assert!(e.contains("HIGH:LOW"), "{e}");
        let e = parse_pairs("a:z", &s).unwrap_err();
        assert!(e.contains("'z'") && e.contains("accepted: a, b, c"), "{e}");
        assert!(parse_pairs("b:b", &s).unwrap_err().contains("itself"));
    }

    fn outcome(text: &str, end: End, taken_off: Option<u64>) -> Outcome {
        let mut report = Report::default();
        text.lines().for_each(|l| report.line(l));
        Outcome {
            mode: Mode::LdPreload,
            report,
            end,
            elapsed: Duration::from_secs(3),
            libxhsa_ran: true,
            taken_off,
            off_us: taken_off.unwrap_or(0) * 1000,
            log: "x".into(),
            isa: None,
        }
    }

    const HEAD: &str = "[==========] Running 3 tests from 1 test suite.\n";
    const ALL_PASS: &str = "[ RUN      ] s.a\n[       OK ] s.a (1 ms)\n[ RUN      ] s.b\n[       OK ] s.b (1 ms)\n[ RUN      ] s.c\n[       OK ] s.c (1 ms)\n[  PASSED  ] 3 tests.\n";

    #[test]
    fn the_same_results_are_identical_and_a_taken_off_low_suite_demonstrates_contention() {
        let s = suites();
        let pass = format!("{HEAD}{ALL_PASS}");
        let side = |i: usize, role, off| Side {
            suite: &s[i],
            role,
            solo: outcome(&pass, End::Exited(0), Some(0)),
            together: outcome(&pass, End::Exited(0), off),
        };
        let r = PairResult {
            high: side(0, Role::High, Some(0)),
            low: side(1, Role::Low, Some(7)),
            together_wall: Duration::from_secs(5),
        };
        assert!(r.identical() && r.demonstrated() && r.libxhsa_ran());
        let t = text(&r);
        assert!(
            t.contains("taken off the GPU 7 times") && t.contains("contention demonstrated"),
            "{t}"
        );
        assert_eq!(t.matches("identical").count(), 2, "{t}");
        let m = markdown(std::slice::from_ref(&r));
        assert!(
            m.contains(
                "| b | low | 3 | 3 / 0 / 0 | 3 s | 3 / 0 / 0 | 3 s | 7 | 0.0 s | identical |"
            ),
            "{m}"
        );

        // Never taken off: said, and not demonstrated; no summary at all likewise.
        for off in [Some(0), None] {
            let r = PairResult { low: side(1, Role::Low, off), ..r.clone() };
            assert!(r.identical() && !r.demonstrated());
            assert!(text(&r).contains("does not demonstrate contention"), "{}", text(&r));
        }
    }

    #[test]
    fn a_test_ending_otherwise_beside_the_other_suite_is_a_difference() {
        let s = suites();
        let pass = format!("{HEAD}{ALL_PASS}");
        // Together: b fails, and the program is killed in c.
        let worse = format!("{HEAD}[ RUN      ] s.a\n[       OK ] s.a (1 ms)\n[ RUN      ] s.b\n[  FAILED  ] s.b (1 ms)\n[ RUN      ] s.c\n");
        let low = Side {
            suite: &s[1],
            role: Role::Low,
            solo: outcome(&pass, End::Exited(0), Some(0)),
            together: outcome(&worse, End::TimedOut, Some(4)),
        };
        assert_eq!(
            low.differences(),
            vec![
                ("s.b".to_string(), "passed".to_string(), "failed".to_string()),
                ("s.c".to_string(), "passed".to_string(), "timed out".to_string()),
            ]
        );
        // A test failing alone and beside the other alike is no difference; one never reached
        // together is.
        let failing = format!("{HEAD}[ RUN      ] s.a\n[  FAILED  ] s.a (1 ms)\n[ RUN      ] s.b\n[       OK ] s.b (1 ms)\n[ RUN      ] s.c\n[       OK ] s.c (1 ms)\n");
        let crashed = format!("{HEAD}[ RUN      ] s.a\n[  FAILED  ] s.a (1 ms)\n");
        let high = Side {
            suite: &s[0],
            role: Role::High,
            solo: outcome(&failing, End::Exited(1), Some(0)),
            together: outcome(&crashed, End::Signalled(11), Some(0)),
        };
        let d = high.differences();
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(d[0], ("s.b".to_string(), "passed".to_string(), "not run".to_string()));
        assert_eq!(d[2], ("(tests not reached)".to_string(), "0".to_string(), "2".to_string()));
        let r = PairResult { high, low, together_wall: Duration::from_secs(9) };
        assert!(!r.identical() && r.demonstrated());
        let t = text(&r);
        assert!(t.contains("b (low): s.b: passed alone, failed together"), "{t}");
        assert!(t.contains("together: time limit") && t.contains("together: signal 11"), "{t}");
    }
}
