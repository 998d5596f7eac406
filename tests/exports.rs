//! The dynamic symbol table of `libxhsa.so` holds exactly `xhsa::EXPORTED_SYMBOLS`.
//!
//! The users' earlier shim broke twice on symbol visibility (a version script hid C++ symbols one
//! of its libraries needed, and a `dlsym` resolved the wrong `hipLaunchKernel`), so the export
//! list is part of the contract and checked against the built artefact.
mod common;

use std::collections::BTreeSet;

#[test]
fn libxhsa_exports_exactly_the_interposed_symbols() {
    let lib = common::artifact("libxhsa.so");
    assert!(lib.exists(), "{} not built", lib.display());
    let defined = common::dynamic_symbols(&lib, true);
    let expected: BTreeSet<String> = xhsa::EXPORTED_SYMBOLS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        defined,
        expected,
        "exported symbols of {} differ from xhsa::EXPORTED_SYMBOLS",
        lib.display()
    );
}

#[test]
fn libxhsa_has_its_soname_and_needs_no_rocm_library() {
    let lib = common::artifact("libxhsa.so");
    let dynamic = common::readelf(&["-d"], &lib);
    assert!(dynamic.contains("Library soname: [libxhsa.so]"), "no soname in:\n{dynamic}");
    // libxhsa resolves ROCr at run time; linking it would pin one ROCm version.
    for needed in dynamic.lines().filter(|l| l.contains("(NEEDED)")) {
        assert!(!needed.contains("hsa") && !needed.contains("hip"), "libxhsa links {needed}");
    }
}
