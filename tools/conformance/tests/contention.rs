//! The quick part of the contention run (`./x conformance --contention`), in `./x test`:
//! rocRAND's basic suite at `XHSA_PRIORITY=10` beside rocRAND Philox's continuity tests at `-10`,
//! both under libxhsa (`LD_PRELOAD`) on one emulated GPU under ROCm 6.4. The continuity tests
//! generate megabytes in one call and in several and compare them, in kernels that run for
//! hundreds of milliseconds on the interpreter: libxhsa takes them off the GPU (CWSR saves their
//! waves) while the basic suite has work and puts them back after, and every test of both suites
//! must end as it does alone. About 1.5 minutes on 2 cores. Needs what tests/quick.rs needs
//! (the ROCm 6.4 root with `librocrand1-tests`).

mod common;

use xhsa_conformance::contention::{self, Role};
use xhsa_conformance::run::{End, Rocm};

#[test]
fn rocrand_suites_compute_the_same_beside_each_other_with_the_low_one_taken_off() {
    let high = common::rocrand_suite("rocrand-basic", "test_rocrand_basic", "*", 180);
    let low = common::rocrand_suite(
        "rocrand-philox-continuity",
        "test_rocrand_philox_prng",
        "*continuity*",
        240,
    );
    common::assert_installed(&[&high, &low], Rocm::V6_4);
    let setup = common::setup("conformance-contention", Rocm::V6_4);
    let r = contention::run_pair(&high, &low, &setup).unwrap();
    let t = contention::text(&r);
    eprintln!("{t}");
    for s in [&r.high, &r.low] {
        let who = format!("{} ({})", s.suite.name, s.role.label());
        for (what, o) in [("alone", &s.solo), ("together", &s.together)] {
            let err = std::fs::read_to_string(o.log.with_extension("stderr")).unwrap_or_default();
            let tail: Vec<&str> = err.lines().rev().take(20).collect();
            assert_eq!(o.end, End::Exited(0), "{who} {what}: {t}\n{}", tail.join("\n"));
            assert!(o.report.finished, "{who} {what}: {t}");
            assert!(
                o.libxhsa_ran,
                "{who} {what}: libxhsa left no exit summary\n{}",
                tail.join("\n")
            );
        }
        // Alone, every test passes (as natively: tests/quick.rs, docs/emulator.md's figures).
        let announced = s.solo.report.announced.unwrap_or(0);
        assert!(announced > 0, "{who}: {t}");
        assert_eq!(
            (s.solo.report.passed.len(), s.solo.failures().len()),
            (announced, 0),
            "{who}: {t}"
        );
        // Nothing of a process alone is taken off: it has no higher priority to yield to.
        assert_eq!(s.solo.taken_off, Some(0), "{who} alone: {t}");
        assert_eq!(s.differences(), Vec::new(), "{who}: results beside the other differ: {t}");
    }
    assert_eq!(r.high.solo.report.announced, Some(44), "{t}");
    assert_eq!(r.high.together.taken_off, Some(0), "the high suite yields to nothing: {t}");
    assert_eq!(r.low.role, Role::Low);
    assert!(
        r.low.together.taken_off.unwrap_or(0) >= 1 && r.demonstrated(),
        "the low suite was never taken off the GPU: no contention: {t}"
    );
    assert!(r.identical(), "{t}");
}
