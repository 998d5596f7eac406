//! Generates `hsa.rs` (ROCr) and `hsakmt.rs` (thunk) in `OUT_DIR` with bindgen.
//!
//! Header search, for each set, stops at the first directory holding all its headers:
//! 1. `$HSA_INCLUDE_DIR` (for the thunk: `$HSAKMT_INCLUDE_DIR`, then `$HSA_INCLUDE_DIR`),
//! 2. `$ROCM_PATH/include`,
//! 3. the system: `/usr/include` (Debian), then `/opt/rocm/include`.
//!
//! Each directory `D` is tried as `D/hsa.h` and `D/hsa/hsa.h` (`D/hsakmt.h`, `D/hsakmt/hsakmt.h`).
//! A missing header fails the build with a message naming it, every directory tried, the Debian
//! package and the variables above. `XHSA_SYS_NO_SYSTEM_HEADERS=1` skips step 3; it exists only
//! to provoke that message on a machine that has the headers (see `build/headers.rs`).
//!
//! Feature `link`: also link `libhsa-runtime64` (for test programs that call ROCr directly).
//!
//! Exposed to the crate as `rustc-env`: `HSA_SYS_HSA_INCLUDE_DIR`, `HSA_SYS_HSAKMT_INCLUDE_DIR`,
//! `HSA_SYS_ROCR_RELEASE`, `HSA_SYS_HSAKMT_RELEASE` (release = package version, or "unknown").

#[path = "build/headers.rs"]
mod headers;

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    for var in headers::ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build/headers.rs");

    let getenv = |k: &str| env::var_os(k);
    let locate = |set: &headers::HeaderSet| {
        let cands = headers::candidates(set, &getenv);
        // Say so when a set's own variable points nowhere useful, since the search goes on.
        let own = format!("${}", set.env_vars[0].0);
        for c in cands.iter().filter(|c| c.origin == own) {
            if !c.dir.join(set.main).is_file() && !c.dir.join(set.subdir).join(set.main).is_file() {
                println!(
                    "cargo:warning={} ({own}) holds no {}; searching on",
                    c.dir.display(),
                    set.main
                );
            }
        }
        headers::find(set, &cands).unwrap_or_else(|msg| panic!("\n{msg}\n"))
    };
    let hsa_dir = locate(&headers::ROCR);
    let kmt_dir = locate(&headers::HSAKMT);

    for (set, dir) in [(&headers::ROCR, &hsa_dir), (&headers::HSAKMT, &kmt_dir)] {
        for h in set.headers {
            println!("cargo:rerun-if-changed={}", dir.join(h).display());
        }
    }
    let release = |dir: &Path, main| headers::release_of(dir, main).unwrap_or("unknown".into());
    for (key, value) in [
        ("HSA_SYS_HSA_INCLUDE_DIR", hsa_dir.display().to_string()),
        ("HSA_SYS_HSAKMT_INCLUDE_DIR", kmt_dir.display().to_string()),
        ("HSA_SYS_ROCR_RELEASE", release(&hsa_dir, "hsa.h")),
        ("HSA_SYS_HSAKMT_RELEASE", release(&kmt_dir, "hsakmt.h")),
    ] {
        println!("cargo:rustc-env={key}={value}");
    }

    if env::var_os("CARGO_FEATURE_LINK").is_some() {
        // A ROCm install keeps the library in <prefix>/lib beside <prefix>/include/hsa; Debian's
        // is on the default search path.
        let lib = hsa_dir.ancestors().nth(2).map(|prefix| prefix.join("lib"));
        if let Some(lib) = lib.filter(|l| l.join("libhsa-runtime64.so").exists()) {
            println!("cargo:rustc-link-search=native={}", lib.display());
        }
        println!("cargo:rustc-link-lib=dylib=hsa-runtime64");
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    generate_hsa(&hsa_dir, &out.join("hsa.rs"));
    generate_hsakmt(&kmt_dir, &out.join("hsakmt.rs"));
}

fn builder(wrapper: &str, contents: String) -> bindgen::Builder {
    bindgen::Builder::default()
        .header_contents(wrapper, &contents)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false) // tests/abi.rs checks the layouts that matter, with spec numbers
        .prepend_enum_name(false)
        .generate_comments(false)
        .size_t_is_usize(true)
        .use_core()
}

fn includes(set: &headers::HeaderSet) -> String {
    set.headers.iter().map(|h| format!("#include \"{h}\"\n")).collect()
}

fn generate_hsa(dir: &Path, out: &Path) {
    // hsa_api_trace.h is C++ (decltype, structs used without `struct`), hence `-x c++`.
    // AMD_INTERNAL_BUILD makes it include "hsa_ext_amd.h" instead of "inc/hsa_ext_amd.h".
    let parent = dir.parent().unwrap_or(dir);
    let b = builder("xhsa_hsa_wrapper.hpp", includes(&headers::ROCR))
        .clang_args(["-x", "c++", "-std=c++14", "-DAMD_INTERNAL_BUILD"])
        .clang_arg(format!("-I{}", dir.display()))
        .clang_arg(format!("-I{}", parent.display()))
        .allowlist_function("hsa_.*|amd_.*")
        .allowlist_type("hsa_.*|amd_.*|HSA_.*|AMD_.*")
        .allowlist_var("hsa_.*|amd_.*|HSA_.*|AMD_.*")
        .allowlist_type(
            "ApiTableVersion|HsaApiTable|CoreApiTable|AmdExtTable|FinalizerExtTable|ImageExtTable|\
             ToolsApiTable|PcSamplingExtTable",
        )
        .blocklist_type("HsaApiTableContainer")
        // Declared with C++ linkage in ROCr 5.x's hsa_api_trace.h and not exported by
        // libhsa-runtime64: they exist only as AmdExtTable entries (`..._fn`), so a declaration
        // would carry a mangled name that links to nothing.
        .blocklist_function(
            "hsa_amd_queue_intercept_create|hsa_amd_queue_intercept_register|\
             hsa_amd_runtime_queue_create_register",
        );
    write(b, out, str::to_string);
}

fn generate_hsakmt(dir: &Path, out: &Path) {
    let b = builder("xhsa_hsakmt_wrapper.h", includes(&headers::HSAKMT))
        .clang_arg(format!("-I{}", dir.display()))
        .allowlist_function("hsaKmt.*")
        .allowlist_type("Hsa.*|HSA.*|HSAKMT_.*|_Hsa.*|_HSA.*")
        .allowlist_var("Hsa.*|HSA.*|HSAKMT_.*|_Hsa.*");
    write(b, out, natural_bitfield_align);
}

fn write(builder: bindgen::Builder, out: &Path, fixup: fn(&str) -> String) {
    let code = builder
        .generate()
        .unwrap_or_else(|e| panic!("hsa-sys: bindgen failed for {}: {e}", out.display()))
        .to_string();
    std::fs::write(out, fixup(&code))
        .unwrap_or_else(|e| panic!("hsa-sys: cannot write {}: {e}", out.display()));
}

/// hsakmttypes.h is under `#pragma pack(4)`, and bindgen gives its bitfield structs
/// `#[repr(align(4))]`, which rustc refuses inside a `packed(4)` type (E0588; rust-bindgen
/// issue #2179). Dropping the attribute and making the zero-sized `_bitfield_align_1` marker an
/// array of the integer of that alignment yields the same size and alignment, accepted by rustc.
/// `tests/abi.rs` checks the affected layouts against the C compiler's numbers.
fn natural_bitfield_align(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = String::with_capacity(code.len());
    let mut pending: Option<&str> = None; // integer type of a dropped `repr(align(N))`
    for (i, line) in lines.iter().enumerate() {
        let int = match line.trim() {
            "#[repr(align(1))]" => Some("u8"),
            "#[repr(align(2))]" => Some("u16"),
            "#[repr(align(4))]" => Some("u32"),
            "#[repr(align(8))]" => Some("u64"),
            _ => None,
        };
        let marker_follows = lines[i + 1..]
            .iter()
            .take(4)
            .any(|l| l.trim_start().starts_with("pub _bitfield_align_1:"));
        if int.is_some() && marker_follows {
            pending = int;
            continue;
        }
        match (pending, line.trim_start().starts_with("pub _bitfield_align_1:")) {
            (Some(int), true) => {
                out.push_str(&format!("    pub _bitfield_align_1: [{int}; 0],\n"));
                pending = None;
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
