//! `XHSA_FAULT_INJECT`: a test and diagnostic knob that makes chosen internal steps of libxhsa
//! fail, to exercise the fail-safe paths (a queue that cannot be shadowed stays a plain queue; a
//! queue whose forwarding fails degrades to passthrough after forwarding what it holds).
//!
//! Syntax: a comma-separated list of `POINT` or `POINT:N` (the N-th time the point is reached,
//! counting from 1, fails; without `:N` every time fails). Points:
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

use std::sync::atomic::{AtomicU64, Ordering};

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

#[derive(Debug)]
struct Rule {
    point: Point,
    /// `None`: every time.
    nth: Option<u64>,
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
            let (name, nth) = match item.split_once(':') {
                Some((n, c)) => match c.trim().parse::<u64>() {
                    Ok(c) if c >= 1 => (n.trim(), Some(c)),
                    _ => {
                        errors.push(format!("{ENV_FAULT_INJECT}: {item:?}: the count must be an integer >= 1; ignored"));
                        continue;
                    }
                },
                None => (item, None),
            };
            match Point::parse(name) {
                Some(point) => plan.rules.push(Rule { point, nth }),
                None => errors.push(format!("{ENV_FAULT_INJECT}: unknown point {name:?} (accepted: shadow_create, forward, forward_after_reserve); ignored")),
            }
        }
        (plan, errors)
    }

    /// Whether nothing is injected.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Counts one arrival at `point`; true if this one must fail.
    pub fn hit(&self, point: Point) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        let counter = match point {
            Point::ShadowCreate => &self.shadow_create,
            Point::Forward => &self.forward,
            Point::ForwardAfterReserve => &self.forward_after_reserve,
        };
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        self.rules.iter().any(|r| r.point == point && r.nth.is_none_or(|k| k == n))
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
    fn bad_items_are_reported_and_ignored() {
        let (p, e) = FaultPlan::parse("forward:0,bogus,forward:x,shadow_create:2");
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[1].contains("unknown point \"bogus\""));
        assert!(!p.hit(Point::ShadowCreate) && p.hit(Point::ShadowCreate));
        assert!(!p.hit(Point::Forward));
    }
}
