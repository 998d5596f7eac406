//! A plain-C HSA program on the emulated GPU (`tests/programs/hsa_queues.c`): AQL packets
//! written by hand on two queues, a cross-queue BARRIER_AND, code objects loaded through the
//! HSA executable API, and a malformed packet reported through the queue's error callback.
mod common;

use common::{assert_check_passed, assert_passed, run_under_emu, RunOpts};

fn hsa_queues(mode: &str) -> common::RunOutput {
    let prog = common::program("hsa_queues");
    let co = common::code_object("xhsa_kernels");
    let co = co.to_str().expect("UTF-8 path");
    let out = run_under_emu(&prog, &[mode, co], &RunOpts::default());
    eprintln!("{}", out.stdout);
    assert_passed(&out);
    out
}

#[test]
fn hsa_two_queues_dispatch_and_cross_queue_barrier() {
    let out = hsa_queues("normal");
    for c in [
        "gpu.compute_units",
        "code_object.load_from_file",
        "copy.roundtrip",
        "dispatch.vadd_q1",
        "dispatch.saxpy_q2",
        "dispatch.barrier_and_cross_queue",
        "queues.no_errors",
        "shutdown",
    ] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn hsa_bad_packet_reports_invalid_packet_format_and_other_queues_work() {
    let out = hsa_queues("badpacket");
    for c in [
        "code_object.load_from_memory",
        "badpacket.callback_called",
        "badpacket.status",
        "badpacket.not_completed",
        "badpacket.good_queue_after",
        "badpacket.new_queue_after",
        "badpacket.destroy_failed_queue",
    ] {
        assert_check_passed(&out, c);
    }
}
