//! Bindgen of the system's `<linux/kfd_ioctl.h>`, for the tests only.
//!
//! The crate's ABI is hand-written in `src/abi/`; nothing in the library uses what this script
//! generates. The tests (`tests/system_header.rs`) compare the hand-written structs, request
//! numbers and constants with this bindgen, so a transcription error fails the tests.
//!
//! The header is `$KFD_IOCTL_H` if set, else `/usr/include/linux/kfd_ioctl.h`. When it is
//! absent, the script generates nothing and does not set `cfg(system_kfd_header)`; the
//! comparison tests are then compiled out and the build still succeeds.
//!
//! What it writes to `OUT_DIR`:
//! - `kfd_sys.rs`: the bindgen output. The request macros (`AMDKFD_IOC_X` expands to the
//!   function-like `_IOWR(...)`) are not numbers bindgen can read, so a generated shim header
//!   defines `static const unsigned long xhsa_sys_AMDKFD_IOC_X = AMDKFD_IOC_X;` for each one
//!   the header has, and clang evaluates the initialisers; the same for the `KFD_EC_MASK_*`
//!   macros, which call the function-like `KFD_EC_MASK`.
//! - `kfd_sys_tables.rs`: tables over everything the header defines, so that the tests compare
//!   whatever this header version has, item by item, without knowing the version in advance:
//!   `SYS_REQUESTS` (name, number), `SYS_CONSTS` (name, value), `sys_layouts()` (struct name,
//!   `size_of`, `align_of`, and `(field, offset_of)` in declaration order, all computed by
//!   rustc on the bindgen types), and `SYS_HEADER`, the header's path.
//!
//! And it sets `cfg(system_kfd_header)`.
//!
//! Debian's `linux-libc-dev` ships `kfd_ioctl.h` but not the `<drm/drm.h>` it includes (that
//! comes with libdrm-dev, under another path); the header uses nothing from it but the `__u32`
//! family, so a stub `drm/drm.h` that includes `<linux/types.h>` is put last on the include
//! path (`-idirafter`), used only when no real one is found.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const DEFAULT_HEADER: &str = "/usr/include/linux/kfd_ioctl.h";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=KFD_IOCTL_H");
    println!("cargo::rustc-check-cfg=cfg(system_kfd_header)");

    let header = env::var_os("KFD_IOCTL_H")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_HEADER));
    println!("cargo::rerun-if-changed={}", header.display());
    if !header.is_file() {
        println!(
            "cargo::warning=no KFD header at {}: the system-header comparison tests are skipped",
            header.display()
        );
        return;
    }
    let header = header.canonicalize().expect("canonicalize the KFD header path");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let text = fs::read_to_string(&header).expect("read the KFD header");

    let stub_dir = out.join("kfd_stub_include");
    fs::create_dir_all(stub_dir.join("drm")).expect("create the stub include dir");
    fs::write(stub_dir.join("drm/drm.h"), "#include <linux/types.h>\n").expect("write stub drm.h");

    let requests = object_macros(&text, "AMDKFD_IOC_");
    let ec_masks = object_macros(&text, "KFD_EC_MASK_");
    let shim = out.join("kfd_sys_shim.h");
    fs::write(&shim, shim_header(&header, &requests, &ec_masks)).expect("write the shim header");

    let bindings = bindgen::Builder::default()
        .header(shim.to_str().expect("OUT_DIR is UTF-8"))
        .clang_arg("-idirafter")
        .clang_arg(stub_dir.to_str().expect("OUT_DIR is UTF-8"))
        .allowlist_file(regex_escape(header.to_str().expect("header path is UTF-8")))
        .allowlist_file(regex_escape(shim.to_str().expect("OUT_DIR is UTF-8")))
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!("bindgen of {} failed ({e}); is libclang installed?", header.display())
        })
        .to_string();
    fs::write(out.join("kfd_sys.rs"), &bindings).expect("write kfd_sys.rs");

    let items = scan_bindings(&bindings);
    fs::write(out.join("kfd_sys_tables.rs"), tables(&header, &requests, &items))
        .expect("write kfd_sys_tables.rs");

    println!("cargo::rustc-cfg=system_kfd_header");
}

/// Names of the object-like macros `#define PREFIX...` of `text` (a function-like macro has
/// `(` right after its name and is skipped).
fn object_macros(text: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.trim_start();
        let name: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.starts_with(prefix) && !rest[name.len()..].starts_with('(') {
            names.push(name);
        }
    }
    names
}

fn shim_header(header: &Path, requests: &[String], ec_masks: &[String]) -> String {
    let mut s = format!("#include \"{}\"\n", header.display());
    for name in requests {
        writeln!(s, "static const unsigned long xhsa_sys_{name} = {name};").unwrap();
    }
    for name in ec_masks {
        writeln!(s, "static const unsigned long long xhsa_sys_{name} = {name};").unwrap();
    }
    s
}

#[derive(Default)]
struct Items {
    /// `pub struct` / `pub union` names with their fields, in order.
    types: Vec<(String, Vec<String>)>,
    /// `pub const` names.
    consts: BTreeSet<String>,
}

/// Reads the names bindgen generated (its output is formatted one item per line).
fn scan_bindings(bindings: &str) -> Items {
    let mut items = Items::default();
    let mut in_type = false;
    for line in bindings.lines() {
        if in_type {
            if line.starts_with('}') {
                in_type = false;
            } else if let Some(field) = line.trim().strip_prefix("pub ") {
                if let Some((name, _)) = field.split_once(':') {
                    items.types.last_mut().unwrap().1.push(name.trim().to_string());
                }
            }
            continue;
        }
        let decl = line.strip_prefix("pub struct ").or_else(|| line.strip_prefix("pub union "));
        if let Some(decl) = decl {
            let name: String =
                decl.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // Only the header's own types (not bindgen helpers like __IncompleteArrayField).
            if name.starts_with("kfd_") && decl.trim_end().ends_with('{') {
                items.types.push((name, Vec::new()));
                in_type = true;
            }
        } else if let Some(decl) = line.strip_prefix("pub const ") {
            if let Some((name, _)) = decl.split_once(':') {
                items.consts.insert(name.trim().to_string());
            }
        }
    }
    items
}

fn tables(header: &Path, requests: &[String], items: &Items) -> String {
    let mut s = String::new();
    writeln!(s, "/// The header these bindings come from.").unwrap();
    writeln!(s, "pub const SYS_HEADER: &str = {:?};", header.display().to_string()).unwrap();
    writeln!(s, "/// Every `AMDKFD_IOC_*` request of the header, as clang evaluated it.").unwrap();
    writeln!(s, "pub const SYS_REQUESTS: &[(&str, u64)] = &[").unwrap();
    for name in requests {
        writeln!(s, "    ({name:?}, xhsa_sys_{name} as u64),").unwrap();
    }
    writeln!(s, "];").unwrap();
    writeln!(s, "/// Every integer constant (macro, enum value, evaluated macro) of the header.")
        .unwrap();
    writeln!(s, "pub const SYS_CONSTS: &[(&str, i128)] = &[").unwrap();
    for name in &items.consts {
        let c_name = name.strip_prefix("xhsa_sys_").unwrap_or(name);
        if c_name.starts_with("AMDKFD_IOC_") {
            continue; // in SYS_REQUESTS
        }
        writeln!(s, "    ({c_name:?}, {name} as i128),").unwrap();
    }
    writeln!(s, "];").unwrap();
    writeln!(s, "/// (name, size_of, align_of, [(field, offset_of)]) of every struct and union.")
        .unwrap();
    writeln!(s, "#[allow(clippy::type_complexity)]").unwrap();
    writeln!(
        s,
        "pub fn sys_layouts() -> Vec<(&'static str, usize, usize, Vec<(&'static str, usize)>)> {{"
    )
    .unwrap();
    writeln!(s, "    vec![").unwrap();
    for (ty, fields) in &items.types {
        writeln!(
            s,
            "        ({ty:?}, ::std::mem::size_of::<{ty}>(), ::std::mem::align_of::<{ty}>(), vec!["
        )
        .unwrap();
        for field in fields {
            let c_field = c_field_name(field);
            writeln!(s, "            ({c_field:?}, ::std::mem::offset_of!({ty}, {field})),")
                .unwrap();
        }
        writeln!(s, "        ]),").unwrap();
    }
    writeln!(s, "    ]").unwrap();
    writeln!(s, "}}").unwrap();
    s
}

/// The C name of a bindgen field: bindgen appends `_` to names that are Rust keywords.
fn c_field_name(field: &str) -> &str {
    const KEYWORDS: &[&str] = &[
        "as", "box", "const", "crate", "dyn", "enum", "fn", "impl", "in", "loop", "match", "mod",
        "move", "mut", "pub", "ref", "self", "super", "trait", "type", "unsafe", "use", "where",
    ];
    match field.strip_suffix('_') {
        Some(name) if KEYWORDS.contains(&name) => name,
        _ => field,
    }
}

/// `s` as a regex matching itself.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
