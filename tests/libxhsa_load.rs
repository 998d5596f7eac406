//! libxhsa's interception layer on the emulated GPU under the real HIP/ROCr: loaded with
//! `LD_PRELOAD`, with `HSA_TOOLS_LIB`, or both at once, applications give the same results as
//! without it, every HIP queue and doorbell is seen exactly once, and every hardware queue's
//! KFD id is recorded from both `hsaKmtCreateQueue` and the CREATE_QUEUE ioctl.
mod common;

use common::{
    assert_passed, libxhsa, run_under_emu, run_with_libxhsa_log as run, RunOpts, RunOutput,
};

/// The counts of libxhsa's exit summary: (queues created, doorbell stores, KFD queues seen by
/// both the thunk and the ioctl).
fn summary(out: &RunOutput) -> (u64, u64, usize) {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("INFO xhsa:") && l.contains("HSA queues created"))
        .unwrap_or_else(|| panic!("no summary\n{}", out.report()));
    let num = |before: &str| -> u64 {
        let head = line.split(before).next().unwrap();
        head.split_whitespace().last().unwrap().trim_start_matches(',').parse().unwrap()
    };
    (num(" HSA queues created"), num(" doorbell stores"), line.matches("(thunk+ioctl)").count())
}

const SUBSETS: &[&str] = &["device", "kernels", "streams", "priority"];

#[test]
fn preloaded_libxhsa_sees_every_queue_doorbell_and_kfd_id() {
    let l = libxhsa();
    let out = run("hip_basic", SUBSETS, &[("LD_PRELOAD", &l)]);
    let (queues, doorbells, kfd) = summary(&out);
    assert!(queues >= 5, "HIP queues seen: {queues}");
    assert!(doorbells > queues, "doorbell stores seen: {doorbells}");
    assert!(kfd >= queues as usize, "KFD queues with ids from both sources: {kfd}");
}

/// hsa_queues rings its doorbells a fixed number of times, so the three ways of loading
/// libxhsa must count exactly the same calls. (HIP's count varies between runs by a store or
/// two with timing, so HIP is compared with a margin that still catches double counting.)
#[test]
fn tools_lib_and_both_modes_intercept_once() {
    let l = libxhsa();
    let co = common::code_object("xhsa_kernels");
    let co = co.to_str().expect("UTF-8 path");
    let hsa = |env: &[(&str, &str)]| summary(&run("hsa_queues", &["normal", co], env));
    let pre = hsa(&[("LD_PRELOAD", &l)]);
    assert!(pre.0 == 2 && pre.1 >= 2, "hsa_queues creates 2 queues and rings both: {pre:?}");
    let tools = hsa(&[("HSA_TOOLS_LIB", &l)]);
    let both = hsa(&[("LD_PRELOAD", &l), ("HSA_TOOLS_LIB", &l)]);
    assert_eq!(
        (tools.0, tools.1),
        (pre.0, pre.1),
        "HSA_TOOLS_LIB saw a different number of queues/doorbells"
    );
    assert_eq!(
        (both.0, both.1),
        (pre.0, pre.1),
        "loaded both ways, libxhsa must count each call once"
    );

    let hip_pre = summary(&run("hip_basic", SUBSETS, &[("LD_PRELOAD", &l)]));
    let tools_out = run("hip_basic", SUBSETS, &[("HSA_TOOLS_LIB", &l)]);
    // Every hook but hsa_amd_queue_get_info, which ROCr 5.2's AMD extension table does not have.
    let hooks_in_5_2 = xhsa::entry::api_table::Hook::ALL.len() - 1;
    let patched = format!("patched={hooks_in_5_2}");
    assert!(
        tools_out
            .stderr
            .lines()
            .any(|l| l.contains("API tables patched") && l.trim_end().ends_with(&patched)),
        "{}",
        tools_out.report()
    );
    let hip_both =
        summary(&run("hip_basic", SUBSETS, &[("LD_PRELOAD", &l), ("HSA_TOOLS_LIB", &l)]));
    for (mode, got) in [("HSA_TOOLS_LIB", summary(&tools_out)), ("both", hip_both)] {
        assert_eq!(got.0, hip_pre.0, "{mode}: HIP queues seen");
        assert!(
            got.1 * 10 >= hip_pre.1 * 9 && got.1 * 10 <= hip_pre.1 * 11,
            "{mode}: HIP doorbell stores {} vs {} with LD_PRELOAD",
            got.1,
            hip_pre.1
        );
    }
}

#[test]
fn disabled_libxhsa_passes_everything_through() {
    let l = libxhsa();
    let out = run("hip_basic", &["kernels"], &[("LD_PRELOAD", &l), ("XHSA_DISABLE", "1")]);
    assert!(out.stderr.contains("pure passthrough"), "{}", out.report());
    assert_eq!(summary(&out).0, 0);
}

#[test]
fn a_malformed_setting_is_reported_once_and_the_app_succeeds() {
    let l = libxhsa();
    let out = run("hip_basic", &["kernels"], &[("LD_PRELOAD", &l), ("XHSA_WINDOW", "abc")]);
    let errors: Vec<&str> =
        out.stderr.lines().filter(|l| l.contains("ERROR") && l.contains("XHSA_WINDOW")).collect();
    assert_eq!(errors.len(), 1, "{}", out.report());
    assert!(errors[0].contains("1..=1024"), "the accepted forms are named: {}", errors[0]);
}

/// `XHSA_LOG=infoo` (a misspelt level, which tracing's EnvFilter takes as a target name and so
/// silences libxhsa entirely) is reported as one error naming the variable, and libxhsa logs
/// at `warn` instead; the application is unaffected.
#[test]
fn an_invalid_log_filter_is_reported_once_and_the_app_succeeds() {
    let l = libxhsa();
    let env = vec![("LD_PRELOAD".to_string(), l), ("XHSA_LOG".to_string(), "infoo".to_string())];
    let out = run_under_emu(
        &common::program("hip_basic"),
        &["kernels"],
        &RunOpts { env, ..RunOpts::default() },
    );
    assert_passed(&out);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "exactly one error\n{}", out.report());
    assert!(
        errors[0].contains("XHSA_LOG=\"infoo\"") && errors[0].contains("accepted: a level"),
        "names the variable, the value and the accepted forms: {}",
        errors[0]
    );
    assert!(errors[0].contains("using warn"), "{}", errors[0]);
    assert!(
        !out.stderr.contains(" INFO xhsa:"),
        "logging at warn: no info lines\n{}",
        out.report()
    );
}

/// hipRAND under libxhsa: every check of hiprand_gen's Philox generators passes (their values
/// too: statistics and per-seed determinism), in both modes. Its XORWOW generators are left to
/// `emu_hip` (natively) and to `emu_rocm64`'s library test (natively and under libxhsa in both
/// modes): their state set-up is the longest kernel the suite runs on the ISA interpreter
/// (about 270 million wave-instructions with ROCm 5.2's rocRAND, twice per run).
#[test]
fn hiprand_works_with_libxhsa_loaded() {
    let l = libxhsa();
    for var in ["LD_PRELOAD", "HSA_TOOLS_LIB"] {
        let out = run("hiprand_gen", &["philox"], &[(var, &l)]);
        assert!(summary(&out).0 >= 1, "{var}: no queue seen\n{}", out.report());
        assert!(
            !out.stderr.contains("shadow queues: 0 created"),
            "{var}: hipRAND's queues were not shadowed\n{}",
            out.report()
        );
        for c in [
            "philox.uniform_chi2",
            "philox.normal_moments",
            "philox_other_seed.uniform_mean",
            "determinism.philox_same_seed",
            "determinism.philox_other_seed_differs",
        ] {
            common::assert_check_passed(&out, c);
        }
    }
}

/// HIP and ROCr loaded by `dlopen(RTLD_LOCAL)` (as Python loads PyTorch's extension): the
/// application's calls still reach libxhsa's preloaded symbols, and libxhsa must find ROCr's
/// definitions although `RTLD_NEXT` cannot see them.
/// Builds tests/programs/hip_plugin.hip into `libhip_plugin-HASH.so` (cached; its kernels in
/// its own embedded code object) and runs it through dlopen_host with `env`.
fn run_plugin(env: &[(&str, &str)]) -> RunOutput {
    let plugin = common::hip_shared_library("hip_plugin");
    let host = common::program("dlopen_host");
    let plugin_arg = plugin.display().to_string();
    let env: Vec<(String, String)> =
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let out = run_under_emu(&host, &[plugin_arg.as_str()], &RunOpts { env, ..RunOpts::default() });
    assert_passed(&out);
    out
}

#[test]
fn hip_loaded_with_dlopen_rtld_local_works_with_libxhsa_preloaded() {
    let l = libxhsa();
    let out = run_plugin(&[("LD_PRELOAD", &l), ("XHSA_LOG", "info")]);
    assert!(summary(&out).0 >= 1, "libxhsa saw no queue\n{}", out.report());
}

/// The `passthrough libraries: Q queues, D dispatches` figures of the exit summary.
fn passthrough_counts(out: &RunOutput) -> (u64, u64) {
    let nums = common::numbers_after(out, "passthrough libraries:")
        .unwrap_or_else(|| panic!("no summary\n{}", out.report()));
    (nums[0], nums[1])
}

/// The whitelist by code object: the plugin's kernels live in libhip_plugin.so's embedded code
/// object (URI `file://…/libhip_plugin-HASH.so#offset=…`), so naming the library sends its
/// dispatches unthrottled; without the entry none is.
#[test]
fn dispatches_of_a_whitelisted_library_kernels_pass_unthrottled() {
    let l = libxhsa();
    let out = run_plugin(&[("LD_PRELOAD", &l), ("XHSA_LOG", "info")]);
    assert_eq!(passthrough_counts(&out), (0, 0), "nothing whitelisted");
    let plugin = common::hip_shared_library("hip_plugin");
    let name = plugin.file_name().unwrap().to_str().expect("UTF-8 name");
    let out = run_plugin(&[
        ("LD_PRELOAD", &l),
        ("XHSA_LOG", "info"),
        ("XHSA_PASSTHROUGH_LIBS", &format!("libother.so, {name}")),
    ]);
    let (queues, dispatches) = passthrough_counts(&out);
    assert_eq!(queues, 0, "HIP, not the plugin, creates the queues");
    assert!(dispatches >= 1, "the plugin's vadd dispatch was not recognised\n{}", out.report());
}

/// The whitelist by queue creator: hsa_queues creates its queues itself, so naming its
/// executable hands it the hardware queues untouched (no shadow), with the same results.
#[test]
fn queues_created_by_a_whitelisted_library_are_untouched() {
    let l = libxhsa();
    let prog = common::program("hsa_queues");
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    let co = common::code_object("xhsa_kernels");
    let co = co.to_str().expect("UTF-8 path");
    let out = run(
        "hsa_queues",
        &["normal", co],
        &[("LD_PRELOAD", &l), ("XSCHED_PASSTHROUGH_LIBS", &name)],
    );
    let (queues, _) = passthrough_counts(&out);
    assert_eq!(queues, 2, "both queues passed through\n{}", out.report());
    assert!(out.stderr.contains("shadow queues: 0 created"), "{}", out.report());
}

/// A config file's `[[library]]` rule gives the queues a library creates its level (here the
/// executable itself creates them): seen in libxhsa's debug line for each shadow queue.
#[test]
fn a_library_rule_sets_the_priority_of_the_queues_it_creates() {
    let l = libxhsa();
    let prog = common::program("hsa_queues");
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("xhsa-librule-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("xhsa.toml");
    std::fs::write(&cfg, format!("priority = -3\n[[library]]\nname = \"{name}\"\npriority = 7\n"))
        .unwrap();
    let co = common::code_object("xhsa_kernels");
    let co = co.to_str().expect("UTF-8 path");
    let cfg_s = cfg.display().to_string();
    let env =
        [("LD_PRELOAD", l.as_str()), ("XHSA_CONFIG", cfg_s.as_str()), ("XHSA_LOG", "xhsa=debug")];
    let out = run_under_emu(
        &prog,
        &["normal", co],
        &RunOpts {
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..RunOpts::default()
        },
    );
    assert_passed(&out);
    let shadows: Vec<&str> = out.stderr.lines().filter(|l| l.contains("shadow 0x")).collect();
    assert_eq!(shadows.len(), 2, "{}", out.report());
    assert!(
        shadows.iter().all(|l| l.contains("Level(7)")),
        "the library rule wins over the top-level priority: {shadows:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
