//! A spread sample of a GoogleTest program's tests, for sweeping programs far larger than a run
//! can afford (rocSPARSE's `quick` tests alone are 110 000, rocBLAS's 1.2 million names):
//! a suite whose filter is written `sample:K:FILTER` runs, of the tests of the program's
//! `--gtest_list_tests` that FILTER selects (GoogleTest's syntax), at most K of each test suite
//! (`quick/csrmv.`, `_/gemv.`, ...), spread evenly over it: its first, then every n/K-th. The
//! sample is the same in every run (the listing's order is the program's). The names go to the
//! program as `--gtest_filter` when they fit one argument ([`MAX_ARGUMENT`]; Linux allows 128
//! KiB), else in a GoogleTest flag file (`--gtest_flagfile`). rocBLAS's program sets its own
//! filter after GoogleTest has read a flag file, and so runs all its 1.2 million tests with
//! one: its sweeps keep K small enough for the command line.

/// The tests of `--gtest_list_tests` output, by test suite in the listing's order: a suite's
/// line is unindented and ends with `.`, its tests' lines follow indented (`  NAME  # GetParam()
/// = ...`). Each test is its full name, `SUITE.NAME`. Lines of neither form (a program's
/// banner) are skipped.
pub fn groups(list_output: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in list_output.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            current = (line.ends_with('.') && !line.contains(char::is_whitespace)).then(|| {
                out.push((line.to_string(), Vec::new()));
                out.len() - 1
            });
            continue;
        }
        if let (Some(g), Some(name)) = (current, line.split_whitespace().next()) {
            let full = format!("{}{name}", out[g].0);
            out[g].1.push(full);
        }
    }
    out.retain(|(_, tests)| !tests.is_empty());
    out
}

/// At most `per_group` of each group's tests that `filter` selects, spread evenly over them
/// (for n > K, the tests at indices floor(i * n / K), i < K), groups in order.
pub fn spread(groups: &[(String, Vec<String>)], filter: &str, per_group: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (_, tests) in groups {
        let chosen = crate::thrust::select(tests, filter);
        let n = chosen.len();
        if n <= per_group {
            out.extend(chosen);
        } else {
            out.extend((0..per_group).map(|i| chosen[i * n / per_group].clone()));
        }
    }
    out
}

/// The longest filter passed as one argument (below Linux's 128 KiB for one string).
pub const MAX_ARGUMENT: usize = 120_000;

/// A GoogleTest flag file with `filter` (the sample's names joined by `:`).
pub fn flagfile(filter: &str) -> String {
    format!("--gtest_filter={filter}\n")
}

/// Parses a suite line's `K:FILTER` (after `sample:`): K a whole number above 0.
pub fn parse(spec: &str) -> Result<(u32, &str), String> {
    let (k, filter) = spec.split_once(':').ok_or("sample: is written sample:K:FILTER")?;
    let k: u32 = k
        .parse()
        .ok()
        .filter(|&k| k > 0)
        .ok_or_else(|| format!("sample:K:FILTER needs K a whole number above 0, not '{k}'"))?;
    if filter.is_empty() {
        return Err("sample:K:FILTER needs a filter, e.g. sample:4:*".into());
    }
    Ok((k, filter))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "\
rocSPARSE version: 3.4.0
info: automatically adding filter to remove stress tests.
quick/axpyi.
  level1/f32_r_1200_5_0b  # GetParam() = { function: \"axpyi\" }
  level1/f64_r_1200_5_0b  # GetParam() = { function: \"axpyi\" }
quick/csrmv.
  level2/a_0
  level2/a_1
  level2/b_2
  level2/a_3
  level2/a_4
  level2/a_5
empty_suite.
pre_checkin/csrmv.
  level2/a_9
";

    #[test]
    fn the_listing_is_read_by_suite_without_banner_lines() {
        let g = groups(LIST);
        let names: Vec<&str> = g.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["quick/axpyi.", "quick/csrmv.", "pre_checkin/csrmv."]);
        assert_eq!(
            g[0].1,
            ["quick/axpyi.level1/f32_r_1200_5_0b", "quick/axpyi.level1/f64_r_1200_5_0b"]
        );
        assert_eq!(g[1].1.len(), 6);
    }

    #[test]
    fn each_suite_gives_at_most_k_tests_spread_over_it() {
        let g = groups(LIST);
        // csrmv's six tests, three of them: indices 0, 2, 4.
        assert_eq!(
            spread(&g, "quick/*", 3),
            [
                "quick/axpyi.level1/f32_r_1200_5_0b",
                "quick/axpyi.level1/f64_r_1200_5_0b",
                "quick/csrmv.level2/a_0",
                "quick/csrmv.level2/b_2",
                "quick/csrmv.level2/a_4",
            ]
        );
        // The filter applies before the spread: csrmv's five a_ tests, two of them (0 and 2).
        assert_eq!(
            spread(&g, "*csrmv*-*b_*:pre_checkin/*", 2),
            ["quick/csrmv.level2/a_0", "quick/csrmv.level2/a_3"]
        );
        assert_eq!(spread(&g, "*", 100).len(), 9);
        assert_eq!(
            flagfile(&spread(&g, "pre*", 1).join(":")),
            "--gtest_filter=pre_checkin/csrmv.level2/a_9\n"
        );
    }

    #[test]
    fn the_spec_needs_a_count_and_a_filter() {
        assert_eq!(parse("40:quick/*"), Ok((40, "quick/*")));
        assert_eq!(parse("3:_/*/quick*:x-y"), Ok((3, "_/*/quick*:x-y")));
        assert!(parse("0:*").unwrap_err().contains("above 0"));
        assert!(parse("x:*").unwrap_err().contains("'x'"));
        assert!(parse("4:").unwrap_err().contains("needs a filter"));
        assert!(parse("4").unwrap_err().contains("sample:K:FILTER"));
    }
}
