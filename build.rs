//! Build script of libxhsa: gives `libxhsa.so` its soname.
//!
//! The export list itself needs no linker script: rustc exports exactly the `#[no_mangle]
//! extern "C"` items of a cdylib, and `tests/exports.rs` checks the built library against
//! `xhsa::EXPORTED_SYMBOLS` so that nothing leaks and nothing we interpose is hidden.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // An soname lets `LD_PRELOAD`, `HSA_TOOLS_LIB` and `ldd` name the library the same way.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libxhsa.so");
}
