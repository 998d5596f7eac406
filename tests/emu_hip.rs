//! HIP programs on the emulated GPU: `tests/programs/hip_basic.hip` subset by subset (so a
//! failure names its area), the whole program in one process, and a ROCm library (hipRAND).
//!
//! Each test builds its program once (cached in target/xhsa-test-programs) and runs it as
//! `xhsa-emu run -- PROGRAM ARGS`; the program prints `PASS`/`FAIL` per check and
//! `RESULT: PASS` when all passed.
mod common;

use common::{assert_check_passed, assert_passed, run_under_emu, RunOpts};

fn hip_basic(subsets: &[&str], opts: &RunOpts) -> common::RunOutput {
    let prog = common::program("hip_basic");
    let out = run_under_emu(&prog, subsets, opts);
    eprintln!("{}", out.stdout);
    assert_passed(&out);
    out
}

#[test]
fn hip_basic_device_properties() {
    let out = hip_basic(&["device"], &RunOpts::default());
    for c in ["device.count", "device.arch", "device.cu_count", "device.malloc"] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn hip_basic_memcpy_pageable_and_pinned() {
    let out = hip_basic(&["memcpy"], &RunOpts::default());
    for c in [
        "memcpy.pageable.1024.h2d_d2h",
        "memcpy.pinned.1024.h2d_d2h",
        "memcpy.pageable.1048579.d2d_misaligned",
        "memcpy.pinned.8388608.h2d_d2h",
        "memcpy.pageable.8388608.d2d",
    ] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn hip_basic_memset() {
    let out = hip_basic(&["memset"], &RunOpts::default());
    assert_check_passed(&out, "memset.bytes");
    assert_check_passed(&out, "memset.d32");
}

#[test]
fn hip_basic_kernels_match_the_cpu() {
    let out = hip_basic(&["kernels"], &RunOpts::default());
    for c in ["kernels.vadd", "kernels.saxpy", "kernels.matmul_64", "kernels.matmul_50"] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn hip_basic_streams() {
    let out = hip_basic(&["streams"], &RunOpts::default());
    for c in ["streams.stream0", "streams.stream3", "streams.null_stream", "streams.wait_event"] {
        assert_check_passed(&out, c);
    }
}

#[test]
fn hip_basic_stream_priorities() {
    let out = hip_basic(&["priority"], &RunOpts::default());
    assert_check_passed(&out, "priority.greatest.work");
    assert_check_passed(&out, "priority.least.work");
}

/// Timing: run alone, so that no other emulator run of this binary shares the two cores.
#[test]
fn hip_basic_event_timing_matches_the_model() {
    let out = hip_basic(&["events"], &RunOpts { exclusive: true, ..RunOpts::default() });
    assert_check_passed(&out, "events.synthetic_2ms");
    assert_check_passed(&out, "events.two_kernels_2x1ms");
}

#[test]
fn hip_basic_10000_launches_then_synchronize() {
    let out = hip_basic(&["launches"], &RunOpts::default());
    assert_check_passed(&out, "launches.10000_null");
    assert_check_passed(&out, "launches.vadd_after");
}

/// Every subset in one process (many queues, memory and code objects living together).
#[test]
fn hip_basic_all_in_one_process() {
    let out = hip_basic(&[], &RunOpts { exclusive: true, ..RunOpts::default() });
    assert_check_passed(&out, "kernels.matmul_64");
    assert_check_passed(&out, "events.synthetic_2ms");
}

/// hipRAND (over rocRAND) launches its own kernels, which run on the ISA interpreter: XORWOW
/// (as the default type and by name) and Philox give uniforms and normals that pass the
/// program's statistical checks (range, moments, chi-square, serial correlation), the same
/// values for the same seed and other values for another seed.
#[test]
fn hiprand_generators_produce_random_numbers() {
    let prog = common::program("hiprand_gen");
    let out = run_under_emu::<&str>(&prog, &[], &RunOpts::default());
    eprintln!("{}", out.stdout);
    assert_passed(&out);
    for g in ["default", "xorwow", "philox", "philox_again", "philox_other_seed"] {
        for c in [
            "hiprandGenerateUniform",
            "uniform_range",
            "uniform_mean",
            "uniform_variance",
            "uniform_chi2",
            "uniform_serial_correlation",
            "normal_moments",
        ] {
            assert_check_passed(&out, &format!("{g}.{c}"));
        }
    }
    for c in ["default_is_xorwow_same_seed", "philox_same_seed", "philox_other_seed_differs"] {
        assert_check_passed(&out, &format!("determinism.{c}"));
    }
}

/// Copies and fills work both through ROCr's SDMA engine and through its blit kernels.
#[test]
fn hip_basic_memcpy_and_memset_with_sdma_on_and_off() {
    for sdma in ["0", "1"] {
        let opts =
            RunOpts { env: vec![("HSA_ENABLE_SDMA".into(), sdma.into())], ..RunOpts::default() };
        let out = hip_basic(&["memcpy", "memset"], &opts);
        for c in [
            "memcpy.pageable.8388608.d2d",
            "memcpy.pinned.8388608.h2d_d2h",
            "memcpy.after_freed_async",
            "memset.bytes",
            "memset.d32",
        ] {
            assert_check_passed(&out, c);
        }
    }
}

/// `--time-scale` slows the whole device: event times are on the host clock, so a modelled
/// 2 ms reads 6 ms at scale 3 (the program scales its expectation by XHSA_EMU_TIME_SCALE), and
/// the host waits that long.
#[test]
fn events_report_device_time_under_a_time_scale() {
    let opts = RunOpts {
        exclusive: true,
        emu_args: vec!["--time-scale".into(), "3".into()],
        ..RunOpts::default()
    };
    let out = hip_basic(&["events"], &opts);
    assert_check_passed(&out, "events.synthetic_2ms");
    // Host wall time per trial covers a 5 ms warm-up kernel plus 2 ms: ~21 ms at scale 3.
    let line =
        out.stdout.lines().find(|l| l.contains("events.synthetic_2ms:")).expect("timing line");
    let walls: Vec<f64> = line
        .split("trial incl. 5 ms warm-up:")
        .nth(1)
        .expect("wall times")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let mut sorted = walls.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!(median > 18.0, "host wall per trial {walls:?} ms: the device does not look 3x slower");
}

/// The same program on eight GPUs (its peer section copies from each GPU to the next) on ROCm
/// 5.2. HIP 5.2 keeps pageable buffers it pinned registered after the application frees them,
/// so a 4 MiB read-back into a reused heap buffer is registered over stale 1 MiB registrations
/// inside it; the emulator looked a device address up by the nearest range start, found the
/// stale inner range and faulted ROCr's SDMA copy of the buffer's last 39 bytes (`dst_range=None`,
/// ROCr's VMFaultHandler abort) in every run until overlapping ranges were looked up whole
/// (`kfd::memory::tests::a_range_inside_a_larger_one_does_not_hide_the_rest_of_it`).
#[test]
fn copies_on_eight_gpus_on_rocm52_survive_stale_registrations_inside_new_ones() {
    let prog = common::program("hip_copies");
    let o = RunOpts { emu_args: vec!["--gpus".into(), "8".into()], ..RunOpts::default() };
    let out = run_under_emu(&prog, &["noregister"], &o);
    assert!(!out.stderr.contains("SDMA memory fault"), "{}", out.report());
    assert_passed(&out);
    for c in ["copy.peer", "copy.pageable.sync.67108864", "fill.memset_d8_d16_d32"] {
        assert_check_passed(&out, c);
    }
}

/// Every kind of copy and fill (tests/programs/hip_copies.hip: pageable, pinned and managed
/// host memory, sync and async, 1 byte to 64 MiB, freed and reused buffers, memset D8/D16/D32,
/// 2D/3D, eight streams) is byte-exact natively and under libxhsa both ways. ROCm 5.2's HIP
/// locks a 64 MiB pageable buffer as userptr registrations side by side, and ROCr's SDMA copies
/// ran across them: the emulator faulted ("SDMA memory fault addr=0x7f...", ROCr's
/// VMFaultHandler abort) where a GPU's page tables map them as one. hipHostRegister is left out
/// (`noregister`): ROCm 5.2's hipHostUnregister aborts ("Memobj map does not have ptr").
#[test]
fn copies_and_fills_of_every_kind_are_byte_exact_natively_and_under_libxhsa() {
    let prog = common::program("hip_copies");
    for (mode, o) in common::host_modes() {
        let out = run_under_emu(&prog, &["noregister"], &o);
        assert!(!out.stderr.contains("SDMA memory fault"), "{mode}\n{}", out.report());
        assert_passed(&out);
        for c in [
            "copy.pageable.sync.67108864",
            "copy.pinned.async.67108864",
            "fill.memset_d8_d16_d32",
            "copy.3d",
        ] {
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
