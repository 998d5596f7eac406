//! Levels 2-3 across processes on one emulated GPU: a low-priority batch process takes its own
//! hardware queue off the GPU while a high-priority process has work, puts it back when that
//! work is done (or when the high-priority process dies), and never leaves it off.
//!
//! Busy (tests/programs/shared_hip.hip `busy`): a stream flooded with 4 ms kernels filling the
//! 80 CUs. Victim (`victim`): 10 kernels of 640 workgroups x 1 ms per trial. Both preload
//! libxhsa with one `XHSA_BOARD_DIR`; the assertions are on libxhsa's exit summaries and on
//! `xhsa-emu status` (which shows a queue deactivated or suspended), not on timings.
mod common;

use std::time::{Duration, Instant};

use common::{
    assert_passed, emu_status, libxhsa, run_lock, spawn_under_emu, DeviceDir, RunOpts, RunOutput,
    Running,
};

/// How the processes load libxhsa: `LD_PRELOAD` or `HSA_TOOLS_LIB`.
const PRELOAD: &str = "LD_PRELOAD";
const TOOLS_LIB: &str = "HSA_TOOLS_LIB";

fn opts(
    dir: &DeviceDir,
    board: &std::path::Path,
    load: &str,
    priority: &str,
    extra: &[(&str, &str)],
) -> RunOpts {
    let mut env = vec![
        dir.env(),
        (load.into(), libxhsa()),
        ("XHSA_BOARD_DIR".into(), board.display().to_string()),
        ("XHSA_PRIORITY".into(), priority.into()),
        ("XHSA_LOG".into(), "info".into()),
    ];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    RunOpts { env, timeout: Duration::from_secs(120), ..RunOpts::default() }
}

/// `(taken off, put back, off now)` from libxhsa's exit summary; `None` without a preemption
/// part (preemption off or never started).
fn preemptions(out: &RunOutput) -> Option<(u64, u64, u64)> {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("INFO xhsa:") && l.contains("HSA queues created"))?;
    let part = line.split("; preemption: ").nth(1)?;
    let num = |before: &str| -> u64 {
        part.split(before)
            .next()
            .unwrap()
            .split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches(',')
            .parse()
            .unwrap()
    };
    Some((num(" taken off"), num(" put back"), num(" off now")))
}

/// Whether `xhsa-emu status` shows some queue deactivated or suspended.
fn some_queue_off(dir: &DeviceDir) -> bool {
    let s = emu_status(dir);
    s.contains("suspended") || s.contains("inactive")
}

struct Scene {
    dir: DeviceDir,
    board: std::path::PathBuf,
    stop: std::path::PathBuf,
    busy: Option<Running>,
    /// The variable the processes load libxhsa with.
    load: &'static str,
}

/// Starts the busy low-priority process and waits until it floods the device.
fn busy_scene(tag: &str, extra: &[(&str, &str)]) -> Scene {
    busy_scene_loaded(tag, PRELOAD, extra)
}

/// [`busy_scene`] with libxhsa loaded through `load` (`LD_PRELOAD` or `HSA_TOOLS_LIB`).
fn busy_scene_loaded(tag: &str, load: &'static str, extra: &[(&str, &str)]) -> Scene {
    let dir = DeviceDir::new(tag);
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let stop = dir.file("stop");
    let prog = common::program("shared_hip");
    let busy = spawn_under_emu(
        &prog,
        &["busy", stop.to_str().unwrap(), "60"],
        &opts(&dir, &board, load, "-10", extra),
    );
    if busy.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(30)).is_none() {
        std::fs::write(&stop, b"").unwrap();
        panic!("the busy program never reported BUSY_RUNNING\n{}", busy.wait().report());
    }
    Scene { dir, board, stop, busy: Some(busy), load }
}

impl Scene {
    fn victim(&self, trials: &str, extra: &[(&str, &str)]) -> Running {
        let prog = common::program("shared_hip");
        spawn_under_emu(
            &prog,
            &["victim", "10", "640", "1000000", trials],
            &opts(&self.dir, &self.board, self.load, "10", extra),
        )
    }

    fn finish(mut self) -> RunOutput {
        std::fs::write(&self.stop, b"").unwrap();
        let busy = self.busy.take().unwrap().wait();
        assert_passed(&busy);
        busy
    }
}

#[test]
fn a_batch_process_is_preempted_for_a_higher_priority_one_and_put_back() {
    let _lock = run_lock(true);
    // The busy process also writes an XHSA_TRACE (docs/trace.md): its preemptions are spans there.
    let traces = DeviceDir::new("preempt-trace");
    let trace = traces.file("busy-%p.json").display().to_string();
    let scene = busy_scene("preempt", &[("XHSA_TRACE", &trace)]);
    let victim = scene.victim("3", &[]).wait();
    assert_passed(&victim);
    // The victim's work is done: the busy queue is back on the GPU within a moment.
    assert!(
        common::wait::holds_within(Duration::from_secs(3), || !some_queue_off(&scene.dir)),
        "a queue stayed off the GPU\n{}",
        emu_status(&scene.dir)
    );
    let busy = scene.finish();
    let (off, back, now) =
        preemptions(&busy).unwrap_or_else(|| panic!("no preemption summary\n{}", busy.report()));
    assert!(off >= 1, "the busy low-priority queue was never taken off\n{}", busy.report());
    assert_eq!((back, now), (off, 0), "every preemption is undone\n{}", busy.report());
    let (v_off, _, _) = preemptions(&victim).expect("victim summary");
    assert_eq!(v_off, 0, "the high-priority process never preempts itself\n{}", victim.report());
    // Each time off the GPU is one span on the queue's track, the KFD calls are spans on the
    // GPU's preemption track.
    let (path, _) = common::trace_file(&traces.path, "busy-");
    let events = common::read_trace(&path);
    let spans = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        events.iter().filter(|e| e["ph"] == "X" && pred(e)).count() as u64
    };
    let names: std::collections::BTreeMap<u64, String> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
        .collect();
    let track =
        |e: &serde_json::Value| names.get(&e["tid"].as_u64().unwrap()).cloned().unwrap_or_default();
    let off_spans = spans(&|e| {
        e["name"] == "off the GPU"
            && track(e).starts_with("queue ")
            && e["args"].get("still_off_at_exit").is_none()
    });
    assert_eq!(
        off_spans,
        off,
        "one closed `off the GPU` span per preemption in {}",
        path.display()
    );
    let kfd_calls = spans(&|e| track(e).starts_with("preemption, GPU") && e["args"]["ok"] == true);
    assert!(
        kfd_calls >= 2 * off,
        "a KFD call to take each queue off and one to put it back: {kfd_calls} for {off}"
    );
    assert_eq!(events.last().unwrap()["name"], "trace end", "{}", path.display());
}

/// Loaded only through `HSA_TOOLS_LIB` (ROCr dlopens libxhsa; its `ioctl` interposes nothing),
/// libxhsa finds its queues' KFD ids in KFD's queue snapshot and preempts as under `LD_PRELOAD`.
#[test]
fn loaded_as_a_tools_lib_a_batch_process_is_preempted_and_put_back() {
    let _lock = run_lock(true);
    let scene = busy_scene_loaded("preempt-toolslib", TOOLS_LIB, &[]);
    let victim = scene.victim("3", &[]).wait();
    assert_passed(&victim);
    assert!(
        common::wait::holds_within(Duration::from_secs(3), || !some_queue_off(&scene.dir)),
        "a queue stayed off the GPU\n{}",
        emu_status(&scene.dir)
    );
    let busy = scene.finish();
    assert!(
        busy.stderr.contains("HSA_TOOLS_LIB") || busy.stderr.contains("tools library"),
        "loaded as a tools library\n{}",
        busy.report()
    );
    let (off, back, now) =
        preemptions(&busy).unwrap_or_else(|| panic!("no preemption summary\n{}", busy.report()));
    assert!(off >= 1, "the busy low-priority queue was never taken off\n{}", busy.report());
    assert_eq!((back, now), (off, 0), "every preemption is undone\n{}", busy.report());
    assert!(busy.stderr.contains("found in KFD's queue snapshot"), "{}", busy.report());
    eprintln!("tools-lib busy process: {off} taken off, {back} put back");
    let (v_off, _, _) = preemptions(&victim).expect("victim summary");
    assert_eq!(v_off, 0, "the high-priority process never preempts itself\n{}", victim.report());
}

#[test]
fn with_preemption_off_only_the_window_acts() {
    let _lock = run_lock(true);
    let scene = busy_scene("preempt-off", &[("XHSA_PREEMPT", "off")]);
    let victim = scene.victim("2", &[]).wait();
    assert_passed(&victim);
    assert!(!some_queue_off(&scene.dir));
    let busy = scene.finish();
    assert_eq!(
        preemptions(&busy),
        None,
        "XHSA_PREEMPT=off starts no preemption\n{}",
        busy.report()
    );
    assert!(busy.stderr.contains("XHSA_PREEMPT=off"), "{}", busy.report());
}

#[test]
fn a_killed_high_priority_process_does_not_leave_the_batch_process_off_the_gpu() {
    let _lock = run_lock(true);
    let scene = busy_scene("preempt-kill", &[]);
    let victim = scene.victim("50", &[]);
    let off = common::wait::holds_within(Duration::from_secs(30), || some_queue_off(&scene.dir));
    assert!(
        off,
        "the busy queue was never taken off while the victim ran\n{}",
        emu_status(&scene.dir)
    );
    let t = Instant::now();
    victim.kill_group(libc::SIGKILL);
    let _ = victim.wait();
    assert!(
        common::wait::holds_within(Duration::from_secs(5), || !some_queue_off(&scene.dir)),
        "the busy queue stayed off after the high-priority process died\n{}",
        emu_status(&scene.dir)
    );
    eprintln!("back on the GPU {:?} after the SIGKILL", t.elapsed());
    let busy = scene.finish();
    let (off, back, now) = preemptions(&busy).expect("busy summary");
    assert!(off >= 1 && back == off && now == 0, "{}", busy.report());
}

/// Preemption by debug-trap suspend (`XHSA_PREEMPT=suspend`): KFD flags every new queue and
/// refuses to suspend it until the flag is cleared; libxhsa clears it and suspends.
#[test]
fn suspend_mode_suspends_and_resumes() {
    let _lock = run_lock(true);
    let scene = busy_scene("preempt-suspend", &[("XHSA_PREEMPT", "suspend")]);
    let victim = scene.victim("3", &[]).wait();
    assert_passed(&victim);
    assert!(
        common::wait::holds_within(Duration::from_secs(3), || !some_queue_off(&scene.dir)),
        "a queue stayed suspended\n{}",
        emu_status(&scene.dir)
    );
    let busy = scene.finish();
    let (off, back, now) =
        preemptions(&busy).unwrap_or_else(|| panic!("no preemption summary\n{}", busy.report()));
    assert!(off >= 1 && back == off && now == 0, "{}", busy.report());
    assert!(!busy.stderr.contains("preemption failed"), "{}", busy.report());
}

/// An injected preemption failure (`XHSA_EMU_FAULT`, the emulated KFD's knob: the unmap fails, or
/// times out as KFD's does): the application completes, libxhsa logs it once and goes on at
/// level 1, and no queue is left off the GPU.
#[test]
fn an_injected_preemption_failure_is_logged_once_and_the_application_completes() {
    let _lock = run_lock(true);
    for (mode, fault) in
        [("queue", "preempt_fail"), ("queue", "preempt_timeout:0:300"), ("suspend", "preempt_fail")]
    {
        let scene =
            busy_scene("preempt-fault", &[("XHSA_PREEMPT", mode), ("XHSA_EMU_FAULT", fault)]);
        let victim = scene.victim("3", &[]).wait();
        assert_passed(&victim);
        assert!(
            !some_queue_off(&scene.dir),
            "{mode}/{fault}: a queue was left off\n{}",
            emu_status(&scene.dir)
        );
        let busy = scene.finish();
        let failures = busy.stderr.lines().filter(|l| l.contains("preemption failed")).count();
        assert_eq!(
            failures,
            1,
            "{mode}/{fault}: the failure is reported exactly once\n{}",
            busy.report()
        );
        let (off, back, now) = preemptions(&busy).expect("busy summary");
        assert_eq!(now, 0, "{mode}/{fault}: nothing stays off\n{}", busy.report());
        assert_eq!(off, back, "{mode}/{fault}\n{}", busy.report());
    }
}
