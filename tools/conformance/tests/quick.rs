//! The quick part of the conformance run, in `./x test`: rocRAND's basic suite (44 tests, about
//! ten seconds a run) on the emulated GPU under ROCm 6.4 (gfx90a, the ISA its packages carry)
//! and under ROCm 7.2 (gfx942, the MI308X's), natively and under libxhsa in both loading modes;
//! every test passes in each. Needs the roots (`./x setup`) with `librocrand1-tests` in them
//! (`./x test` installs it: `tools/conformance/install.sh --rocm V librocrand1-tests`): without
//! them the test fails and says so, as the other ROCm 6.4 and 7.2 tests do.

mod common;

use xhsa_conformance::run::{self, End, Mode, Rocm};
use xhsa_conformance::table::{self, SuiteResult};

fn rocrand_basic_passes_natively_and_under_libxhsa_on(rocm: Rocm) {
    let suite = common::rocrand_suite("rocrand-basic", "test_rocrand_basic", "*", 180);
    common::assert_installed(&[&suite], rocm);
    let setup = common::setup(&format!("conformance-quick-{rocm}"), rocm);
    let mut r = SuiteResult { suite: &suite, outcomes: Vec::new() };
    for m in Mode::ALL {
        r.outcomes.push(run::run(&suite, m, &setup).unwrap());
    }
    let t = table::text(&r);
    eprintln!("ROCm {rocm}, {}:\n{t}", setup.isa);
    for o in &r.outcomes {
        let log = std::fs::read_to_string(o.log.with_extension("stderr")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        let m = o.mode.label();
        assert_eq!(o.end, End::Exited(0), "{rocm} {m}: {t}\n{}", tail.join("\n"));
        assert_eq!(o.report.announced, Some(44), "{rocm} {m}: {t}");
        assert_eq!((o.report.passed.len(), o.report.failed.len()), (44, 0), "{rocm} {m}: {t}");
        assert!(o.report.finished, "{rocm} {m}: {t}");
        if o.mode != Mode::Native {
            assert!(
                o.libxhsa_ran,
                "{rocm} {m}: libxhsa left no exit summary: it did not run\n{}",
                tail.join("\n")
            );
        }
    }
}

#[test]
fn rocrand_basic_passes_natively_and_under_libxhsa() {
    rocrand_basic_passes_natively_and_under_libxhsa_on(Rocm::V6_4);
}

#[test]
fn rocrand_basic_on_rocm72_and_gfx942_passes_natively_and_under_libxhsa() {
    rocrand_basic_passes_natively_and_under_libxhsa_on(Rocm::V7_2);
}
