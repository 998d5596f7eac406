//! Scenarios the ROCm roots share (tests/emu_rocm64.rs, tests/emu_rocm72.rs): the same check
//! on each userland, parameterised by its root.

use std::path::Path;
use std::time::Duration;

use super::{assert_passed, libxhsa, run_under_emu, DeviceDir, RocmRoot, RunOpts, RunOutput};

/// Options to run under `xhsa-emu run --rocm VERSION --isa ISA` with libxhsa preloaded and its
/// summary logged.
fn preloaded(root: &RocmRoot, isa: &str) -> RunOpts {
    let mut o = RunOpts {
        emu_args: root.args(isa),
        timeout: Duration::from_secs(240),
        ..RunOpts::default()
    };
    o.env.push(("LD_PRELOAD".into(), libxhsa()));
    o.env.push(("XHSA_LOG".into(), "info".into()));
    o
}

/// The whitelist by code object through the root's ROCr loader: rocSPARSE's kernels live in
/// the `rocsparse` library's embedded code objects, so naming it in `XHSA_PASSTHROUGH_LIBS`
/// sends hipSPARSE's SpMV dispatches (`rocm_libs spmv`) unthrottled; without the entry none is.
/// In both loading modes. (ROCm 6.x loads them from the library's file, ROCm 7.x from memory
/// after HIP extracted them: libxhsa then knows them by the libraries that asked.)
pub fn whitelist_by_code_object(root: &RocmRoot, rocm_libs: &Path, rocsparse: &str) {
    if !root.available() {
        return;
    }
    for mode in ["LD_PRELOAD", "HSA_TOOLS_LIB"] {
        let counts = |wl: &str| {
            let mut o = preloaded(root, "gfx90a");
            if mode == "HSA_TOOLS_LIB" {
                o.env.retain(|(k, _)| k != "LD_PRELOAD");
                o.env.push(("HSA_TOOLS_LIB".into(), libxhsa()));
            }
            o.env.push(("XHSA_PASSTHROUGH_LIBS".into(), wl.into()));
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

/// Preemption on the root's ROCm: a low-priority process flooding the GPU (`shared_hip busy`)
/// is taken off it (queue deactivation through the runtime's own `/dev/kfd` descriptor) while a
/// high-priority one (`shared_hip victim`) has work, and put back; the high-priority one is
/// never preempted.
pub fn batch_preempted_for_high_priority(root: &RocmRoot) {
    if !root.available() {
        return;
    }
    let _lock = super::run_lock(true);
    let prog = root.program("shared_hip", "gfx942", &[]);
    let dir = DeviceDir::new(&format!("preempt-{}", root.tag));
    let board = dir.file("board");
    std::fs::create_dir_all(&board).unwrap();
    let stop = dir.file("stop");
    let o = |prio: &str| {
        let mut o = preloaded(root, "gfx942");
        o.env.push(dir.env());
        o.env.push(("XHSA_BOARD_DIR".into(), board.display().to_string()));
        o.env.push(("XHSA_PRIORITY".into(), prio.into()));
        o
    };
    let busy = super::spawn_under_emu(&prog, &["busy", stop.to_str().unwrap(), "40"], &o("-10"));
    if busy.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(60)).is_none() {
        std::fs::write(&stop, b"").unwrap();
        panic!("the busy program never reported BUSY_RUNNING\n{}", busy.wait().report());
    }
    // spawn + wait, not run_under_emu: that takes the run lock this test already holds.
    let victim =
        super::spawn_under_emu(&prog, &["victim", "10", "640", "1000000", "3"], &o("10")).wait();
    std::fs::write(&stop, b"").unwrap();
    let busy = busy.wait();
    assert_passed(&victim);
    assert_passed(&busy);
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
}

/// MIOpen on the root's ROCm (`rocm_libs --values conv`, gfx90a: Debian builds MIOpen's kernels
/// for it): convolution find, forward, backward data and backward weights, max pooling and
/// batch-norm inference
/// succeed and their outputs are the host's, natively and
/// under libxhsa in both loading modes; under libxhsa its queues are shadowed and nothing
/// degrades.
pub fn miopen(root: &RocmRoot, rocm_libs: &Path) {
    if !root.available() {
        return;
    }
    for mode in ["native", "LD_PRELOAD", "HSA_TOOLS_LIB"] {
        let mut o = preloaded(root, "gfx90a");
        o.env.retain(|(k, _)| k != "LD_PRELOAD");
        if mode != "native" {
            o.env.push((mode.into(), libxhsa()));
        }
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
        if mode != "native" {
            let s = super::shadow_summary(&out);
            assert!(
                s.created > 0 && s.forwarded == s.taken && s.degraded == 0,
                "{mode}: MIOpen's queues shadowed, every packet forwarded: {s:?}\n{}",
                out.report()
            );
        }
    }
}
