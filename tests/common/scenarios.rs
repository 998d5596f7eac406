//! Scenarios the ROCm roots share (tests/emu_rocm64.rs, tests/emu_rocm72.rs): the same check
//! on each userland, parameterised by its root.

use std::path::Path;
use std::time::Duration;

use super::{
    assert_check_passed, assert_libxhsa_scheduled, assert_passed, libxhsa, run_under_emu,
    DeviceDir, RocmRoot, RunOutput,
};

/// The whitelist by code object through the root's ROCr loader: rocSPARSE's kernels live in
/// the `rocsparse` library's embedded code objects, so naming it in `XHSA_PASSTHROUGH_LIBS`
/// sends hipSPARSE's SpMV dispatches (`rocm_libs spmv`) unthrottled; without the entry none is.
/// In both loading modes. (ROCm 6.x loads them from the library's file, ROCm 7.x from memory
/// after HIP extracted them: libxhsa then knows them by the libraries that asked.)
pub fn whitelist_by_code_object(root: &RocmRoot, rocm_libs: &Path, rocsparse: &str) {
    if !root.available() {
        return;
    }
    for (mode, o) in root.modes("gfx90a").into_iter().filter(|(m, _)| *m != "native") {
        let counts = |wl: &str| {
            let mut o = o.clone().with_env("XHSA_PASSTHROUGH_LIBS", wl);
            o.timeout = Duration::from_secs(300);
            let out = run_under_emu(rocm_libs, &["spmv"], &o);
            assert_passed(&out);
            let nums = super::numbers_after(&out, "passthrough libraries: ")
                .unwrap_or_else(|| panic!("{mode}: no libxhsa summary\n{}", out.report()));
            (nums[0], nums[1], out)
        };
        let (q, d, out) = counts("");
        assert_eq!((q, d), (0, 0), "{mode}: nothing whitelisted\n{}", out.report());
        let (q, d, out) = counts(&format!("libother.so, {rocsparse}"));
        assert_eq!(q, 0, "{mode}: HIP, not rocSPARSE, creates the queues\n{}", out.report());
        assert!(d >= 1, "{mode}: rocSPARSE's dispatches were not recognised\n{}", out.report());
    }
}

/// Two processes under libxhsa on one emulated GPU of the root's ROCm (gfx942), sharing a board:
/// `shared_hip busy-sync` at level -10 floods it; once it runs, `while_busy` looks at the device,
/// then `shared_hip victim` at level 10 runs `trials` trials. Both get `extra` in their
/// environment and must pass; returns (busy, victim, what `while_busy` returned). Takes the run
/// lock for itself.
fn busy_beside_victim<T>(
    root: &RocmRoot,
    tag: &str,
    extra: &[(&str, &str)],
    trials: &str,
    while_busy: impl FnOnce(&DeviceDir) -> T,
) -> (RunOutput, RunOutput, T) {
    let _lock = super::run_lock(true);
    let prog = root.program("shared_hip", "gfx942", &[]);
    let dir = DeviceDir::new(&format!("{tag}-{}", root.tag));
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let stop = dir.file("stop");
    let o = |prio: &str| {
        let mut o =
            root.opts("gfx942").with_env("LD_PRELOAD", libxhsa()).with_env("XHSA_LOG", "info");
        o.env.push(dir.env());
        o.env.push(("XHSA_BOARD_DIR".into(), board.display().to_string()));
        o.env.push(("XHSA_PRIORITY".into(), prio.into()));
        o.env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        o
    };
    let busy =
        super::spawn_under_emu(&prog, &["busy-sync", stop.to_str().unwrap(), "40"], &o("-10"));
    if busy.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(60)).is_none() {
        std::fs::write(&stop, b"").unwrap();
        panic!("the busy program never reported BUSY_RUNNING\n{}", busy.wait().report());
    }
    let seen = while_busy(&dir);
    // spawn + wait, not run_under_emu: that takes the run lock this test already holds.
    let victim =
        super::spawn_under_emu(&prog, &["victim", "10", "640", "1000000", trials], &o("10")).wait();
    std::fs::write(&stop, b"").unwrap();
    let busy = busy.wait();
    assert_passed(&victim);
    assert_passed(&busy);
    (busy, victim, seen)
}

/// Preemption on the root's ROCm: a low-priority process flooding the GPU (`shared_hip busy`)
/// is taken off it (queue deactivation through the runtime's own `/dev/kfd` descriptor) while a
/// high-priority one (`shared_hip victim`) has work, and put back; the high-priority one is
/// never preempted.
pub fn batch_preempted_for_high_priority(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let (busy, victim, ()) = busy_beside_victim(root, "preempt", &[], "20", |_| ());
    let taken = |out: &RunOutput| -> (u64, u64) {
        super::numbers_after(out, "preemption: ").map_or((0, 0), |n| (n[0], n[1]))
    };
    let (off, back) = taken(&busy);
    assert!(
        off >= 1 && back == off,
        "the busy process was not taken off and put back ({off} off, {back} back)\n{}",
        busy.report()
    );
    assert!(
        busy.stderr.contains("UPDATE_QUEUE percentage 0"),
        "deactivation is the mechanism\n{}",
        busy.report()
    );
    assert_eq!(
        taken(&victim).0,
        0,
        "the high-priority process must never be preempted\n{}",
        victim.report()
    );
    // The batch process mostly waits (it polls its events every millisecond) while libxhsa
    // waits for its tracking signals. ROCr 6.4/7.2's async-handler thread spun a core for as
    // long as libxhsa had a handler registered there (its event ages kept by list position):
    // that showed as CPU time close to the wall time.
    let share = busy.cpu().as_secs_f64() / busy.wall.as_secs_f64();
    eprintln!(
        "busy process: cpu {:.2} s over {:.2} s wall",
        busy.cpu().as_secs_f64(),
        busy.wall.as_secs_f64()
    );
    assert!(
        share < 0.5,
        "the batch process used {:.0} % of a core while it mostly waited (a thread spinning?)\n{}",
        share * 100.0,
        busy.report()
    );
}

/// `XHSA_RESERVE=20@10` on the root's ROCm, which knows the MI308X's 4 XCCs
/// (`HSA_AMD_AGENT_INFO_NUM_XCC`): the reserved partition is the last XCC, mask bits 3, 7, ...,
/// 79 as amdkfd maps bits to XCCs on GC 9.4.3; the batch process's hardware queue is given the
/// other 60 (the emulated KFD's status shows the mask), and neither process holds back or takes
/// off the other.
pub fn reserve_keeps_partitions_apart(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let reserve = [("XHSA_RESERVE", "20@10")];
    let (busy, victim, status) =
        busy_beside_victim(root, "reserve", &reserve, "5", super::emu_status);
    let shared: Vec<String> = (0..80).filter(|c| c % 4 != 3).map(|c| c.to_string()).collect();
    let masked = status.contains(&format!("CU mask 60 of 80 CUs [{}]", shared.join(",")));
    eprintln!(
        "reserve on {}: victim {:.2} s, busy {:.2} s wall",
        root.tag,
        victim.wall.as_secs_f64(),
        busy.wall.as_secs_f64()
    );
    assert!(masked, "the batch process's hardware queue is not on XCCs 0-2\n{status}");
    for (who, out) in [("busy", &busy), ("victim", &victim)] {
        assert!(
            out.stderr.contains("run on 20 reserved CUs, the others on 60 CUs"),
            "{who}: no split\n{}",
            out.report()
        );
        let off = super::numbers_after(out, "preemption: ").map_or(0, |n| n[0]);
        assert_eq!(off, 0, "{who} was taken off across partitions\n{}", out.report());
        let throttled = super::numbers_after(out, "packets forwarded, ").map_or(0, |n| n[2]);
        assert_eq!(throttled, 0, "{who} was held back across partitions\n{}", out.report());
    }
}

/// MIOpen on the root's ROCm (`rocm_libs --values conv`, gfx90a: Debian builds MIOpen's kernels
/// for it): convolution find, forward, backward data and backward weights, max pooling and
/// batch-norm inference succeed and their outputs are the host's, natively and under libxhsa in
/// both loading modes; under libxhsa its queues are shadowed and nothing degrades.
pub fn miopen(root: &RocmRoot, rocm_libs: &Path) {
    if !root.available() {
        return;
    }
    for (mode, mut o) in root.modes("gfx90a") {
        o.timeout = Duration::from_secs(600);
        let out = run_under_emu(rocm_libs, &["--values", "conv"], &o);
        assert_passed(&out);
        for check in [
            "miopen.find",
            "miopen.forward",
            "miopen.forward_values",
            "miopen.backward_data",
            "miopen.backward_data_values",
            "miopen.backward_weights",
            "miopen.backward_weights_values",
            "miopen.pool",
            "miopen.pool_values",
            "miopen.bn",
            "miopen.bn_values",
            "miopen.destroy",
        ] {
            super::assert_check_passed(&out, check);
        }
        super::assert_libxhsa_scheduled(mode, &out);
    }
}

/// Kernels that wait (`tests/programs/hip_waiting.hip`: device printf through HIP's hostcall
/// service, a cooperative launch's grid barrier, kernels waiting for another stream's kernel or
/// for the host), built by the root's hipcc for gfx942 and gfx90a: every check passes and the
/// 128 printf lines arrive, natively and under libxhsa in both loading modes.
pub fn kernels_that_wait(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    for isa in ["gfx942", "gfx90a"] {
        let prog = root.program("hip_waiting", isa, &[]);
        for (mode, o) in root.modes(isa) {
            let out = run_under_emu(&prog, &["all"], &o);
            assert_passed(&out);
            for c in super::HIP_WAITING_CHECKS {
                super::assert_check_passed(&out, c);
            }
            let printed = out.stdout.lines().filter(|l| l.starts_with("dev-printf block")).count();
            assert_eq!(printed, 128, "{isa} {mode}: device printf lines\n{}", out.report());
            assert!(
                out.stdout.contains("dev-printf block 1 thread 63 word emu half 81.50 hex abc0a3"),
                "{isa} {mode}\n{}",
                out.report()
            );
            super::assert_libxhsa_scheduled(mode, &out);
        }
    }
}

/// Forked children on the root's ROCm under libxhsa (both loading modes, preemption forced,
/// a board): a child that exits, one that `_exit`s, one that execs, and one that execs a GPU
/// program (runtime and libxhsa loaded afresh) all end, and the parent keeps working.
pub fn forked_children(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let fork = root.program("hip_fork", "gfx942", &[]);
    let dir = DeviceDir::new(&format!("fork-{}", root.tag));
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    // The parent waits for this file after its children: it exists already.
    let go = dir.file("go");
    std::fs::write(&go, b"").unwrap();
    for (mode, o) in root.modes("gfx942").into_iter().filter(|(m, _)| *m != "native") {
        let o = o
            .with_env("XHSA_PREEMPT", "suspend")
            .with_env("XHSA_BOARD_DIR", board.display().to_string());
        let out = run_under_emu(&fork, &[go.to_str().unwrap()], &o);
        assert_passed(&out);
        for c in [
            "fork.child_exit_ended",
            "fork.child__exit_ended",
            "fork.child_exec_ended",
            "fork.child_gpu_ended",
            "fork.child_gpu_ok",
            "fork.after",
            "fork.last",
        ] {
            super::assert_check_passed(&out, c);
        }
        super::assert_libxhsa_scheduled(mode, &out);
    }
}

/// The HSA runtime shut down and started again in one process on the root's ROCm: natively and
/// under libxhsa in both loading modes with preemption forced (`XHSA_PREEMPT=suspend`) and a
/// board, both runtimes' queues dispatch, and libxhsa leaves nothing off.
pub fn runtime_restarted(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let prog = root.program("hsa_queues", "gfx942", &[]);
    let co = root.code_object("xhsa_kernels", "gfx942");
    let dir = DeviceDir::new(&format!("reinit-{}", root.tag));
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    for (mode, o) in root.modes("gfx942") {
        let o = o
            .with_env("XHSA_PREEMPT", "suspend")
            .with_env("XHSA_BOARD_DIR", board.display().to_string());
        let out = run_under_emu(&prog, &["reinit", co.to_str().unwrap()], &o);
        assert_passed(&out);
        assert!(out.stdout.contains("REINIT"), "{mode}\n{}", out.report());
        let passes = |c: &str| out.stdout.lines().filter(|l| *l == format!("PASS {c}")).count();
        for c in [
            "dispatch.vadd_q1",
            "dispatch.saxpy_q2",
            "dispatch.barrier_and_cross_queue",
            "shutdown",
        ] {
            assert_eq!(passes(c), 2, "{mode}: {c} passes in both runtimes\n{}", out.report());
        }
        super::assert_libxhsa_scheduled(mode, &out);
        if let Some(n) = super::numbers_after(&out, "preemption: ") {
            assert_eq!(n[2], 0, "{mode}: nothing stays off\n{}", out.report());
        }
    }
}

/// HIP IPC between two processes on the root's ROCm (`tests/programs/hip_ipc.hip`, gfx942): a
/// parent fills two device buffers (a large one and a small one ROCr may carve from a block)
/// with a kernel and passes their `hipIpcGetMemHandle` handles to a child it fork+execs; the
/// child opens them (ROCr sends it a DMA-buf over its IPC socket; KFD's GET_DMABUF_INFO and
/// IMPORT_DMABUF take it, on 7.x also the render node's PRIME_FD_TO_HANDLE and GEM_METADATA),
/// reads the parent's values with a kernel and a copy, writes its own with a kernel, closes and
/// reopens; the parent then finds the child's values, with a kernel and a copy. Natively and
/// under libxhsa in both loading modes (the child inherits the loading).
pub fn ipc_between_processes(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let prog = root.program("hip_ipc", "gfx942", &[]);
    for (mode, o) in root.modes("gfx942") {
        let out = run_under_emu::<&str>(&prog, &[], &o);
        assert_passed(&out);
        for c in [
            "ipc.parent.handle_big",
            "ipc.parent.handle_small",
            "ipc.child.big.open",
            "ipc.child.big.kernel_reads_parent_values",
            "ipc.child.big.copy_reads_parent_values",
            "ipc.child.big.close",
            "ipc.child.small.open",
            "ipc.child.small.kernel_reads_parent_values",
            "ipc.child.small.copy_reads_parent_values",
            "ipc.child.small.close",
            "ipc.child.reopen_sees_child_values",
            "ipc.child.reclose",
            "ipc.child.cycles",
            "ipc.child.nothing_left_behind",
            "ipc.parent.child_ok",
            "ipc.parent.kernel_sees_child_writes_big",
            "ipc.parent.copy_sees_child_writes_big",
            "ipc.parent.kernel_sees_child_writes_small",
            "ipc.parent.copy_sees_child_writes_small",
            "ipc.parent.free_big",
        ] {
            super::assert_check_passed(&out, c);
        }
        super::assert_libxhsa_scheduled(mode, &out);
    }
}

/// tests/programs/hip_copies.hip built by the root's hipcc on eight emulated GPUs: every kind of
/// copy and fill (hipHostRegister too) and a peer copy from each GPU to the next are byte-exact,
/// natively and under libxhsa both ways, with no SDMA memory fault.
pub fn copies_on_eight_gpus(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let prog = root.program("hip_copies", "gfx942", &[]);
    for (mode, mut o) in root.modes("gfx942") {
        o.emu_args.extend(["--gpus".to_string(), "8".to_string()]);
        let out = run_under_emu::<&str>(&prog, &[], &o);
        assert!(!out.stderr.contains("SDMA memory fault"), "{mode}\n{}", out.report());
        assert_passed(&out);
        assert_check_passed(&out, "copy.registered.async.4194612");
        assert_check_passed(&out, "copy.peer");
        assert!(out.stdout.contains("8 devices, 8 peer copies"), "{mode}\n{}", out.report());
        assert_libxhsa_scheduled(mode, &out);
    }
}
