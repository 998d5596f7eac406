//! The header search of build.rs, run against fake environments and temporary directories.

#[allow(dead_code)]
#[path = "../build/headers.rs"]
mod headers;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use headers::{candidates, find, Candidate, HeaderSet, HSAKMT, NO_SYSTEM_HEADERS, ROCR};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hsa-sys-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    /// Creates empty files for every header of `set` under `self/sub`.
    fn headers(&self, sub: &str, set: &HeaderSet) -> PathBuf {
        let dir = self.0.join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        for h in set.headers {
            std::fs::write(dir.join(h), "").unwrap();
        }
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn env(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
    let pairs: Vec<(String, OsString)> =
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_os_str().to_owned())).collect();
    move |k| pairs.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone())
}

fn search(set: &HeaderSet, e: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    find(set, &candidates(set, e))
}

#[test]
fn env_var_comes_before_rocm_path_and_system() {
    let s = Scratch::new("order");
    let mine = s.headers("mine/hsa", &ROCR);
    s.headers("rocm/include/hsa", &ROCR);
    let e = env(&[("HSA_INCLUDE_DIR", &s.0.join("mine")), ("ROCM_PATH", &s.0.join("rocm"))]);
    let c = candidates(&ROCR, &e);
    assert_eq!(c[0], Candidate { dir: s.0.join("mine"), origin: "$HSA_INCLUDE_DIR".into() });
    assert_eq!(c[1].dir, s.0.join("rocm/include"));
    assert_eq!(c[2].dir, Path::new("/usr/include"), "system locations follow");
    assert_eq!(find(&ROCR, &c), Ok(mine));
}

#[test]
fn env_var_may_name_the_header_dir_or_its_parent() {
    let s = Scratch::new("forms");
    let flat = s.headers("flat", &ROCR);
    assert_eq!(search(&ROCR, &env(&[("HSA_INCLUDE_DIR", &flat)])), Ok(flat.clone()));
    let nested = s.headers("root/hsa", &ROCR);
    assert_eq!(search(&ROCR, &env(&[("HSA_INCLUDE_DIR", &s.0.join("root"))])), Ok(nested));
}

#[test]
fn rocm_path_layout() {
    let s = Scratch::new("rocm");
    let hsa = s.headers("include/hsa", &ROCR);
    let kmt = s.headers("include/hsakmt", &HSAKMT);
    let e = env(&[("ROCM_PATH", &s.0), (NO_SYSTEM_HEADERS, Path::new("1"))]);
    assert_eq!(search(&ROCR, &e), Ok(hsa));
    assert_eq!(search(&HSAKMT, &e), Ok(kmt));
}

#[test]
fn hsakmt_var_comes_before_hsa_var() {
    let s = Scratch::new("kmt");
    let a = s.headers("a", &HSAKMT);
    let b = s.headers("b", &HSAKMT);
    let e = env(&[("HSAKMT_INCLUDE_DIR", &a), ("HSA_INCLUDE_DIR", &b)]);
    assert_eq!(search(&HSAKMT, &e), Ok(a));
    assert_eq!(search(&HSAKMT, &env(&[("HSA_INCLUDE_DIR", &b)])), Ok(b));
}

#[test]
fn system_locations_can_be_switched_off() {
    let on = candidates(&ROCR, &env(&[]));
    assert_eq!(
        on.iter().map(|c| c.dir.to_str().unwrap()).collect::<Vec<_>>(),
        headers::SYSTEM_ROOTS
    );
    assert!(candidates(&ROCR, &env(&[(NO_SYSTEM_HEADERS, Path::new("1"))])).is_empty());
    // An empty variable counts as unset.
    assert_eq!(candidates(&ROCR, &env(&[("HSA_INCLUDE_DIR", Path::new(""))])), on);
}

#[test]
fn missing_header_message() {
    let s = Scratch::new("empty");
    let e =
        env(&[("HSA_INCLUDE_DIR", &s.0), ("ROCM_PATH", &s.0), (NO_SYSTEM_HEADERS, Path::new("1"))]);
    let msg = search(&ROCR, &e).unwrap_err();
    for needle in [
        "`hsa.h`",
        &s.0.display().to_string(),
        &s.0.join("hsa").display().to_string(),
        &s.0.join("include/hsa").display().to_string(),
        "libhsa-runtime-dev",
        "HSA_INCLUDE_DIR",
        "ROCM_PATH",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from:\n{msg}");
    }

    let msg = search(&HSAKMT, &e).unwrap_err();
    for needle in
        ["`hsakmt.h`", "libhsakmt-dev", "HSAKMT_INCLUDE_DIR", "HSA_INCLUDE_DIR", "ROCM_PATH"]
    {
        assert!(msg.contains(needle), "{needle:?} missing from:\n{msg}");
    }
}

#[test]
fn missing_companion_is_named() {
    let s = Scratch::new("partial");
    std::fs::write(s.0.join("hsa.h"), "").unwrap();
    let e = env(&[("HSA_INCLUDE_DIR", &s.0), (NO_SYSTEM_HEADERS, Path::new("1"))]);
    let msg = search(&ROCR, &e).unwrap_err();
    assert!(msg.contains("header `hsa_ext_amd.h`"), "{msg}");
}

#[test]
fn nothing_searched_is_said() {
    let msg = search(&ROCR, &env(&[(NO_SYSTEM_HEADERS, Path::new("1"))])).unwrap_err();
    assert!(msg.contains("No directory was searched"), "{msg}");
    assert!(msg.contains("libhsa-runtime-dev"), "{msg}");
}

#[test]
fn hsa_var_parent_finds_hsakmt_beside_hsa() {
    // Debian: /usr/include/hsa/hsa.h and /usr/include/hsakmt.h; ROCm 6: include/hsa/hsa.h and
    // include/hsakmt/hsakmt.h. Either way HSA_INCLUDE_DIR=<...>/hsa also locates the thunk.
    let s = Scratch::new("beside");
    let hsa = s.headers("debian/hsa", &ROCR);
    let kmt = s.headers("debian", &HSAKMT);
    let e = env(&[("HSA_INCLUDE_DIR", &hsa), (NO_SYSTEM_HEADERS, Path::new("1"))]);
    assert_eq!(search(&ROCR, &e), Ok(hsa));
    assert_eq!(search(&HSAKMT, &e), Ok(kmt));

    let hsa = s.headers("rocm/include/hsa", &ROCR);
    let kmt = s.headers("rocm/include/hsakmt", &HSAKMT);
    let e = env(&[("HSA_INCLUDE_DIR", &hsa), (NO_SYSTEM_HEADERS, Path::new("1"))]);
    assert_eq!(search(&HSAKMT, &e), Ok(kmt));
}
