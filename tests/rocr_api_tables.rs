//! libxhsa's API-table plan against the real `hsa_api_trace.h` of the ROCm roots (6.4, 7.2):
//! a C++ program built against each root's headers prints the table majors, sizes and the
//! offset of every field libxhsa replaces; the plan for those versions must patch every hook
//! at exactly that offset, with nothing left out and no note. (ROCm 5.2's headers, the host's,
//! are checked against the bindgen layout in `entry::api_table`'s unit tests.)
mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{RocmRoot, ROCM64, ROCM72};
use xhsa::entry::api_table::{plan, Hook, Table, TableVersion, AMD_LAYOUTS};

/// `name -> number` as the header program prints them.
fn header_facts(root: &RocmRoot) -> BTreeMap<String, usize> {
    let dir =
        std::env::temp_dir().join(format!("xhsa-api-tables-{}-{}", root.tag, std::process::id()));
    let inc = dir.join("inc");
    std::fs::create_dir_all(&inc).unwrap();
    let hsa = root.path().join("usr/include/hsa");
    assert!(hsa.join("hsa_api_trace.h").exists(), "{} has no hsa_api_trace.h", hsa.display());
    let link = inc.join("hsa");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&hsa, &link).unwrap();
    let in_amd = |h: Hook| AMD_LAYOUTS.iter().any(|(_, f)| f.iter().any(|(x, _)| *x == h));
    let mut src = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <hsa/hsa_api_trace.h>\nint main() {\n",
    );
    src += "  printf(\"core_major %u\\n\", (unsigned)HSA_CORE_API_TABLE_MAJOR_VERSION);\n";
    src += "  printf(\"amd_major %u\\n\", (unsigned)HSA_AMD_EXT_API_TABLE_MAJOR_VERSION);\n";
    src += "  printf(\"core_size %zu\\n\", sizeof(CoreApiTable));\n";
    src += "  printf(\"amd_size %zu\\n\", sizeof(AmdExtTable));\n";
    for h in Hook::ALL {
        let table = if in_amd(h) { "AmdExtTable" } else { "CoreApiTable" };
        src += &format!("  printf(\"{0} %zu\\n\", offsetof({table}, {0}));\n", h.c_field());
    }
    src += "  return 0;\n}\n";
    let cpp = dir.join("tables.cpp");
    let exe = dir.join("tables");
    std::fs::write(&cpp, src).unwrap();
    // hsa_api_trace.h is C++; AMD_INTERNAL_BUILD makes it include its siblings by plain name.
    let out = Command::new("g++")
        .args(["-std=c++17", "-DAMD_INTERNAL_BUILD", "-w"])
        .arg("-I")
        .arg(&link)
        .arg("-I")
        .arg(&inc)
        .arg("-o")
        .arg(&exe)
        .arg(&cpp)
        .output()
        .expect("g++ (Debian package g++) is needed");
    assert!(out.status.success(), "g++ failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn check(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let f = header_facts(root);
    let version =
        |major: &str, size: &str| TableVersion { major: f[major] as u32, minor: f[size] as u32 };
    let p = plan(Some(version("core_major", "core_size")), Some(version("amd_major", "amd_size")));
    assert!(p.notes.is_empty(), "ROCm {}: {:?}", root.version, p.notes);
    assert_eq!(p.patches.len(), Hook::ALL.len(), "ROCm {}: every hook patched", root.version);
    for patch in &p.patches {
        let want = f[patch.hook.c_field()];
        assert_eq!(
            patch.offset,
            want,
            "ROCm {}: {:?} ({}) at {} in the plan, {} in the header",
            root.version,
            patch.hook,
            patch.hook.c_field(),
            patch.offset,
            want
        );
        let in_amd = patch.table == Table::AmdExt;
        assert_eq!(in_amd, patch.hook.c_field().starts_with("hsa_amd_"), "{:?}", patch.hook);
    }
}

#[test]
fn the_plan_patches_rocm64_tables_where_its_headers_put_each_field() {
    check(&ROCM64);
}

#[test]
fn the_plan_patches_rocm72_tables_where_its_headers_put_each_field() {
    check(&ROCM72);
}
