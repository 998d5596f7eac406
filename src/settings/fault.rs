//! `XHSA_FAULT_INJECT`: a test and diagnostic knob that makes chosen internal steps of libxhsa
//! fail, to exercise the fail-safe paths (a queue that cannot be shadowed stays a plain queue; a
//! queue whose forwarding fails degrades to passthrough after forwarding what it holds).
//!
//! Syntax: a comma-separated list of `POINT` (every time the point is reached fails), `POINT:N`
//! (the N-th time, counting from 1, fails) or `POINT:>=K` (the first time it is reached with at
//! least K packets fails, once: a test that needs a failure in the middle of a large batch names
//! it by its size, which does not depend on how a run's packets happened to be batched before
//! it; `shadow_create` counts as one packet). Points:
//!
//! | point | what fails |
//! |---|---|
//! | `shadow_create` | building the shadow of a newly created queue |
//! | `forward` | a forwarding batch (the packets of one queue in one pass), before its hardware slots are reserved |
//! | `forward_after_reserve` | a write of packets into reserved hardware slots (a forwarding batch, a passthrough flush or a destroy's drain step, counted when it has packets): it stops, as a panic would, after half of them (rounded down) were written |
//!
//! An unknown point or a malformed count is reported once and ignored. Not meant for
//! production use; an unset or empty variable injects nothing.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The variable.
pub const ENV_FAULT_INJECT: &str = "XHSA_FAULT_INJECT";

/// A step that can be made to fail.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Point {
    ShadowCreate,
    Forward,
    ForwardAfterReserve,
}

impl Point {
    fn parse(name: &str) -> Option<Point> {
        match name {
            "shadow_create" => Some(Point::ShadowCreate),
            "forward" => Some(Point::Forward),
            "forward_after_reserve" => Some(Point::ForwardAfterReserve),
            _ => None,
        }
    }
}

/// When a rule's point fails.
#[derive(Debug)]
enum When {
    Every,
    /// The N-th arrival (from 1).
    Nth(u64),
    /// The first arrival with at least this many packets; `fired` once it has failed.
    FirstOfAtLeast {
        packets: u64,
        fired: AtomicBool,
    },
}

#[derive(Debug)]
struct Rule {
    point: Point,
    when: When,
}

/// The parsed plan and how often each point was reached.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Vec<Rule>,
    shadow_create: AtomicU64,
    forward: AtomicU64,
    forward_after_reserve: AtomicU64,
}

impl FaultPlan {
    /// Parses the variable's value; returns the plan and the problems found.
    pub fn parse(text: &str) -> (FaultPlan, Vec<String>) {
        let mut plan = FaultPlan::default();
        let mut errors = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, when) = match item.split_once(':') {
                Some((n, c)) => {
                    let c = c.trim();
                    let (at_least, count) = match c.strip_prefix(">=") {
                        Some(k) => (true, k.trim()),
                        None => (false, c),
                    };
                    match count.parse::<u64>() {
                        Ok(k) if k >= 1 && at_least => (
                            n.trim(),
                            When::FirstOfAtLeast { packets: k, fired: AtomicBool::new(false) },
                        ),
                        Ok(k) if k >= 1 => (n.trim(), When::Nth(k)),
                        _ => {
                            errors.push(format!("{ENV_FAULT_INJECT}: {item:?}: after the point's name comes nothing, `:N` (the N-th time) or `:>=K` (the first time with at least K packets), N and K integers >= 1; ignored"));
                            continue;
                        }
                    }
                }
                None => (item, When::Every),
            };
            match Point::parse(name) {
                Some(point) => plan.rules.push(Rule { point, when }),
                None => errors.push(format!("{ENV_FAULT_INJECT}: unknown point {name:?} (accepted: shadow_create, forward, forward_after_reserve); ignored")),
            }
        }
        (plan, errors)
    }

    /// Whether nothing is injected.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Counts one arrival at `point`, a step with no packets of its own (counted as one); true
    /// if this one must fail.
    pub fn hit(&self, point: Point) -> bool {
        self.hit_with(point, 1)
    }

    /// Counts one arrival at `point` with `packets` packets; true if this one must fail.
    pub fn hit_with(&self, point: Point, packets: usize) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        let counter = match point {
            Point::ShadowCreate => &self.shadow_create,
            Point::Forward => &self.forward,
            Point::ForwardAfterReserve => &self.forward_after_reserve,
        };
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fail = false;
        for r in self.rules.iter().filter(|r| r.point == point) {
            fail |= match &r.when {
                When::Every => true,
                When::Nth(k) => *k == n,
                When::FirstOfAtLeast { packets: k, fired } => {
                    packets as u64 >= *k && !fired.swap(true, Ordering::Relaxed)
                }
            };
        }
        fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_plan_never_fails() {
        let (p, e) = FaultPlan::parse("");
        assert!(e.is_empty() && p.is_empty());
        assert!(!p.hit(Point::Forward));
    }

    #[test]
    fn nth_and_always() {
        let (p, e) = FaultPlan::parse("forward:3, shadow_create");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            (0..5).map(|_| p.hit(Point::Forward)).collect::<Vec<_>>(),
            [false, false, true, false, false]
        );
        assert!(p.hit(Point::ShadowCreate) && p.hit(Point::ShadowCreate));
    }

    #[test]
    fn points_count_separately() {
        let (p, e) = FaultPlan::parse("forward_after_reserve:2");
        assert!(e.is_empty(), "{e:?}");
        assert!(!p.hit(Point::Forward) && !p.hit(Point::Forward));
        assert_eq!(
            (0..3).map(|_| p.hit(Point::ForwardAfterReserve)).collect::<Vec<_>>(),
            [false, true, false]
        );
    }

    #[test]
    fn the_first_large_enough_arrival_fails_once() {
        let (p, e) = FaultPlan::parse("forward_after_reserve:>=100, forward:>= 2");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            [1, 99, 255, 1, 300].map(|n| p.hit_with(Point::ForwardAfterReserve, n)),
            [false, false, true, false, false]
        );
        assert!(!p.hit(Point::Forward) && p.hit_with(Point::Forward, 2));
        assert!(!p.hit_with(Point::Forward, 2));
    }

    #[test]
    fn bad_items_are_reported_and_ignored() {
        let (p, e) = FaultPlan::parse("forward:0,bogus,forward:x,shadow_create:2,forward:>=0");
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e[1].contains("unknown point \"bogus\""));
        assert!(e[3].contains(":>=K") && e[3].contains("forward:>=0"), "{e:?}");
        assert!(!p.hit(Point::ShadowCreate) && p.hit(Point::ShadowCreate));
        assert!(!p.hit(Point::Forward));
    }
}
