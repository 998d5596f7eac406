//! The users' stack on the emulator: ROCm 7.2 (Debian experimental's ROCr/HIP 7.2.4 with the
//! thunk inside ROCr, hipcc on clang 22, hipBLAS 3, rocBLAS 5, MIOpen, rocFFT, hipSPARSE 4,
//! hipRAND) from the root `./x setup` builds (tools/rocm72), under `xhsa-emu run --rocm 7.2`:
//! the emulated MI308X is a gfx942 agent with 80 CUs (gfx90a with `--isa gfx90a`), the
//! project's HIP and HSA programs built by the 7.2 hipcc run natively and under libxhsa, which
//! shadows and schedules ROCr 7.2's queues in both loading modes, the ROCm libraries report
//! success, and 5.2, 6.4 and 7.2 processes share one emulated GPU.
//!
//! These tests need the ROCm 7.2 root (`./x setup` builds it; `$XHSA_ROCM72_ROOT` names
//! another): without it they fail and say so, unless `XHSA_ROCM72=skip`, which skips them
//! (each prints why).
mod common;

use std::time::Duration;

use common::{
    assert_check_passed, assert_libxhsa_scheduled, assert_passed, run_under_emu, DeviceDir,
    RunOpts, RunOutput, ROCM64, ROCM72,
};

fn shell(cmd: &str, isa: &str) -> RunOutput {
    run_under_emu(std::path::Path::new("/bin/sh"), &["-c", cmd], &ROCM72.opts(isa))
}

#[test]
fn rocminfo_on_rocm72_lists_a_gfx942_agent_with_80_compute_units() {
    if !ROCM72.available() {
        return;
    }
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
    assert!(gpu.contains("AMD Instinct MI308X"), "{}", out.report());
    let out = shell("rocminfo", "gfx90a");
    assert!(
        out.status.success() && out.stdout.contains("amdgcn-amd-amdhsa--gfx90a"),
        "--isa gfx90a\n{}",
        out.report()
    );
}

#[test]
fn the_command_sees_the_rocm72_root_the_emulated_devices_and_the_host() {
    if !ROCM72.available() {
        return;
    }
    let cwd = std::env::current_dir().unwrap();
    let out = shell(
        "hipcc --version; stat -c '%F %t:%T' /dev/kfd /dev/dri/renderD128; \
         grep -E '^(gfx_target_version|simd_count|drm_render_minor|cwsr_size|ctl_stack_size) ' /sys/devices/virtual/kfd/kfd/topology/nodes/1/properties; \
         readlink -f /sys/dev/char/226:128/device; pwd",
        "gfx942",
    );
    assert!(out.status.success(), "{}", out.report());
    let s = &out.stdout;
    assert!(s.contains("HIP version: 7.2") && s.contains("clang version 22"), "not its hipcc\n{s}");
    assert!(
        s.contains("character special file ee:0") && s.contains("character special file e2:80"),
        "device nodes\n{s}"
    );
    assert!(
        s.contains("gfx_target_version 90402")
            && s.contains("simd_count 320")
            && s.contains("drm_render_minor 128"),
        "{s}"
    );
    assert!(s.contains("/sys/devices/pci0000:0c/0000:0c:00.0"), "{s}");
    assert!(s.contains(&cwd.display().to_string()), "the working directory\n{s}");
}

/// The project's HIP test program, built by the 7.2 hipcc for gfx942: its checks pass natively
/// and under libxhsa in both modes.
#[test]
fn hip_basic_built_by_the_rocm72_hipcc_passes_natively_and_under_libxhsa() {
    if !ROCM72.available() {
        return;
    }
    let prog = ROCM72.program("hip_basic", "gfx942", &[]);
    for (mode, o) in ROCM72.modes("gfx942") {
        let out = run_under_emu(
            &prog,
            &["device", "memcpy", "memset", "kernels", "streams", "priority"],
            &o,
        );
        assert_passed(&out);
        assert_check_passed(&out, "kernels.matmul_64");
        assert_check_passed(&out, "priority.greatest.work");
        assert!(out.stdout.contains("gfx942"), "{mode}: not a gfx942 device\n{}", out.report());
        assert_libxhsa_scheduled(mode, &out);
    }
}

/// libxhsa's completion waiter never lets ROCr 7.2's `hsa_amd_signal_wait_any` write past its
/// one-element vector (see [`common::RocmRoot::assert_completion_waits_leave_the_heap_intact`]).
#[test]
fn completion_waits_leave_the_heap_intact_under_glibcs_malloc_check() {
    if !ROCM72.available() {
        return;
    }
    ROCM72.assert_completion_waits_leave_the_heap_intact();
}

/// Kernels without a CPU model built for gfx942 by clang 22 execute on the ISA interpreter and
/// compute right results.
#[test]
fn isa_exec_built_by_the_rocm72_hipcc_computes_right_results() {
    if !ROCM72.available() {
        return;
    }
    let prog = ROCM72.program("isa_exec", "gfx942", &[]);
    let out = run_under_emu::<&str>(&prog, &[], &ROCM72.opts("gfx942"));
    assert_passed(&out);
    for c in ["vadd", "lds_reduce", "shfl", "atomic_sum", "fp64", "private"] {
        assert_check_passed(&out, c);
    }
}

/// The HSA-level test program (queues, packets, signals, `hsa_amd_queue_get_info`), built
/// against ROCr 7.2.
#[test]
fn hsa_queues_built_against_rocr72_passes_natively_and_under_libxhsa() {
    if !ROCM72.available() {
        return;
    }
    let prog = ROCM72.program("hsa_queues", "gfx942", &[]);
    let co = ROCM72.code_object("xhsa_kernels", "gfx942");
    for (mode, o) in ROCM72.modes("gfx942") {
        let out = run_under_emu(&prog, &["normal", co.to_str().unwrap()], &o);
        assert_passed(&out);
        assert_check_passed(&out, "queues.get_info_agent");
        assert_libxhsa_scheduled(mode, &out);
    }
}

fn rocm_libs() -> std::path::PathBuf {
    ROCM72.program(
        "rocm_libs",
        "gfx90a",
        &["hipblas", "rocblas", "MIOpen", "rocfft", "hipsparse", "hiprand"],
    )
}

/// hipBLAS 3, rocBLAS 5, rocFFT, hipSPARSE 4 and hipRAND of ROCm 7.2 (Debian builds their
/// kernels for gfx90a among others, hence `--isa gfx90a`): every status a success and every
/// result the host's, natively and under libxhsa in both modes.
#[test]
fn rocm72_libraries_compute_right_results_natively_and_under_libxhsa() {
    if !ROCM72.available() {
        return;
    }
    let prog = rocm_libs();
    for (mode, mut o) in ROCM72.modes("gfx90a") {
        o.timeout = Duration::from_secs(600);
        let out = run_under_emu(&prog, &["--values", "sgemm", "fft", "spmv", "rand"], &o);
        assert_passed(&out);
        for check in [
            "hipblas.sgemm",
            "rocblas.sgemm",
            "rocfft.execute",
            "hipsparse.spmv",
            "hiprand.uniform",
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

/// MIOpen 7.2: convolution forward, backward data and weights, max pooling and batch-norm
/// inference give the host's results, natively
/// and under libxhsa in both loading modes (the kernels run on the ISA interpreter, gfx90a).
/// Debian's package lacks the sources of MIOpen's assembly kernels; `xhsa-emu run --rocm 7.2`
/// turns those solvers off (`MIOPEN_DEBUG_GCN_ASM_KERNELS=0`, docs/emulator.md).
#[test]
fn miopen_computes_right_results_on_rocm72_natively_and_under_libxhsa() {
    common::scenarios::miopen(&ROCM72, &rocm_libs());
}

/// A ROCm 5.2, a ROCm 6.4 and a ROCm 7.2 process on one emulated GPU: all three run at the same
/// time, and the shared device lists them.
#[test]
fn rocm52_rocm64_and_rocm72_processes_share_one_emulated_gpu() {
    if !ROCM72.available() || !ROCM64.available() {
        return;
    }
    let dir = DeviceDir::new("three-stacks");
    let stops = [dir.file("stop52"), dir.file("stop64"), dir.file("stop72")];
    let progs = [
        common::program("shared_hip"),
        ROCM64.program("shared_hip", "gfx942", &[]),
        ROCM72.program("shared_hip", "gfx942", &[]),
    ];
    let o52 = RunOpts { timeout: Duration::from_secs(120), ..RunOpts::default() };
    let o64 = ROCM64.opts("gfx942");
    let mut children = Vec::new();
    for ((prog, stop), mut o) in progs.iter().zip(&stops).zip([o52, o64, ROCM72.opts("gfx942")]) {
        o.env.push(dir.env());
        children.push(common::spawn_under_emu(prog, &["busy", stop.to_str().unwrap(), "60"], &o));
    }
    let pid_of = |l: &str| l.strip_prefix("shared_hip busy, pid ").map(str::to_string);
    let pids: Vec<Option<String>> = children
        .iter()
        .map(|c| {
            c.wait_for_line(|l| pid_of(l).is_some(), Duration::from_secs(90))
                .and_then(|l| pid_of(&l))
        })
        .collect();
    let running = children
        .iter()
        .all(|c| c.wait_for_line(|l| l == "BUSY_RUNNING", Duration::from_secs(90)).is_some());
    let (k, v) = dir.env();
    let st = std::process::Command::new(common::emu_launcher())
        .arg("status")
        .env(k, v)
        .output()
        .unwrap();
    for s in &stops {
        std::fs::write(s, b"").unwrap();
    }
    let outs: Vec<RunOutput> = children.into_iter().map(|c| c.wait()).collect();
    let reports: Vec<String> = outs.iter().map(RunOutput::report).collect();
    assert!(running, "all three busy processes must run at once\n{}", reports.join("\n"));
    for out in &outs {
        assert_passed(out);
    }
    let text = String::from_utf8_lossy(&st.stdout);
    for (stack, pid) in ["5.2", "6.4", "7.2"].iter().zip(pids) {
        let pid = pid.unwrap_or_else(|| panic!("no {stack} pid\n{}", reports.join("\n")));
        assert!(
            text.contains(&format!("process {pid} ")),
            "the shared device does not list the {stack} process {pid}\n{text}"
        );
    }
}

/// Kernels that wait (device printf through HIP 7.2's hostcall service, a cooperative launch's
/// grid syncs, workgroups spinning on each other, kernels waiting for another stream or for the
/// host), built by the 7.2 hipcc for gfx942 and gfx90a, natively and under libxhsa.
#[test]
fn kernels_that_wait_complete_under_rocm72_natively_and_under_libxhsa() {
    common::scenarios::kernels_that_wait(&ROCM72);
}

/// Forked children on ROCm 7.2 under libxhsa (both modes, preemption forced, a board):
/// children leaving by `exit()`, `_exit()` and `exec`, and one exec'ing a GPU program of its
/// own, while the parent goes on; every program passes and exits.
#[test]
fn forked_children_under_libxhsa_on_rocm72() {
    common::scenarios::forked_children(&ROCM72);
}

/// ROCr 7.2 shut down and started again in one process (its thunk enables the KFD runtime at
/// start and disables it at shutdown): both runtimes' queues dispatch, natively and under
/// libxhsa.
#[test]
fn a_rocr72_runtime_shut_down_and_started_again_keeps_working() {
    common::scenarios::runtime_restarted(&ROCM72);
}

/// The whitelist by code object through ROCr 7.2's loader (rocSPARSE 4's library is still
/// `librocsparse.so.1`).
#[test]
fn the_whitelist_recognises_a_rocm72_library_by_its_code_objects() {
    common::scenarios::whitelist_by_code_object(&ROCM72, &rocm_libs(), "librocsparse.so.1");
}

/// Preemption on ROCm 7.2: a low-priority process flooding the GPU is taken off it (queue
/// deactivation through ROCr 7.2's own `/dev/kfd` descriptor, its KFD queue ids seen through
/// the thunk inside ROCr) while a high-priority process has work, and put back; the
/// high-priority one is never preempted.
#[test]
fn a_batch_process_on_rocm72_is_preempted_for_a_higher_priority_one() {
    common::scenarios::batch_preempted_for_high_priority(&ROCM72);
}

/// A reserved CU partition on ROCm 7.2 (4 XCCs known): see
/// `common::scenarios::reserve_keeps_partitions_apart`.
#[test]
fn a_reserved_partition_on_rocm72_is_the_last_xcc_and_keeps_the_batch_process_running() {
    common::scenarios::reserve_keeps_partitions_apart(&ROCM72);
}

/// HIP IPC on ROCm 7.2 (ROCr 7.2.4 also checks, through the render node, that the imported
/// buffer carries the metadata the exporter set): a child process opens the parent's device
/// buffers by their handles, reads the parent's values and writes its own, which the parent then
/// reads; natively and under libxhsa in both loading modes.
#[test]
fn hip_ipc_shares_device_memory_between_processes_on_rocm72() {
    common::scenarios::ipc_between_processes(&ROCM72);
}

/// tests/programs/hip_copies.hip built by the 7.2 hipcc on eight emulated GPUs: every kind of copy
/// and fill (hipHostRegister too) and a peer copy from each GPU to the next are byte-exact,
/// natively and under libxhsa both ways.
#[test]
fn copies_of_every_kind_on_eight_gpus_on_rocm72_natively_and_under_libxhsa() {
    common::scenarios::copies_on_eight_gpus(&ROCM72);
}
