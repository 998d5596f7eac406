//! The selection of each suite that the conformance run runs (`tools/conformance/suites.txt`).

use std::time::Duration;

/// One test program with its GoogleTest filter and time budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    /// Short name, for the table and `--only`.
    pub name: String,
    /// Path inside the ROCm 6.4 root, under `/usr/libexec/rocm/`.
    pub binary: String,
    /// The whole program's time limit (per run: each mode gets its own).
    pub timeout: Duration,
    /// `--gtest_filter`, or for a Thrust program the same syntax over its `--list`, or for a
    /// sample the same over its `--gtest_list_tests`.
    pub filter: String,
    /// The program's test driver.
    pub format: Format,
    /// Extra environment (`KEY=VALUE` after the filter).
    pub env: Vec<(String, String)>,
}

/// A test program's driver: GoogleTest, or Thrust's own (rocThrust; the suite line's filter is
/// written `thrust:FILTER`, see [`crate::thrust`]); or GoogleTest with a spread sample of the
/// tests FILTER selects, at most `per_group` of each test suite (`sample:K:FILTER`, see
/// [`crate::sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Gtest,
    Thrust,
    Sample { per_group: u32 },
}

impl Format {
    /// What a suite line writes before the filter for this driver (`thrust:`, `sample:K:`;
    /// nothing for GoogleTest): the inverse of [`parse`]'s prefixes.
    pub fn prefix(self) -> String {
        match self {
            Format::Gtest => String::new(),
            Format::Thrust => "thrust:".into(),
            Format::Sample { per_group } => format!("sample:{per_group}:"),
        }
    }
}

/// Where Debian's `lib*-tests` packages put their programs.
pub const TESTS_DIR: &str = "/usr/libexec/rocm";

impl Suite {
    /// The program's path inside the root.
    pub fn program(&self) -> String {
        format!("{TESTS_DIR}/{}", self.binary)
    }
}

/// Parses the suites file: one suite a line, `NAME BINARY TIMEOUT_S FILTER [KEY=VALUE]...`,
/// `#` to the end of a line is a comment; a FILTER `thrust:F` marks a Thrust program whose
/// listed tests F selects, `sample:K:F` a spread sample of K tests a test suite of those F
/// selects.
pub fn parse(text: &str) -> Result<Vec<Suite>, String> {
    let mut out: Vec<Suite> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |m: &str| format!("line {}: {m}: '{line}'", n + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 4 {
            return Err(at("expected NAME BINARY TIMEOUT_S FILTER [KEY=VALUE]..."));
        }
        let secs: u64 =
            w[2].parse().map_err(|_| at("TIMEOUT_S is not a whole number of seconds"))?;
        if secs == 0 {
            return Err(at("TIMEOUT_S must be above 0"));
        }
        if w[1].starts_with('/') || w[1].contains("..") {
            return Err(at("BINARY is a path under /usr/libexec/rocm, without .."));
        }
        let mut env = Vec::new();
        for kv in &w[4..] {
            let (k, v) = kv.split_once('=').ok_or_else(|| at("extra fields are KEY=VALUE"))?;
            env.push((k.to_string(), v.to_string()));
        }
        if out.iter().any(|s| s.name == w[0]) {
            return Err(at("NAME used twice"));
        }
        let (format, filter) = if let Some(spec) = w[3].strip_prefix("sample:") {
            let (k, f) = crate::sample::parse(spec).map_err(|e| at(&e))?;
            (Format::Sample { per_group: k }, f)
        } else {
            match w[3].strip_prefix("thrust:") {
                Some("") => return Err(at("thrust: needs a filter after it, e.g. thrust:*")),
                Some(f) => (Format::Thrust, f),
                None => (Format::Gtest, w[3]),
            }
        };
        out.push(Suite {
            name: w[0].into(),
            binary: w[1].into(),
            timeout: Duration::from_secs(secs),
            filter: filter.into(),
            format,
            env,
        });
    }
    if out.is_empty() {
        return Err("no suites listed".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_environment() {
        let s = parse("# header\n\nrocrand-basic librocrand1-tests/test_rocrand_basic 120 * # all 44\nblas librocblas4-tests/rocblas-test 600 *quick*gemm* GTEST_LISTENER=PASS_LINE_IN_LOG\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].program(), "/usr/libexec/rocm/librocrand1-tests/test_rocrand_basic");
        assert_eq!((s[0].timeout.as_secs(), s[0].filter.as_str()), (120, "*"));
        assert_eq!(s[1].env, vec![("GTEST_LISTENER".to_string(), "PASS_LINE_IN_LOG".to_string())]);
        assert_eq!(s[0].format, Format::Gtest);
        let t = parse("merge librocthrust-tests/test_thrust_merge 60 thrust:*-*WithBigIndexes\n")
            .unwrap();
        assert_eq!((t[0].format, t[0].filter.as_str()), (Format::Thrust, "*-*WithBigIndexes"));
        assert!(parse("m b 60 thrust:\n").unwrap_err().contains("thrust:"));
        let t = parse("sw librocsparse1-tests/rocsparse-test 600 sample:40:quick/*\n").unwrap();
        assert_eq!(
            (t[0].format, t[0].filter.as_str()),
            (Format::Sample { per_group: 40 }, "quick/*")
        );
        assert!(parse("m b 60 sample:0:*\n").unwrap_err().starts_with("line 1:"));
        for f in ["* ", "thrust:* ", "sample:7:* "] {
            let line = format!("n b 60 {f}");
            let s = &parse(&line).unwrap()[0];
            assert_eq!(format!("{}{}", s.format.prefix(), s.filter), f.trim_end());
        }
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        assert!(parse("a b 10\n").unwrap_err().starts_with("line 1:"));
        assert!(parse("a b x *\n").unwrap_err().contains("TIMEOUT_S"));
        assert!(parse("a /bin/b 10 *\n").unwrap_err().contains("BINARY"));
        assert!(parse("a b 10 * NOEQ\n").unwrap_err().contains("KEY=VALUE"));
        assert!(parse("a b 10 *\na c 10 *\n").unwrap_err().contains("twice"));
        assert!(parse("# nothing\n").is_err());
    }
}
