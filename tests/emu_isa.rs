//! Kernel code executes on the emulated GPU: `tests/programs/isa_exec.hip` (a vector add, an
//! LDS reduction with barriers, a `__shfl`, a global atomic, fp64 math, a private array), whose
//! kernels have no CPU model in the emulator, checks its own results under `xhsa-emu run`.
mod common;

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
