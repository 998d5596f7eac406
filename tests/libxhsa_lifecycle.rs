//! The process's and the runtime's lifecycle under libxhsa, with preemption forced
//! (`XHSA_PREEMPT=suspend`) and a board: forked children that leave by `exit()`, `_exit()` or
//! `exec` (they never touch their parent's queues, board slots or locks), or exec a GPU program
//! (its own runtime and libxhsa, on the same GPU and board), and an HSA runtime
//! shut down and started again in one process (the queues of the second runtime work; nothing
//! of the first is used after its `hsa_shut_down`).
mod common;

use std::time::Duration;

use common::{
    assert_check_passed, assert_passed, libxhsa, run_lock, spawn_under_emu, DeviceDir, RunOpts,
};
use serde_json::Value;

fn opts(dir: &DeviceDir, board: &std::path::Path) -> RunOpts {
    let env = vec![
        dir.env(),
        ("LD_PRELOAD".into(), libxhsa()),
        ("XHSA_BOARD_DIR".into(), board.display().to_string()),
        ("XHSA_PREEMPT".into(), "suspend".into()),
        ("XHSA_LOG".into(), "info".into()),
    ];
    RunOpts { env, timeout: Duration::from_secs(180), ..RunOpts::default() }
}

/// The live processes on the boards in `board` and their queue counts, from `xhsa-top --json`.
fn live_processes(board: &std::path::Path) -> Vec<(u64, usize)> {
    let snap = common::top_json(board);
    common::snapshot_processes(&snap)
        .filter(|p| p["alive"] == Value::Bool(true))
        .map(|p| (p["pid"].as_u64().unwrap(), p["queues"].as_array().map_or(0, Vec::len)))
        .collect()
}

#[test]
fn forked_children_leave_the_parents_queues_and_board_alone() {
    let _lock = run_lock(true);
    let dir = DeviceDir::new("fork");
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let stop = dir.file("stop");
    let run = spawn_under_emu(
        &common::program("hip_fork"),
        &[stop.to_str().unwrap()],
        &opts(&dir, &board),
    );
    let done = run.wait_for_line(|l| l == "CHILDREN_DONE", Duration::from_secs(120));
    // The children are gone; the parent's queues are still on the board, alive.
    let procs = if done.is_some() { live_processes(&board) } else { Vec::new() };
    std::fs::write(&stop, b"").unwrap();
    let out = run.wait();
    assert!(done.is_some(), "the parent never got past its children\n{}", out.report());
    assert_passed(&out);
    for c in [
        "fork.before",
        "fork.child_exit_ended",
        "fork.child__exit_ended",
        "fork.child_exec_ended",
        "fork.child_gpu_ended",
        "fork.child_gpu_ok",
        "fork.after",
        "fork.last",
    ] {
        assert_check_passed(&out, c);
    }
    assert_eq!(
        procs.len(),
        1,
        "exactly the parent on the board after its children left: {procs:?}\n{}",
        out.report()
    );
    assert!(procs[0].1 >= 1, "the parent's queues are still on the board: {procs:?}");
    // Two exit summaries: the parent's and the GPU child's own (a child that exits says nothing
    // for its parent).
    let summaries = out
        .stderr
        .lines()
        .filter(|l| l.contains("INFO xhsa:") && l.contains("HSA queues created"))
        .count();
    assert_eq!(summaries, 2, "{}", out.report());
}

#[test]
fn a_runtime_shut_down_and_started_again_keeps_working() {
    let _lock = run_lock(true);
    let dir = DeviceDir::new("reinit");
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let co = common::code_object("xhsa_kernels");
    // spawn + wait, not run_under_emu: that takes the run lock this test already holds.
    let out = spawn_under_emu(
        &common::program("hsa_queues"),
        &["reinit", co.to_str().unwrap()],
        &opts(&dir, &board),
    )
    .wait();
    assert_passed(&out);
    assert!(out.stdout.contains("REINIT"), "{}", out.report());
    let passes = |c: &str| out.stdout.lines().filter(|l| *l == format!("PASS {c}")).count();
    for c in
        ["dispatch.vadd_q1", "dispatch.saxpy_q2", "dispatch.barrier_and_cross_queue", "shutdown"]
    {
        assert_eq!(passes(c), 2, "{c} passes in both runtimes\n{}", out.report());
    }
    assert!(
        out.stderr.contains("the runtime shut down: preemption of its queues stops"),
        "{}",
        out.report()
    );
    // Both runtimes' queues were shadowed (four in all) and nothing stays off.
    let created = common::numbers_after(&out, "shadow queues: ")
        .unwrap_or_else(|| panic!("no libxhsa summary\n{}", out.report()));
    assert_eq!(created[0], 4, "{}", out.report());
    if let Some(n) = common::numbers_after(&out, "preemption: ") {
        assert_eq!(n[2], 0, "nothing stays off\n{}", out.report());
    }
}
