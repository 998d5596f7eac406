//! rocThrust's test programs, which use Thrust's own unit-test driver instead of GoogleTest:
//! `--list` prints the test names, the names given as arguments are the ones run, `--sizes=`
//! bounds the input sizes and `--verbose` prints one line per test,
//! `Running NAME...[PASS]    1.2 ms NAME` (or `[FAILURE]`, `[KNOWN FAILURE]`, `[ERROR]`), and
//! `Totals: ...` at the end. A suite selects its tests with GoogleTest's filter syntax over the
//! listed names (`POSITIVE[:POSITIVE]...[-NEGATIVE[:NEGATIVE]...]`, `*` and `?` wildcards), so
//! that e.g. the `*WithBigIndexes` tests (2^32 and more elements: hours interpreted) stay out.

use crate::gtest::Report;

/// The sizes the run asks for (Thrust's driver: tiny, small, medium, default, ...): small keeps
/// each test's inputs at a few thousand elements, minutes for a whole program interpreted.
pub const SIZES: &str = "--sizes=small";

/// Whether `name` matches the glob `pat` (`*` any run, `?` any one character).
pub fn glob(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pat.chars().collect(), name.chars().collect());
    // Iterative matching with backtracking to the last `*`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// The names `filter` selects, in their order: GoogleTest's syntax (a name matching any
/// positive pattern and no negative one; an empty positive part means `*`).
pub fn select(names: &[String], filter: &str) -> Vec<String> {
    let (pos, neg) = filter.split_once('-').unwrap_or((filter, ""));
    let pos: Vec<&str> = pos.split(':').filter(|p| !p.is_empty()).collect();
    let neg: Vec<&str> = neg.split(':').filter(|p| !p.is_empty()).collect();
    names
        .iter()
        .filter(|n| pos.is_empty() || pos.iter().any(|p| glob(p, n)))
        .filter(|n| !neg.iter().any(|p| glob(p, n)))
        .cloned()
        .collect()
}

/// The test names of `--list` output (one a line; blank and indented lines are not names).
pub fn names(list_output: &str) -> Vec<String> {
    list_output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace) && !l.contains(' '))
        .map(str::to_string)
        .collect()
}

impl Report {
    /// Takes one line of a Thrust test program's `--verbose` output.
    pub fn thrust_line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.starts_with("Totals:") {
            self.finished = true;
            return;
        }
        let Some(rest) = line.strip_prefix("Running ") else { return };
        if let Some(n) = rest.strip_suffix(" unit tests.").and_then(|n| n.trim().parse().ok()) {
            self.announced = Some(n);
            return;
        }
        let Some((name, result)) = rest.split_once("...") else { return };
        let name = name.trim().to_string();
        let result = result.trim_start();
        let set = if result.starts_with("[PASS]") {
            &mut self.passed
        } else if result.starts_with("[KNOWN FAILURE]") {
            &mut self.skipped
        } else if result.starts_with("[FAILURE]") || result.starts_with("[ERROR]") {
            &mut self.failed
        } else {
            // No result yet: the program stopped in this test (or its output was cut there).
            self.running = Some(name);
            return;
        };
        set.insert(name);
        self.running = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_filters_select_as_googletest_does() {
        assert!(glob("*", "TestMerge"));
        assert!(glob("TestMerge*", "TestMergeSimpleDevice"));
        assert!(glob("*WithBigIndexes", "TestReduceWithBigIndexes"));
        assert!(!glob("*WithBigIndexes", "TestReduceWithBigIndexesX"));
        assert!(glob("T?st*g", "TestMergeDescending"));
        assert!(!glob("Test", "TestMerge"));
        let listed: Vec<String> =
            ["TestReduce", "TestReduceWithBigIndexes", "TestScan", "TestScanWithBigIndexes"]
                .map(String::from)
                .to_vec();
        assert_eq!(select(&listed, "*-*WithBigIndexes"), ["TestReduce", "TestScan"]);
        assert_eq!(select(&listed, "-*WithBigIndexes"), ["TestReduce", "TestScan"]);
        assert_eq!(select(&listed, "TestScan*"), ["TestScan", "TestScanWithBigIndexes"]);
        assert_eq!(select(&listed, "TestReduce:TestScan"), ["TestReduce", "TestScan"]);
        assert_eq!(names("TestA\nTestB\n\n  detail line\nnot a name\n"), ["TestA", "TestB"]);
    }

    #[test]
    fn verbose_lines_count_passes_failures_known_failures_and_the_test_stopped_in() {
        let mut r = Report::default();
        for l in [
            "Running 5 unit tests.",
            "Running TestA...[PASS]    12.5 ms TestA",
            "Running TestB...[FAILURE]            TestB",
            "Running TestC...[KNOWN FAILURE]      TestC",
            "Running TestD...[ERROR]      TestD",
            "Running TestE...",
        ] {
            r.thrust_line(l);
        }
        assert_eq!(r.announced, Some(5));
        assert_eq!(r.passed.iter().collect::<Vec<_>>(), ["TestA"]);
        assert_eq!(r.failed.iter().collect::<Vec<_>>(), ["TestB", "TestD"]);
        assert_eq!(r.skipped.iter().collect::<Vec<_>>(), ["TestC"]);
        assert_eq!(r.running.as_deref(), Some("TestE"));
        assert!(!r.finished);
        assert_eq!(r.not_run(), 0);
        r.thrust_line("Totals: 2 failures, 1 known failures, 0 errors, and 1 passes.");
        assert!(r.finished);
    }
}
