//! The `xhsa-emu` launcher binary: exit status, the environment contract with the thunk, the
//! runtime directory, usage errors and `info`.
//!
//! The thunk crate need not be built: `XHSA_EMU_THUNK` points at a real system library
//! (preloading libm is harmless), or at a plain file when none is found (ld.so then only warns).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_xhsa-emu");

/// A shared library that exists on this system, else a plain temp file.
fn stand_in_thunk() -> PathBuf {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/lib64/libm.so.6",
    ];
    if let Some(p) = candidates.iter().map(Path::new).find(|p| p.is_file()) {
        return p.to_path_buf();
    }
    let p = temp_path("thunk.so");
    std::fs::write(&p, b"not a library").unwrap();
    p
}

fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "xhsa-emu-launcher-test-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The launcher with a hermetic environment for the variables it touches.
fn launcher<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(args: I) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("XHSA_EMU_THUNK", stand_in_thunk())
        .env_remove("LD_PRELOAD")
        .env_remove("XHSA_EMU_CONFIG")
        .env_remove("XHSA_EMU_TIME_SCALE")
        .env_remove("XHSA_EMU_GPUS")
        .env_remove("XHSA_EMU_FAULT");
    c
}

fn output(mut c: Command) -> Output {
    c.output().expect("run xhsa-emu")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sh -c SCRIPT` under `xhsa-emu run EXTRA... --`.
fn run_sh(extra: &[&str], script: &str) -> Output {
    let mut args: Vec<&str> = vec!["run"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    output(launcher(args))
}

#[test]
fn exits_with_the_commands_status() {
    assert_eq!(run_sh(&[], "exit 7").status.code(), Some(7));
    assert_eq!(
        output(launcher(["run", "sh", "-c", "exit 9"])).status.code(),
        Some(9),
        "without --"
    );
    assert_eq!(run_sh(&[], "kill -TERM $$").status.code(), Some(128 + 15), "killed by a signal");
    let o = output(launcher(["run", "--", "/nonexistent/xhsa-emu-test-cmd"]));
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
}

#[test]
fn stdout_is_exactly_the_commands() {
    let o = output(launcher(["run", "--gpus", "3", "--", "printf", "a%sb", "-"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "a-b");
}

#[test]
fn the_command_sees_the_environment_contract() {
    let script = r#"printf '%s\n' "$LD_PRELOAD" "$LD_LIBRARY_PATH" "$XHSA_EMU_GPUS" "${XHSA_EMU_TIME_SCALE-unset}" "${XHSA_EMU_CONFIG-unset}" "$PATH"
ls "${LD_LIBRARY_PATH%%:*}"
lsmod | grep amdgpu"#;
    let o = run_sh(&["--gpus", "2"], script);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 8, "{out}");
    let (preload, libpath, gpus, scale, config, path) =
        (lines[0], lines[1], lines[2], lines[3], lines[4], lines[5]);
    assert!(preload.ends_with("/lib/libhsakmt.so.1") && !preload.contains(':'), "{preload}");
    let first = libpath.split(':').next().unwrap();
    assert_eq!(Path::new(first).join("libhsakmt.so.1"), Path::new(preload));
    let bin = Path::new(first).parent().unwrap().join("bin");
    assert!(path.starts_with(&format!("{}:", bin.display())), "{path}");
    assert_eq!((gpus, scale, config), ("2", "unset", "unset"));
    assert_eq!(lines[6], "libhsakmt.so.1", "{out}");
    assert!(lines[7].starts_with("amdgpu "), "{out}");
}

#[test]
fn the_fault_knob_reaches_the_command_unchanged() {
    let mut c = launcher(["run", "--", "sh", "-c", "printf '%s' \"$XHSA_EMU_FAULT\""]);
    c.env("XHSA_EMU_FAULT", "preempt_timeout:2:50,preempt_fail:5");
    let o = output(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "preempt_timeout:2:50,preempt_fail:5");
}

#[test]
fn existing_preloads_stay_first_and_search_paths_are_kept() {
    let thunk = stand_in_thunk();
    let mut c = launcher([
        "run",
        "--time-scale",
        "2.5",
        "--",
        "sh",
        "-c",
        r#"printf '%s\n' "$LD_PRELOAD" "$LD_LIBRARY_PATH" "$XHSA_EMU_TIME_SCALE" "$XHSA_EMU_GPUS""#,
    ]);
    c.env("LD_PRELOAD", &thunk).env("LD_LIBRARY_PATH", "/xhsa-emu-test/a:/xhsa-emu-test/b");
    let o = output(c);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    let (first, ours) = lines[0].split_once(':').unwrap();
    assert_eq!(Path::new(first), thunk);
    assert!(ours.ends_with("libhsakmt.so.1"), "{out}");
    assert!(lines[1].ends_with("/lib:/xhsa-emu-test/a:/xhsa-emu-test/b"), "{out}");
    assert_eq!((lines[2], lines[3]), ("2.5", "1"));
}

#[test]
fn the_config_reaches_the_command_as_an_absolute_path() {
    let dir = temp_path("cfgdir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("emu.toml"), "[device]\nxccs = 2\n").unwrap();
    let mut c =
        launcher(["run", "--config", "emu.toml", "--", "sh", "-c", "echo \"$XHSA_EMU_CONFIG\""]);
    c.current_dir(&dir);
    let o = output(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(Path::new(stdout(&o).trim()), dir.join("emu.toml"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_config_is_refused_before_the_command_runs() {
    let cfg = temp_path("bad.toml");
    std::fs::write(&cfg, "[device]\nwave_size = 48\n").unwrap();
    let o = output(launcher([
        OsStr::new("run"),
        OsStr::new("--config"),
        cfg.as_os_str(),
        OsStr::new("--"),
        OsStr::new("echo"),
        OsStr::new("ran"),
    ]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("device.wave_size") && stderr(&o).contains("32, 64"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "");
    let o = output(launcher([OsStr::new("info"), OsStr::new("--config"), cfg.as_os_str()]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("device.wave_size"), "{}", stderr(&o));
    std::fs::remove_file(&cfg).unwrap();
}

#[test]
fn a_missing_thunk_is_named() {
    let mut c = launcher(["run", "--", "true"]);
    c.env("XHSA_EMU_THUNK", "/nonexistent/xhsa-emu-test/libhsakmt.so");
    let o = output(c);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("/nonexistent/xhsa-emu-test/libhsakmt.so")
            && e.contains("cargo build --workspace"),
        "{e}"
    );
}

#[test]
fn the_runtime_dir_is_removed_after_exit() {
    for script in
        ["echo \"${LD_LIBRARY_PATH%%:*}\"", "echo \"${LD_LIBRARY_PATH%%:*}\"; kill -KILL $$"]
    {
        let o = run_sh(&[], script);
        let lib = PathBuf::from(stdout(&o).trim());
        assert!(lib.ends_with("lib"), "{lib:?}");
        let rt = lib.parent().unwrap();
        assert!(rt.is_absolute() && !rt.exists(), "{rt:?} is left behind");
    }
}

#[test]
fn a_termination_signal_is_forwarded() {
    let mut c = launcher([
        "run",
        "--",
        "sh",
        "-c",
        "trap 'echo term; kill $! 2>/dev/null; exit 3' TERM; sleep 20 >/dev/null & echo ready; wait",
    ]);
    c.stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // The command says when its trap is set and its background job started (whose output
    // goes elsewhere: a TERM that reaches it between fork and exec is taken by the trap's
    // handler it inherited, and it would otherwise hold the pipe for its 20 s).
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert_eq!(first, "ready\n");
    let t = Instant::now();
    // SAFETY: kill takes no pointers; the child is ours and not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let rest = std::io::read_to_string(out).unwrap();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(3), "the launcher survives and reports the command's status");
    assert_eq!(rest, "term\n");
}

#[test]
fn usage_errors_exit_2_and_name_the_accepted_forms() {
    let cases: [(&[&str], &str); 7] = [
        (&["run", "--bogus", "true"], "--bogus"),
        (&["run"], "CMD"),
        (&["run", "--gpus", "2"], "CMD"),
        (&["run", "--gpus", "0", "true"], "1 to 8"),
        (&["info", "--gpus", "9"], "1 to 8"),
        (&["run", "--time-scale", "0.1", "true"], "1.0 to 1000.0"),
        (&["frobnicate"], "frobnicate"),
    ];
    for (args, needle) in cases {
        let o = output(launcher(args));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(needle) && e.contains("xhsa-emu run [--config FILE]"), "{args:?}: {e}");
        assert_eq!(stdout(&o), "", "{args:?}");
    }
    let o = output(launcher(Vec::<&str>::new()));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage"), "{}", stderr(&o));
    let o = output(launcher(["run", "--help"]));
    assert!(o.status.success() && stdout(&o).contains("--time-scale"));
}

#[test]
fn info_describes_the_device_and_the_nodes() {
    let o = output(launcher(["info", "--gpus", "2"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("= 80 CUs") && s.contains("gfx90a") && s.contains("gfx942"), "{s}");
    assert!(s.contains("node 0: CPU") && s.contains("node 2: GPU") && !s.contains("node 3"), "{s}");
}
