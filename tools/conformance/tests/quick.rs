//! The quick part of the conformance run, in `./x test`: rocRAND's basic suite (44 tests, about
//! ten seconds a run) on the emulated GPU under ROCm 6.4, natively and under libxhsa in both
//! loading modes; every test passes in each. Needs the ROCm 6.4 root (`./x setup`) with
//! `librocrand1-tests` in it (`./x test` installs it: `tools/conformance/install.sh
//! librocrand1-tests`): without them the test fails and says so, as the other ROCm 6.4 tests do.

use std::path::PathBuf;
use std::time::Duration;

use xhsa_conformance::run::{self, End, Mode, Setup};
use xhsa_conformance::suites::Suite;
use xhsa_conformance::table::{self, SuiteResult};

#[test]
fn rocrand_basic_passes_natively_and_under_libxhsa() {
    let root = xhsa_emu::launcher::rocm::root(
        xhsa_emu::launcher::rocm::Rocm::V6_4,
        std::env::var_os(xhsa_emu::launcher::rocm::ROOT_VAR),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let suite = Suite {
        name: "rocrand-basic".into(),
        binary: "librocrand1-tests/test_rocrand_basic".into(),
        timeout: Duration::from_secs(180),
        filter: "*".into(),
        env: Vec::new(),
    };
    assert!(
        root.join(suite.program().trim_start_matches('/')).exists(),
        "{} is not in the ROCm 6.4 root at {}: install it with `tools/conformance/install.sh librocrand1-tests` (as root; ./x test does)",
        suite.program(),
        root.display()
    );
    // Built beside this package's binary (target/release): cargo builds those of other packages
    // only with the workspace (./x test builds it first).
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_xhsa-conformance")).parent().unwrap().to_path_buf();
    let setup = Setup {
        emu: dir.join("xhsa-emu"),
        libxhsa: dir.join("libxhsa.so"),
        log_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance-quick"),
        timeout_scale: 1.0,
        isa_stats: false,
    };
    for p in [&setup.emu, &dir.join("libhsakmt.so"), &setup.libxhsa] {
        assert!(p.exists(), "{} not built: cargo build --release --workspace", p.display());
    }
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
