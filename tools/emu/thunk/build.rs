//! Gives `libhsakmt.so.1` the symbol versions ROCr links against: the `HSAKMT_1` version node
//! (a version script listing every `hsaKmt*` function of `exports.txt`; each function is bound
//! to it by a `.symver` directive next to its definition, see `symver!`) and the soname
//! `libhsakmt.so.1`. The libc functions the library interposes (open, ioctl, ...) stay
//! unversioned, which matches any version a caller asks for.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=exports.txt");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let names: Vec<String> = std::fs::read_to_string("exports.txt")
        .expect("exports.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let script = format!("HSAKMT_1 {{\n  global:\n    {};\n}};\n", names.join(";\n    "));
    let script_path = out.join("hsakmt.map");
    std::fs::write(&script_path, script).expect("write hsakmt.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", script_path.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhsakmt.so.1");
}
