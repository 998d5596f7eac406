//! xhsa-top and xhsactl on a live scene: an inference process (level 5) and a batch process
//! (level -5), both flooding one emulated GPU under libxhsa with one board directory. The
//! monitor lists both processes' queues with their fields, the counters move, `xhsactl
//! set-priority`/`pause`/`resume` reach the batch process through the board and show in the next
//! snapshots, the metrics endpoint serves `xhsa_` families with `pid` labels, and `xhsa-top`
//! runs in a real terminal (tmux) and quits on `q`.
mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{artifact, libxhsa, run_lock, spawn_under_emu, DeviceDir, RunOpts};
use serde_json::Value;

fn opts(dir: &DeviceDir, board: &Path, priority: &str) -> RunOpts {
    let env = vec![
        dir.env(),
        ("LD_PRELOAD".into(), libxhsa()),
        ("XHSA_BOARD_DIR".into(), board.display().to_string()),
        ("XHSA_PRIORITY".into(), priority.into()),
        ("XHSA_LOG".into(), "info".into()),
    ];
    RunOpts { env, timeout: Duration::from_secs(120), ..RunOpts::default() }
}

fn json(board: &Path) -> Value {
    common::top_json(board)
}

fn ctl(board: &Path, args: &[&str]) -> std::process::Output {
    Command::new(artifact("xhsactl"))
        .arg("--board-dir")
        .arg(board)
        .args(args)
        .output()
        .expect("run xhsactl")
}

/// The queues of the process whose requested level is `level`: (pid, queues).
fn process_at(snap: &Value, level: i64) -> Option<(u64, Vec<Value>)> {
    for g in snap["gpus"].as_array()? {
        for p in g["processes"].as_array()? {
            let qs = p["queues"].as_array()?;
            if qs.iter().any(|q| q["requested_priority"].as_i64() == Some(level)) {
                return Some((p["pid"].as_u64()?, qs.clone()));
            }
        }
    }
    None
}

/// The first snapshot for which `pred` holds, within `limit`.
fn until(board: &Path, limit: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
    common::wait::wait_until(limit, || Some(json(board)).filter(|s| pred(s)))
}

fn sum(qs: &[Value], field: &str) -> u64 {
    qs.iter().map(|q| q[field].as_u64().unwrap_or_else(|| panic!("no {field} in {q}"))).sum()
}

#[test]
fn the_monitor_sees_and_steers_an_inference_and_a_batch_process() {
    let _lock = run_lock(true);
    let prog = common::program("shared_hip");
    let dir = DeviceDir::new("monitor");
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let stop = dir.file("stop");
    let infer =
        spawn_under_emu(&prog, &["busy", stop.to_str().unwrap(), "90"], &opts(&dir, &board, "5"));
    let mut batch_opts = opts(&dir, &board, "-5");
    // The batch process also writes a trace: the operator's priority change must be on it.
    batch_opts.env.push(("XHSA_TRACE".into(), dir.file("batch-%p.json").display().to_string()));
    let batch = spawn_under_emu(&prog, &["busy", stop.to_str().unwrap(), "90"], &batch_opts);
    // A third process whose queues HIP creates and the passthrough list names: not shadowed,
    // shown as passthrough.
    let mut pass_opts = opts(&dir, &board, "1");
    pass_opts.env.push(("XHSA_PASSTHROUGH_LIBS".into(), "libamdhip64.so".into()));
    let pass = spawn_under_emu(&prog, &["busy", stop.to_str().unwrap(), "90"], &pass_opts);
    let scene = std::panic::catch_unwind(|| scene(&board));
    std::fs::write(&stop, b"").unwrap();
    let (i, b, p) = (infer.wait(), batch.wait(), pass.wait());
    if let Err(e) = scene {
        eprintln!(
            "inference:\n{}\nbatch:\n{}\npassthrough:\n{}",
            i.report(),
            b.report(),
            p.report()
        );
        std::panic::resume_unwind(e);
    }
    common::assert_passed(&i);
    common::assert_passed(&b);
    common::assert_passed(&p);
    let (trace, _) = common::trace_file(&dir.path, "batch-");
    let events = common::read_trace(&trace);
    let by = |who: &str| {
        events
            .iter()
            .filter(|e| {
                e["name"] == "priority"
                    && e["args"]["by"].as_str().is_some_and(|b| b.starts_with(who))
            })
            .count()
    };
    assert!(by("operator") >= 2, "set-priority and reset are on the batch process's trace as the operator's ({} priority events)", events.iter().filter(|e| e["name"] == "priority").count());
}

fn scene(board: &Path) {
    // Both processes' queues, with every field the monitor promises.
    let snap = until(board, Duration::from_secs(60), |s| {
        process_at(s, 5).is_some()
            && process_at(s, -5).is_some_and(|(_, q)| sum(&q, "dispatched") > 0)
    })
    .unwrap_or_else(|| panic!("both processes never showed with dispatches: {}", json(board)));
    let (ipid, iq) = process_at(&snap, 5).unwrap();
    let (bpid, bq) = process_at(&snap, -5).unwrap();
    assert_ne!(ipid, bpid);
    for q in iq.iter().chain(&bq) {
        for f in [
            "id",
            "priority",
            "state",
            "pending",
            "in_flight",
            "dispatched",
            "preemptions",
            "completed",
            "time_preempted_ns",
            "time_held_ns",
            "time_busy_ns",
            "latency",
        ] {
            assert!(!q[f].is_null(), "queue without {f}: {q}");
        }
        assert!(
            ["running", "held", "preempted", "passthrough", "degraded"]
                .contains(&q["state"].as_str().unwrap()),
            "{q}"
        );
    }
    let top = |qs: &[Value]| qs.iter().filter_map(|q| q["priority"].as_i64()).max().unwrap();
    assert!(top(&iq) > top(&bq), "the inference's priority is above the batch job's: {snap}");
    let name = snap["gpus"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(ipid))
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(name.starts_with("shared_hip"), "process name {name:?}");
    // The passthrough process's queues are there, unscheduled.
    let s = until(board, Duration::from_secs(30), |s| process_at(s, 1).is_some()).unwrap_or_else(
        || panic!("the passthrough process's queues never showed: {}", json(board)),
    );
    let (_, pq) = process_at(&s, 1).unwrap();
    assert!(
        pq.iter().all(|q| q["state"] == "passthrough" && q["dispatched"].as_u64() == Some(0)),
        "{s}"
    );
    // The counters move.
    let (before, busy_before) = (sum(&iq, "dispatched"), sum(&iq, "time_busy_ns"));
    until(board, Duration::from_secs(30), |s| {
        process_at(s, 5).is_some_and(|(_, q)| {
            sum(&q, "dispatched") > before && sum(&q, "time_busy_ns") > busy_before
        })
    })
    .expect("the inference's dispatches and busy time never moved");
    // The batch job is held back or taken off while the inference floods the GPU.
    until(board, Duration::from_secs(30), |s| {
        process_at(s, -5).is_some_and(|(_, q)| {
            q.iter().any(|q| {
                q["time_held_ns"].as_u64() > Some(0) || q["preemptions"].as_u64() > Some(0)
            })
        })
    })
    .expect("the batch process was never held back nor preempted");

    // set-priority: the owning process applies it, the next snapshots show it.
    let out = ctl(board, &["set-priority", &bpid.to_string(), "7"]);
    assert!(out.status.success(), "set-priority failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("priority level 7 applied"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let s = json(board);
    let (_, bq) = process_at(&s, -5).expect("the batch process keeps its requested level");
    assert!(
        bq.iter()
            .all(|q| q["priority"].as_i64() == Some(7) && q["overridden"] == Value::Bool(true)),
        "{s}"
    );
    // pause / resume, while the batch process runs above the inference (level 7): after the
    // resume nothing higher holds it back, so it must go on.
    let out = ctl(board, &["pause", &bpid.to_string()]);
    assert!(out.status.success(), "pause failed: {}", String::from_utf8_lossy(&out.stderr));
    let s = until(board, Duration::from_secs(10), |s| {
        process_at(s, -5).is_some_and(|(_, q)| q.iter().all(|q| q["paused"] == Value::Bool(true)))
    })
    .expect("never shown paused");
    let (_, bq) = process_at(&s, -5).unwrap();
    let frozen = sum(&bq, "dispatched");
    std::thread::sleep(Duration::from_millis(700));
    let (_, bq) = process_at(&json(board), -5).unwrap();
    assert_eq!(sum(&bq, "dispatched"), frozen, "a paused process dispatches nothing");
    let out = ctl(board, &["resume", &bpid.to_string()]);
    assert!(out.status.success(), "resume failed: {}", String::from_utf8_lossy(&out.stderr));
    until(board, Duration::from_secs(30), |s| {
        process_at(s, -5).is_some_and(|(_, q)| {
            q.iter().all(|q| q["paused"] == Value::Bool(false)) && sum(&q, "dispatched") > frozen
        })
    })
    .expect("the batch process never went on after resume");
    let out = ctl(board, &["set-priority", &bpid.to_string(), "reset"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, bq) = process_at(&json(board), -5).unwrap();
    assert!(bq.iter().all(|q| q["priority"].as_i64() == Some(-5)));

    // Refusals say why.
    let out = ctl(board, &["set-priority", "1", "3"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no queue of process 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ctl(board, &["set-priority", &bpid.to_string(), "300"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("-256..=255"));

    // Another user cannot change the owner-only board: refused, saying whose it is.
    if let Some(setpriv) = common::find_in_path("setpriv") {
        use std::os::unix::fs::PermissionsExt;
        // Others may reach the board directory (the board itself stays 0600).
        std::fs::set_permissions(board.parent().unwrap(), std::fs::Permissions::from_mode(0o711))
            .unwrap();
        std::fs::set_permissions(board, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(artifact("xhsactl"))
            .arg("--board-dir")
            .arg(board)
            .args(["pause", &bpid.to_string()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("Permission denied")
                && err.contains("only its owner (uid 0)"),
            "{err}"
        );
        let (_, bq) = process_at(&json(board), -5).unwrap();
        assert!(bq.iter().all(|q| q["paused"] == Value::Bool(false)), "nothing changed");
    }

    // list and --once name both pids.
    let out = ctl(board, &["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&ipid.to_string()) && text.contains(&bpid.to_string()), "{text}");

    metrics(board, bpid);
    tmux(board, ipid, bpid);
}

fn metrics(board: &Path, bpid: u64) {
    let mut server = Command::new(artifact("xhsactl"))
        .arg("--board-dir")
        .arg(board)
        .args(["metrics", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("xhsactl metrics");
    let mut err = server.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while err.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("# TYPE xhsa_queue_dispatches_total counter"), "{body}");
    assert!(
        body.contains("xhsa_queue_priority{gpu=") && body.contains(&format!("pid=\"{bpid}\"")),
        "{body}"
    );
    assert!(
        body.lines().filter(|l| l.starts_with("xhsa_queue_preemptions_total{")).count() >= 2,
        "{body}"
    );
}

fn tmux(board: &Path, ipid: u64, bpid: u64) {
    let Some(tmux) = common::find_in_path("tmux") else {
        panic!("tmux is needed (Debian package tmux, in tools/debian-packages.txt)")
    };
    let session = format!("xhsa-top-test-{}", std::process::id());
    let cmd = format!(
        "{} --board-dir {} --interval 0.2",
        artifact("xhsa-top").display(),
        board.display()
    );
    let st = Command::new(&tmux)
        .args(["new-session", "-d", "-s", &session, "-x", "80", "-y", "24", &cmd])
        .status()
        .unwrap();
    assert!(st.success());
    let capture = || {
        String::from_utf8_lossy(
            &Command::new(&tmux)
                .args(["capture-pane", "-p", "-t", &session])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    };
    let both = |s: &String| s.contains(&ipid.to_string()) && s.contains(&bpid.to_string());
    let screen = common::wait::wait_until(Duration::from_secs(20), || Some(capture()).filter(both))
        .unwrap_or_else(capture);
    let alive = |s: &str| {
        Command::new(&tmux)
            .args(["has-session", "-t", s])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !(screen.contains(&ipid.to_string()) && screen.contains(&bpid.to_string())) {
        let _ = Command::new(&tmux).args(["kill-session", "-t", &session]).output();
        panic!("xhsa-top at 80x24 never showed both pids:\n{screen}");
    }
    assert!(screen.contains("xhsa-top") && screen.contains("PRIO"), "{screen}");
    Command::new(&tmux).args(["send-keys", "-t", &session, "q"]).status().unwrap();
    let quit = common::wait::holds_within(Duration::from_secs(5), || !alive(&session));
    let _ = Command::new(&tmux).args(["kill-session", "-t", &session]).output();
    assert!(quit, "xhsa-top did not quit on q");
}

#[test]
fn check_config_places_each_problem_and_accepts_a_valid_file() {
    let dir = DeviceDir::new("checkcfg");
    let bad = dir.file("bad.toml");
    std::fs::write(&bad, "priority = 9\nwindw = 3\n[[process]]\nname = \"a\"\npriority = 999\n")
        .unwrap();
    let out = ctl(&dir.file("nowhere"), &["check-config", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}:2:1: key `windw`", bad.display()))
            && err.contains("accepted keys"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:5:1: key `process[0].priority`: value 999", bad.display()))
            && err.contains("-256..=255"),
        "{err}"
    );
    let good = dir.file("good.toml");
    std::fs::write(&good, "priority = 1\ncontrol_max_level = 0\n").unwrap();
    let out = ctl(&dir.file("nowhere"), &["check-config", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(artifact("xhsactl")).arg("--frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--frobnicate"));
}
