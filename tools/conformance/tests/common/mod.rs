//! What the conformance tests share: rocRAND's suites from the ROCm 6.4 root, checked to be
//! installed, and a run set-up of this build's emulator and libxhsa.

use std::path::PathBuf;
use std::time::Duration;

use xhsa_conformance::run::Setup;
use xhsa_conformance::suites::Suite;

/// A suite of Debian's `librocrand1-tests`: `binary` run with `filter` within `secs`.
pub fn rocrand_suite(name: &str, binary: &str, filter: &str, secs: u64) -> Suite {
    Suite {
        name: name.into(),
        binary: format!("librocrand1-tests/{binary}"),
        timeout: Duration::from_secs(secs),
        filter: filter.into(),
        env: Vec::new(),
    }
}

/// Fails, naming what to install, unless every suite's program is in the ROCm 6.4 root.
pub fn assert_installed(suites: &[&Suite]) {
    let root = xhsa_emu::launcher::rocm::root(
        xhsa_emu::launcher::rocm::Rocm::V6_4,
        std::env::var_os(xhsa_emu::launcher::rocm::ROOT_VAR),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for s in suites {
        assert!(
            root.join(s.program().trim_start_matches('/')).exists(),
            "{} is not in the ROCm 6.4 root at {}: install it with `tools/conformance/install.sh librocrand1-tests` (as root; ./x test does)",
            s.program(),
            root.display()
        );
    }
}

/// This build's emulator, thunk and libxhsa (failing when one is not built), logs in the test
/// target directory's `logs`.
pub fn setup(logs: &str) -> Setup {
    // Built beside this package's binary (target/release): cargo builds those of other packages
    // only with the workspace (./x test builds it first).
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_xhsa-conformance")).parent().unwrap().to_path_buf();
    let setup = Setup {
        emu: dir.join("xhsa-emu"),
        libxhsa: dir.join("libxhsa.so"),
        log_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(logs),
        timeout_scale: 1.0,
        isa_stats: false,
    };
    for p in [&setup.emu, &dir.join("libhsakmt.so"), &setup.libxhsa] {
        assert!(p.exists(), "{} not built: cargo build --release --workspace", p.display());
    }
    setup
}
