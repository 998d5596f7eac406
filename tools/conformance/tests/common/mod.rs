//! What the conformance tests share: rocRAND's suites from a ROCm root (6.4 or 7.2), checked to
//! be installed, and a run set-up of this build's emulator and libxhsa.

use std::path::PathBuf;
use std::time::Duration;

use xhsa_conformance::run::{Rocm, Setup};
use xhsa_conformance::suites::{Format, Suite};

/// A suite of Debian's `librocrand1-tests`: `binary` run with `filter` within `secs`.
pub fn rocrand_suite(name: &str, binary: &str, filter: &str, secs: u64) -> Suite {
    Suite {
        name: name.into(),
        binary: format!("librocrand1-tests/{binary}"),
        timeout: Duration::from_secs(secs),
        filter: filter.into(),
        format: Format::Gtest,
        env: Vec::new(),
    }
}

/// Fails, naming what to install, unless every suite's program is in the root of `rocm`.
pub fn assert_installed(suites: &[&Suite], rocm: Rocm) {
    let root = xhsa_emu::launcher::rocm::root_from_env(rocm).unwrap_or_else(|e| panic!("{e}"));
    for s in suites {
        assert!(
            root.join(s.program().trim_start_matches('/')).exists(),
            "{} is not in the ROCm {rocm} root at {}: install it with `tools/conformance/install.sh --rocm {rocm} librocrand1-tests` (as root; ./x test does)",
            s.program(),
            root.display()
        );
    }
}

/// This build's emulator, thunk and libxhsa (failing when one is not built), logs in the test
/// target directory's `logs`.
pub fn setup(logs: &str, rocm: Rocm) -> Setup {
    // Built beside this package's binary (target/release): cargo builds those of other packages
    // only with the workspace (./x test builds it first).
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_xhsa-conformance")).parent().unwrap().to_path_buf();
    let setup = Setup {
        emu: dir.join("xhsa-emu"),
        libxhsa: dir.join("libxhsa.so"),
        log_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(logs),
        timeout_scale: 1.0,
        isa_stats: false,
        rocm,
        isa: xhsa_conformance::run::default_isa(rocm).into(),
    };
    for p in [&setup.emu, &dir.join("libhsakmt.so"), &setup.libxhsa] {
        assert!(p.exists(), "{} not built: cargo build --release --workspace", p.display());
    }
    setup
}
