//! GoogleTest's console output, read line by line: which tests started, passed, failed or were
//! skipped, and how many the program said it would run.

use std::collections::BTreeSet;

/// What one run of a GoogleTest program reported.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// From `[==========] Running N tests from M test suites.`
    pub announced: Option<usize>,
    pub passed: BTreeSet<String>,
    pub failed: BTreeSet<String>,
    pub skipped: BTreeSet<String>,
    /// A test that started (`[ RUN      ]`) and has not ended: when the program stops, the one
    /// it was in (timed out or crashed).
    pub running: Option<String>,
    /// `[  PASSED  ] N tests.` seen: the program reached its end.
    pub finished: bool,
}

/// The test name after a status tag: the first word, without the `,` of parameterised tests'
/// `, where GetParam() = ...`.
fn name(rest: &str) -> Option<String> {
    let w = rest.split_whitespace().next()?;
    let w = w.strip_suffix(',').unwrap_or(w);
    (!w.is_empty()).then(|| w.to_string())
}

impl Report {
    /// Takes one line of the program's standard output.
    pub fn line(&mut self, line: &str) {
        let line = line.trim_end();
        // Colour codes, should a program force them.
        let line = line
            .replace("\x1b[0;32m", "")
            .replace("\x1b[0;31m", "")
            .replace("\x1b[0;33m", "")
            .replace("\x1b[m", "");
        let Some(rest) = line.strip_prefix('[') else { return };
        let Some((tag, rest)) = rest.split_once(']') else { return };
        match tag.trim() {
            "RUN" => self.running = name(rest),
            "OK" => self.end(rest, Outcome::Passed),
            "FAILED" => self.end(rest, Outcome::Failed),
            "SKIPPED" => self.end(rest, Outcome::Skipped),
            "PASSED" => self.finished = true,
            "==========" => {
                if let Some(n) = rest
                    .trim()
                    .strip_prefix("Running ")
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                {
                    self.announced = Some(n);
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, rest: &str, how: Outcome) {
        let Some(n) = name(rest) else { return };
        // The summary at the end lists the failed (and skipped) tests again, without a time:
        // those are already counted. A summary line such as `[  FAILED  ] 3 tests, listed
        // below:` names no test.
        if n.chars().all(|c| c.is_ascii_digit()) {
            return;
        }
        if self.running.as_deref() == Some(n.as_str()) {
            self.running = None;
        }
        match how {
            Outcome::Passed => self.passed.insert(n),
            Outcome::Failed => self.failed.insert(n),
            Outcome::Skipped => self.skipped.insert(n),
        };
    }

    /// Tests that ended, each once.
    pub fn ended(&self) -> usize {
        self.passed.len() + self.failed.len() + self.skipped.len()
    }

    /// Tests announced but never started (the program stopped before them).
    pub fn not_run(&self) -> usize {
        self.announced
            .map_or(0, |n| n.saturating_sub(self.ended() + usize::from(self.running.is_some())))
    }
}

enum Outcome {
    Passed,
    Failed,
    Skipped,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(text: &str) -> Report {
        let mut r = Report::default();
        for l in text.lines() {
            r.line(l);
        }
        r
    }

    #[test]
    fn passes_failures_skips_and_the_summary() {
        let r = feed(
            "Note: Google Test filter = *basic*\n\
             [==========] Running 4 tests from 2 test suites.\n\
             [----------] Global test environment set-up.\n\
             [ RUN      ] a.one\n[       OK ] a.one (0 ms)\n\
             [ RUN      ] a/p.two/0\n[  FAILED  ] a/p.two/0, where GetParam() = (1, 2) (12 ms)\n\
             [ RUN      ] b.three\nsome output [not a tag]\n[  SKIPPED ] b.three (0 ms)\n\
             [ RUN      ] b.four\n[       OK ] b.four (3 ms)\n\
             [==========] 4 tests from 2 test suites ran. (15 ms total)\n\
             [  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] b.three\n\
             [  FAILED  ] 1 test, listed below:\n[  FAILED  ] a/p.two/0, where GetParam() = (1, 2)\n",
        );
        assert_eq!(r.announced, Some(4));
        assert_eq!(r.passed.iter().map(String::as_str).collect::<Vec<_>>(), ["a.one", "b.four"]);
        assert_eq!(r.failed.iter().map(String::as_str).collect::<Vec<_>>(), ["a/p.two/0"]);
        assert_eq!(r.skipped.len(), 1);
        assert!(r.finished && r.running.is_none());
        assert_eq!(r.not_run(), 0);
    }

    #[test]
    fn a_program_stopped_inside_a_test_leaves_it_running_and_the_rest_not_run() {
        let r = feed("[==========] Running 10 tests from 1 test suite.\n[ RUN      ] s.t1\n[       OK ] s.t1 (5 ms)\n[ RUN      ] s.t2\n");
        assert_eq!(r.running.as_deref(), Some("s.t2"));
        assert_eq!((r.passed.len(), r.not_run(), r.finished), (1, 8, false));
    }

    #[test]
    fn colour_codes_are_ignored() {
        let r = feed("\x1b[0;32m[==========] \x1b[mRunning 1 test from 1 test suite.\n\x1b[0;32m[ RUN      ] \x1b[ms.t\n\x1b[0;31m[  FAILED  ] \x1b[ms.t (1 ms)\n");
        assert_eq!((r.announced, r.failed.len(), r.running.is_none()), (Some(1), 1, true));
    }
}
