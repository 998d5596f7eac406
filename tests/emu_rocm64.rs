//! The users' stack on the emulator: ROCm 6.4 (Debian sid's ROCr/HIP 6.4 with the thunk inside
//! ROCr, hipcc on clang 21, hipBLAS, rocBLAS, MIOpen, rocFFT, hipSPARSE, hipRAND) from the root
//! `./x setup` builds, under `xhsa-emu run --rocm 6.4`: the emulated MI308X is a gfx942 agent
//! with 80 CUs (gfx90a with `--isa gfx90a`), the project's HIP programs built by the 6.4 hipcc
//! run natively and under libxhsa in both loading modes, the ROCm libraries report success, and
//! 5.2 and 6.4 processes share one emulated GPU.
//!
//! These tests need the ROCm 6.4 root (`./x setup` builds it; `$XHSA_ROCM64_ROOT` names
//! another): without it they fail and say so.
mod common;

use std::time::Duration;

use common::{
    assert_check_passed, assert_libxhsa_scheduled, assert_passed, run_under_emu, DeviceDir,
    RunOpts, RunOutput, ROCM64,
};

fn shell(cmd: &str, isa: &str) -> RunOutput {
    run_under_emu(std::path::Path::new("/bin/sh"), &["-c", cmd], &ROCM64.opts(isa))
}

#[test]
fn rocminfo_lists_a_gfx942_agent_with_80_compute_units() {
    let out = shell("rocminfo", "gfx942");
    assert!(out.status.success(), "{}", out.report());
    let agents: Vec<&str> = out.stdout.split("*******").collect();
    let gpu = agents
        .iter()
        .find(|a| a.contains("Device Type:             GPU"))
        .unwrap_or_else(|| panic!("no GPU agent\n{}", out.report()));
    assert!(gpu.contains("Name:                    gfx942"), "{}", out.report());
    assert!(gpu.contains("Compute Unit:            80"), "{}", out.report());
    assert!(gpu.contains("amdgcn-amd-amdhsa--gfx942"), "{}", out.report());
    let out = shell("rocminfo", "gfx90a");
    assert!(
        out.status.success() && out.stdout.contains("amdgcn-amd-amdhsa--gfx90a"),
        "--isa gfx90a\n{}",
        out.report()
    );
}

#[test]
fn the_command_sees_the_rocm64_root_the_emulated_devices_and_the_host() {
    let cwd = std::env::current_dir().unwrap();
    let out = shell(
        "cat /etc/debian_version; hipcc --version | head -1; stat -c '%F %t:%T' /dev/kfd /dev/dri/renderD128; \
         cat /sys/class/kfd/kfd/topology/nodes/1/name; grep -E '^(gfx_target_version|simd_count|drm_render_minor) ' /sys/devices/virtual/kfd/kfd/topology/nodes/1/properties; \
         readlink -f /sys/dev/char/226:128/device; cat /sys/module/amdgpu/initstate; pwd; test -d /proc/self && echo proc-ok",
        "gfx942",
    );
    assert!(out.status.success(), "{}", out.report());
    let s = &out.stdout;
    assert!(s.contains("sid") || s.contains("forky"), "not the sid root\n{s}");
    assert!(s.contains("clang version 21") || s.contains("HIP version: 6.4"), "not its hipcc\n{s}");
    assert!(
        s.contains("character special file ee:0") && s.contains("character special file e2:80"),
        "device nodes\n{s}"
    );
    assert!(
        s.contains("gfx942\n")
            && s.contains("gfx_target_version 90402")
            && s.contains("simd_count 320")
            && s.contains("drm_render_minor 128"),
        "{s}"
    );
    assert!(
        s.contains("/sys/devices/pci0000:0c/0000:0c:00.0")
            && s.contains("live")
            && s.contains("proc-ok"),
        "{s}"
    );
    assert!(s.contains(&cwd.display().to_string()), "the working directory\n{s}");
}

/// The project's HIP test program, built by the 6.4 hipcc for gfx942: its checks pass natively
/// and under libxhsa in both modes.
#[test]
fn hip_basic_built_by_the_rocm64_hipcc_passes_natively_and_under_libxhsa() {
    let prog = common::program64("hip_basic", "gfx942", &[]);
    for (mode, o) in ROCM64.modes("gfx942") {
        let out = run_under_emu(
            &prog,
            &["device", "memcpy", "memset", "kernels", "streams", "priority"],
            &o,
        );
        assert_passed(&out);
        assert_check_passed(&out, "kernels.matmul_64");
        assert!(out.stdout.contains("gfx942"), "{mode}: not a gfx942 device\n{}", out.report());
        assert_libxhsa_scheduled(mode, &out);
    }
}

/// libxhsa's completion waiter never lets ROCr 6.4's `hsa_amd_signal_wait_any` write past its
/// one-element vector (see [`common::RocmRoot::assert_completion_waits_leave_the_heap_intact`]).
#[test]
fn completion_waits_leave_the_heap_intact_under_glibcs_malloc_check() {
    ROCM64.assert_completion_waits_leave_the_heap_intact();
}

/// An idle queue is never taken off: `hip_basic`'s memcpy section leaves the null stream's and
/// the copy queues (normal priority) with their last packets written untracked (the process
/// was alone), so they counted as 86 and 12 packets in flight, and when the priority section's
/// high stream got work they were taken off and put back beside the low stream's (two
/// device-wide unmaps each, for nothing). Their counts are now confirmed by a tracking barrier
/// before they are weighed: every queue the watcher takes off (its debug log of each step)
/// is the low stream's, the lowest priority in the process. Three rounds of two runs at a time
/// (the build before took idle queues off in 11 of 12 such runs; this one in 0 of 24 alone).
/// The confirmation waits at most a round trip's cost (1 ms before one is measured): with the
/// other tests of this binary running beside the two emulators on two cores, a barrier's
/// round trip took 5 ms once (one run in six of a full `./x test`), so one run in six may
/// take an idle queue off; two or more is the old behaviour.
#[test]
fn idle_queues_with_stale_in_flight_counts_are_never_taken_off() {
    let prog = common::program64("hip_basic", "gfx942", &[]);
    let o = ROCM64
        .opts("gfx942")
        .with_env("LD_PRELOAD", common::libxhsa())
        .with_env("XHSA_LOG", "info,xhsa::preempt=debug");
    let _lock = common::run_lock(true);
    let runs = (0..3).flat_map(|_| {
        let two: Vec<_> =
            (0..2).map(|_| common::spawn_under_emu(&prog, &["memcpy", "priority"], &o)).collect();
        two.into_iter().map(|r| r.wait()).collect::<Vec<_>>()
    });
    let mut wrong: Vec<String> = Vec::new();
    for (i, out) in runs.enumerate() {
        assert_passed(&out);
        let mut first_wrong = None;
        for line in out.stderr.lines().filter(|l| l.contains("preemption step: mine [")) {
            // "mine [(id, rank, pending, in_flight, packet_us, preemptable, unconfirmed), ...],
            // ...: take off
            // [QueueId(a), ...], put back [...]"
            let mine = &line[line.find("mine [").unwrap() + 6..line.find("], others").unwrap()];
            let queues: Vec<(u64, i64)> = mine
                .split("), (")
                .map(|t| {
                    let mut f = t.trim_matches(|c| c == '(' || c == ')').split(", ");
                    (f.next().unwrap().parse().unwrap(), f.next().unwrap().parse().unwrap())
                })
                .collect();
            let lowest = queues.iter().map(|q| q.1).min().unwrap();
            let off =
                &line[line.find("take off [").unwrap() + 10..line.find("], put back").unwrap()];
            for id in off.split(", ").filter(|s| !s.is_empty()) {
                let id: u64 =
                    id.trim_start_matches("QueueId(").trim_end_matches(')').parse().unwrap();
                let rank = queues.iter().find(|q| q.0 == id).unwrap().1;
                if rank != lowest && first_wrong.is_none() {
                    first_wrong =
                        Some(format!("run {i}: queue {id} (rank {rank}) taken off: {line}"));
                }
            }
        }
        wrong.extend(first_wrong);
    }
    assert!(
        wrong.len() <= 1,
        "idle queues taken off in {} runs of 6:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// With `HSA_ENABLE_INTERRUPT=0` ROCr's signals have no KFD events: libxhsa's completion waiter
/// cannot sleep in KFD and looks at its armed tracking signals' values instead (said once);
/// the program still passes in both loading modes, and no queue is left off the GPU.
#[test]
fn completions_are_seen_when_signals_have_no_kfd_events() {
    let prog = common::program64("hip_basic", "gfx942", &[]);
    for (mode, o) in ROCM64.modes("gfx942").into_iter().filter(|(m, _)| *m != "native") {
        let o = o.with_env("HSA_ENABLE_INTERRUPT", "0");
        let out = run_under_emu(&prog, &["memcpy", "priority"], &o);
        assert_passed(&out);
        assert_check_passed(&out, "priority.greatest.work");
        assert_libxhsa_scheduled(mode, &out);
        assert!(
            out.stderr.contains("has no KFD event") && out.stderr.contains(" 0 off now"),
            "{mode}: the waiter did not poll, or a queue was left off\n{}",
            out.report()
        );
    }
}

/// Kernels without a CPU model built for gfx942 execute on the ISA interpreter and compute
/// right results (`tests/programs/isa_exec.hip` checks its own: vector add, LDS reduction with
/// barriers, shuffle, atomics, fp64, a private array in scratch memory).
#[test]
fn isa_exec_built_for_gfx942_computes_right_results() {
    let prog = common::program64("isa_exec", "gfx942", &[]);
    let out = run_under_emu::<&str>(&prog, &[], &ROCM64.opts("gfx942"));
    assert_passed(&out);
    for c in ["vadd", "lds_reduce", "shfl", "atomic_sum", "fp64", "private"] {
        assert_check_passed(&out, c);
    }
}

/// The HSA-level test program (queues, packets, signals, `hsa_amd_queue_get_info`), built
/// against ROCr 6.4.
#[test]
fn hsa_queues_built_against_rocr64_passes_natively_and_under_libxhsa() {
    let prog = common::program64("hsa_queues", "gfx942", &[]);
    let co = common::code_object64("xhsa_kernels", "gfx942");
    for (mode, o) in ROCM64.modes("gfx942") {
        let out = run_under_emu(&prog, &["normal", co.to_str().unwrap()], &o);
        assert_passed(&out);
        // ROCm 6.x's hsa_amd_queue_get_info on a queue libxhsa shadows answers for its hardware
        // queue (ROCr itself refuses a shadow: HSA_STATUS_ERROR_INVALID_QUEUE).
        assert_check_passed(&out, "queues.get_info_agent");
        // The shadow carries ROCr 6.4's queue-object pointer where its layout (amd_queue_v2_t)
        // puts it.
        assert_check_passed(&out, "queues.core_queue_word");
        assert_libxhsa_scheduled(mode, &out);
    }
}

fn rocm_libs() -> std::path::PathBuf {
    common::program64(
        "rocm_libs",
        "gfx90a",
        &["hipblas", "rocblas", "MIOpen", "rocfft", "hipsparse", "hiprand"],
    )
}

/// hipBLAS, rocBLAS, rocFFT, hipSPARSE and hipRAND (Debian builds their kernels for gfx90a,
/// hence `--isa gfx90a`, and gfx90a kernels execute on the ISA interpreter): every status a
/// success and every result the host's (SGEMM exactly, both ways; an FFT; SpMV; uniforms in
/// range with mean and variance), natively and under libxhsa in both modes.
#[test]
fn rocm64_libraries_compute_right_results_natively_and_under_libxhsa() {
    let prog = rocm_libs();
    for (mode, mut o) in ROCM64.modes("gfx90a") {
        o.timeout = Duration::from_secs(600);
        let out = run_under_emu(&prog, &["--values", "sgemm", "fft", "spmv", "rand"], &o);
        assert_passed(&out);
        for check in [
            "hipblas.sgemm",
            "rocblas.sgemm",
            "rocfft.execute",
            "hipsparse.spmv",
            "hiprand.uniform",
        ] {
            assert_check_passed(&out, check);
        }
        for check in [
            "hipblas.sgemm_values",
            "rocblas.sgemm_values",
            "rocfft.values",
            "hipsparse.spmv_values",
            "hiprand.uniform_values",
        ] {
            assert_check_passed(&out, check);
        }
        assert_libxhsa_scheduled(mode, &out);
    }
}

/// MIOpen 6.4: convolution forward, backward data and weights, max pooling and batch-norm
/// inference give the host's results, natively and under
/// libxhsa in both loading modes. Debian's package breaks two of its own run-time compiles
/// (docs/emulator.md): its build-tree clang path is linked in the root by tools/rocm-root.sh,
/// and `xhsa-emu run --rocm 6.4` turns off the naive solver, whose flags break libstdc++'s
/// `<cmath>` in sid.
#[test]
fn miopen_computes_right_results_on_rocm64_natively_and_under_libxhsa() {
    common::scenarios::miopen(&common::ROCM64, &rocm_libs());
}

/// A ROCm 5.2 process and a ROCm 6.4 process on one emulated GPU: both run at the same time,
/// and the shared device lists both.
#[test]
fn rocm52_and_rocm64_processes_share_one_emulated_gpu() {
    let dir = DeviceDir::new("mixed-stacks");
    let (stop52, stop64) = (dir.file("stop52"), dir.file("stop64"));
    let p52 = common::program("shared_hip");
    let p64 = common::program64("shared_hip", "gfx942", &[]);
    let mut o52 = RunOpts { timeout: Duration::from_secs(120), ..RunOpts::default() };
    o52.env.push(dir.env());
    let mut o64 = ROCM64.opts("gfx942");
    o64.env.push(dir.env());
    let pid_of = |l: &str| l.strip_prefix("shared_hip busy, pid ").map(str::to_string);
    let a = common::spawn_under_emu(&p52, &["busy", stop52.to_str().unwrap(), "60"], &o52);
    let b = common::spawn_under_emu(&p64, &["busy", stop64.to_str().unwrap(), "60"], &o64);
    let pid_a =
        a.wait_for_line(|l| pid_of(l).is_some(), Duration::from_secs(60)).and_then(|l| pid_of(&l));
    let pid_b =
        b.wait_for_line(|l| pid_of(l).is_some(), Duration::from_secs(90)).and_then(|l| pid_of(&l));
    let running = a.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(60)).is_some()
        && b.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(90)).is_some();
    let (k, v) = dir.env();
    let st = std::process::Command::new(common::emu_launcher())
        .arg("status")
        .env(k, v)
        .output()
        .unwrap();
    std::fs::write(&stop52, b"").unwrap();
    std::fs::write(&stop64, b"").unwrap();
    let (a, b) = (a.wait(), b.wait());
    assert!(running, "both busy processes must run at once\n{}\n{}", a.report(), b.report());
    assert_passed(&a);
    assert_passed(&b);
    let text = String::from_utf8_lossy(&st.stdout);
    for pid in [pid_a.expect("5.2 pid"), pid_b.expect("6.4 pid")] {
        assert!(
            text.contains(&format!("process {pid} ")),
            "the shared device does not list pid {pid}\n{text}"
        );
    }
}

/// Kernels that wait (`tests/programs/hip_waiting.hip`: device printf through HIP 6.4's
/// hostcall service, a cooperative launch's grid syncs, workgroups spinning on each other,
/// kernels waiting for another stream's kernel or for the host), built by the 6.4 hipcc for the
/// MI308X's gfx942 and for gfx90a: ROCr 6.4's own thunk finds the GWS in the sysfs topology and
/// asks KFD for them with the raw ioctl. Natively and under libxhsa in both modes.
#[test]
fn kernels_that_wait_complete_under_rocm64_natively_and_under_libxhsa() {
    common::scenarios::kernels_that_wait(&common::ROCM64);
}

/// Forked children on ROCm 6.4 (HIP 6.4 shuts the runtime down from a static destructor), in
/// both loading modes with preemption forced (`XHSA_PREEMPT=suspend`) and a board: children
/// leaving by `exit()`, `_exit()` and `exec`, and one exec'ing a GPU program of its own (runtime
/// and libxhsa loaded afresh, same GPU and board), while the parent goes on; every program passes and
/// exits (no hang, no crash).
#[test]
fn forked_children_under_libxhsa_on_rocm64() {
    common::scenarios::forked_children(&common::ROCM64);
}

/// The HSA runtime shut down and started again in one process on ROCm 6.4 (whose thunk enables
/// the KFD runtime at start and disables it at shutdown): natively and under libxhsa in both
/// modes with preemption forced (`XHSA_PREEMPT=suspend`, the debug trap) and a board, both
/// runtimes' queues dispatch, and libxhsa leaves nothing off.
#[test]
fn a_rocr64_runtime_shut_down_and_started_again_keeps_working() {
    common::scenarios::runtime_restarted(&common::ROCM64);
}

/// The whitelist by code object through ROCr 6.4's loader: rocSPARSE's kernels live in
/// librocsparse.so's embedded code objects, so naming the library sends hipSPARSE's SpMV
/// dispatches unthrottled; without the entry none is.
#[test]
fn the_whitelist_recognises_a_rocm64_library_by_its_code_objects() {
    common::scenarios::whitelist_by_code_object(&common::ROCM64, &rocm_libs(), "librocsparse.so.1");
}

/// Preemption on ROCm 6.4: a low-priority process flooding the GPU is taken off it (queue
/// deactivation through ROCr 6.4's own `/dev/kfd` descriptor) while a high-priority process has
/// work, and put back; the high-priority one is never held back.
#[test]
fn a_batch_process_on_rocm64_is_preempted_for_a_higher_priority_one() {
    common::scenarios::batch_preempted_for_high_priority(&common::ROCM64);
}

/// A reserved CU partition on ROCm 6.4 (4 XCCs known): see
/// `common::scenarios::reserve_keeps_partitions_apart`.
#[test]
fn a_reserved_partition_on_rocm64_is_the_last_xcc_and_keeps_the_batch_process_running() {
    common::scenarios::reserve_keeps_partitions_apart(&common::ROCM64);
}

/// HIP IPC on ROCm 6.4 (ROCr 6.4.3 takes the DMA-buf path: KFD 1.17 and libdrm's
/// `amdgpu_device_get_fd`): a child process opens the parent's device buffers by their handles,
/// reads the parent's values and writes its own, which the parent then reads; natively and
/// under libxhsa in both loading modes.
#[test]
fn hip_ipc_shares_device_memory_between_processes_on_rocm64() {
    common::scenarios::ipc_between_processes(&common::ROCM64);
}

/// tests/programs/hip_copies.hip built by the 6.4 hipcc on eight emulated GPUs: every kind of copy
/// and fill (hipHostRegister too) and a peer copy from each GPU to the next are byte-exact,
/// natively and under libxhsa both ways.
#[test]
fn copies_of_every_kind_on_eight_gpus_on_rocm64_natively_and_under_libxhsa() {
    common::scenarios::copies_on_eight_gpus(&ROCM64);
}
