//! Helpers shared by the integration tests: where cargo put the artefacts, and ELF inspection
//! through binutils (present wherever the project builds).
#![allow(dead_code)]

pub mod scenarios;
pub mod wait;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`: the directory holding the cdylibs and binaries of this build.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test-binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// A library or binary cargo built: `target/<profile>/NAME`, or `deps/NAME` when only the
/// test build produced it.
pub fn artifact(name: &str) -> PathBuf {
    let dir = target_dir();
    let top = dir.join(name);
    if top.exists() {
        return top;
    }
    dir.join("deps").join(name)
}

/// Runs `readelf ARGS FILE` and returns its standard output.
pub fn readelf(args: &[&str], file: &Path) -> String {
    let out =
        Command::new("readelf").args(args).arg(file).output().expect("run readelf (binutils)");
    assert!(out.status.success(), "readelf {args:?} {} failed", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The dynamic symbols of an ELF file: the defined ones (with `defined`) or the undefined ones,
/// each with its version suffix stripped.
pub fn dynamic_symbols(file: &Path, defined: bool) -> BTreeSet<String> {
    let flag = if defined { "--defined-only" } else { "--undefined-only" };
    let out = Command::new("nm").args(["-D", flag]).arg(file).output().expect("run nm (binutils)");
    assert!(out.status.success(), "nm -D {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|s| s.split('@').next().unwrap_or(s).to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Running test programs on the emulated GPU (`xhsa-emu run -- PROGRAM ARGS`).
//
// The programs live in tests/programs (HIP, C++ and C), the kernels they share in tests/kernels.
// Each is built once per source version: into `target/xhsa-test-programs/NAME-HASH`, the hash
// covering the compiler command and every source file, so concurrent test threads and test
// binaries reuse one build; a build goes to a temporary name first and is renamed into place.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// The repository root (the root package's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/` of the repository.
pub fn tests_dir() -> PathBuf {
    repo_root().join("tests")
}

/// The emulator launcher `target/<profile>/xhsa-emu`, after checking that it and the emulated
/// thunk `libhsakmt.so` were built; panics with what to do otherwise.
pub fn emu_launcher() -> PathBuf {
    let emu = artifact("xhsa-emu");
    let thunk = artifact("libhsakmt.so");
    let missing: Vec<String> =
        [&emu, &thunk].iter().filter(|p| !p.exists()).map(|p| p.display().to_string()).collect();
    assert!(
        missing.is_empty(),
        "the emulator is not built: missing {}. Build the whole workspace first \
         (`cargo build --workspace`, as `./x test` does), with the same profile as this test.",
        missing.join(", ")
    );
    emu
}

/// The first `name` on `PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A tool the tests need, or a panic naming the Debian package that provides it.
pub fn require_tool(name: &str, package: &str) -> PathBuf {
    find_in_path(name).unwrap_or_else(|| {
        panic!(
            "`{name}` not found on PATH: install the Debian package `{package}` \
             (`sudo ./x setup` installs everything in tools/debian-packages.txt)"
        )
    })
}

/// FNV-1a, 64 bits: a stable content hash for the build cache (std's hasher may change).
fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Field separator, so that ("ab", "c") and ("a", "bc") differ.
    *h ^= 0xff;
    *h = h.wrapping_mul(0x0100_0000_01b3);
}

/// Every file a test program may include: all of tests/kernels and the headers of
/// tests/programs, sorted.
fn shared_sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (dir, header_only) in
        [(tests_dir().join("kernels"), false), (tests_dir().join("programs"), true)]
    {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let p = e.path();
                let is_header = p.extension().is_some_and(|x| x == "h");
                if p.is_file() && (!header_only || is_header) {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Where the cached builds go: `target/xhsa-test-programs`.
pub fn program_cache_dir() -> PathBuf {
    let dir = target_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(target_dir)
        .join("xhsa-test-programs");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Builds `output_name` (`NAME` or `NAME.EXT`) with `tool ARGS`, where the argument `{OUT}`
/// stands for the output file, at most once per content hash; returns the built file.
fn build_cached(output_name: &str, tool: &Path, args: &[OsString], inputs: &[PathBuf]) -> PathBuf {
    static BUILDS: OnceLock<Mutex<HashMap<String, Arc<OnceLock<PathBuf>>>>> = OnceLock::new();

    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    fnv1a(&mut h, tool.as_os_str().as_encoded_bytes());
    if let Ok(m) = std::fs::metadata(tool) {
        fnv1a(&mut h, format!("{:?}/{}", m.modified().ok(), m.len()).as_bytes());
    }
    for a in args {
        fnv1a(&mut h, a.as_encoded_bytes());
    }
    for p in inputs {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
        fnv1a(&mut h, p.as_os_str().as_encoded_bytes());
        fnv1a(&mut h, &data);
    }
    let (stem, ext) = match output_name.split_once('.') {
        Some((s, e)) => (s, format!(".{e}")),
        None => (output_name, String::new()),
    };
    let out = program_cache_dir().join(format!("{stem}-{h:016x}{ext}"));
    let key = out.display().to_string();

    let cell = {
        let mut map =
            BUILDS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key).or_default().clone()
    };
    cell.get_or_init(|| {
        if out.exists() {
            return out.clone();
        }
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = out.with_file_name(format!(
            "{}.tmp-{}-{seq}{ext}",
            out.file_stem().and_then(|s| s.to_str()).unwrap_or(stem),
            std::process::id()
        ));
        let real_args: Vec<OsString> = args
            .iter()
            .map(|a| if a == "{OUT}" { tmp.clone().into_os_string() } else { a.clone() })
            .collect();
        let started = Instant::now();
        let res = Command::new(tool)
            .args(&real_args)
            .current_dir(repo_root())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
        if !res.status.success() || !tmp.exists() {
            let _ = std::fs::remove_file(&tmp);
            panic!(
                "building {output_name} failed ({}): {} {}\n--- stdout\n{}\n--- stderr\n{}",
                res.status,
                tool.display(),
                real_args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
                String::from_utf8_lossy(&res.stdout),
                String::from_utf8_lossy(&res.stderr)
            );
        }
        std::fs::rename(&tmp, &out)
            .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), out.display()));
        eprintln!("built {} in {:.1} s", out.display(), started.elapsed().as_secs_f64());
        out.clone()
    })
    .clone()
}

/// The source of test program NAME, `tests/programs/NAME.{hip,cpp,c}`, with its directory.
fn program_source(name: &str) -> (PathBuf, PathBuf) {
    let dir = tests_dir().join("programs");
    let src = ["hip", "cpp", "c"]
        .iter()
        .map(|e| dir.join(format!("{name}.{e}")))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no test program {name}.hip/.cpp/.c in {}", dir.display()));
    (dir, src)
}

/// Builds test program `tests/programs/NAME.{hip,cpp,c}` (cached) and returns the executable:
/// `.hip` with `hipcc --offload-arch=gfx90a`, `.cpp` the same plus `-lhiprand` (the hipRAND
/// program), `.c` with `cc` against `libhsa-runtime64`.
pub fn program(name: &str) -> PathBuf {
    program_with_inputs(name, &[])
}

/// As [`program`], for a program that also includes files outside the shared headers (e.g. a
/// `.c` file of tests/programs it `#include`s): `extra` are covered by the build-cache hash, so
/// a change to them rebuilds the program.
pub fn program_with_inputs(name: &str, extra: &[PathBuf]) -> PathBuf {
    let (dir, src) = program_source(name);
    let ext = src.extension().and_then(|e| e.to_str()).unwrap_or("");
    let kernels = tests_dir().join("kernels");
    let mut args: Vec<OsString> = Vec::new();
    let tool = if ext == "c" {
        let cc = find_in_path("cc")
            .or_else(|| find_in_path("gcc"))
            .unwrap_or_else(|| require_tool("gcc", "gcc"));
        for a in ["-std=gnu11", "-O2", "-g", "-Wall"] {
            args.push(a.into());
        }
        args.push(OsString::from("-I"));
        args.push(dir.clone().into_os_string());
        args.push("-o".into());
        args.push("{OUT}".into());
        args.push(src.clone().into_os_string());
        for a in ["-lhsa-runtime64", "-lm"] {
            args.push(a.into());
        }
        cc
    } else {
        let hipcc = require_tool("hipcc", "hipcc");
        for a in ["--offload-arch=gfx90a", "-O2", "-g", "-Wall"] {
            args.push(a.into());
        }
        for inc in [&kernels, &dir] {
            args.push(OsString::from("-I"));
            args.push(inc.clone().into_os_string());
        }
        args.push("-o".into());
        args.push("{OUT}".into());
        args.push(src.clone().into_os_string());
        if ext == "cpp" {
            args.push("-lhiprand".into());
        }
        hipcc
    };
    let mut inputs = vec![src];
    inputs.extend(shared_sources());
    inputs.extend(extra.iter().cloned());
    build_cached(name, &tool, &args, &inputs)
}

/// A ROCm userland in its own root (built by `./x setup`) that `xhsa-emu run --rocm` puts a
/// command on: its version, the tag its cached builds carry, its C compiler, the variables that
/// name its root and skip it.
#[derive(Clone, Copy, Debug)]
pub struct RocmRoot {
    pub version: &'static str,
    pub tag: &'static str,
    pub clang: &'static str,
    pub root_var: &'static str,
    pub default_root: &'static str,
    pub skip_var: &'static str,
}

/// Debian sid's ROCm 6.4 (tools/rocm64).
pub const ROCM64: RocmRoot = RocmRoot {
    version: "6.4",
    tag: "rocm64",
    clang: "clang-21",
    root_var: "XHSA_ROCM64_ROOT",
    default_root: "/var/lib/xhsa/rocm-6.4",
    skip_var: "XHSA_ROCM64",
};

/// Debian experimental's ROCm 7.2 (tools/rocm72).
pub const ROCM72: RocmRoot = RocmRoot {
    version: "7.2",
    tag: "rocm72",
    clang: "clang-22",
    root_var: "XHSA_ROCM72_ROOT",
    default_root: "/var/lib/xhsa/rocm-7.2",
    skip_var: "XHSA_ROCM72",
};

impl RocmRoot {
    /// Whether a test on this root runs: false (a reason printed) when `$SKIP_VAR=skip`
    /// (`./x setup` then leaves the root out); otherwise the root must be built, or the test fails
    /// here, naming `./x setup`.
    pub fn available(&self) -> bool {
        if std::env::var(self.skip_var).is_ok_and(|v| v == "skip") {
            eprintln!(
                "skipped: {}=skip (the ROCm {} root is left out of set-up)",
                self.skip_var, self.version
            );
            return false;
        }
        let root = self.path();
        assert!(
            root.join(".xhsa-ready").is_file(),
            "the ROCm {} root at {} is missing or incomplete: build it with `./x setup` (as root), \
             point ${} at one, or set {}=skip to leave these tests out",
            self.version,
            root.display(),
            self.root_var,
            self.skip_var
        );
        true
    }

    /// Where the root is: `$ROOT_VAR`, else its default place.
    pub fn path(&self) -> PathBuf {
        std::env::var_os(self.root_var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(self.default_root))
    }

    /// Options to run a command on this userland (`xhsa-emu run --rocm VERSION --isa ISA`,
    /// 240 s).
    pub fn opts(&self, isa: &str) -> RunOpts {
        RunOpts {
            emu_args: self.args(isa),
            timeout: Duration::from_secs(240),
            ..RunOpts::default()
        }
    }

    /// The three ways a program meets libxhsa on this userland: not at all, `LD_PRELOAD`,
    /// `HSA_TOOLS_LIB` (with libxhsa's summary logged).
    pub fn modes(&self, isa: &str) -> Vec<(&'static str, RunOpts)> {
        vec![
            ("native", self.opts(isa)),
            (
                "LD_PRELOAD",
                self.opts(isa).with_env("LD_PRELOAD", libxhsa()).with_env("XHSA_LOG", "info"),
            ),
            (
                "HSA_TOOLS_LIB",
                self.opts(isa).with_env("HSA_TOOLS_LIB", libxhsa()).with_env("XHSA_LOG", "info"),
            ),
        ]
    }

    /// ROCr 6.x/7.x's `hsa_amd_signal_wait_any` stores the satisfying value at the satisfying
    /// signal's index in a vector of one element: any return with an index above 0 writes past
    /// it (docs/preemption.md). libxhsa's completion waiter must never let that happen, whatever
    /// the allocator. glibc's malloc check (`libc_malloc_debug.so`, `glibc.malloc.check=3`)
    /// keeps a check byte right after every allocation and aborts in `free` when it was
    /// overwritten, as an allocator without slack (jemalloc, tcmalloc) would be corrupted: the
    /// `hip_basic` memcpy and priority sections (several queues' tracking signals armed at once,
    /// the low stream's queue taken off for the high one), four runs at a time, in both loading
    /// modes, must all pass under it. (The waiter of the eighth and ninth sessions, ROCr's wait
    /// over at most two armed signals, aborted in 12 of 12 such runs on 6.4.)
    pub fn assert_completion_waits_leave_the_heap_intact(&self) {
        const MALLOC_DEBUG: &str = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0";
        let prog = self.program("hip_basic", "gfx942", &[]);
        let prog = prog.display().to_string();
        let script = r#"LD_PRELOAD="$LD_PRELOAD $0" GLIBC_TUNABLES=glibc.malloc.check=3 exec "$@""#;
        for (mode, o) in self.modes("gfx942").into_iter().filter(|(m, _)| *m != "native") {
            let _lock = run_lock(true);
            let runs: Vec<_> = (0..4)
                .map(|_| {
                    spawn_under_emu(
                        Path::new("/bin/sh"),
                        &["-c", script, MALLOC_DEBUG, &prog, "memcpy", "priority"],
                        &o,
                    )
                })
                .collect();
            for (i, run) in runs.into_iter().enumerate() {
                let out = run.wait();
                assert!(
                    out.status.success() && out.stdout.contains("RESULT: PASS"),
                    "ROCm {}, {mode}, run {i} (under glibc's malloc check)\n{}",
                    self.version,
                    out.report()
                );
                assert_libxhsa_scheduled(mode, &out);
            }
        }
    }

    /// The `xhsa-emu run` options that put a command on this userland, with the ISA the emulated
    /// GPU reports.
    pub fn args(&self, isa: &str) -> Vec<String> {
        vec!["--rocm".into(), self.version.into(), "--isa".into(), isa.into()]
    }

    /// Builds test program `tests/programs/NAME.{hip,cpp,c}` (cached) with this root's compilers,
    /// run through `xhsa-emu run --rocm VERSION`: `.hip` and `.cpp` with its `hipcc
    /// --offload-arch=ARCH` (`.cpp` linked with `libs`), `.c` with its clang against its
    /// `libhsa-runtime64`.
    pub fn program(&self, name: &str, arch: &str, libs: &[&str]) -> PathBuf {
        let (dir, src) = program_source(name);
        let c = src.extension().is_some_and(|e| e == "c");
        let kernels = tests_dir().join("kernels");
        let mut args: Vec<OsString> =
            ["run", "--rocm", self.version, "--"].iter().map(OsString::from).collect();
        if c {
            for a in
                [self.clang, "-std=gnu11", "-O2", "-g", "-Wall", "-Wno-unused-but-set-variable"]
            {
                args.push(a.into());
            }
        } else {
            args.push("hipcc".into());
            for a in [
                format!("--offload-arch={arch}").as_str(),
                "-O2",
                "-g",
                "-Wall",
                "-Wno-unused-result",
                "-Wno-unused-value",
            ] {
                args.push(a.into());
            }
            args.push(OsString::from("-I"));
            args.push(kernels.into_os_string());
        }
        args.push(OsString::from("-I"));
        args.push(dir.clone().into_os_string());
        args.push("-o".into());
        args.push("{OUT}".into());
        args.push(src.clone().into_os_string());
        if c {
            for a in ["-lhsa-runtime64", "-lm", "-lpthread"] {
                args.push(a.into());
            }
        }
        for l in libs {
            args.push(format!("-l{l}").into());
        }
        let mut inputs = vec![src];
        inputs.extend(shared_sources());
        build_cached(&format!("{name}-{}-{arch}", self.tag), &emu_launcher(), &args, &inputs)
    }

    /// Builds `tests/kernels/NAME.hip` into a raw code object for `arch` with this root's hipcc
    /// (cached), for the HSA loader API of its ROCr.
    pub fn code_object(&self, name: &str, arch: &str) -> PathBuf {
        let src = tests_dir().join("kernels").join(format!("{name}.hip"));
        assert!(src.exists(), "no kernel source {}", src.display());
        let offload = format!("--offload-arch={arch}");
        let args: Vec<OsString> = [
            "run",
            "--rocm",
            self.version,
            "--",
            "hipcc",
            "--genco",
            "--no-gpu-bundle-output",
            offload.as_str(),
            "-O2",
            "-o",
            "{OUT}",
        ]
        .iter()
        .map(OsString::from)
        .chain([src.clone().into_os_string()])
        .collect();
        let mut inputs = vec![src];
        inputs.extend(shared_sources());
        build_cached(&format!("{name}-{}-{arch}.hsaco", self.tag), &emu_launcher(), &args, &inputs)
    }
}

/// [`RocmRoot::program`] of the ROCm 6.4 root.
pub fn program64(name: &str, arch: &str, libs: &[&str]) -> PathBuf {
    ROCM64.program(name, arch, libs)
}

/// [`RocmRoot::code_object`] of the ROCm 6.4 root.
pub fn code_object64(name: &str, arch: &str) -> PathBuf {
    ROCM64.code_object(name, arch)
}

/// Builds `tests/programs/NAME.c` into a shared library `libNAME.so` (cached; `cc -shared
/// -fPIC`, with tests/programs on the include path, linked with `-ldl`) and returns its path,
/// e.g. an `LD_PRELOAD` interposer.
pub fn shared_library(name: &str) -> PathBuf {
    let dir = tests_dir().join("programs");
    let src = dir.join(format!("{name}.c"));
    assert!(src.exists(), "no library source {}", src.display());
    let cc = find_in_path("cc")
        .or_else(|| find_in_path("gcc"))
        .unwrap_or_else(|| require_tool("gcc", "gcc"));
    let mut args: Vec<OsString> = ["-shared", "-fPIC", "-std=gnu11", "-O2", "-g", "-Wall", "-I"]
        .iter()
        .map(OsString::from)
        .collect();
    args.push(dir.clone().into_os_string());
    args.push("-o".into());
    args.push("{OUT}".into());
    args.push(src.clone().into_os_string());
    args.push("-ldl".into());
    let mut inputs = vec![src];
    inputs.extend(shared_sources());
    build_cached(&format!("lib{name}.so"), &cc, &args, &inputs)
}

/// Builds `tests/programs/NAME.hip` into a HIP shared library `libNAME-HASH.so` (cached;
/// `hipcc --offload-arch=gfx90a -shared -fPIC`, its kernels in its own embedded code object)
/// and returns its path.
pub fn hip_shared_library(name: &str) -> PathBuf {
    let src = tests_dir().join("programs").join(format!("{name}.hip"));
    assert!(src.exists(), "no library source {}", src.display());
    let hipcc = require_tool("hipcc", "hipcc");
    let mut args: Vec<OsString> =
        ["--offload-arch=gfx90a", "-shared", "-fPIC", "-O2", "-w", "-o", "{OUT}"]
            .iter()
            .map(OsString::from)
            .collect();
    args.push(src.clone().into_os_string());
    let mut inputs = vec![src];
    inputs.extend(shared_sources());
    build_cached(&format!("lib{name}.so"), &hipcc, &args, &inputs)
}

/// Builds `tests/kernels/NAME.hip` into a raw gfx90a code object (an ELF, not an offload
/// bundle) for the HSA loader API (cached) and returns its path.
pub fn code_object(name: &str) -> PathBuf {
    let src = tests_dir().join("kernels").join(format!("{name}.hip"));
    assert!(src.exists(), "no kernel source {}", src.display());
    let hipcc = require_tool("hipcc", "hipcc");
    let args: Vec<OsString> =
        ["--genco", "--no-gpu-bundle-output", "--offload-arch=gfx90a", "-O2", "-o", "{OUT}"]
            .iter()
            .map(OsString::from)
            .chain([src.clone().into_os_string()])
            .collect();
    let mut inputs = vec![src];
    inputs.extend(shared_sources());
    build_cached(&format!("{name}.hsaco"), &hipcc, &args, &inputs)
}

/// How to run a program under the emulator.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// Killed (with everything it started) after this long.
    pub timeout: Duration,
    /// Run alone: no other emulator run of this test binary at the same time (timing and CPU
    /// measurements).
    pub exclusive: bool,
    /// `xhsa-emu run` options before `--` (e.g. `--gpus 2`).
    pub emu_args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Standard-output lines at which to sample the CPU time of the process group (see
    /// `RunOutput::samples`).
    pub sample_on: Vec<String>,
}

impl RunOpts {
    /// These options with `key=value` added to the environment.
    pub fn with_env(mut self, key: &str, value: impl Into<String>) -> RunOpts {
        self.env.push((key.into(), value.into()));
        self
    }
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            timeout: Duration::from_secs(120),
            exclusive: false,
            emu_args: Vec::new(),
            env: Vec::new(),
            sample_on: Vec::new(),
        }
    }
}

/// CPU time used so far by a process group: every live thread of every member.
#[derive(Clone, Copy, Debug)]
pub struct GroupCpu {
    pub cpu: Duration,
    pub processes: usize,
    pub threads: usize,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// The command line, for messages.
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// User and system CPU of the launcher and every descendant it waited for (`wait4`).
    pub user: Duration,
    pub sys: Duration,
    pub timed_out: bool,
    /// Processes of the group still alive after the launcher exited (then killed).
    pub leftovers: bool,
    /// `(line, group CPU when it was read)` for each `RunOpts::sample_on` line seen.
    pub samples: Vec<(String, GroupCpu)>,
}

impl RunOutput {
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }

    /// The lines of standard output starting with `FAIL`.
    pub fn failures(&self) -> Vec<&str> {
        self.stdout.lines().filter(|l| l.starts_with("FAIL") || l.starts_with("WATCHDOG")).collect()
    }

    /// Everything about the run, for an assertion message (stderr limited to its last lines).
    pub fn report(&self) -> String {
        let err_lines: Vec<&str> = self.stderr.lines().collect();
        let keep = 150;
        let err = if err_lines.len() > keep {
            format!(
                "[... {} earlier lines]\n{}",
                err_lines.len() - keep,
                err_lines[err_lines.len() - keep..].join("\n")
            )
        } else {
            self.stderr.clone()
        };
        format!(
            "command: {}\nstatus: {}{}{}, wall {:.2} s, cpu user {:.3} s sys {:.3} s\n--- stdout\n{}\n--- stderr\n{}",
            self.command,
            self.status,
            if self.timed_out { " (TIMED OUT, killed)" } else { "" },
            if self.leftovers { " (left processes behind, killed)" } else { "" },
            self.wall.as_secs_f64(),
            self.user.as_secs_f64(),
            self.sys.as_secs_f64(),
            self.stdout,
            err
        )
    }

    /// The value of the first `KEY=VALUE` line of standard output.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.stdout.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
    }
}

/// Whether the program exited 0, printed `RESULT: PASS` and no `FAIL` line.
pub fn passed(out: &RunOutput) -> bool {
    out.status.success()
        && !out.timed_out
        && out.failures().is_empty()
        && out.stdout.lines().any(|l| l == "RESULT: PASS")
}

/// Panics with the whole output unless the program passed (see `passed`).
pub fn assert_passed(out: &RunOutput) {
    let failures = out.failures();
    assert!(
        passed(out),
        "the program did not pass{}\n{}",
        if failures.is_empty() { String::new() } else { format!(":\n  {}", failures.join("\n  ")) },
        out.report()
    );
}

/// Panics unless standard output has the line `PASS NAME` (a check that must have run).
/// The numbers after `marker` on the first stderr line holding it (e.g. libxhsa's exit summary:
/// `numbers_after(out, "passthrough libraries: ")` gives queues then dispatches), or None.
pub fn numbers_after(out: &RunOutput, marker: &str) -> Option<Vec<u64>> {
    let tail = out.stderr.lines().find_map(|l| l.split_once(marker).map(|(_, t)| t))?;
    Some(
        tail.split(|c: char| !c.is_ascii_digit())
            .filter(|t| !t.is_empty())
            .filter_map(|t| t.parse().ok())
            .collect(),
    )
}

pub fn assert_check_passed(out: &RunOutput, name: &str) {
    let want = format!("PASS {name}");
    assert!(out.stdout.lines().any(|l| l == want), "check `{name}` did not pass\n{}", out.report());
}

fn exclusive_lock() -> &'static RwLock<()> {
    static L: OnceLock<RwLock<()>> = OnceLock::new();
    L.get_or_init(|| RwLock::new(()))
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// The CPU time of every live process in process group `pgid` (sum of its threads'
/// `/proc/PID/task/TID/schedstat` run time, in ns; `utime + stime` of `/proc/PID/stat` where
/// schedstat is missing).
pub fn group_cpu(pgid: i32) -> GroupCpu {
    let mut total = Duration::ZERO;
    let (mut processes, mut threads) = (0, 0);
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let tick_ns = 1_000_000_000 / (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64);
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return GroupCpu { cpu: total, processes, threads };
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Fields after the command name, which is in parentheses and may contain anything.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] state, f[1] ppid, f[2] pgrp, ..., f[11] utime, f[12] stime.
        if f.get(2).and_then(|s| s.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        processes += 1;
        let mut sched = Duration::ZERO;
        let mut sched_ok = true;
        let mut n = 0;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                n += 1;
                match std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
                {
                    Some(ns) => sched += Duration::from_nanos(ns),
                    None => sched_ok = false,
                }
            }
        }
        threads += n;
        if sched_ok && n > 0 {
            total += sched;
        } else {
            let ticks: u64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0)
                + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            total += Duration::from_nanos(ticks * tick_ns);
        }
    }
    GroupCpu { cpu: total, processes, threads }
}

/// Runs `xhsa-emu run [emu_args] -- PROGRAM ARGS` in a process group of its own, collects its
/// output, kills the group on timeout, and returns what happened. Panics only if the launcher
/// is missing or cannot be started.
pub fn run_under_emu<S: AsRef<std::ffi::OsStr>>(
    program: &Path,
    args: &[S],
    opts: &RunOpts,
) -> RunOutput {
    let _lock = run_lock(opts.exclusive);
    spawn_under_emu(program, args, opts).wait()
}

/// The lock that keeps timing-sensitive runs of this test binary apart: held shared by ordinary
/// runs and exclusively by `RunOpts { exclusive: true }` ones ([`run_under_emu`] takes it
/// itself). A test that starts several programs at once with [`spawn_under_emu`] takes it for
/// the whole group instead: `let _lock = run_lock(true);`.
pub enum RunLock {
    Shared(std::sync::RwLockReadGuard<'static, ()>),
    Exclusive(std::sync::RwLockWriteGuard<'static, ()>),
}

pub fn run_lock(exclusive: bool) -> RunLock {
    let lock = exclusive_lock();
    if exclusive {
        RunLock::Exclusive(lock.write().unwrap_or_else(|e| e.into_inner()))
    } else {
        RunLock::Shared(lock.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What a pipe reader thread sends when its pipe closes: (is stdout, text, CPU samples).
type PipeText = (bool, String, Vec<(String, GroupCpu)>);

/// Standard output collected so far, shared between the reader thread and [`Running`].
#[derive(Default)]
struct OutBuf {
    text: String,
    closed: bool,
}

/// A program started under the emulator in the background ([`spawn_under_emu`]): its output
/// can be watched while it runs, it can be signalled, and [`Running::wait`] collects it as
/// [`run_under_emu`] does. Dropped without `wait`, its process group is killed and reaped.
pub struct Running {
    pub command: String,
    /// The launcher's pid, which is also the id of the process group it leads.
    pub pid: i32,
    started: Instant,
    timeout: Duration,
    child: Option<std::process::Child>,
    out: Arc<(Mutex<OutBuf>, std::sync::Condvar)>,
    rx: mpsc::Receiver<PipeText>,
    /// The run's own emulated device, when the caller did not name one.
    _device: Option<DeviceDir>,
    /// The run's own libxhsa board directory, likewise.
    _board: Option<DeviceDir>,
}

/// Starts `xhsa-emu run [emu_args] -- PROGRAM ARGS` in a process group of its own and returns
/// at once. `opts.timeout` counts from now and applies in [`Running::wait`]; `opts.exclusive`
/// is not looked at (hold [`run_lock`] around the group of runs instead).
pub fn spawn_under_emu<S: AsRef<std::ffi::OsStr>>(
    program: &Path,
    args: &[S],
    opts: &RunOpts,
) -> Running {
    let emu = emu_launcher();
    let mut cmd = Command::new(&emu);
    cmd.arg("run").args(&opts.emu_args).arg("--").arg(program).args(args);
    let command = format!(
        "{} run {}-- {} {}",
        emu.display(),
        opts.emu_args.iter().map(|a| format!("{a} ")).collect::<String>(),
        program.display(),
        args.iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The programs' own watchdog reports the step they hang in, shortly before we kill them.
    let watchdog = opts.timeout.as_secs().saturating_sub(10).max(5);
    cmd.env("XHSA_TEST_WATCHDOG_S", watchdog.to_string());
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    // Each run gets a device of its own unless the test shares one between its processes on
    // purpose, so that tests running side by side do not share CUs.
    let device = if opts.env.iter().any(|(k, _)| k == "XHSA_EMU_DEVICE_DIR") {
        None
    } else {
        let d = DeviceDir::new("run");
        let (k, v) = d.env();
        cmd.env(k, v);
        Some(d)
    };
    // Likewise libxhsa's board (one per GPU, by default in /dev/shm): a test that does not
    // choose one gets its own, so that libxhsa processes of other tests running side by side
    // neither throttle it nor change its tracking.
    let board = if opts.env.iter().any(|(k, _)| k == "XHSA_BOARD_DIR") {
        None
    } else {
        let d = DeviceDir::new("board");
        cmd.env("XHSA_BOARD_DIR", &d.path);
        Some(d)
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);

    let started = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {command}: {e}"));
    let pid = child.id() as i32;

    let (tx, rx) = mpsc::channel::<PipeText>();
    let mut out_pipe = child.stdout.take().expect("stdout piped");
    let mut err_pipe = child.stderr.take().expect("stderr piped");
    let markers = opts.sample_on.clone();
    let tx_out = tx.clone();
    let out: Arc<(Mutex<OutBuf>, std::sync::Condvar)> = Arc::default();
    let shared = out.clone();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut samples = Vec::new();
        let mut pending = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match out_pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(i) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=i).collect();
                        let line = String::from_utf8_lossy(&line).into_owned();
                        let trimmed = line.trim_end();
                        if markers.iter().any(|m| m == trimmed) {
                            samples.push((trimmed.to_string(), group_cpu(pid)));
                        }
                        text.push_str(&line);
                        let (m, cv) = &*shared;
                        m.lock().unwrap_or_else(|e| e.into_inner()).text.push_str(&line);
                        cv.notify_all();
                    }
                }
            }
        }
        text.push_str(&String::from_utf8_lossy(&pending));
        {
            let (m, cv) = &*shared;
            m.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
            cv.notify_all();
        }
        let _ = tx_out.send((true, text, samples));
    });
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        let _ = tx.send((false, String::from_utf8_lossy(&v).into_owned(), Vec::new()));
    });
    Running {
        command,
        pid,
        started,
        timeout: opts.timeout,
        child: Some(child),
        out,
        rx,
        _device: device,
        _board: board,
    }
}

impl Running {
    /// Waits up to `timeout` for a complete standard-output line for which `pred` holds, and
    /// returns it (without its newline); `None` on timeout or when standard output closed first.
    pub fn wait_for_line(&self, pred: impl Fn(&str) -> bool, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        let (m, cv) = &*self.out;
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(l) = g.text.lines().find(|l| pred(l)) {
                return Some(l.to_string());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if g.closed || left.is_zero() {
                return None;
            }
            g = cv.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Standard output so far.
    pub fn stdout_so_far(&self) -> String {
        self.out.0.lock().unwrap_or_else(|e| e.into_inner()).text.clone()
    }

    /// Sends `sig` to the whole process group (the launcher and the program).
    pub fn kill_group(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's process group.
        unsafe { libc::kill(-self.pid, sig) };
    }

    /// Waits for the launcher to exit (killing the group at the run's timeout), collects the
    /// output and returns what happened, as [`run_under_emu`].
    pub fn wait(mut self) -> RunOutput {
        let pid = self.pid;
        let command = self.command.clone();
        // Reap the launcher with wait4 (its rusage covers every descendant it waited for).
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is a plain C struct for which all-zero bytes are a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // Until the run's timeout, wait for the exit itself (a pidfd becomes readable when the
        // process exits); then kill the group, and reap it.
        // SAFETY: pidfd_open takes a pid and flags, no pointers.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        assert!(pidfd >= 0, "pidfd_open({pid}): {}", std::io::Error::last_os_error());
        let exited = loop {
            let left = self.timeout.saturating_sub(self.started.elapsed());
            let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().min(i32::MAX as u128) as libc::c_int;
            // SAFETY: one pollfd we own.
            match unsafe { libc::poll(&mut p, 1, ms) } {
                0 => break false,
                r if r > 0 => break true,
                _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
                _ => panic!("poll on the pidfd of {command}: {}", std::io::Error::last_os_error()),
            }
        };
        // SAFETY: the descriptor pidfd_open gave us, closed once.
        unsafe { libc::close(pidfd) };
        let timed_out = !exited;
        if timed_out {
            // SAFETY: kill takes no pointers; the group is the launcher's, which we started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        loop {
            // SAFETY: wait4 writes only into `status` and `ru`, locals we own.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            if r == pid {
                break;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                panic!("wait4({pid}) for {command}: {err}");
            }
        }
        let wall = self.started.elapsed();
        // The child is reaped; std's handle (dropped here) never waits for or signals it.
        drop(self.child.take());

        // Anything of the group still alive (and holding the pipes) is left over: kill it.
        // SAFETY: signal 0 sends nothing; kill only checks whether the group exists.
        let leftovers = unsafe { libc::kill(-pid, 0) } == 0;
        let mut stdout = None;
        let mut stderr = None;
        let mut samples = Vec::new();
        let mut killed = false;
        let mut deadline = Instant::now() + Duration::from_secs(if leftovers { 2 } else { 10 });
        while stdout.is_none() || stderr.is_none() {
            match self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((true, text, s)) => {
                    stdout = Some(text);
                    samples = s;
                }
                Ok((false, text, _)) => stderr = Some(text),
                Err(_) if !killed => {
                    // SAFETY: kill takes no pointers; the group is the launcher's, which we started.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    killed = true;
                    deadline = Instant::now() + Duration::from_secs(5);
                }
                Err(_) => break,
            }
        }
        if leftovers {
            // SAFETY: kill takes no pointers; the group is the launcher's, which we started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        RunOutput {
            command,
            status: ExitStatus::from_raw(status),
            stdout: stdout.unwrap_or_else(|| "[stdout not collected: still held open]".into()),
            stderr: stderr.unwrap_or_else(|| "[stderr not collected: still held open]".into()),
            wall,
            user: timeval(ru.ru_utime),
            sys: timeval(ru.ru_stime),
            timed_out,
            leftovers,
            samples,
        }
    }
}

impl Drop for Running {
    /// A run abandoned without `wait` (a failed assertion): kill its group and reap the launcher.
    fn drop(&mut self) {
        if self.child.take().is_some() {
            let mut status: libc::c_int = 0;
            // SAFETY: kill takes no pointers and the group is the launcher's, which we started;
            // waitpid writes only into `status`, a local we own.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, &mut status, 0);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The shared emulated device (one device process per device directory; see
// tools/emu/src/shared): private directories for tests, its status, its process.

/// A fresh, private device directory for `XHSA_EMU_DEVICE_DIR` (owner-only, under the system
/// temporary directory, short enough for a Unix socket path), removed when dropped. Programs
/// run with the same directory share one emulated device; the device process exits by itself
/// a few seconds after its last client.
pub struct DeviceDir {
    pub path: PathBuf,
}

impl DeviceDir {
    pub fn new(tag: &str) -> DeviceDir {
        use std::os::unix::fs::DirBuilderExt;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("xhsa-test-{}-{seq}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        DeviceDir { path }
    }

    /// The `XHSA_EMU_DEVICE_DIR` entry for `RunOpts::env`.
    pub fn env(&self) -> (String, String) {
        ("XHSA_EMU_DEVICE_DIR".into(), self.path.display().to_string())
    }

    /// A path inside the directory (for trigger and stop files).
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The device's log (what the device process wrote to stderr), or an empty string.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path.join("device.log")).unwrap_or_default()
    }
}

impl Drop for DeviceDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `xhsa-emu status` for the device in `dir` (its standard output).
pub fn emu_status(dir: &DeviceDir) -> String {
    let out = Command::new(emu_launcher())
        .arg("status")
        .env("XHSA_EMU_DEVICE_DIR", &dir.path)
        .stdin(Stdio::null())
        .output()
        .expect("run xhsa-emu status");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pid of the device process serving `dir` (`xhsa-emu device --dir DIR`), if one runs.
pub fn device_pid(dir: &DeviceDir) -> Option<i32> {
    let want = dir.path.as_os_str().as_encoded_bytes();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_device = args.iter().any(|a| *a == b"device");
        let dir_matches = args.windows(2).any(|w| w[0] == b"--dir" && w[1] == want);
        if is_device && dir_matches {
            return Some(pid);
        }
    }
    None
}

/// CPU time of one live process: `(sum of its threads' schedstat run time, utime + stime of
/// /proc/PID/stat)`; `None` if it is gone.
pub fn process_cpu(pid: i32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let tick_ns = 1_000_000_000 / (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64);
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let mut sched = Duration::ZERO;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        if let Some(ns) = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        {
            sched += Duration::from_nanos(ns);
        }
    }
    Some((sched, Duration::from_nanos(ticks * tick_ns)))
}

/// The built `libxhsa.so`, as a path string for `LD_PRELOAD` / `HSA_TOOLS_LIB`.
pub fn libxhsa() -> String {
    let p = artifact("libxhsa.so");
    assert!(p.exists(), "{} not built (cargo build --release --workspace)", p.display());
    p.display().to_string()
}

/// Runs test program `name` on the emulated GPU with `env` and `XHSA_LOG=info`, echoes
/// libxhsa's log lines, and asserts that it passed.
pub fn run_with_libxhsa_log(name: &str, args: &[&str], env: &[(&str, &str)]) -> RunOutput {
    let mut env: Vec<(String, String)> =
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    env.push(("XHSA_LOG".into(), "info".into()));
    let out = run_under_emu(&program(name), args, &RunOpts { env, ..RunOpts::default() });
    eprintln!(
        "{}",
        out.stderr.lines().filter(|l| l.contains("xhsa:")).collect::<Vec<_>>().join("\n")
    );
    assert_passed(&out);
    out
}

/// One `xhsa-top --json` snapshot of the boards in `board` (the test fails if xhsa-top does).
pub fn top_json(board: &Path) -> serde_json::Value {
    let out = Command::new(artifact("xhsa-top"))
        .args(["--json", "--board-dir"])
        .arg(board)
        .output()
        .expect("run xhsa-top");
    assert!(
        out.status.success(),
        "xhsa-top --json failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("xhsa-top --json is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
    })
}

/// The processes of every GPU of an `xhsa-top --json` snapshot.
pub fn snapshot_processes(snap: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    snap["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["processes"].as_array().into_iter().flatten())
}

/// The events of an `XHSA_TRACE` file (Chrome trace-event JSON, one array), asserting that it
/// is valid JSON.
pub fn read_trace(path: &Path) -> Vec<serde_json::Value> {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("read the trace {}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "the trace {} is not valid JSON: {e}\n{}",
            path.display(),
            String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(2000)..])
        )
    });
    v.as_array()
        .unwrap_or_else(|| panic!("the trace {} is not a JSON array", path.display()))
        .clone()
}

/// The one file in `dir` whose name starts with `prefix` (a trace named with `%p`), and the pid
/// in its name (what follows `prefix`, up to `.json`).
pub fn trace_file(dir: &Path, prefix: &str) -> (PathBuf, u32) {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json"))
        })
        .collect();
    assert_eq!(found.len(), 1, "one trace file {prefix}*.json in {}: {found:?}", dir.display());
    let name = found[0].file_name().unwrap().to_str().unwrap();
    let pid = name[prefix.len()..name.len() - ".json".len()]
        .parse()
        .unwrap_or_else(|_| panic!("no pid in {name}"));
    (found[0].clone(), pid)
}

/// The checks `tests/programs/hip_waiting.hip all` prints (kernels that wait: device printf, a
/// cooperative launch, a spin chain, kernels waiting across streams and for the host).
pub const HIP_WAITING_CHECKS: &[&str] = &[
    "printf.returned",
    "coop.supported",
    "coop.occupancy",
    "coop.grid_sync",
    "coop.too_large_refused",
    "chain.spin_waits",
    "queues.kernel_waits_for_kernel_on_another_stream",
    "queues.host_creates_a_stream_while_a_kernel_waits",
];

/// The shadow part of libxhsa's exit summary (`XHSA_LOG=info`).
#[derive(Debug, Default)]
pub struct Shadow {
    pub created: u64,
    pub taken: u64,
    pub forwarded: u64,
    pub held: u64,
    pub degraded: u64,
}

pub fn shadow_summary(out: &RunOutput) -> Shadow {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("INFO xhsa:") && l.contains("HSA queues created"))
        .unwrap_or_else(|| panic!("no summary\n{}", out.report()));
    let part = line
        .split("; shadow queues: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no shadow summary in {line}"));
    let num = |label: &str| -> u64 {
        let head = part.split(label).next().unwrap();
        head.split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches(',')
            .parse()
            .unwrap_or_else(|_| panic!("{label} in {part}"))
    };
    Shadow {
        created: num(" created"),
        taken: num(" packets taken"),
        forwarded: num(" packets forwarded"),
        held: num(" held"),
        degraded: num(" degraded"),
    }
}

/// The host userland's (ROCm 5.2) three ways to run a program: `native`, and with libxhsa through
/// `LD_PRELOAD` and `HSA_TOOLS_LIB` (the mode's name is the variable's); `XHSA_LOG=info` in each.
pub fn host_modes() -> Vec<(&'static str, RunOpts)> {
    let info = RunOpts::default().with_env("XHSA_LOG", "info");
    vec![
        ("native", info.clone()),
        ("LD_PRELOAD", info.clone().with_env("LD_PRELOAD", libxhsa())),
        ("HSA_TOOLS_LIB", info.with_env("HSA_TOOLS_LIB", libxhsa())),
    ]
}

/// Under libxhsa (`mode` other than "native"), libxhsa was loaded and scheduled the runtime's
/// queues: its exit summary shows shadow queues (not passthrough), every packet taken
/// forwarded, nothing degraded, no error, no panic and no warning about ROCr's queue layout.
pub fn assert_libxhsa_scheduled(mode: &str, out: &RunOutput) {
    if mode == "native" {
        return;
    }
    assert!(
        out.stderr.contains("INFO xhsa:") && out.stderr.contains("HSA queues created"),
        "{mode}: libxhsa left no summary: it did not run\n{}",
        out.report()
    );
    assert!(
        out.stderr.contains(" 0 degraded")
            && !out.stderr.contains("ERROR xhsa:")
            && !out.stderr.contains("panicked"),
        "{mode}: libxhsa degraded, reported an error or panicked\n{}",
        out.report()
    );
    assert!(
        !out.stderr.contains("unshadowed"),
        "{mode}: libxhsa passed the runtime's queues through\n{}",
        out.report()
    );
    let s = shadow_summary(out);
    assert!(
        s.created > 0 && s.taken > 0 && s.forwarded == s.taken && s.held == 0,
        "{mode}: queues shadowed and every packet forwarded: {s:?}\n{}",
        out.report()
    );
}
