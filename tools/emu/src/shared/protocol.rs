//! The control protocol between a process's emulated KFD and the shared device: one text line
//! per request and per reply over a Unix stream socket (`device.sock`). Only queue management,
//! preemption and status travel here; kernels and completions use the shared rings.
//!
//! Requests (keys are the client's own queue keys; the device keys a queue by its connection
//! and that key, never by pid):
//! - `HELLO pid=P pidns=N gpu=G epoch=E` with the client's shared area (a `memfd`) attached
//!   (`SCM_RIGHTS`) → `OK client=C base_mono=NS base_dev=NS scale=X gpus=N` with the device's
//!   area attached. `pid` and `pidns` (the inode of the client's PID namespace) are shown by
//!   `STATUS` only; `epoch` is the job-entry epoch the device takes from the client's ring.
//! - `CREATE key=K gpu=G prio=P pct=N [susp=0|1] [bits=N words=HEX,..]` → `OK key=K` (`susp`
//!   and the CU mask restore a queue the client had on a device that went away, at no cost)
//! - `DESTROY key=K`, `UPDATE key=K prio=P pct=N [susp=0|1]`, `CUMASK key=K bits=N
//!   words=HEX,HEX..` → `OK` (`susp`: KFD's suspension flag of the queue, which the remap
//!   follows)
//! - `SUSPEND keys=K,K.. grace_ns=NS` / `RESUME keys=K,K..` → `OK n=COUNT status=S,S..` (per
//!   key: 0 handled, already in that state included; 1 no such queue). The device-wide cost is
//!   charged only when `keys` is not empty.
//! - `UPDATE` with `pct=0` takes an active queue off the runlist with its running workgroups
//!   saved; a percentage above 0 brings it back (unless it is suspended), saved ones first.
//! - `STATUS` → text lines, then `END`
//!
//! Errors: `ERR errno=N message`.

use std::collections::HashMap;

/// A parsed line: the verb and its `key=value` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub verb: String,
    pub args: HashMap<String, String>,
}

impl Line {
    pub fn parse(s: &str) -> Option<Line> {
        let mut it = s.split_whitespace();
        let verb = it.next()?.to_string();
        let args = it
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(Line { verb, args })
    }

    pub fn get<T: std::str::FromStr>(&self, k: &str) -> Option<T> {
        self.args.get(k).and_then(|v| v.parse().ok())
    }

    /// A comma-separated list of numbers (empty list for an empty or missing value).
    pub fn list<T: std::str::FromStr>(&self, k: &str) -> Option<Vec<T>> {
        match self.args.get(k) {
            None => Some(Vec::new()),
            Some(v) if v.is_empty() => Some(Vec::new()),
            Some(v) => v.split(',').map(|x| x.parse().ok()).collect(),
        }
    }
}

/// Formats a comma-separated list.
pub fn join<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let l = Line::parse("SUSPEND keys=3,4,5 grace=0").unwrap();
        assert_eq!(l.verb, "SUSPEND");
        assert_eq!(l.list::<u32>("keys").unwrap(), vec![3, 4, 5]);
        assert_eq!(l.get::<u32>("grace"), Some(0));
        assert_eq!(l.list::<u32>("none").unwrap(), Vec::<u32>::new());
        assert!(Line::parse("X keys=1,a").unwrap().list::<u32>("keys").is_none());
        assert_eq!(join(&[1, 2]), "1,2");
        assert!(Line::parse("   ").is_none());
    }
}
