//! `rocminfo` (the real ROCm 5.2 tool) on the emulated GPU: one GPU agent, gfx90a, 80 CUs.
mod common;

use std::collections::HashMap;

/// The top-level `Key: value` lines of each agent section of rocminfo's output.
fn agents(stdout: &str) -> Vec<HashMap<String, String>> {
    let mut out: Vec<HashMap<String, String>> = Vec::new();
    for line in stdout.lines() {
        let t = line.trim();
        if t.strip_prefix("Agent ").is_some_and(|n| n.trim().parse::<u32>().is_ok()) {
            out.push(HashMap::new());
            continue;
        }
        let Some(agent) = out.last_mut() else { continue };
        // Agent properties are indented by two spaces; deeper lines (pools, ISAs) by more.
        if line.starts_with("  ") && !line.starts_with("   ") {
            if let Some((k, v)) = t.split_once(':') {
                agent.entry(k.trim().to_string()).or_insert_with(|| v.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn rocminfo_lists_a_gfx90a_agent_with_80_compute_units() {
    let rocminfo = common::require_tool("rocminfo", "rocminfo");
    let out = common::run_under_emu::<&str>(&rocminfo, &[], &common::RunOpts::default());
    assert!(out.status.success() && !out.timed_out, "rocminfo failed\n{}", out.report());
    let agents = agents(&out.stdout);
    let gpus: Vec<&HashMap<String, String>> =
        agents.iter().filter(|a| a.get("Device Type").map(String::as_str) == Some("GPU")).collect();
    eprintln!(
        "rocminfo agents: {:?}",
        agents
            .iter()
            .map(|a| (a.get("Name"), a.get("Device Type"), a.get("Compute Unit")))
            .collect::<Vec<_>>()
    );
    assert_eq!(gpus.len(), 1, "want exactly one GPU agent\n{}", out.report());
    let gpu = gpus[0];
    assert_eq!(
        gpu.get("Name").map(String::as_str),
        Some("gfx90a"),
        "GPU agent name\n{}",
        out.report()
    );
    assert_eq!(
        gpu.get("Compute Unit").map(String::as_str),
        Some("80"),
        "GPU compute units\n{}",
        out.report()
    );
    assert!(
        out.stdout.contains("amdgcn-amd-amdhsa--gfx90a"),
        "no gfx90a ISA (amdgcn-amd-amdhsa--gfx90a...) listed\n{}",
        out.report()
    );
}

#[test]
fn rocminfo_lists_two_gpus_with_gpus_2() {
    let rocminfo = common::require_tool("rocminfo", "rocminfo");
    let opts = common::RunOpts {
        emu_args: vec!["--gpus".into(), "2".into()],
        ..common::RunOpts::default()
    };
    let out = common::run_under_emu::<&str>(&rocminfo, &[], &opts);
    assert!(out.status.success() && !out.timed_out, "rocminfo failed\n{}", out.report());
    let agents = agents(&out.stdout);
    let gpus =
        agents.iter().filter(|a| a.get("Device Type").map(String::as_str) == Some("GPU")).count();
    assert_eq!(gpus, 2, "want two GPU agents\n{}", out.report());
}
