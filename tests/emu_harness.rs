//! The test harness itself (tests/common): a run that outlives its timeout is killed with
//! everything it started, exit statuses come through, and standard output is parsed as the
//! other emu_* tests expect. Uses plain shell commands under `xhsa-emu run`.
mod common;

use std::path::Path;
use std::time::Duration;

use common::{run_under_emu, RunOpts};

#[test]
fn a_run_past_its_timeout_is_killed_with_its_children() {
    let sh = Path::new("/bin/sh");
    let opts = RunOpts { timeout: Duration::from_secs(2), ..RunOpts::default() };
    // A background child that would keep the pipes open, and a foreground one.
    let out = run_under_emu(sh, &["-c", "sleep 60 & echo started; sleep 60"], &opts);
    assert!(out.timed_out, "not reported as timed out\n{}", out.report());
    assert!(!out.status.success(), "a killed run reported success\n{}", out.report());
    assert!(out.wall < Duration::from_secs(15), "took {:?} to give up\n{}", out.wall, out.report());
    assert!(out.stdout.contains("started"), "output before the kill was lost\n{}", out.report());
    assert!(out.report().contains("TIMED OUT"), "the report does not say it timed out");
}

#[test]
fn exit_status_and_checks_come_through() {
    let sh = Path::new("/bin/sh");
    let out = run_under_emu(
        sh,
        &["-c", "echo 'PASS one'; echo 'FAIL two: broken'; echo key=42; exit 3"],
        &RunOpts::default(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", out.report());
    assert_eq!(out.failures(), vec!["FAIL two: broken"], "{}", out.report());
    assert_eq!(out.value("key"), Some("42"));
    common::assert_check_passed(&out, "one");
    assert!(!common::passed(&out), "a failing run counted as passed");
}
