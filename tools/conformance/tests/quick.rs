//! The quick part of the conformance run, in `./x test`: rocRAND's basic suite (44 tests, about
//! ten seconds a run) on the emulated GPU under ROCm 6.4, natively and under libxhsa in both
//! loading modes; every test passes in each. Needs the ROCm 6.4 root (`./x setup`) with
//! `librocrand1-tests` in it (`./x test` installs it: `tools/conformance/install.sh
//! librocrand1-tests`): without them the test fails and says so, as the other ROCm 6.4 tests do.

mod common;

use xhsa_conformance::run::{self, End, Mode};
use xhsa_conformance::table::{self, SuiteResult};

#[test]
fn rocrand_basic_passes_natively_and_under_libxhsa() {
    let suite = common::rocrand_suite("rocrand-basic", "test_rocrand_basic", "*", 180);
    common::assert_installed(&[&suite]);
    let setup = common::setup("conformance-quick");
    let mut r = SuiteResult { suite: &suite, outcomes: Vec::new() };
    for m in Mode::ALL {
        r.outcomes.push(run::run(&suite, m, &setup).unwrap());
    }
    let t = table::text(&r);
    eprintln!("{t}");
    for o in &r.outcomes {
        let log = std::fs::read_to_string(o.log.with_extension("stderr")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        let m = o.mode.label();
        assert_eq!(o.end, End::Exited(0), "{m}: {t}\n{}", tail.join("\n"));
        assert_eq!(o.report.announced, Some(44), "{m}: {t}");
        assert_eq!((o.report.passed.len(), o.report.failed.len()), (44, 0), "{m}: {t}");
        assert!(o.report.finished, "{m}: {t}");
        if o.mode != Mode::Native {
            assert!(
                o.libxhsa_ran,
                "{m}: libxhsa left no exit summary: it did not run\n{}",
                tail.join("\n")
            );
        }
    }
}
