//! `XHSA_EMU_FAULT`: preemptions that fail, so that callers' fallbacks can be tested.
//!
//! Read once by a process's emulated KFD when it opens. Forms (comma-separated list):
//!
//! - `preempt_fail[:N]`: after `N` preemption operations succeeded (default 0), every later one
//!   fails as KFD's unmap does when the HWS cannot take it (`execute_queues_cpsch` /
//!   `unmap_queues_cpsch` return -EIO while the GPU is being reset or the HWS is hung).
//! - `preempt_timeout[:N[:MS]]`: after `N` successes, every later preemption times out as
//!   KFD's preemption fence does (`amdkfd_fence_wait_timeout`): the ioctl stalls for `MS`
//!   milliseconds (default `kfd.preemption_timeout_ms`, amdgpu's `queue_preemption_timeout_ms`)
//!   and then fails.
//!
//! A preemption operation is one unmap KFD would issue to take queues off the runlist: a
//! DBG_TRAP SUSPEND_QUEUES with at least one queue to suspend on a GPU, or an UPDATE_QUEUE
//! that makes an active queue inactive. With several entries, operation `k` (counted from 0)
//! gets the entry with the largest `N <= k` (the later one in the list on a tie).

/// The variable.
pub const VAR: &str = "XHSA_EMU_FAULT";

/// The accepted forms, for messages.
pub const FORMS: &str = "preempt_fail[:N] or preempt_timeout[:N[:MS]], comma-separated \
    (N: preemption operations that succeed first, default 0; MS: the timeout in ms, at least 1, \
    default kfd.preemption_timeout_ms)";

/// What happens to one preemption operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The unmap fails at once (EIO from the HWS).
    Fail,
    /// The preemption fence times out after `ms` milliseconds.
    Timeout { ms: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rule {
    after: u32,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Fail,
    /// `None`: the configured timeout.
    Timeout(Option<u64>),
}

/// The faults a process injects into its preemptions (none by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: Vec<Rule>,
}

impl FaultPlan {
    /// Parses the variable's value; the error names the variable and the accepted forms.
    pub fn parse(value: &str) -> Result<FaultPlan, String> {
        let bad = |why: String| format!("{VAR}={value:?} is not valid ({why}); accepted: {FORMS}");
        let mut rules = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let mut parts = entry.split(':');
            let name = parts.next().unwrap_or_default();
            let args: Vec<&str> = parts.collect();
            let number = |s: &str, what: &str| {
                s.parse::<u64>()
                    .map_err(|_| bad(format!("{what} {s:?} in {entry:?} is not a number")))
            };
            let after = match args.first() {
                Some(n) => u32::try_from(number(n, "N")?)
                    .map_err(|_| bad(format!("N in {entry:?} is too large")))?,
                None => 0,
            };
            let kind = match (name, args.len()) {
                ("preempt_fail", 0 | 1) => Kind::Fail,
                ("preempt_timeout", 0 | 1) => Kind::Timeout(None),
                ("preempt_timeout", 2) => match number(args[1], "MS")? {
                    0 => return Err(bad(format!("MS in {entry:?} must be at least 1"))),
                    ms => Kind::Timeout(Some(ms)),
                },
                ("preempt_fail" | "preempt_timeout", _) => {
                    return Err(bad(format!("too many fields in {entry:?}")))
                }
                _ => return Err(bad(format!("unknown fault {name:?}"))),
            };
            rules.push(Rule { after, kind });
        }
        Ok(FaultPlan { rules })
    }

    /// The plan `XHSA_EMU_FAULT` asks for. A malformed value is reported once on the log and
    /// otherwise ignored.
    pub fn from_env() -> FaultPlan {
        match std::env::var(VAR) {
            Ok(v) => Self::parse(&v).unwrap_or_else(|e| {
                tracing::error!("xhsa-emu: {e}; no fault is injected");
                FaultPlan::default()
            }),
            Err(_) => FaultPlan::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The fault of preemption operation `op` (0 for the first), if any.
    pub fn fault_for(&self, op: u32, default_timeout_ms: u64) -> Option<Fault> {
        let mut best: Option<Rule> = None;
        for r in self.rules.iter().filter(|r| r.after <= op) {
            if best.is_none_or(|b| r.after >= b.after) {
                best = Some(*r);
            }
        }
        best.map(|r| match r.kind {
            Kind::Fail => Fault::Fail,
            Kind::Timeout(ms) => Fault::Timeout { ms: ms.unwrap_or(default_timeout_ms) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_and_their_defaults() {
        let p = FaultPlan::parse("preempt_fail").unwrap();
        assert_eq!(
            (p.fault_for(0, 9000), p.fault_for(7, 9000)),
            (Some(Fault::Fail), Some(Fault::Fail))
        );
        let p = FaultPlan::parse("preempt_fail:2").unwrap();
        assert_eq!(
            [p.fault_for(0, 1), p.fault_for(1, 1), p.fault_for(2, 1), p.fault_for(3, 1)],
            [None, None, Some(Fault::Fail), Some(Fault::Fail)]
        );
        let p = FaultPlan::parse("preempt_timeout").unwrap();
        assert_eq!(p.fault_for(0, 9000), Some(Fault::Timeout { ms: 9000 }));
        let p = FaultPlan::parse("preempt_timeout:1").unwrap();
        assert_eq!(
            (p.fault_for(0, 50), p.fault_for(1, 50)),
            (None, Some(Fault::Timeout { ms: 50 }))
        );
        let p = FaultPlan::parse("preempt_timeout:0:25").unwrap();
        assert_eq!(p.fault_for(0, 9000), Some(Fault::Timeout { ms: 25 }));
        assert!(FaultPlan::parse("").unwrap().is_empty());
        assert_eq!(FaultPlan::default().fault_for(0, 9000), None);
    }

    #[test]
    fn in_a_list_the_latest_threshold_reached_wins() {
        let p = FaultPlan::parse("preempt_timeout:0:30, preempt_fail:2").unwrap();
        assert_eq!(p.fault_for(0, 9000), Some(Fault::Timeout { ms: 30 }));
        assert_eq!(p.fault_for(1, 9000), Some(Fault::Timeout { ms: 30 }));
        assert_eq!(p.fault_for(2, 9000), Some(Fault::Fail));
        let p = FaultPlan::parse("preempt_fail:1,preempt_timeout:1:5").unwrap();
        assert_eq!((p.fault_for(0, 9), p.fault_for(1, 9)), (None, Some(Fault::Timeout { ms: 5 })));
    }

    #[test]
    fn malformed_values_name_the_variable_and_the_forms() {
        for v in [
            "preempt_crash",
            "preempt_fail:x",
            "preempt_fail:1:2",
            "preempt_timeout:1:0",
            "preempt_timeout:1:2:3",
            "preempt_timeout:99999999999",
        ] {
            let e = FaultPlan::parse(v).unwrap_err();
            assert!(e.starts_with(&format!("XHSA_EMU_FAULT={v:?} is not valid")), "{e}");
            assert!(e.contains("preempt_fail[:N] or preempt_timeout[:N[:MS]]"), "{e}");
        }
    }
}
