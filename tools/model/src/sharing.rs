//! How a process's lower-priority queues share the GPU with higher-priority work
//! (`XHSA_POLICY`, the config's `policy`, `xhsactl policy`): the setting, its text form and the
//! 16-bit code the board and the control word carry.
//!
//! - [`Sharing::Strict`]: a queue with higher-priority work above it in an overlapping
//!   partition is taken off the GPU, and comes back only when that work is gone or at the
//!   starvation bound (`XHSA_PREEMPT_MAX_MS`, then `XHSA_PREEMPT_MIN_RUN_MS` of run).
//! - [`Sharing::Weights`] `weights:HIGH:LOW`: while higher work exists, the held queues still get
//!   `LOW / (HIGH + LOW)` of each period (a duty cycle of off and on times; on, they share the
//!   GPU with the higher work as the hardware schedules it).
//! - [`Sharing::Slo`] `slo:K` (`K` like `1.2` or `1.2x`): the higher work's measured time per
//!   packet may grow to `K` times what it is when it runs without this process's lower queues;
//!   the share the held queues get is adjusted each period to stay under that target (it grows
//!   while the target holds with a margin and halves when it is missed). The default is
//!   [`DEFAULT_POLICY`], `slo:1.2`: it starts as strict priority and lets held work run beside
//!   higher work only where that work stays within 1.2x.
//! - [`Sharing::Cap`] `cap:PCT`: this process's queues run at most `PCT` percent of any period
//!   in which they are continuously busy, higher work or not (room kept free for others' bursts).
//!
//! What it is not: the decisions (libxhsa's `preempt::sharing` and `preempt::policy`).
#![forbid(unsafe_code)]

use std::fmt;

/// The accepted forms, for messages.
pub const ACCEPTED_POLICY: &str = "strict, weights:HIGH:LOW (integers 1..=1000, e.g. weights:3:1: \
     held queues get a quarter of the time), slo:K (the higher work may take up to K times its \
     time alone, K in 1.01..=40, e.g. slo:1.2 or slo:1.2x) or cap:PCT (this process's queues run \
     at most PCT percent of the time, 1..=100)";

/// The policy in force when neither `XHSA_POLICY` nor the config's `policy` says one.
pub const DEFAULT_POLICY: Sharing = Sharing::Slo { target_pct: 120 };

/// A sharing policy; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Strict priority with the starvation bound.
    Strict,
    /// Held queues get `low / (high + low)` of the time.
    Weights { high: u16, low: u16 },
    /// The higher work may take `target_pct / 100` times its time alone.
    Slo { target_pct: u16 },
    /// This process's queues run at most `pct` percent of the time.
    Cap { pct: u8 },
}

/// The code's kinds (high 4 bits of the 16-bit code).
const KIND_STRICT: u16 = 0;
const KIND_WEIGHTS: u16 = 1;
const KIND_SLO: u16 = 2;
const KIND_CAP: u16 = 3;

impl Default for Sharing {
    /// [`DEFAULT_POLICY`].
    fn default() -> Sharing {
        DEFAULT_POLICY
    }
}

impl Sharing {
    /// Parses one of [`ACCEPTED_POLICY`]'s forms (case and spaces around the parts ignored).
    pub fn parse(text: &str) -> Option<Sharing> {
        let text = text.trim().to_ascii_lowercase();
        let mut parts = text.split(':').map(str::trim);
        let kind = parts.next()?;
        let args: Vec<&str> = parts.collect();
        let sharing = match (kind, args.as_slice()) {
            ("strict", []) => Sharing::Strict,
            ("weights", [high, low]) => {
                let w = |s: &str| s.parse::<u16>().ok().filter(|w| (1..=1000).contains(w));
                Sharing::Weights { high: w(high)?, low: w(low)? }
            }
            ("slo", [k]) => {
                let k: f64 = k.strip_suffix('x').unwrap_or(k).trim().parse().ok()?;
                if !k.is_finite() || !(1.01..=40.0).contains(&k) {
                    return None;
                }
                Sharing::Slo { target_pct: (k * 100.0).round() as u16 }
            }
            ("cap", [pct]) => {
                let pct = pct.strip_suffix('%').unwrap_or(pct).trim();
                Sharing::Cap { pct: pct.parse::<u8>().ok().filter(|p| (1..=100).contains(p))? }
            }
            _ => return None,
        };
        Some(sharing)
    }

    /// The share of time held queues get from the setting alone, in per mille (`Weights`);
    /// `None` for the others (strict uses the starvation bound, the SLO a measured share, the
    /// cap its own duty cycle).
    pub fn fixed_share_permille(self) -> Option<u32> {
        match self {
            Sharing::Weights { high, low } => {
                Some(u32::from(low) * 1000 / (u32::from(high) + u32::from(low)))
            }
            _ => None,
        }
    }

    /// The 16-bit code (kind in the high 4 bits, a 12-bit parameter). Weights are carried as
    /// their share in per mille (`weights:3:1` and `weights:6:2` have one code).
    pub fn code(self) -> u16 {
        match self {
            Sharing::Strict => KIND_STRICT << 12,
            Sharing::Weights { .. } => {
                (KIND_WEIGHTS << 12) | self.fixed_share_permille().unwrap_or(0).min(999) as u16
            }
            Sharing::Slo { target_pct } => (KIND_SLO << 12) | target_pct.min(4000),
            Sharing::Cap { pct } => (KIND_CAP << 12) | u16::from(pct),
        }
    }

    /// The policy of a code; `None` for a code no policy has. Weights come back as
    /// `weights:(1000 - share):share`.
    pub fn from_code(code: u16) -> Option<Sharing> {
        let param = code & 0x0fff;
        match code >> 12 {
            KIND_STRICT if param == 0 => Some(Sharing::Strict),
            KIND_WEIGHTS if (1..=999).contains(&param) => {
                Some(Sharing::Weights { high: 1000 - param, low: param })
            }
            KIND_SLO if (101..=4000).contains(&param) => Some(Sharing::Slo { target_pct: param }),
            KIND_CAP if (1..=100).contains(&param) => Some(Sharing::Cap { pct: param as u8 }),
            _ => None,
        }
    }
}

impl fmt::Display for Sharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Sharing::Strict => f.write_str("strict"),
            Sharing::Weights { high, low } => write!(f, "weights:{high}:{low}"),
            Sharing::Slo { target_pct } => {
                write!(f, "slo:{}.{:02}x", target_pct / 100, target_pct % 100)
            }
            Sharing::Cap { pct } => write!(f, "cap:{pct}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_bad_ones_do_not() {
        assert_eq!(Sharing::parse(" Strict "), Some(Sharing::Strict));
        assert_eq!(Sharing::parse("weights:3:1"), Some(Sharing::Weights { high: 3, low: 1 }));
        assert_eq!(Sharing::parse("slo:1.2"), Some(Sharing::Slo { target_pct: 120 }));
        assert_eq!(Sharing::parse("SLO: 1.25x"), Some(Sharing::Slo { target_pct: 125 }));
        assert_eq!(Sharing::parse("cap:40"), Some(Sharing::Cap { pct: 40 }));
        assert_eq!(Sharing::parse("cap:40%"), Some(Sharing::Cap { pct: 40 }));
        for bad in [
            "",
            "high",
            "strict:1",
            "weights:3",
            "weights:0:1",
            "weights:1:1001",
            "weights:a:b",
            "slo",
            "slo:1",
            "slo:0.5",
            "slo:41",
            "slo:nan",
            "slo:inf",
            "cap:0",
            "cap:101",
            "cap:-5",
            "fair",
        ] {
            assert_eq!(Sharing::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn codes_round_trip_and_name_the_share() {
        for s in [
            Sharing::Strict,
            Sharing::Weights { high: 750, low: 250 },
            Sharing::Slo { target_pct: 120 },
            Sharing::Cap { pct: 100 },
            Sharing::Cap { pct: 1 },
        ] {
            assert_eq!(Sharing::from_code(s.code()), Some(s), "{s}");
            assert_eq!(Sharing::parse(&s.to_string()), Some(s), "{s}");
        }
        let w = Sharing::Weights { high: 3, low: 1 };
        assert_eq!(w.fixed_share_permille(), Some(250));
        assert_eq!(Sharing::from_code(w.code()), Some(Sharing::Weights { high: 750, low: 250 }));
        for bad in [0x0001, 0x1000, 0x13e8, 0x2064, 0x3000, 0x3065, 0x4000, 0xffff] {
            assert_eq!(Sharing::from_code(bad), None, "{bad:#x}");
        }
    }
}
