//! The sharing policy at run time ([`xhsa_model::sharing::Sharing`], `XHSA_POLICY`): how long
//! a queue held by higher-priority work stays off the GPU and how long it then runs, and, for the
//! SLO policy, the controller that sets that share from the higher work's measured times.
//!
//! All policies work in periods of `P = XHSA_PREEMPT_MAX_MS + XHSA_PREEMPT_MIN_RUN_MS` (110 ms
//! by default), so each costs at most two device-wide unmaps per period:
//! - **strict**: off for up to `XHSA_PREEMPT_MAX_MS`, then on for `XHSA_PREEMPT_MIN_RUN_MS`
//!   (the starvation bound; a share of 10/110 by default).
//! - **weights** `H:L` and **slo** with a share `s`: off for `(1 - s) P`, on for `s P`; a share
//!   below the starvation bound's is the starvation bound (no policy starves a queue more than
//!   strict priority does).
//! - **slo** `K`: the share starts at 0 (strict). Every period, each higher-priority queue's
//!   mean time per packet (the board's `packet_ns`, measured by its owner) is compared with its
//!   baseline, its time without this process's held work: when the largest ratio is above `K`,
//!   the share halves (below 2 %: 0); when it is below `1 + 0.9 (K - 1)`, the share grows by 5 points,
//!   up to 90 %. The baseline is measured in a *probe* period, run as strict priority, every
//!   [`PROBE_EVERY`] periods (the first period is one), so a changed workload is learnt again;
//!   between probes it only goes down. A period without higher work changes nothing.
//! - **cap** `PCT`: a queue of this process continuously busy for `PCT % × P` is taken off for
//!   the rest of the period, higher work or not ([`super::policy`]).
//!
//! Pure: time and measurements are passed in.
#![forbid(unsafe_code)]

use super::settings::PreemptSettings;
use crate::path::window::Nanos;
use std::collections::BTreeMap;
use xhsa_model::sharing::Sharing;

/// The SLO controller's step up, per mille.
const SLO_STEP_UP: u32 = 50;
/// The SLO controller's largest share, per mille.
const SLO_MAX_SHARE: u32 = 900;
/// Below this the halved share becomes 0, per mille.
const SLO_FLOOR: u32 = 20;
/// How much of the target's headroom (`K - 1`) the ratio may use for the share to grow, percent.
const SLO_MARGIN_PCT: u64 = 90;
/// Baselines not seen for this many periods are forgotten (a queue that went away).
const FORGET_PERIODS: u64 = 100;
/// One period in this many is a probe (strict priority, the baseline measured).
pub const PROBE_EVERY: u64 = 20;

/// A higher-priority queue's sample: who (a key stable while the queue lives) and its measured
/// time per packet.
pub type Sample = (u64, u64);

/// The policy and its state; see the module doc.
#[derive(Clone, Debug)]
pub struct ShareState {
    policy: Sharing,
    /// The share held queues get, per mille (weights: fixed; slo: controlled).
    share: u32,
    period_start: Option<Nanos>,
    /// This period's (sum, count) of each higher queue's time per packet.
    period: BTreeMap<u64, (u64, u64)>,
    /// Each higher queue's baseline time per packet and the period it was last seen in.
    baselines: BTreeMap<u64, (u64, u64)>,
    periods: u64,
    /// The last period's largest ratio to the baseline, percent (0: none yet).
    last_ratio_pct: u32,
}

/// What the watcher and `xhsa-top` show of the policy's state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ShareStatus {
    pub policy: Sharing,
    /// The share held queues get now, per mille (strict and cap: the starvation bound's).
    pub share_permille: u32,
    /// SLO: the last period's largest slowdown of the higher work, percent (0: none measured).
    pub ratio_pct: u32,
}

impl ShareState {
    pub fn new(policy: Sharing) -> ShareState {
        ShareState {
            policy,
            share: policy.fixed_share_permille().unwrap_or(0),
            period_start: None,
            period: BTreeMap::new(),
            baselines: BTreeMap::new(),
            periods: 0,
            last_ratio_pct: 0,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Sharing {
        self.policy
    }

    /// A new policy (`xhsactl policy`): its state starts afresh.
    pub fn set(&mut self, policy: Sharing) {
        *self = ShareState::new(policy);
    }

    /// The period: the starvation bound's off and on times together.
    pub fn period(settings: &PreemptSettings) -> Nanos {
        settings.max_preempted_ns.saturating_add(settings.min_run_ns).max(1)
    }

    /// How long a held queue may stay off, and how long it then runs: `(max_off, min_run)`.
    pub fn duty(&self, settings: &PreemptSettings) -> (Nanos, Nanos) {
        let strict = (settings.max_preempted_ns, settings.min_run_ns);
        if !matches!(self.policy, Sharing::Weights { .. } | Sharing::Slo { .. }) {
            return strict;
        }
        if self.probing() {
            return strict;
        }
        let p = Self::period(settings);
        let on = p / 1000 * Nanos::from(self.share);
        if on <= settings.min_run_ns {
            strict
        } else {
            (p - on, on)
        }
    }

    /// Whether this period is an SLO probe (the baseline measured under strict priority).
    fn probing(&self) -> bool {
        matches!(self.policy, Sharing::Slo { .. }) && self.periods.is_multiple_of(PROBE_EVERY)
    }

    /// The cap's on and off times per period, `None` without a cap.
    pub fn cap(&self, settings: &PreemptSettings) -> Option<(Nanos, Nanos)> {
        match self.policy {
            Sharing::Cap { pct } if pct < 100 => {
                let p = Self::period(settings);
                let on = p / 100 * Nanos::from(pct);
                Some((on, p - on))
            }
            _ => None,
        }
    }

    /// What to show.
    pub fn status(&self, settings: &PreemptSettings) -> ShareStatus {
        let p = Self::period(settings);
        let (_, on) = self.duty(settings);
        let share_permille = match self.cap(settings) {
            Some((on, _)) => (on * 1000 / p) as u32,
            None => (on * 1000 / p) as u32,
        };
        ShareStatus { policy: self.policy, share_permille, ratio_pct: self.last_ratio_pct }
    }

    /// One look at the higher-priority work (`higher`: the queues above some queue of this
    /// process with work, with a measured time per packet) at `now`. Only the SLO policy
    /// learns from it.
    pub fn observe(&mut self, now: Nanos, higher: &[Sample], settings: &PreemptSettings) {
        let Sharing::Slo { target_pct } = self.policy else { return };
        let start = *self.period_start.get_or_insert(now);
        for &(key, ns) in higher {
            if ns > 0 {
                let e = self.period.entry(key).or_insert((0, 0));
                e.0 = e.0.saturating_add(ns);
                e.1 += 1;
            }
        }
        if now.saturating_sub(start) < Self::period(settings) {
            return;
        }
        self.period_start = Some(now);
        let probe = self.probing();
        self.periods += 1;
        let period = std::mem::take(&mut self.period);
        if period.is_empty() {
            return;
        }
        let mut worst = 0u64;
        for (key, (sum, n)) in period {
            let mean = (sum / n.max(1)).max(1);
            let base = match self.baselines.get(&key) {
                Some(&(b, _)) if !probe => b.min(mean),
                _ => mean,
            };
            self.baselines.insert(key, (base, self.periods));
            worst = worst.max(mean * 100 / base);
        }
        let periods = self.periods;
        self.baselines.retain(|_, (_, seen)| periods - *seen < FORGET_PERIODS);
        if probe {
            return;
        }
        self.last_ratio_pct = worst.min(u64::from(u32::MAX)) as u32;
        if worst > u64::from(target_pct) {
            self.share /= 2;
            if self.share < SLO_FLOOR {
                self.share = 0;
            }
        } else if worst < 100 + u64::from(target_pct).saturating_sub(100) * SLO_MARGIN_PCT / 100 {
            self.share = (self.share + SLO_STEP_UP).min(SLO_MAX_SHARE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn settings() -> PreemptSettings {
        PreemptSettings::default()
    }

    #[test]
    fn strict_and_a_small_weight_keep_the_starvation_bound() {
        let s = settings();
        assert_eq!(ShareState::new(Sharing::Strict).duty(&s), (100 * MS, 10 * MS));
        // 1/100 of 110 ms is under the 10 ms minimum run: the bound.
        let w = ShareState::new(Sharing::Weights { high: 99, low: 1 });
        assert_eq!(w.duty(&s), (100 * MS, 10 * MS));
        assert_eq!(ShareState::new(Sharing::Cap { pct: 40 }).duty(&s), (100 * MS, 10 * MS));
    }

    #[test]
    fn weights_give_held_queues_their_share_of_each_period() {
        let s = settings();
        let w = ShareState::new(Sharing::Weights { high: 3, low: 1 });
        assert_eq!(w.duty(&s), (110 * MS - 27_500_000, 27_500_000));
        assert_eq!(w.status(&s).share_permille, 250);
        let even = ShareState::new(Sharing::Weights { high: 1, low: 1 });
        assert_eq!(even.duty(&s), (55 * MS, 55 * MS));
    }

    #[test]
    fn a_cap_runs_its_share_of_each_period() {
        let s = settings();
        assert_eq!(ShareState::new(Sharing::Cap { pct: 40 }).cap(&s), Some((44 * MS, 66 * MS)));
        assert_eq!(ShareState::new(Sharing::Cap { pct: 100 }).cap(&s), None);
        assert_eq!(ShareState::new(Sharing::Strict).cap(&s), None);
    }

    /// Runs the controller for `periods` periods, looking every 10 ms, with the higher queue's
    /// time per packet given by `ns_at(share shown)`; returns the share after each period.
    fn run(st: &mut ShareState, periods: u64, ns_at: impl Fn(u32) -> u64) -> Vec<u32> {
        let s = settings();
        let mut out = Vec::new();
        let mut now = st.period_start.unwrap_or(0);
        let end = st.periods + periods;
        while st.periods < end {
            let before = st.periods;
            let share = st.status(&s).share_permille;
            st.observe(now, &[(7, ns_at(share))], &s);
            if st.periods != before {
                out.push(st.share);
            }
            now += 10 * MS;
        }
        out
    }

    #[test]
    fn the_slo_share_grows_while_the_target_holds_and_settles_below_it() {
        // The higher queue's packets take 1 ms alone and slow down linearly with the share the
        // held work gets: 1 ms + share x 1 us, so a 1.2x target allows about 20 %.
        let mut st = ShareState::new(Sharing::Slo { target_pct: 120 });
        let shares = run(&mut st, 80, |share| 1_000_000 + u64::from(share) * 1_000);
        assert_eq!(shares[0], 0, "the first period is a probe: {shares:?}");
        assert!(
            shares[1..4].windows(2).all(|w| w[1] > w[0]),
            "it grows while the target holds: {shares:?}"
        );
        let late = &shares[30..];
        // The baseline is the probe's (the starvation bound's 9 %: 1.09 ms), so 1.2x allows
        // 1.308 ms: a share of 308.
        assert!(late.iter().all(|&s| s <= 310), "never above what the target allows: {late:?}");
        assert!(
            late.iter().filter(|&&s| s >= 250).count() > late.len() / 2,
            "and uses it: {late:?}"
        );
        let r = st.status(&settings()).ratio_pct;
        assert!((100..=120).contains(&r), "{r}");
    }

    #[test]
    fn a_missed_target_halves_the_share_down_to_the_starvation_bound() {
        let mut st = ShareState::new(Sharing::Slo { target_pct: 110 });
        // Alone (the strict bound's 9 %) 1 ms; beside any larger share, 2 ms: never met.
        let shares = run(&mut st, 2, |_| 1_000_000);
        assert_eq!(shares, vec![0, 50], "probe, then growth while it holds");
        st.share = 400;
        let shares = run(&mut st, 8, |share| if share > 91 { 2_000_000 } else { 1_000_000 });
        assert_eq!(&shares[..3], &[200, 100, 50], "{shares:?}");
        assert!(shares[3..].iter().all(|&s| s <= 100), "{shares:?}");
        let (_, on) = st.duty(&settings());
        assert!(on <= 11 * MS, "about the bound: {on}");
    }

    #[test]
    fn a_probe_period_relearns_the_baseline() {
        let mut st = ShareState::new(Sharing::Slo { target_pct: 150 });
        // Alone 1 ms for the first probe; then the workload changes to 3 ms alone, at any share.
        let shares = run(&mut st, 1, |_| 1_000_000);
        assert_eq!(shares, vec![0]);
        let shares = run(&mut st, PROBE_EVERY + 10, |_| 3_000_000);
        // Ratio 3x until the next probe keeps the share at 0; after it the share grows again.
        assert!(shares[..PROBE_EVERY as usize - 1].iter().all(|&s| s == 0), "{shares:?}");
        assert!(shares.last().copied().unwrap() > 0, "{shares:?}");
    }

    #[test]
    fn periods_without_higher_work_change_nothing_and_other_policies_do_not_learn() {
        let s = settings();
        let mut st = ShareState::new(Sharing::Slo { target_pct: 150 });
        st.share = 300;
        for i in 0..50 {
            st.observe(i * 10 * MS, &[], &s);
        }
        assert_eq!(st.share, 300);
        let mut w = ShareState::new(Sharing::Weights { high: 1, low: 1 });
        for i in 0..50 {
            w.observe(i * 10 * MS, &[(1, 5_000_000 + i * 1_000_000)], &s);
        }
        assert_eq!(w.status(&s).share_permille, 500);
        // A new policy starts afresh.
        st.set(Sharing::Weights { high: 1, low: 3 });
        assert_eq!(st.status(&s).share_permille, 750);
    }
}
