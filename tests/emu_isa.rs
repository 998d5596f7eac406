//! Kernel code executes on the emulated GPU: `tests/programs/isa_exec.hip` (a vector add, an
//! LDS reduction with barriers, a `__shfl`, a global atomic, fp64 math, a private array), whose
//! kernels have no CPU model in the emulator, checks its own results under `xhsa-emu run`; and
//! kernels that wait (`tests/programs/hip_waiting.hip`: device printf through HIP's hostcall
//! service, a cooperative launch's grid syncs, workgroups spinning on each other, a kernel
//! waiting for a kernel on another stream, a kernel waiting for the host while it creates a
//! stream) complete with right results, natively and with libxhsa loaded both ways.
mod common;

use std::collections::BTreeSet;

use common::{assert_check_passed, assert_passed, run_under_emu, RunOpts};

#[test]
fn hip_kernels_without_a_model_compute_right_results() {
    let prog = common::program("isa_exec");
    let out = run_under_emu::<&str>(&prog, &[], &RunOpts::default());
    eprintln!("{}", out.stdout);
    assert_passed(&out);
    for c in ["vadd", "lds_reduce", "shfl", "atomic_sum", "fp64", "private"] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn kernels_that_wait_on_the_host_the_grid_or_each_other_complete() {
    let prog = common::program("hip_waiting");
    let want: BTreeSet<String> = (0..2)
        .flat_map(|b| (0..64).map(move |t| (b, t)))
        .map(|(b, t)| {
            format!(
                "dev-printf block {b} thread {t} word emu half {:.2} hex {:x}",
                f64::from(b * 100 + t) / 2.0,
                0xabc000 + b * 100 + t
            )
        })
        .collect();
    for (mode, o) in common::host_modes() {
        let out = run_under_emu(&prog, &["all"], &o);
        assert_passed(&out);
        for c in common::HIP_WAITING_CHECKS {
            assert_check_passed(&out, c);
        }
        let lines: Vec<&str> = out.stdout.lines().filter(|x| x.starts_with("dev-printf")).collect();
        let got: BTreeSet<String> = lines.iter().map(|x| x.to_string()).collect();
        assert_eq!(lines.len(), want.len(), "{mode}: every device printf once\n{}", out.report());
        assert_eq!(got, want, "{mode}: device printf lines\n{}", out.report());
        if mode != "native" {
            assert!(
                out.stderr.contains(&format!("xhsa: loaded through {mode}")),
                "{mode}: libxhsa not loaded\n{}",
                out.report()
            );
        }
    }
}

/// Double-precision sqrt, exp, sin, log1p and division on 4096 lanes (denormal, tiny, huge and
/// large-argument operands; tests/programs/fp64_lanes.hip) agree with the host's libm natively
/// and under libxhsa both ways. A denormal quotient once came out an ulp low (v_div_scale and
/// v_div_fmas did not scale as the ISA does: -0x0.0000000003a0bp-1022 / -18).
#[test]
fn fp64_lanes_agree_with_the_host_natively_and_under_libxhsa() {
    let prog = common::program("fp64_lanes");
    for (mode, o) in common::host_modes() {
        let out = run_under_emu::<&str>(&prog, &[], &o);
        assert_passed(&out);
        for c in ["fp64.sqrt", "fp64.exp", "fp64.sin", "fp64.log1p", "fp64.div"] {
            assert_check_passed(&out, c);
        }
        if mode != "native" {
            assert!(
                out.stderr.contains(&format!("xhsa: loaded through {mode}")),
                "{mode}: libxhsa not loaded\n{}",
                out.report()
            );
        }
    }
}
