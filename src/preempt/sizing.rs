//! The live size of the reserved CU partition (`XHSA_RESERVE=auto@LEVEL`): from the demand the
//! board shows, which size to reserve for the latency-critical class, and whether changing to it
//! is worth what it costs.
//!
//! **Measured** ([`Demand::between`], over two looks at the board): the fraction of the time the
//! latency-critical class (queues at or above the reserve's priority) had packets in flight, its
//! packets completed and their mean time — differences of each queue's busy-time and completion
//! counters (`busy_ns`, `completed`), summed — the batch class's busy time, and how often batch
//! queues were taken off the GPU. Per size (the whole GPU being one), what the critical class
//! was served while that size was in force, summed over every interval there but the first
//! after a change ([`Sizes`]); a size's *service ratio* `r` is how much longer the critical
//! class takes there than at the best size measured: its completion rate's drop where the rate
//! fell (a closed-loop class, whose next request waits for the last: the drop is its slowdown,
//! however much of a packet's longer time its host work hides), else its time per packet
//! against the best (a class paced by its requests). A size not measured in the last
//! [`MEASURED_FOR_NS`] is expected to serve as the sizes measured around it say
//! ([`Sizes::expected_ratio`]: its time scaled with its CUs), else as the class's kernels'
//! widths say (the rounds of work-groups its dispatches need there,
//! [`crate::path::packet_width`]), else as well (`r = 1`): choosing it is a trial, which measures it, and none is made of a size expected to miss; a size measured
//! to miss is held as missed ([`MISS_HOLD_NS`]) through drifts of the demand, and a size larger
//! than one measured to serve is not tried, nor any before the whole GPU, the reference, was
//! measured in full. When the class on the whole GPU, alone or beside batch work no take-off
//! disturbed, shows a time per packet [`DRIFT`] away from the interval before, its own work changed
//! (a prefill, then decode steps) and every size's figures are forgotten
//! ([`Sizer::own_work_changed`]): a trial is judged against the work it runs. Under the SLO policy
//! ([`Situation::slo`]) only a class that keeps the GPU busy itself is explored or moved to a
//! reserve measured before: a paced one is the SLO's to serve by time sharing. Whether it keeps
//! the GPU busy is judged over the long run as well ([`super::duty`]: a burst of work looks busy
//! in any window shorter than the class's cycle), and no size is tried or moved to before the
//! class's pattern is known ([`Situation::pattern_known`]); the demand the model uses is that
//! long-run duty. The search halves:
//! the sizes left to explore are those not measured below the smallest measured to serve and
//! above the first measured to miss (a smaller one serves no better), and the trial is the
//! middle one when some of them would beat the best measured size (its gain counted from the
//! best of them) — on an MI308X 40 CUs first, then 20 or 60; on 80 CUs in one XCC (eighths)
//! 40, then 20 or 60, then the one between: three re-partitions find the size, each of which
//! stalls every queue on the GPU for an unmap.
//!
//! **Model**, the critical class's demand `u` in whole-GPU terms:
//! - the whole GPU (strict priority with preemption): the critical class waits one take-off (a
//!   device-wide unmap) at each of its busy periods, slowdown `1 + takeoffs/s × unmap / u`; the
//!   batch class gets `1 - u - 2 × takeoffs/s × unmap`;
//! - `c` of `n` CUs reserved: the critical class takes `r` times as long (its slowdown); a class
//!   paced by its requests that was busy 95 % of the time on its side cannot be served there;
//!   the batch class gets `1 - c / n` at all times. (A latency-critical job that keeps the GPU
//!   busy itself, a server under steady load, is served by a side as long as its completion
//!   rate holds there: the reserve then costs it little and gives the batch class the rest.)
//!
//! **Decision** ([`decide`]): the size that gives the batch class the most while the critical
//! class's predicted slowdown stays within the target (`XHSA_POLICY=slo:K`, else
//! [`DEFAULT_TARGET_PCT`]); if none does, the one closest to it. The GPU is re-partitioned only
//! when the predicted gain over [`HORIZON_NS`] (the batch class's time, or the critical class's
//! when the size in force misses the target) exceeds [`HYSTERESIS`] times what the change costs
//! — one device-wide unmap per hardware queue on the GPU, at the measured unmap cost — and the
//! batch class's share changes by at least [`MIN_SHARE_CHANGE`]; never sooner than
//! [`MIN_INTERVAL_NS`] after the last change, doubled for each reversal (a change the other way
//! than the one before it) within a minute up to 32 s ([`Sizer::min_interval`]: measurements
//! that disagree cost unmaps, so flapping backs off; a search going on down the sizes does not). Every process
//! with the setting measures; one decides, the same for all of them ([`Look`]).
//!
//! Pure: measurements and costs are passed in.
#![forbid(unsafe_code)]

use super::duty::{Duty, IDLE_BELOW};
use crate::path::packet_width::PARTS;
use crate::path::window::Nanos;
use std::collections::BTreeMap;
use xhsa_model::sharing::Sharing;

/// The critical class's slowdown the size must keep within when no SLO says otherwise, percent.
pub const DEFAULT_TARGET_PCT: u32 = 130;
/// How long a new size is expected to stand: the window its gain is counted over.
pub const HORIZON_NS: Nanos = 2_000_000_000;
/// The shortest time between two changes.
pub const MIN_INTERVAL_NS: Nanos = 2_000_000_000;
/// Changes within this window lengthen the interval before the next ([`Sizer::min_interval`]).
pub const BACKOFF_WINDOW_NS: Nanos = 60_000_000_000;
/// The longest interval the back-off reaches.
pub const MAX_INTERVAL_NS: Nanos = 32_000_000_000;
/// The gain must exceed the cost this many times.
pub const HYSTERESIS: u64 = 2;
/// The smallest change of the batch class's share worth a re-partition.
pub const MIN_SHARE_CHANGE: f64 = 0.05;
/// How long a size's measured service ratio stands while the critical class's demand holds
/// ([`DRIFT`]): re-measuring a size that failed costs the critical class its tail.
pub const MEASURED_FOR_NS: Nanos = 600_000_000_000;
/// The span a size's sums cover at most: older intervals fade out, so that the size in force
/// follows the critical class's demand.
pub const WINDOW_NS: Nanos = 10_000_000_000;
/// A size measured to miss the target is held as missed this long (doubled for each further miss
/// of it, up to [`MEASURED_FOR_NS`]), whatever the other figures do: a demand that drifts
/// ([`DRIFT`]) forgets them, and trying a failed size again costs the critical class its tail.
pub const MISS_HOLD_NS: Nanos = 20_000_000_000;
/// When the size in force's time per packet or completion rate moves this far from what it was
/// when first measured in full, the critical class's demand changed: the other sizes'
/// figures no longer compare and are forgotten.
pub const DRIFT: f64 = 0.25;
/// How long a size must have been measured (its settling interval not counted) before its
/// figures count: a class's time per packet over a few hundred milliseconds after a change
/// says more about the change than about the size.
pub const MIN_MEASURED_NS: Nanos = 2_000_000_000;
/// A size measured for [`EARLY_SPAN_NS`] already counts when the critical class is this many
/// times beyond its target there: a trial that clearly fails ends early.
pub const CLEAR_MISS: f64 = 1.05;
/// The longest a trial size stands unmeasured (the critical class idle there) before the
/// sizing decides without its figures.
pub const MAX_TRIAL_NS: Nanos = 10_000_000_000;
/// Fewer critical packets than this between two looks measure no size.
const MIN_PACKETS: f64 = 16.0;
/// How often the board is looked at for the sizing.
pub const LOOK_NS: Nanos = 500_000_000;
/// How often while a trial size is not measured yet: a trial that fails costs the critical
/// class until it is seen to fail.
pub const TRIAL_LOOK_NS: Nanos = 100_000_000;
/// How long a size must have been measured for a clear miss ([`CLEAR_MISS`]) to count.
pub const EARLY_SPAN_NS: Nanos = 300_000_000;
/// A size measured for [`GROSS_SPAN_NS`] (one trial look) already counts when the critical
/// class is this many times beyond its target there: every look of a trial that misses this
/// far costs the class a fifth of its time or more (llm-decode's decode steps at 1.8x on 40
/// CUs and 1.47x on 60, a target of 1.2x; from look to look a trial's figures move by 5 %).
pub const GROSS_MISS: f64 = 1.2;
/// How long a size must have been measured for a gross miss ([`GROSS_MISS`]) to count.
pub const GROSS_SPAN_NS: Nanos = TRIAL_LOOK_NS;
/// The unmap cost assumed before this process measured one (a take-off's KFD call).
pub const UNMEASURED_UNMAP_NS: Nanos = 1_000_000;
/// A critical class busy at least this much of the time at every size measured (its least
/// busy one included) keeps the GPU busy itself: requests back to back, a server under steady
/// load, a decoder ([`Sizes::ratio`]).
pub const BUSY_CLASS: f64 = 0.6;
/// A class below [`BUSY_CLASS`] cannot be served by a size where it was busy this much of the
/// time: it is paced by its requests, and there they wait for each other.
const SATURATED: f64 = 0.95;
/// What the critical class's rounds counted so far keep at each look: they fade over some ten
/// looks (five seconds at [`LOOK_NS`]).
pub const ROUNDS_KEEP: f64 = 0.9;

/// One queue on the board at one look, as the sizing needs it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QueueSample {
    /// Stable while the queue lives.
    pub key: u64,
    /// In the latency-critical class (at or above the reserve's priority).
    pub critical: bool,
    pub completed: u64,
    /// Total time with packets in flight (the board's `busy_ns`).
    pub busy_ns: u64,
    pub preemptions: u64,
    /// Rounds of work-groups its dispatches needed on each eighth of the GPU, summed (the
    /// board's `rounds`, [`crate::path::packet_width`]).
    pub rounds: [u64; PARTS],
}

/// The board at one look.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Look {
    pub at: Nanos,
    pub queues: Vec<QueueSample>,
    /// This process decides for the GPU: of the processes on the board, its owner token is the
    /// lowest (every process measures; one decides, so that processes whose measurements differ
    /// do not undo each other's changes).
    pub leader: bool,
}

/// What the classes asked of the GPU between two looks.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// Fraction of the time the critical class had packets executing (on the CUs it had).
    pub critical_busy: f64,
    /// Its mean time per packet (0: none completed).
    pub critical_packet_ns: f64,
    /// Its packets completed.
    pub critical_packets: f64,
    /// The same busy fraction for the batch class.
    pub batch_busy: f64,
    /// Batch queues taken off the GPU per second.
    pub takeoffs_per_s: f64,
    /// The rounds of work-groups the critical class's dispatches needed on each eighth of the
    /// GPU (submitted in the interval).
    pub critical_rounds: [f64; PARTS],
}

impl Demand {
    /// The demand between `before` and `after` (queues in both; counters that went back, a
    /// queue's slot reused, count nothing).
    pub fn between(before: &Look, after: &Look) -> Option<Demand> {
        let dt = after.at.checked_sub(before.at).filter(|&d| d > 0)? as f64;
        let mut d = Demand::default();
        let mut critical_done = 0.0;
        for q in &after.queues {
            let Some(b) = before.queues.iter().find(|b| b.key == q.key) else { continue };
            let done = q.completed.saturating_sub(b.completed) as f64;
            let busy = q.busy_ns.saturating_sub(b.busy_ns) as f64;
            if q.critical {
                d.critical_busy += busy;
                critical_done += done;
                for (sum, (a, b)) in d.critical_rounds.iter_mut().zip(q.rounds.iter().zip(b.rounds))
                {
                    *sum += a.saturating_sub(b) as f64;
                }
            } else {
                d.batch_busy += busy;
                d.takeoffs_per_s += q.preemptions.saturating_sub(b.preemptions) as f64 * 1e9 / dt;
            }
        }
        if critical_done > 0.0 {
            d.critical_packet_ns = d.critical_busy / critical_done;
        }
        d.critical_packets = critical_done;
        d.critical_busy = (d.critical_busy / dt).min(1.0);
        d.batch_busy = (d.batch_busy / dt).min(1.0);
        Some(d)
    }
}

/// The critical class's counters over time at one size: packets completed, their busy time, and
/// the time they were counted over.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Served {
    pub packets: f64,
    pub busy_ns: f64,
    pub span_ns: f64,
}

impl Served {
    /// Mean time per packet.
    fn per_packet(&self) -> f64 {
        self.busy_ns / self.packets
    }

    /// Packets per nanosecond.
    fn rate(&self) -> f64 {
        self.packets / self.span_ns
    }

    /// Fraction of the time with packets in flight.
    fn busy(&self) -> f64 {
        self.busy_ns / self.span_ns
    }
}

/// Per size (0: the whole GPU), what the critical class was served while it was in force
/// (counters summed over every interval measured there, so a size's figure firms up the longer
/// it stands), and when it was last measured.
#[derive(Clone, Debug, Default)]
pub struct Sizes {
    measured: BTreeMap<u32, (Served, Nanos)>,
    /// The size in force when first measured in full, and its figure then.
    baseline: Option<(u32, Served)>,
    /// The critical class's slowdown to keep within ([`Sizer::follow`]; 0: none set, the
    /// default's).
    target: f64,
    /// Sizes measured to miss the target: until when they count as missed, with the ratio
    /// measured, and how many times they missed ([`MISS_HOLD_NS`]).
    missed: BTreeMap<u32, Missed>,
    /// The critical class's long-run pattern ([`Sizer::look`] feeds it; left empty, only the
    /// sizes' own figures judge the class).
    duty: Duty,
    /// The rounds of work-groups its dispatches needed on each eighth of the GPU, summed over
    /// the looks since its work last changed, older looks fading ([`Sizes::count_rounds`]).
    rounds: [f64; PARTS],
}

/// A size measured to miss the target ([`Sizes::note`]).
#[derive(Copy, Clone, Debug, PartialEq)]
struct Missed {
    until: Nanos,
    ratio: f64,
    times: u32,
}

impl Sizes {
    /// `cus` was in force while the critical class was served `d` (ignored without packets).
    /// Sums older than [`MEASURED_FOR_NS`] are dropped first, and sums over more than
    /// [`WINDOW_NS`] scaled down to it; when the figure drifts ([`DRIFT`]) from the one this
    /// size had when first measured in full, the other sizes' figures are forgotten.
    pub fn record(&mut self, cus: u32, d: Served, now: Nanos) {
        if d.packets <= 0.0 || d.busy_ns <= 0.0 || d.span_ns <= 0.0 {
            return;
        }
        let sum = match self.measured.get(&cus) {
            Some(&(old, at)) if now.saturating_sub(at) < MEASURED_FOR_NS => {
                let keep = (WINDOW_NS as f64 / old.span_ns).min(1.0);
                Served {
                    packets: old.packets * keep + d.packets,
                    busy_ns: old.busy_ns * keep + d.busy_ns,
                    span_ns: old.span_ns * keep + d.span_ns,
                }
            }
            _ => d,
        };
        self.measured.insert(cus, (sum, now));
        if sum.span_ns < MIN_MEASURED_NS as f64 {
            return;
        }
        match self.baseline {
            Some((c, base)) if c == cus => {
                let moved = |a: f64, b: f64| (a / b - 1.0).abs() > DRIFT;
                if moved(sum.rate(), base.rate()) || moved(sum.per_packet(), base.per_packet()) {
                    self.measured.retain(|&c, _| c == cus);
                    self.baseline = Some((cus, sum));
                }
            }
            _ => self.baseline = Some((cus, sum)),
        }
    }

    /// Forgets every size's figures (the critical class's work changed,
    /// [`Sizer::own_work_changed`]), and how wide its kernels were; the misses' holds stand.
    fn forget_figures(&mut self) {
        self.measured.clear();
        self.baseline = None;
        self.rounds = [0.0; PARTS];
    }

    /// Adds the critical class's rounds of one look ([`Demand::critical_rounds`]); what was
    /// counted before fades by [`ROUNDS_KEEP`] per look.
    pub fn count_rounds(&mut self, rounds: &[f64; PARTS]) {
        for (sum, r) in self.rounds.iter_mut().zip(rounds) {
            *sum = *sum * ROUNDS_KEEP + r;
        }
    }

    /// The sizes measured lately, each for [`MIN_MEASURED_NS`] at least.
    fn fresh(&self, now: Nanos) -> impl Iterator<Item = (u32, Served)> + Clone + '_ {
        self.measured
            .iter()
            .filter(move |(_, (v, at))| {
                now.saturating_sub(*at) < MEASURED_FOR_NS && v.span_ns >= MIN_MEASURED_NS as f64
            })
            .map(|(c, (v, _))| (*c, *v))
    }

    /// Whether the whole GPU was measured in full lately: the reference a reserve's figures are
    /// compared with.
    fn reference(&self, now: Nanos) -> bool {
        self.fresh(now).any(|(c, _)| c == 0)
    }

    /// Whether the critical class keeps the GPU busy itself: busy [`BUSY_CLASS`] of the time at
    /// least at every size measured lately, and over the long run when that is known
    /// ([`Duty::fraction`]; `None`: no size measured).
    fn busy_class(&self, now: Nanos) -> Option<bool> {
        let least = self.fresh(now).map(|(_, v)| v.busy()).reduce(f64::min)?;
        Some(least >= BUSY_CLASS && self.duty.fraction().is_none_or(|d| d >= BUSY_CLASS))
    }

    /// The service ratio of `cus` reserved CUs: how much longer the critical class takes there
    /// than at the best size measured lately (the whole GPU's included, whose time can include
    /// waits for batch take-offs, so a reserve's may be the best); `None` unless `cus` was
    /// measured lately for [`MIN_MEASURED_NS`] at least. A class that keeps the GPU busy itself
    /// ([`BUSY_CLASS`]: its next request follows the last) is slowed by as much as its
    /// completion rate falls against the best rate — however much longer each packet takes,
    /// the time its host spends between them can hide; a class paced by its requests completes
    /// as many packets at any size that keeps up with them, and its time per packet against
    /// the best says it (an upper bound: its time off the GPU does not grow).
    ///
    /// A size measured for [`EARLY_SPAN_NS`] already counts when it misses the target by
    /// [`CLEAR_MISS`] against the sizes measured in full, one measured for [`GROSS_SPAN_NS`]
    /// when it misses by [`GROSS_MISS`].
    pub fn ratio(&self, cus: u32, now: Nanos) -> Option<f64> {
        self.measured_ratio(cus, now).or_else(|| self.held_miss(cus, now))
    }

    /// The ratio `cus` reserved CUs are expected to have, not measured themselves: interpolated
    /// in `cu_count / cus` (a class's time scales so with the CUs it has when its kernels fill
    /// them) between the nearest size measured below and the nearest above (or the whole GPU,
    /// `cu_count` CUs at 1). `None` with no size measured below, where a trial is the only way
    /// to know. llm-decode's decode steps measured at 1.82x on 40 of 80 CUs put 60 at 1.27x and
    /// 70 at 1.12x: with a target of 1.2x, 60 is not worth a trial (measured: 1.47x); bert6's
    /// 40 at 1.00x and 20 at 1.40x put 30 at 1.13x (measured to serve).
    ///
    /// With no size measured below, the class's kernels' widths say it ([`Sizes::by_widths`]).
    pub fn expected_ratio(&self, cus: u32, cu_count: u32, now: Nanos) -> Option<f64> {
        self.interpolated(cus, cu_count, now).or_else(|| self.by_widths(cus, cu_count, now))
    }

    /// How much longer the critical class is expected to take on `cus` CUs by its kernels'
    /// widths ([`crate::path::packet_width::ratio`], its rounds there against the whole GPU's,
    /// `w`): a class paced by its requests, whose time per packet is its ratio, `w`; one that
    /// keeps the GPU busy ([`BUSY_CLASS`]) and had packets in flight `b` of the time on the
    /// whole GPU, `b w` (at least 1): the time between its packets hides a longer time per
    /// packet until the two meet, and its completion rate, its ratio, falls by the rest. `None`
    /// before the whole GPU was measured in full or without rounds counted. The rounds ignore
    /// what limits a CU's work-groups beside its wave slots and LDS, and a kernel's fixed
    /// cost: the figure errs low. llm-decode's decode steps (GPU-bound, `b` 0.98) count 1.58 at
    /// 40 of 80 CUs and 1.37 at 70 (measured 1.82-2.07x and 1.44-1.50x); bert6's server
    /// (`b` 0.73, its host's launches between) 1.41 and 1.51 at 40 and 30, expected 1.03x and
    /// 1.10x (measured 1.00x and within 1.2x), 20 at 1.51x (measured 1.40x).
    fn by_widths(&self, cus: u32, cu_count: u32, now: Nanos) -> Option<f64> {
        let w = crate::path::packet_width::ratio(&self.rounds, cu_count, cus)?;
        let whole = self.fresh(now).find(|&(c, _)| c == 0)?.1;
        if self.busy_class(now)? {
            Some((whole.busy().min(1.0) * w).max(1.0))
        } else {
            Some(w)
        }
    }

    /// [`Sizes::expected_ratio`] from the sizes measured around `cus`.
    fn interpolated(&self, cus: u32, cu_count: u32, now: Nanos) -> Option<f64> {
        if cus == 0 || cus >= cu_count {
            return None;
        }
        let known = self.measured.keys().chain(self.missed.keys()).copied().filter(|&c| c > 0);
        let known = known.filter_map(|c| self.ratio(c, now).map(|r| (c, r)));
        let below = known.clone().filter(|&(c, _)| c < cus).max_by_key(|&(c, _)| c)?;
        let above = known
            .filter(|&(c, _)| c > cus && c < cu_count)
            .min_by_key(|&(c, _)| c)
            .unwrap_or((cu_count, 1.0));
        let x = |c: u32| f64::from(cu_count) / f64::from(c);
        let r = above.1 + (below.1 - above.1) * (x(cus) - x(above.0)) / (x(below.0) - x(above.0));
        Some(r.max(1.0))
    }

    /// The critical class's slowdown to keep within: the one set, else the default's.
    fn target(&self) -> f64 {
        if self.target > 0.0 {
            self.target
        } else {
            DEFAULT_TARGET_PCT as f64 / 100.0
        }
    }

    /// The ratio a size was last measured to miss the target by, while its hold lasts.
    fn held_miss(&self, cus: u32, now: Nanos) -> Option<f64> {
        self.missed.get(&cus).filter(|m| now < m.until).map(|m| m.ratio)
    }

    /// Notes what `cus` (in force) measures now: a miss of the target starts a hold of
    /// [`MISS_HOLD_NS`] doubled for each earlier miss (once per stay: a hold in force is only
    /// brought up to date); a full measurement within the target ends any hold and forgets the
    /// misses.
    pub fn note(&mut self, cus: u32, now: Nanos) {
        let Some(r) = self.measured_ratio(cus, now).filter(|_| cus != 0) else { return };
        if r > self.target() {
            let m = self.missed.entry(cus).or_insert(Missed { until: 0, ratio: r, times: 0 });
            m.ratio = r;
            if now >= m.until {
                let hold = MISS_HOLD_NS.saturating_mul(1 << m.times.min(16));
                m.until = now.saturating_add(hold.min(MEASURED_FOR_NS));
                m.times += 1;
            }
        } else if self.measured.get(&cus).is_some_and(|(v, _)| v.span_ns >= MIN_MEASURED_NS as f64)
        {
            self.missed.remove(&cus);
        }
    }

    /// [`Sizes::ratio`] from the figures measured (no hold).
    fn measured_ratio(&self, cus: u32, now: Nanos) -> Option<f64> {
        if cus == 0 {
            return Some(1.0);
        }
        let &(own, at) = self.measured.get(&cus)?;
        if now.saturating_sub(at) >= MEASURED_FOR_NS || own.span_ns < GROSS_SPAN_NS as f64 {
            return None;
        }
        let full = own.span_ns >= MIN_MEASURED_NS as f64;
        // Against the sizes measured in full (`cus` among them when it is).
        let r = if self.busy_class(now)? {
            let best_rate = self.fresh(now).map(|(_, v)| v.rate()).fold(0.0, f64::max);
            best_rate / own.rate()
        } else {
            let best_time =
                self.fresh(now).map(|(_, v)| v.per_packet()).fold(f64::INFINITY, f64::min);
            own.per_packet() / best_time
        }
        .max(1.0);
        let early = |span: Nanos, miss: f64| own.span_ns >= span as f64 && r > self.target() * miss;
        (full || early(EARLY_SPAN_NS, CLEAR_MISS) || early(GROSS_SPAN_NS, GROSS_MISS)).then_some(r)
    }

    /// The critical class's slowdown to keep within.
    pub fn set_target(&mut self, target: f64) {
        self.target = target;
    }

    /// Whether a class paced by its requests was busy [`SATURATED`] of the time at `cus`: it
    /// cannot be served there.
    pub fn saturated(&self, cus: u32, now: Nanos) -> bool {
        self.busy_class(now) == Some(false)
            && self.fresh(now).any(|(c, v)| c == cus && v.busy() >= SATURATED)
    }
}

/// What a size is predicted to give.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Reserved CUs; 0: the whole GPU.
    pub cus: u32,
    /// The critical class's service ratio used (for an unmeasured size, a trial: the one
    /// [`Sizes::expected_ratio`] gives from the sizes measured around it or the class's
    /// kernels' widths, else 1).
    pub ratio: f64,
    /// Whether the ratio was measured.
    pub measured: bool,
    /// The critical class's response time against alone (infinite: it cannot keep up).
    pub slowdown: f64,
    /// The batch class's share of the GPU.
    pub batch_share: f64,
}

/// The facts a decision rests on.
#[derive(Clone, Debug)]
pub struct Situation<'a> {
    pub now: Nanos,
    /// Reserved CUs now; 0: the whole GPU.
    pub current: u32,
    /// The sizes the GPU can have ([`xhsa_model::partition::Split::sizes`]).
    pub sizes: &'a [u32],
    pub cu_count: u32,
    pub demand: Demand,
    pub measured: &'a Sizes,
    /// Batch take-offs per second with the whole GPU, as last measured so.
    pub whole_takeoffs_per_s: f64,
    /// Measured cost of one device-wide unmap.
    pub unmap_ns: Nanos,
    /// Hardware queues on the GPU whose mask a change sets.
    pub queues: u32,
    /// The critical class's slowdown to keep within, percent.
    pub target_pct: u32,
    /// The sharing policy is the SLO's, which keeps the critical class within the target on the
    /// whole GPU by measurement: a class paced by its requests is left to it (no trial).
    pub slo: bool,
    /// The critical class's pattern has been watched long enough to tell a class that keeps the
    /// GPU busy from a burst ([`Duty::known`]): before that, no size is tried.
    pub pattern_known: bool,
}

/// The outcome of [`decide`]: the best size's prediction, the predicted gain and the cost, in
/// nanoseconds of device time, and whether to change to it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Verdict {
    pub now: Prediction,
    pub best: Prediction,
    pub gain_ns: u64,
    pub cost_ns: u64,
    pub change: bool,
}

/// What `cus` reserved CUs would give, with the critical class's demand `u` in whole-GPU terms.
pub fn predict(s: &Situation, cus: u32, u: f64) -> Prediction {
    if cus == 0 || s.cu_count == 0 {
        let waits = s.whole_takeoffs_per_s * s.unmap_ns as f64 / 1e9;
        return Prediction {
            cus: 0,
            ratio: 1.0,
            measured: true,
            slowdown: 1.0 + waits / u.max(0.01),
            batch_share: (1.0 - u - 2.0 * waits).max(0.0),
        };
    }
    // Not measured (a trial): as the sizes measured around it say, else as good as the best.
    let measured = s.measured.ratio(cus, s.now);
    let expected = measured.or_else(|| s.measured.expected_ratio(cus, s.cu_count, s.now));
    let r = expected.unwrap_or(1.0).max(0.01);
    let slowdown = if s.measured.saturated(cus, s.now) { f64::INFINITY } else { r };
    let f = f64::from(cus.min(s.cu_count)) / f64::from(s.cu_count);
    Prediction { cus, ratio: r, measured: measured.is_some(), slowdown, batch_share: 1.0 - f }
}

/// Decides; see the module doc.
pub fn decide(s: &Situation) -> Verdict {
    // The critical class's busy time was measured on the CUs it had: in whole-GPU terms.
    let r_now =
        if s.current == 0 { 1.0 } else { s.measured.ratio(s.current, s.now).unwrap_or(1.0) };
    let u = (s.demand.critical_busy / r_now.max(0.01)).min(1.0);
    let target = f64::from(s.target_pct) / 100.0;
    let batch_wants = s.demand.batch_busy > 0.01 || s.demand.takeoffs_per_s > 0.0;
    let score = |p: &Prediction| {
        if p.slowdown <= target {
            if batch_wants {
                p.batch_share
            } else {
                0.0
            }
        } else if p.slowdown.is_finite() {
            -p.slowdown
        } else {
            f64::MIN
        }
    };
    let now = predict(s, s.current, u);
    let mut best = now;
    let mut consider = |p: Prediction| {
        if score(&p) > score(&best) {
            best = p;
        }
    };
    consider(predict(s, 0, u));
    // Reserves from the largest down: a smaller one serves no better than a larger one, so the
    // search stops at the first measured one that misses the target.
    // The sizes to explore: those not measured below the smallest measured to serve (a larger
    // one serves too and leaves the batch class less) and above the first measured to miss (a
    // smaller one serves no better), largest first.
    let mut unmeasured: Vec<Prediction> = Vec::new();
    // Under the SLO policy a class paced by its requests is served on the whole GPU within the
    // target by time sharing, which the SLO measures; the model's whole-GPU prediction (a wait
    // per take-off) does not see that, and a trial costs it its tail: only a class that keeps
    // the GPU busy itself (no idle time for the batch class to use) is worth a trial then.
    //
    // The same holds for a move to a reserve measured before: a class whose pattern is not
    // known (a burst, as far as the sizing can tell) or that the SLO serves is not moved to
    // one (a reserve in force stays while it serves, and the whole GPU is always a choice).
    // A reserve's figures are only as good as the whole GPU's they are compared with: no
    // trial before the whole GPU was measured in full lately (a trial compared with nothing
    // else measures only itself, and serves).
    let reserves = s.pattern_known && (!s.slo || s.measured.busy_class(s.now) == Some(true));
    let explores = reserves && s.measured.reference(s.now);
    for &c in s.sizes.iter().rev() {
        let p = predict(s, c, u);
        if p.measured {
            if p.slowdown > target {
                break;
            }
            if reserves || c == s.current {
                consider(p);
            }
            unmeasured.clear();
            continue;
        }
        // A trial is made where the sizes measured around it expect it to serve.
        if explores && p.slowdown <= target {
            unmeasured.push(p);
        }
    }
    // Halving: the trial is the middle one (the larger of two), its gain counted from the best
    // it can lead to (those not measured as serving as well as the best, r = 1). Each trial
    // halves what is left, so the search costs few re-partitions (each one stalls the GPU's
    // queues for an unmap apiece).
    let explore = unmeasured.get(unmeasured.len() / 2).map(|&step| {
        let aim =
            unmeasured.iter().copied().fold(step, |a, b| if score(&b) > score(&a) { b } else { a });
        (step, aim)
    });
    let (best, aim) = match explore {
        Some((step, aim)) if score(&aim) > score(&best) => (step, aim),
        _ => (best, best),
    };
    let cost_ns = u64::from(s.queues).saturating_mul(s.unmap_ns);
    let horizon = HORIZON_NS as f64;
    let gain = if now.slowdown <= target {
        let change = aim.batch_share - now.batch_share;
        if change < MIN_SHARE_CHANGE {
            0.0
        } else {
            change * horizon
        }
    } else if now.slowdown.is_finite() {
        // The size in force misses the target: the critical class's time it would save.
        (now.slowdown - aim.slowdown.min(now.slowdown)) * u * horizon
    } else {
        u.max(0.01) * horizon
    };
    let gain_ns = gain.max(0.0) as u64;
    let change = best.cus != s.current && gain_ns > HYSTERESIS.saturating_mul(cost_ns);
    Verdict { now, best, gain_ns, cost_ns, change }
}

/// What the sizing of one GPU knows: its sizes and target, and what it measured.
#[derive(Clone, Debug)]
pub struct Sizer {
    sizes: Vec<u32>,
    cu_count: u32,
    /// The SLO policy is in force ([`Situation::slo`]).
    slo: bool,
    /// The last look and the size in force at it.
    last: Option<(Look, u32)>,
    measured: Sizes,
    whole_takeoffs_per_s: f64,
    demand: Option<Demand>,
    /// The first interval after a change is not measured.
    settling: bool,
    /// When the size in force changed within the last [`BACKOFF_WINDOW_NS`], and whether the
    /// change took CUs from the critical class (a smaller reserve, or a first one).
    changes: std::collections::VecDeque<(Nanos, bool)>,
    /// The critical class's time per packet in the last interval, when it was measured on the
    /// whole GPU, and whether a batch queue was taken off in it ([`Sizer::own_work_changed`]).
    whole_packet_ns: Option<(f64, bool)>,
}

impl Sizer {
    pub fn new(sizes: Vec<u32>, cu_count: u32, target_pct: u32) -> Sizer {
        Sizer {
            sizes,
            cu_count,
            slo: false,
            last: None,
            measured: Sizes { target: f64::from(target_pct) / 100.0, ..Sizes::default() },
            whole_takeoffs_per_s: 0.0,
            demand: None,
            settling: false,
            changes: std::collections::VecDeque::new(),
            whole_packet_ns: None,
        }
    }

    /// Whether the critical class's figures on the whole GPU say its own work changed: in this
    /// interval (`d`, at `current` reserved CUs) it had the whole GPU, and its time per packet
    /// moved by more than [`DRIFT`] from the interval before (on the whole GPU too), while
    /// either it was alone in this interval (the batch class completed nothing and was not
    /// taken off) or no batch queue was taken off in either interval. Beside take-offs its time
    /// per packet moves with their waits (10x from look to look in bert6), on a reserve with the
    /// size; beside batch work that stays on the GPU it is its work's with a steady share of
    /// contention. An LLM server's prefill (packets of 2.8 ms) followed by its decode steps
    /// (0.3 ms), the training beside both and never taken off, is such a change, and so is a
    /// class that had waited for batch work and now runs alone: figures measured over both say
    /// nothing of what it is served now, and a trial judged against them was taken to serve at
    /// 1.8x the decode steps' time. `last` is [`Sizer::whole_packet_ns`] (the time per packet
    /// and whether a batch queue was taken off), brought up to date.
    fn own_work_changed(last: &mut Option<(f64, bool)>, d: &Demand, current: u32) -> bool {
        let measured =
            current == 0 && d.critical_packets >= MIN_PACKETS && d.critical_packet_ns > 0.0;
        let taken_off = d.takeoffs_per_s > 0.0;
        let alone = d.batch_busy < IDLE_BELOW && !taken_off;
        let before = std::mem::replace(last, measured.then_some((d.critical_packet_ns, taken_off)));
        let now = d.critical_packet_ns;
        measured
            && before.is_some_and(|(b, before_taken_off)| {
                (alone || !(taken_off || before_taken_off)) && now.max(b) / now.min(b) > 1.0 + DRIFT
            })
    }

    /// The critical class's rounds at each size against the whole GPU's, for the log.
    fn width_ratios(&self) -> String {
        let r = self.sizes.iter().filter_map(|&c| {
            crate::path::packet_width::ratio(&self.measured.rounds, self.cu_count, c)
                .map(|r| format!("{c}: {r:.2}"))
        });
        format!("[{}]", r.collect::<Vec<_>>().join(", "))
    }

    /// The shortest time between two changes now: [`MIN_INTERVAL_NS`], doubled for each
    /// reversal in the last [`BACKOFF_WINDOW_NS`] (a change the other way than the one before
    /// it), up to [`MAX_INTERVAL_NS`]: measurements that disagree must not make the GPU pay an
    /// unmap per queue every 2 s, while a search that goes on down the sizes is not flapping.
    pub fn min_interval(&self) -> Nanos {
        let n = self.changes.iter().zip(self.changes.iter().skip(1)).filter(|(a, b)| a.1 != b.1);
        let n = n.count().min(16) as u32;
        MIN_INTERVAL_NS.saturating_mul(1 << n).min(MAX_INTERVAL_NS)
    }

    /// The CUs the critical class may use with `reserved` CUs reserved (the whole GPU at 0).
    fn critical_cus(&self, reserved: u32) -> u32 {
        if reserved == 0 {
            self.cu_count
        } else {
            reserved
        }
    }

    /// When to look next: soon while `current` reserved CUs are a trial not measured yet.
    pub fn look_interval(&self, current: u32, now: Nanos) -> Nanos {
        if current != 0 && self.measured.ratio(current, now).is_none() {
            TRIAL_LOOK_NS
        } else {
            LOOK_NS
        }
    }

    /// Follows the sharing policy in force from now on: under `slo:K` the critical class's
    /// slowdown to keep within is `K` and a class paced by its requests is left to the SLO's
    /// time sharing ([`Situation::slo`]); under the others the target is
    /// [`DEFAULT_TARGET_PCT`].
    pub fn follow(&mut self, policy: Sharing) {
        let (target_pct, slo) = match policy {
            Sharing::Slo { target_pct } => (u32::from(target_pct), true),
            _ => (DEFAULT_TARGET_PCT, false),
        };
        self.slo = slo;
        self.measured.set_target(f64::from(target_pct) / 100.0);
    }

    /// The critical class's slowdown to keep within, percent (the one [`Sizes`] holds).
    fn target_pct(&self) -> u32 {
        (self.measured.target() * 100.0).round() as u32
    }

    /// One look at the board (`look`, with `current` reserved CUs in force, changed `since_change`
    /// ago): measures, and when [`MIN_INTERVAL_NS`] passed since the last change decides. Returns
    /// the verdict when it decided.
    pub fn look(
        &mut self,
        look: Look,
        current: u32,
        since_change: Nanos,
        unmap_ns: Option<Nanos>,
    ) -> Option<Verdict> {
        let now = look.at;
        let prev = self.last.replace((look, current));
        let (prev, prev_cus) = prev?;
        let (look, _) = self.last.as_ref()?;
        if prev_cus != current {
            // A change between the two looks: nothing measured across it, nor in the next
            // interval (the queues' moves and the owners' running estimates settle).
            self.settling = true;
            self.whole_packet_ns = None;
            let fewer = self.critical_cus(current) < self.critical_cus(prev_cus);
            self.changes.push_back((now, fewer));
            return None;
        }
        while self.changes.front().is_some_and(|&(t, _)| now.saturating_sub(t) > BACKOFF_WINDOW_NS)
        {
            self.changes.pop_front();
        }
        let d = Demand::between(&prev, look)?;
        tracing::debug!(
            "xhsa: sizing at {} reserved CUs{}: critical busy {:.3}, {:.0} packets of {:.1} us; batch busy {:.3}, {:.1} take-offs/s; critical class: pattern {}, duty {}, keeps the GPU busy {:?}, rounds against the whole GPU's {}",
            current,
            if self.settling { " (settling)" } else { "" },
            d.critical_busy,
            d.critical_packets,
            d.critical_packet_ns / 1e3,
            d.batch_busy,
            d.takeoffs_per_s,
            if self.measured.duty.known() { "known" } else { "not known" },
            self.measured.duty.fraction().map_or("-".to_string(), |f| format!("{f:.2}")),
            self.measured.busy_class(now),
            self.width_ratios()
        );
        if std::mem::take(&mut self.settling) {
            return None;
        }
        if Self::own_work_changed(&mut self.whole_packet_ns, &d, current) {
            // What every size measured was another work's: measured again from here (the
            // whole GPU in full before any trial); the misses' holds stand.
            tracing::debug!(
                "xhsa: sizing: the latency-critical class's own work changed (on the whole GPU, no take-off disturbing it: {:.1} us per packet): the sizes' figures are measured again",
                d.critical_packet_ns / 1e3
            );
            self.measured.forget_figures();
        }
        self.measured.count_rounds(&d.critical_rounds);
        // The class's own pattern (the settling interval, disturbed by the change, left out).
        self.measured.duty.observe(d.critical_busy, now.saturating_sub(prev.at));
        if d.critical_packets >= MIN_PACKETS {
            let served = Served {
                packets: d.critical_packets,
                busy_ns: d.critical_packet_ns * d.critical_packets,
                span_ns: now.saturating_sub(prev.at) as f64,
            };
            self.measured.record(current, served, now);
            self.measured.note(current, now);
        }
        if current == 0 {
            self.whole_takeoffs_per_s = (self.whole_takeoffs_per_s + d.takeoffs_per_s) / 2.0;
        }
        // The critical class's demand is its long-run duty once known: a burst's seconds do not
        // move the split.
        let smoothed = match self.demand {
            Some(o) if o.critical_busy.is_finite() => Demand {
                critical_busy: self
                    .measured
                    .duty
                    .fraction()
                    .unwrap_or((o.critical_busy + d.critical_busy) / 2.0),
                critical_packet_ns: d.critical_packet_ns,
                critical_packets: d.critical_packets,
                critical_rounds: d.critical_rounds,
                batch_busy: (o.batch_busy + d.batch_busy) / 2.0,
                takeoffs_per_s: (o.takeoffs_per_s + d.takeoffs_per_s) / 2.0,
            },
            _ => d,
        };
        self.demand = Some(smoothed);
        // A size measured to miss the target is left without the back-off (going back from a
        // failed trial is not flapping); a trial stands until it is measured (or the critical
        // class stayed idle there).
        let r_now = (current != 0).then(|| self.measured.ratio(current, now));
        let missing = r_now.flatten().is_some_and(|r| r > self.measured.target());
        let interval = if missing { 0 } else { self.min_interval() };
        if since_change < interval || !look.leader {
            return None;
        }
        if r_now.is_some_and(|r| r.is_none()) && since_change < MAX_TRIAL_NS {
            return None;
        }
        let s = Situation {
            now,
            current,
            sizes: &self.sizes,
            cu_count: self.cu_count,
            demand: smoothed,
            measured: &self.measured,
            whole_takeoffs_per_s: self.whole_takeoffs_per_s,
            unmap_ns: unmap_ns.unwrap_or(UNMEASURED_UNMAP_NS),
            queues: look.queues.len() as u32,
            target_pct: self.target_pct(),
            slo: self.slo,
            pattern_known: self.measured.duty.known(),
        };
        Some(decide(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preempt::duty::BUSY_STRETCH_NS;

    const SIZES: [u32; 3] = [20, 40, 60];
    const S: Nanos = 1_000_000_000;

    fn busy(critical: f64, batch: f64, takeoffs: f64) -> Demand {
        Demand {
            critical_busy: critical,
            critical_packet_ns: 0.0,
            critical_packets: 0.0,
            batch_busy: batch,
            takeoffs_per_s: takeoffs,
            critical_rounds: [0.0; PARTS],
        }
    }

    fn situation<'a>(current: u32, demand: Demand, measured: &'a Sizes) -> Situation<'a> {
        Situation {
            now: 10 * S,
            current,
            sizes: &SIZES,
            cu_count: 80,
            demand,
            measured,
            whole_takeoffs_per_s: demand.takeoffs_per_s,
            unmap_ns: 450_000,
            queues: 8,
            target_pct: 130,
            slo: false,
            pattern_known: true,
        }
    }

    /// Ratios measured for each size at 10 s.
    /// Paced: 1000 packets a second at every size, each taking `packet_ns`, over the shortest
    /// span that counts.
    fn paced(packet_ns: f64) -> Served {
        let secs = MIN_MEASURED_NS as f64 / 1e9;
        Served { packets: 1_000.0 * secs, busy_ns: 1_000.0 * secs * packet_ns, span_ns: secs * 1e9 }
    }

    /// A class paced by its requests, busy `u` of the time on the whole GPU, its packets `r`
    /// times as long at each size `c` (so busy `u r` there, at most all the time).
    fn paced_at(u: f64, ratios: &[(u32, f64)]) -> Sizes {
        let mut m = Sizes::default();
        let span = MIN_MEASURED_NS as f64;
        let at =
            |r: f64| Served { packets: 1_000.0, busy_ns: (u * r).min(1.0) * span, span_ns: span };
        m.record(0, at(1.0), 10 * S);
        for &(c, r) in ratios {
            m.record(c, at(r), 10 * S);
        }
        m
    }

    /// A light class paced by its requests (busy 10 % on the whole GPU).
    fn measured(ratios: &[(u32, f64)]) -> Sizes {
        paced_at(0.1, ratios)
    }

    /// A class that keeps the GPU busy itself: busy 95 % of the time at every size, its
    /// completion rate `1 / r` of the whole GPU's at each size `c`.
    fn closed_loop(ratios: &[(u32, f64)]) -> Sizes {
        let mut m = Sizes::default();
        let span = MIN_MEASURED_NS as f64;
        let at = |r: f64| Served { packets: 1_000.0 / r, busy_ns: 0.95 * span, span_ns: span };
        m.record(0, at(1.0), 10 * S);
        for &(c, r) in ratios {
            m.record(c, at(r), 10 * S);
        }
        m
    }

    #[test]
    fn demand_is_busy_time_per_class_from_two_looks() {
        let q = |key, critical, completed: u64, packet_ns: u64, preemptions| QueueSample {
            key,
            critical,
            completed,
            busy_ns: completed * packet_ns,
            preemptions,
            rounds: [0; PARTS],
        };
        let before = Look {
            at: 0,
            queues: vec![q(1, true, 100, 1_000, 0), q(2, false, 5, 10_000_000, 3)],
            leader: true,
        };
        let after = Look {
            at: S,
            queues: vec![
                q(1, true, 300_100, 1_000, 0),   // 300 000 x 1 us = 0.3 s of 1 s
                q(2, false, 65, 10_000_000, 13), // 60 x 10 ms = 0.6 s; 10 take-offs
                q(3, true, 1_000_000, 1_000, 0), // not in the first look: nothing
            ],
            leader: true,
        };
        let d = Demand::between(&before, &after).unwrap();
        assert!((d.critical_busy - 0.3).abs() < 1e-9, "{d:?}");
        assert!((d.critical_packet_ns - 1_000.0).abs() < 1e-9, "{d:?}");
        assert!((d.batch_busy - 0.6).abs() < 1e-9, "{d:?}");
        assert!((d.takeoffs_per_s - 10.0).abs() < 1e-9, "{d:?}");
        assert_eq!(Demand::between(&after, &before), None, "time must go forward");
    }

    #[test]
    fn measured_ratios_are_against_the_best_size_and_stand_for_ten_minutes() {
        let mut m = Sizes::default();
        m.record(20, paced(3_000.0), 0);
        assert_eq!(m.ratio(20, S), Some(1.0), "alone, it is the best");
        assert_eq!(m.ratio(40, S), None, "not measured");
        m.record(0, paced(1_000.0), S);
        assert_eq!(m.ratio(20, 2 * S), Some(3.0));
        assert_eq!(m.ratio(0, 2 * S), Some(1.0));
        // The whole GPU's time included waits for take-offs: 40 CUs were faster.
        m.record(40, paced(500.0), S);
        assert_eq!(m.ratio(20, 2 * S), Some(6.0));
        assert_eq!(m.ratio(40, 2 * S), Some(1.0));
        assert_eq!(m.ratio(20, MEASURED_FOR_NS + 1), None, "too old");
        m.record(20, Served { packets: 0.0, ..paced(1.0) }, 3 * S);
        assert_eq!(m.ratio(20, 3 * S), Some(6.0), "no packets: no sample");
        // Intervals at one size add up: a second one at 40 CUs of 600 ns makes its mean 550 ns
        // (20 CUs' 3 us now 5.45 x).
        m.record(40, paced(600.0), 3 * S);
        assert_eq!(m.ratio(40, 3 * S), Some(1.0), "still the best");
        let r = m.ratio(20, 3 * S).unwrap();
        assert!((r - 3_000.0 / 550.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn the_size_in_force_follows_the_last_seconds_and_a_change_of_demand_forgets_the_others() {
        let mut m = Sizes::default();
        let at = |rate: f64, per_packet_ns: f64| Served {
            packets: rate,
            busy_ns: rate * per_packet_ns,
            span_ns: 1e9,
        };
        // 20 CUs measured as 2x slower; then 40 CUs stands for a while.
        m.record(20, at(1_000.0, 2_000.0), S);
        m.record(20, at(1_000.0, 2_000.0), 2 * S);
        for t in 3..=20 {
            m.record(40, at(1_000.0, 1_000.0), t * S);
        }
        assert_eq!(m.ratio(20, 20 * S), Some(2.0));
        // Still measured five minutes on: the demand held.
        for t in 21..=320 {
            m.record(40, at(1_000.0, 1_000.0), t * S);
        }
        assert_eq!(m.ratio(20, 320 * S), Some(2.0));
        // A window of the last 10 s: a small change of the packets' time shows within it and
        // does not forget anything.
        for t in 321..=360 {
            m.record(40, at(1_000.0, 1_150.0), t * S);
        }
        let (now40, _) = m.measured[&40];
        assert!((now40.per_packet() - 1_150.0).abs() < 10.0, "{now40:?}");
        let r = m.ratio(20, 360 * S).expect("still measured");
        assert!((r - 2_000.0 / now40.per_packet()).abs() < 1e-9, "{r}");
        // The critical class's packets now take 1.5x as long at the size in force: what 20 CUs
        // measured before no longer compares.
        for t in 361..=400 {
            m.record(40, at(1_000.0, 1_500.0), t * S);
        }
        assert_eq!(m.ratio(20, 400 * S), None, "forgotten");
        assert!(m.ratio(40, 400 * S).is_some());
        assert_eq!(m.ratio(40, MEASURED_FOR_NS + 401 * S), None, "too old");
    }

    #[test]
    fn a_closed_loop_class_is_slowed_by_as_much_as_its_completion_rate_falls() {
        // A server whose requests follow each other: on 60 CUs 1110 packets a second, busy 78 %
        // of the time (its launches, not the GPU, set the pace); on 40 CUs 1040 a second, busy
        // 97 %: each packet takes 1.33 x as long, but the host's time between them hides most of
        // it, and its requests are 1.07 x as long as the rate says.
        let mut m = Sizes::default();
        let at = |packets: f64, busy: f64| Served {
            packets: packets * 2.0,
            busy_ns: busy * 2e9,
            span_ns: 2e9,
        };
        m.record(60, at(1_110.0, 0.78), S);
        m.record(40, at(1_040.0, 0.97), S);
        let r = m.ratio(40, S).unwrap();
        assert!((r - 1_110.0 / 1_040.0).abs() < 1e-9, "{r}");
        // Paced by its requests: the same rate everywhere, so the time per packet says it.
        let mut m = Sizes::default();
        m.record(60, at(500.0, 0.30), S);
        m.record(20, at(495.0, 0.60), S);
        let r = m.ratio(20, S).unwrap();
        assert!((r - (0.60 / 495.0) / (0.30 / 500.0)).abs() < 1e-9, "{r}");
    }

    #[test]
    fn light_critical_work_that_strict_priority_delays_is_tried_on_a_small_reserve() {
        // Busy 15 %, batch queues taken off 100 times a second for it: strict priority costs it
        // 1 + 0.045 / 0.15 = 1.3x (just within), the batch class gets 76 %; 20 CUs, not measured
        // yet, are tried at r = 1: 1.0x, and the batch gets 75 %... only 1 point less: with a
        // 1.25x target strict misses and the trial is made.
        let m = measured(&[]);
        let s = Situation { target_pct: 125, ..situation(0, busy(0.15, 0.9, 100.0), &m) };
        let v = decide(&s);
        assert!(v.change, "{v:?}");
        assert_eq!((v.best.cus, v.best.measured), (40, false), "the middle first: {v:?}");
        assert!(v.gain_ns > 2 * v.cost_ns);
        // 40 measured as good: 20 is tried next (60 serves too, and leaves the batch less).
        let m = measured(&[(40, 1.05)]);
        let s = Situation { target_pct: 125, ..situation(40, busy(0.15, 0.9, 100.0), &m) };
        let v = decide(&s);
        assert!(v.change && v.best.cus == 20 && !v.best.measured, "{v:?}");
        // 40 measured to miss (1.5x): 60 is tried (20 serves no better than 40), expected at
        // 1.17x (2x at 40 would put it at 1.33x, beyond the target: no trial).
        let m = measured(&[(40, 1.5)]);
        let s = Situation { target_pct: 125, ..situation(40, busy(0.15, 0.9, 100.0), &m) };
        let v = decide(&s);
        assert!(v.change && v.best.cus == 60 && !v.best.measured, "{v:?}");
        // Eighths of 80 CUs: 40, then 20 (40 served), then 30 (20 missed at 1.4x: 30 expected
        // at 1.17x; at 2x, 30 would be expected at 1.37x and not tried).
        let eighths = [10, 20, 30, 40, 50, 60, 70];
        let trial = |m: &Sizes, current| {
            let s = Situation {
                target_pct: 125,
                sizes: &eighths,
                ..situation(current, busy(0.15, 0.9, 100.0), m)
            };
            decide(&s).best.cus
        };
        assert_eq!(trial(&measured(&[]), 0), 40);
        assert_eq!(trial(&measured(&[(40, 1.05)]), 40), 20);
        assert_eq!(trial(&measured(&[(40, 1.05), (20, 1.4)]), 20), 30);
        assert_eq!(trial(&measured(&[(40, 1.05), (20, 2.0)]), 20), 40);
        assert_eq!(trial(&measured(&[(40, 1.05), (20, 1.4), (30, 1.1)]), 30), 30, "found");
    }

    #[test]
    fn a_measured_reserve_that_serves_the_critical_class_is_kept_and_one_that_does_not_is_left() {
        // On 20 CUs its packets took as long as on the whole GPU: 20 CUs stay (strict priority
        // was measured taking batch queues off 100 times a second: 1.3x, over 1.25x).
        let m = measured(&[(20, 1.0)]);
        let v = decide(&Situation {
            whole_takeoffs_per_s: 100.0,
            target_pct: 125,
            ..situation(20, busy(0.15, 0.9, 0.0), &m)
        });
        assert!(!v.change, "{v:?}");
        assert_eq!(v.best.cus, 20);
        // Measured 3x there, 40 CUs as good as the whole GPU: back to 40.
        let m = measured(&[(60, 1.0), (40, 1.0), (20, 3.0)]);
        let v = decide(&Situation {
            whole_takeoffs_per_s: 100.0,
            target_pct: 125,
            ..situation(20, busy(0.45, 0.9, 0.0), &m)
        });
        assert!(v.change, "{v:?}");
        assert_eq!(v.best.cus, 40, "{v:?}");
        // Every reserve measured too slow: back to the whole GPU.
        let m = measured(&[(20, 3.0), (40, 2.0), (60, 1.5)]);
        let v = decide(&situation(40, busy(0.6, 0.9, 5.0), &m));
        assert!(v.change, "{v:?}");
        assert_eq!(v.best.cus, 0, "{v:?}");
    }

    #[test]
    fn a_change_is_made_only_when_its_gain_exceeds_its_cost() {
        // Whole GPU, strict priority missing 1.25x, every reserve measured as good: a change to
        // 20 CUs worth 2 s x the critical class's saved time, against 8 unmaps of 450 us.
        let m = measured(&[(60, 1.0), (40, 1.0), (20, 1.0)]);
        let s = Situation { target_pct: 125, ..situation(0, busy(0.15, 0.9, 100.0), &m) };
        let v = decide(&s);
        assert!(v.change && v.best.cus == 20, "{v:?}");
        assert_eq!(v.cost_ns, 8 * 450_000);
        // The same with unmaps 60 times dearer (27 ms; 8 of them 216 ms, twice that 432 ms):
        // the critical class's predicted saving ((1.3 - 1) x 0.15 x 2 s = 90 ms) does not cover
        // it.
        let dear = Situation {
            unmap_ns: 27_000_000,
            whole_takeoffs_per_s: 100.0 * 450.0 / 27_000.0,
            ..s.clone()
        };
        let v = decide(&dear);
        assert_eq!(v.best.cus, 20, "still the best size: {v:?}");
        assert!(!v.change && v.gain_ns <= 2 * v.cost_ns, "{v:?}");
        // A gain below the minimum share change is none, even at no cost: 20 CUs in force
        // (batch 75 %); the whole GPU with 78 take-offs a second would be 1.23x and 78 %.
        let m = measured(&[(20, 1.0)]);
        let free = Situation {
            queues: 0,
            whole_takeoffs_per_s: 78.0,
            target_pct: 125,
            ..situation(20, busy(0.15, 0.9, 0.0), &m)
        };
        let v = decide(&free);
        assert_eq!((v.best.cus, v.cost_ns, v.gain_ns), (0, 0, 0), "{v:?}");
        assert!(!v.change, "{v:?}");
    }

    #[test]
    fn a_server_busy_all_the_time_is_served_by_a_side_where_its_packets_are_not_slower() {
        // Busy 100 % (a steady stream of narrow kernels); measured on 40 CUs as fast as on the
        // whole GPU, on 20 CUs 1.6x: 40 CUs, the batch class gets half the GPU.
        let m = closed_loop(&[(60, 1.0), (40, 1.02), (20, 1.6)]);
        let v = decide(&situation(0, busy(1.0, 0.9, 20.0), &m));
        assert!(v.change && v.best.cus == 40, "{v:?}");
        // Paced by requests and busy 50 % on the whole GPU: on 20 CUs, where its packets take
        // twice as long, it was busy all the time: it cannot be served there even under a 2.5x
        // target.
        let m = paced_at(0.5, &[(60, 1.0), (40, 1.0), (20, 2.0)]);
        let v = decide(&Situation { target_pct: 250, ..situation(0, busy(0.5, 0.9, 20.0), &m) });
        assert_eq!(v.best.cus, 40, "40 CUs, not 20: {v:?}");
        assert!(m.saturated(20, 10 * S) && !m.saturated(40, 10 * S));
    }

    #[test]
    fn a_size_the_measured_ones_around_it_expect_to_miss_is_not_tried() {
        // llm-decode's decode steps: 1.82x on 40 of 80 CUs. 60 is expected at 1.27x (its time
        // scaled with its CUs, between 40 and the whole GPU): beyond a target of 1.2x, no trial;
        // within one of 1.3x, tried (as expected, not measured).
        let m = closed_loop(&[(40, 1.82)]);
        let r = m.expected_ratio(60, 80, 10 * S).expect("40 measured below");
        assert!((r - (1.0 + 0.82 / 3.0)).abs() < 1e-9, "{r}");
        let at =
            |pct| decide(&Situation { target_pct: pct, ..situation(0, busy(1.0, 0.9, 20.0), &m) });
        let v = at(120);
        assert!(!v.change && v.best.cus == 0, "{v:?}");
        let v = at(130);
        assert!(v.change && v.best.cus == 60 && !v.best.measured, "{v:?}");
        assert!((v.best.slowdown - r).abs() < 1e-9, "{v:?}");
        // Between two measured sizes (bert6: 40 at 1.00x, 20 at 1.40x), 30 at 1.13x.
        let m = closed_loop(&[(40, 1.0), (20, 1.4)]);
        let r = m.expected_ratio(30, 80, 10 * S).expect("20 measured below");
        assert!((r - (1.0 + 0.4 / 3.0)).abs() < 1e-9, "{r}");
        // Nothing measured below: only a trial can tell.
        assert_eq!(closed_loop(&[(40, 1.0)]).expected_ratio(20, 80, 10 * S), None);
    }

    #[test]
    fn a_size_the_kernels_widths_expect_to_miss_is_not_tried() {
        // A class that keeps the GPU busy, measured on the whole GPU only (busy `b`), whose
        // dispatches are one kernel filling the GPU in one round (480 work-groups, six to a CU)
        // and one that fits anywhere: 1.5x the rounds on 40 CUs, 2.5x on 20.
        let wide = [8.0, 4.0, 3.0, 2.0, 2.0, 2.0, 2.0, 1.0];
        let rounds: [f64; PARTS] = std::array::from_fn(|i| wide[i] + 1.0);
        let busy_at = |b: f64, rounds: &[f64; PARTS]| {
            let span = MIN_MEASURED_NS as f64;
            let mut m = Sizes::default();
            m.record(0, Served { packets: 1_000.0, busy_ns: b * span, span_ns: span }, 10 * S);
            m.count_rounds(rounds);
            m
        };
        let slo = |m: &Sizes| {
            decide(&Situation {
                target_pct: 120,
                slo: true,
                ..situation(0, busy(0.95, 0.9, 20.0), m)
            })
        };
        // GPU-bound (busy 95 %): 1.43x expected on 40 CUs, 1.43x on 60: no trial.
        let m = busy_at(0.95, &rounds);
        let r = m.expected_ratio(40, 80, 10 * S).expect("rounds counted");
        assert!((r - 0.95 * 1.5).abs() < 1e-9, "{r}");
        let v = slo(&m);
        assert!(!v.change && v.best.cus == 0, "{v:?}");
        // Its host's time between packets hides most of it (busy 70 %): 40 expected at 1.05x,
        // tried; 20 (1.75x) is not.
        let m = busy_at(0.7, &rounds);
        let v = slo(&m);
        assert!(v.change && v.best.cus == 40 && !v.best.measured, "{v:?}");
        assert!((v.best.slowdown - 1.05).abs() < 1e-9, "{v:?}");
        assert!(m.expected_ratio(20, 80, 10 * S).is_some_and(|r| r > 1.2));
        // Kernels that fit in any part: no slowdown expected, the trial as before.
        let v = slo(&busy_at(0.95, &[1.0; PARTS]));
        assert!(v.change && v.best.cus == 40 && (v.best.slowdown - 1.0).abs() < 1e-9, "{v:?}");
        // A paced class's packets take the rounds' ratio itself (its busy time hides nothing).
        let mut m = measured(&[]);
        m.count_rounds(&rounds);
        assert_eq!(m.expected_ratio(40, 80, 10 * S), Some(1.5));
        // A size measured below overrules the widths (20 at 1.1x: 40 interpolated).
        let mut m = closed_loop(&[(20, 1.1)]);
        m.count_rounds(&rounds);
        let r = m.expected_ratio(40, 80, 10 * S).unwrap();
        assert!((r - (1.0 + 0.1 / 3.0)).abs() < 1e-9, "{r}");
        // The rounds counted fade, and a change of the class's work forgets them.
        let mut m = busy_at(0.95, &rounds);
        m.count_rounds(&[0.0; PARTS]);
        assert!((m.rounds[PARTS - 1] - 2.0 * ROUNDS_KEEP).abs() < 1e-9);
        m.forget_figures();
        assert_eq!(m.expected_ratio(40, 80, 10 * S), None);
    }

    #[test]
    fn a_trial_that_clearly_fails_ends_after_a_short_measurement_and_without_the_back_off() {
        // A closed-loop class (busy 95 %): 1000 packets a second on 40 CUs, measured in full;
        // then on 20 CUs 650 a second (1.54x, the target 1.3x).
        let span = MIN_MEASURED_NS as f64;
        let per = |rate: f64, secs: f64| Served {
            packets: rate * secs,
            busy_ns: 0.95 * secs * 1e9,
            span_ns: secs * 1e9,
        };
        let mut m = Sizes { target: 1.3, ..Sizes::default() };
        m.record(40, per(1_000.0, span / 1e9), S);
        m.record(20, per(650.0, 0.2), S);
        assert_eq!(m.ratio(20, S), None, "200 ms measured: nothing yet");
        m.record(20, per(650.0, 0.1), S);
        let r = m.ratio(20, S).expect("300 ms, and beyond the target by CLEAR_MISS: it counts");
        assert!((r - 1_000.0 / 650.0).abs() < 1e-9, "{r}");
        // Beyond the target by GROSS_MISS (2x, the target 1.3x), one trial look counts.
        let mut gross = Sizes { target: 1.3, ..Sizes::default() };
        gross.record(40, per(1_000.0, span / 1e9), S);
        gross.record(20, per(500.0, 0.05), S);
        assert_eq!(gross.ratio(20, S), None, "50 ms measured: nothing yet");
        gross.record(20, per(500.0, 0.05), S);
        let r = gross.ratio(20, S).expect("100 ms, and beyond the target by GROSS_MISS");
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        // Within the target it waits for the whole measurement.
        let mut ok = Sizes { target: 1.3, ..Sizes::default() };
        ok.record(40, per(1_000.0, span / 1e9), S);
        ok.record(20, per(900.0, 1.0), S);
        assert_eq!(ok.ratio(20, S), None);
        ok.record(20, per(900.0, 1.0), S);
        assert!(ok.ratio(20, S).is_some_and(|r| r < 1.3));

        // The sizer looks every 100 ms while a trial is not measured and leaves such a trial
        // 300 ms after its settling interval, although two changes within the minute put the
        // back-off at 4 s.
        let q = |completed: u64, critical: bool| QueueSample {
            key: u64::from(critical),
            critical,
            completed,
            busy_ns: completed * if critical { 950_000 } else { 10_000_000 },
            preemptions: 0,
            rounds: [0; PARTS],
        };
        let look = |t: u64, c: u64| Look {
            at: t * TRIAL_LOOK_NS,
            queues: vec![q(c, true), q(t * 50, false)],
            leader: true,
        };
        let mut sz = Sizer::new(SIZES.to_vec(), 80, 130);
        let (mut t, mut done) = (0, 0);
        let mut step = |sz: &mut Sizer, cus: u32, since: Nanos, rate: u64| {
            t += 1;
            done += rate / 10;
            sz.look(look(t, done), cus, since, Some(450_000))
        };
        // 60 and 40 CUs measured at 1000 a second, then changes to 40 and 20 within the minute.
        step(&mut sz, 60, 10 * S, 1_000);
        for i in 1..=25 {
            step(&mut sz, 60, 10 * S + i * TRIAL_LOOK_NS, 1_000);
        }
        step(&mut sz, 40, 0, 1_000);
        for i in 1..=25 {
            step(&mut sz, 40, i * TRIAL_LOOK_NS, 1_000);
        }
        assert_eq!(sz.look_interval(40, 100 * S), LOOK_NS, "40 CUs measured");
        step(&mut sz, 20, 0, 650);
        assert_eq!(sz.min_interval(), MIN_INTERVAL_NS, "a search going on down: no back-off");
        assert_eq!(sz.look_interval(20, 100 * S), TRIAL_LOOK_NS, "a trial");
        step(&mut sz, 20, TRIAL_LOOK_NS, 650); // settling
        assert_eq!(step(&mut sz, 20, 2 * TRIAL_LOOK_NS, 650), None, "100 ms measured");
        assert_eq!(step(&mut sz, 20, 3 * TRIAL_LOOK_NS, 650), None, "200 ms measured");
        let v = step(&mut sz, 20, 4 * TRIAL_LOOK_NS, 650).expect("300 ms measured: decided");
        assert!(v.now.measured && v.now.slowdown > 1.5, "{v:?}");
        assert!(v.change && v.best.cus != 20 && v.best.slowdown <= 1.3, "{v:?}");
    }

    #[test]
    fn a_size_measured_to_miss_stays_missed_through_a_drift_until_its_hold_ends() {
        // Closed loop: 40 CUs serve (1.05x), 20 miss (1.5x against the target 1.3x).
        let span = MIN_MEASURED_NS as f64;
        let at = |rate: f64| Served { packets: rate * 2.0, busy_ns: 0.95 * span, span_ns: span };
        let mut m = Sizes { target: 1.3, ..Sizes::default() };
        m.record(40, at(1_000.0), S);
        m.record(20, at(666.0), 2 * S);
        m.note(20, 2 * S);
        assert!(m.ratio(20, 2 * S).is_some_and(|r| r > 1.4));
        // The demand drifts at 40 CUs (its rate +50 %): the other sizes' figures are forgotten,
        // the miss is not.
        m.record(40, at(1_000.0), 3 * S);
        m.record(40, at(2_000.0), 3 * S + span as u64);
        m.record(40, at(2_000.0), 3 * S + 2 * span as u64);
        assert!(!m.measured.contains_key(&20), "forgotten by the drift");
        let t = 3 * S + 2 * span as u64;
        assert!(m.ratio(20, t).is_some_and(|r| r > 1.4), "held as missed");
        let v = decide(&Situation { now: t, ..situation(40, busy(0.95, 0.9, 200.0), &m) });
        assert!(!v.change, "no trial of 20 CUs while its miss holds: {v:?}");
        // The hold ends after MISS_HOLD_NS; a second miss holds twice as long.
        assert_eq!(m.ratio(20, 2 * S + MISS_HOLD_NS), None);
        let again = 2 * S + MISS_HOLD_NS;
        m.record(20, at(600.0), again);
        m.record(20, at(600.0), again + span as u64);
        m.note(20, again + span as u64);
        let held = m.missed[&20];
        assert_eq!((held.until, held.times), (again + span as u64 + 2 * MISS_HOLD_NS, 2), "2x");
        m.measured.clear();
        assert!(m.ratio(20, again + span as u64 + 2 * MISS_HOLD_NS - 1).is_some());
        assert_eq!(m.ratio(20, again + span as u64 + 2 * MISS_HOLD_NS), None);
        // A full measurement within the target ends the hold and forgets the misses.
        let mut ok = Sizes { target: 1.3, ..Sizes::default() };
        ok.record(40, at(1_000.0), S);
        ok.record(20, at(650.0), 2 * S);
        ok.note(20, 2 * S);
        assert!(ok.missed.contains_key(&20));
        ok.record(20, at(950.0), 3 * S);
        ok.record(20, at(950.0), 4 * S);
        ok.note(20, 4 * S);
        assert!(!ok.missed.contains_key(&20), "{:?}", ok.missed);
    }

    #[test]
    fn under_the_slo_policy_only_a_class_that_keeps_the_gpu_busy_is_tried_on_a_reserve() {
        // Light paced work that strict priority's take-offs delay (1.3x predicted): tried on a
        // reserve under strict priority, left to the SLO's time sharing under the SLO.
        let m = measured(&[]);
        let paced = Situation { target_pct: 120, ..situation(0, busy(0.15, 0.9, 100.0), &m) };
        assert!(decide(&paced).change);
        let v = decide(&Situation { slo: true, ..paced });
        assert!(!v.change && v.best.cus == 0, "{v:?}");
        // A server busy all the time (closed loop): its trial is made under the SLO too.
        let m = closed_loop(&[]);
        let busy_class =
            Situation { target_pct: 120, slo: true, ..situation(0, busy(0.95, 0.9, 100.0), &m) };
        let v = decide(&busy_class);
        assert!(v.change && v.best.cus == 40 && !v.best.measured, "{v:?}");
    }

    #[test]
    fn under_the_slo_a_class_busy_in_bursts_is_tried_at_most_in_its_first_burst() {
        // A server whose requests arrive every 16 s and keep it busy 5 s each (decode steps
        // back to back, packets of ~300 us), beside a batch queue flat out: every size's own
        // window (a few seconds) sees it busy all the time, its cycles show it busy 31 %. The
        // sizer's changes are applied (the split follows its verdicts), and the critical class
        // completes nothing in the settling look after each (its queue moving: no idle period).
        let q = |key, critical, completed, busy_ns| QueueSample {
            key,
            critical,
            completed,
            busy_ns,
            preemptions: 0,
            rounds: [0; PARTS],
        };
        let run = |bursty: bool| {
            let mut sz = Sizer::new(SIZES.to_vec(), 80, 120);
            sz.follow(Sharing::Slo { target_pct: 120 });
            let (mut done, mut busy, mut changes) = (0, 0, Vec::new());
            let (mut current, mut since) = (0, 10 * LOOK_NS);
            for t in 0..240 {
                let moving = changes.last().is_some_and(|&(c, _)| c + 2 == t);
                if (!bursty || t % 32 < 10) && !moving {
                    done += 1_600;
                    busy += LOOK_NS * 98 / 100;
                }
                let look = Look {
                    at: t * LOOK_NS,
                    queues: vec![q(1, true, done, busy), q(2, false, 10 * t, t * LOOK_NS)],
                    leader: true,
                };
                let v = sz.look(look, current, since, Some(450_000));
                since += LOOK_NS;
                if let Some(v) = v.filter(|v| v.change) {
                    changes.push((t, v.best.cus));
                    (current, since) = (v.best.cus, 0);
                }
            }
            (sz, changes, current)
        };
        // Busy at every look for the stretch, the server is taken for a steady one and tried
        // on a reserve in its first burst; once idle, its pattern is unknown until its cycles
        // are seen, and the whole GPU comes back; from its second burst on no size is tried.
        let (sz, changes, current) = run(true);
        assert!(changes.first().is_some_and(|&(t, c)| t < 10 && c > 0), "{changes:?}");
        assert!(changes.iter().all(|&(t, c)| t < 32 || c == 0), "{changes:?}");
        assert_eq!(current, 0, "{changes:?}");
        let duty = sz.measured.duty.fraction().expect("two cycles seen");
        assert!((0.25..0.4).contains(&duty), "{duty}");
        assert_eq!(sz.demand.map(|d| d.critical_busy), Some(duty), "the demand is the duty");
        // The same server under steady load: tried on a reserve once busy at every look for the
        // stretch, not before; the search goes on within seconds (its queue's moves are no idle
        // periods) and ends on a reserve.
        let (_, changes, current) = run(false);
        let first = changes.first().copied();
        assert_eq!(first, Some((BUSY_STRETCH_NS / LOOK_NS, 40)), "{changes:?}");
        assert!(changes.get(1).is_some_and(|&(t, c)| t < 20 && c == 20), "{changes:?}");
        assert!(current > 0, "{changes:?}");
    }

    #[test]
    fn the_critical_class_own_work_is_seen_to_change_only_alone_on_the_whole_gpu() {
        let d = |packet_ns: f64, batch: f64, takeoffs: f64| Demand {
            critical_busy: 0.98,
            critical_packet_ns: packet_ns,
            critical_packets: 1_000.0,
            batch_busy: batch,
            takeoffs_per_s: takeoffs,
            critical_rounds: [0.0; PARTS],
        };
        let changed = |steps: &[(Demand, u32)]| {
            let mut last = None;
            steps.iter().map(|(d, c)| Sizer::own_work_changed(&mut last, d, *c)).collect::<Vec<_>>()
        };
        // Alone, the same work from look to look: no change; 3x: a change.
        let alone = |ns| (d(ns, 0.0, 0.0), 0);
        assert_eq!(changed(&[alone(300e3), alone(320e3), alone(900e3)]), [false, false, true]);
        // Beside take-offs the time per packet moves with their waits.
        let beside = |ns, batch, takeoffs| (d(ns, batch, takeoffs), 0);
        assert_eq!(changed(&[alone(300e3), beside(3e6, 0.0, 4.0)]), [false, false]);
        assert_eq!(changed(&[alone(300e3), beside(3e6, 1.0, 8.0)]), [false, false]);
        let contended = |ns| beside(ns, 1.0, 0.0);
        assert_eq!(
            changed(&[contended(2.9e6), beside(700e3, 1.0, 6.0), contended(700e3)]),
            [false, false, false],
            "a take-off in the interval before: not compared"
        );
        // ...but alone after it, the class's figures are its own again: a change.
        assert_eq!(changed(&[beside(3e6, 1.0, 8.0), alone(300e3)]), [false, true]);
        // Beside batch work that stays on the GPU in both intervals, its figures are its work's
        // with the same contention: a prefill's packets then decode steps are a change, the
        // same steps from look to look are not.
        assert_eq!(
            changed(&[contended(2.9e6), contended(660e3), contended(700e3), alone(300e3)]),
            [false, true, false, true]
        );
        // On a reserve the time per packet moves with the size; nor does a look on a reserve
        // count as the one before.
        assert_eq!(changed(&[(d(300e3, 0.0, 0.0), 40), (d(900e3, 0.0, 0.0), 40)]), [false, false]);
        assert_eq!(changed(&[(d(900e3, 0.0, 0.0), 40), alone(300e3)]), [false, false]);
        // Too few packets measure nothing.
        let few = Demand { critical_packets: 3.0, ..d(5e6, 0.0, 0.0) };
        assert_eq!(changed(&[alone(300e3), (few, 0), alone(900e3)]), [false, false, false]);
    }

    #[test]
    fn a_change_of_the_critical_class_own_work_is_measured_afresh_before_a_trial() {
        // An LLM server starting with a backlog: a prefill (packets of 2.8 ms, the batch class
        // beside it), then decode steps back to back (0.3 ms, the batch class off), 1.8x as long
        // on 40 CUs. Judged against the whole GPU's figures over both, 40 CUs looked to serve
        // (the prefill's slow packets in the reference) and stood for the rest of the burst.
        // The same with the training beside the decode steps on the whole GPU, never taken off
        // (llm-decode's fourth run of the seventeenth session).
        let q = |key, critical, completed, busy_ns, preemptions| QueueSample {
            key,
            critical,
            completed,
            busy_ns,
            preemptions,
            rounds: [0; PARTS],
        };
        for beside_decode in [false, true] {
            let mut sz = Sizer::new(SIZES.to_vec(), 80, 120);
            sz.follow(Sharing::Slo { target_pct: 120 });
            let (mut done, mut busy, mut batch_done, mut batch_busy) = (0u64, 0u64, 0u64, 0u64);
            let (mut current, mut since, mut changes) = (0u32, 10 * LOOK_NS, Vec::new());
            let mut t = 0;
            let mut at = 0;
            while t < 40 {
                let prefill = t < 4;
                let step = sz.look_interval(current, at);
                at += step;
                let packet = if prefill {
                    2_800_000
                } else if current == 0 {
                    300_000
                } else {
                    540_000
                };
                done += step * 98 / 100 / packet;
                busy += step * 98 / 100;
                if prefill || current != 0 || beside_decode {
                    // Beside the prefill, and on its side of a reserve, the batch class works (and,
                    // in the second run, beside the decode steps on the whole GPU too, never taken
                    // off).
                    batch_done += 10;
                    batch_busy += step / 2;
                }
                let look = Look {
                    at,
                    queues: vec![q(1, true, done, busy, 0), q(2, false, batch_done, batch_busy, 0)],
                    leader: true,
                };
                let v = sz.look(look, current, since, Some(450_000));
                since += step;
                if let Some(v) = v.filter(|v| v.change) {
                    changes.push((t, at, v.best.cus));
                    (current, since) = (v.best.cus, 0);
                }
                t += 1;
            }
            // The stretch (2 s) is reached at the decode's first looks, but the decode's figures on
            // the whole GPU are measured in full first; the trial on 40 CUs then ends as a miss.
            let decode_from = 4 * LOOK_NS;
            let first = changes.first().copied().expect("a trial");
            assert!(first.1 >= decode_from + MIN_MEASURED_NS, "{changes:?}");
            assert_eq!(first.2, 40, "{changes:?}");
            let back = changes.get(1).copied().expect("the trial ends");
            assert_eq!(back.2, 0, "{changes:?}");
            assert!(back.1 - first.1 <= 2 * LOOK_NS, "a clear miss ends early: {changes:?}");
            assert!(sz.measured.ratio(40, back.1).is_some_and(|r| r > 1.5), "{changes:?}");
        }
    }

    #[test]
    fn a_measured_reserve_is_chosen_only_for_a_class_whose_pattern_is_known_and_its_own() {
        // 40 CUs measured to serve (paced, 1.05x), 20 to miss; the whole GPU misses the target
        // (200 take-offs a second): 40 is the choice once the class's pattern is known.
        let m = measured(&[(40, 1.05), (20, 2.0)]);
        let known = situation(0, busy(0.1, 0.9, 200.0), &m);
        let v = decide(&known);
        assert!(v.change && v.best.cus == 40 && v.best.measured, "{v:?}");
        // A burst (its pattern not known: llm-decode's third request, the reserve measured in
        // its first) is not moved to it; a class paced by its requests is the SLO's to serve.
        let burst = Situation { pattern_known: false, ..known.clone() };
        let v = decide(&burst);
        assert!(!v.change && v.best.cus == 0, "{v:?}");
        let v = decide(&Situation { slo: true, ..known.clone() });
        assert!(!v.change && v.best.cus == 0, "{v:?}");
        // A reserve in force that serves stays (moving costs unmaps), and the way back to the
        // whole GPU is always open.
        let v = decide(&Situation { current: 40, ..burst.clone() });
        assert!(!v.change && v.best.cus == 40, "{v:?}");
        let calm = situation(40, busy(0.1, 0.9, 0.0), &m);
        let v = decide(&Situation { pattern_known: false, slo: true, ..calm });
        assert!(v.change && v.best.cus == 0, "{v:?}");
    }

    #[test]
    fn no_reserve_is_tried_before_the_whole_gpu_is_measured_in_full() {
        // A class that keeps the GPU busy, the whole GPU measured for 1 s only: a trial now
        // would be compared with itself alone (its own rate the best measured) and serve.
        let mut m = Sizes::default();
        let s = MIN_MEASURED_NS as f64 / 2.0;
        m.record(0, Served { packets: 1_000.0, busy_ns: 0.95 * s, span_ns: s }, 10 * S);
        let v = decide(&situation(0, busy(0.95, 0.9, 100.0), &m));
        assert!(!v.change, "{v:?}");
        // Measured in full: the trial comes.
        m.record(0, Served { packets: 1_000.0, busy_ns: 0.95 * s, span_ns: s }, 10 * S);
        let v = decide(&situation(0, busy(0.95, 0.9, 100.0), &m));
        assert!(v.change && v.best.cus == 40 && !v.best.measured, "{v:?}");
    }

    #[test]
    fn a_size_larger_than_one_measured_to_serve_is_not_tried() {
        // 40 CUs measured to serve (paced, 1.05x) and in force, the whole GPU missing the target
        // (200 take-offs a second); 60 forgotten (not measured), 20 not measured either: the
        // next trial is 20, never 60.
        let m = measured(&[(40, 1.05)]);
        let v = decide(&situation(40, busy(0.1, 0.9, 200.0), &m));
        assert!(v.change && v.best.cus == 20 && !v.best.measured, "{v:?}");
        let m = measured(&[(40, 1.05), (20, 2.0)]);
        let v = decide(&situation(40, busy(0.1, 0.9, 200.0), &m));
        assert!(!v.change && v.best.cus == 40, "40 is the best, 60 is not explored: {v:?}");
    }

    #[test]
    fn without_batch_work_nothing_is_worth_a_change() {
        let m = measured(&[(20, 1.0)]);
        let v = decide(&situation(0, busy(0.15, 0.0, 0.0), &m));
        assert!(!v.change, "{v:?}");
        let v = decide(&situation(20, busy(0.15, 0.0, 0.0), &m));
        assert!(!v.change, "a reserve in force that serves stays: {v:?}");
    }

    #[test]
    fn a_critical_class_that_cannot_keep_up_on_its_reserve_gets_the_whole_gpu_back() {
        // Busy 45 % of the time on the whole GPU, all the time on 20 CUs where its packets
        // take 2.2x as long: it cannot keep up there.
        let m = paced_at(0.45, &[(20, 2.2)]);
        let v = decide(&situation(20, busy(0.8, 0.9, 0.0), &m));
        assert!(v.change, "{v:?}");
        assert_eq!(v.best.cus, 0, "{v:?}");
    }

    #[test]
    fn the_sizer_measures_each_size_between_looks_and_decides_after_the_interval() {
        let q = |completed: u64, packet_ns: u64, critical, preemptions| QueueSample {
            key: if critical { 1 } else { 2 },
            critical,
            completed,
            busy_ns: completed * packet_ns,
            preemptions,
            rounds: [0; PARTS],
        };
        // The critical queue completes 150 packets of 1 ms a second (15 %); the batch queue is
        // taken off 100 times a second.
        let look = |t: u64| Look {
            at: t * LOOK_NS,
            queues: vec![q(75 * t, 1_000_000, true, 0), q(10 * t, 45_000_000, false, 50 * t)],
            leader: true,
        };
        let mut sz = Sizer::new(SIZES.to_vec(), 80, 125);
        assert_eq!(sz.look(look(1), 0, 0, Some(450_000)), None, "the first look measures nothing");
        assert_eq!(sz.look(look(2), 0, LOOK_NS, Some(450_000)), None, "too soon after a change");
        let v = sz.look(look(6), 0, 10 * LOOK_NS, Some(450_000)).unwrap();
        assert!((sz.whole_takeoffs_per_s - 75.0).abs() < 1.0, "{}", sz.whole_takeoffs_per_s);
        // Strict priority: 1 + 75 x 450 us / 0.15 = 1.23x, within 1.25x, and the batch class
        // gets 78 %, more than any reserve would leave it: kept. A tighter target makes strict
        // priority miss, and 20 CUs are tried.
        assert!(!v.change && v.best.cus == 0 && v.now.slowdown < 1.25, "{v:?}");
        let mut sz = Sizer::new(SIZES.to_vec(), 80, 110);
        sz.look(look(1), 0, 0, Some(450_000));
        // No trial before the critical class's pattern is known: busy at every look (15 %) for
        // BUSY_STRETCH_NS, it is not a burst.
        let w = BUSY_STRETCH_NS / LOOK_NS;
        for t in 2..=w {
            let v = sz.look(look(t), 0, 10 * LOOK_NS, Some(450_000)).unwrap();
            assert!(!v.change && !sz.measured.duty.known(), "look {t}: {v:?}");
        }
        let v = sz.look(look(w + 1), 0, 10 * LOOK_NS, Some(450_000)).unwrap();
        assert!(v.change && v.best.cus == 40 && !v.best.measured, "the middle size: {v:?}");
        // A change between two looks measures nothing, nor does the interval after it; the
        // next one does (at 60 CUs here: another process led and chose so).
        assert_eq!(sz.look(look(w + 2), 60, 0, Some(450_000)), None);
        sz.look(look(w + 3), 60, LOOK_NS, Some(450_000));
        assert_eq!(sz.measured.ratio(60, look(w + 3).at), None);
        // The trial is measured for MIN_MEASURED_NS before its figures count, and stands
        // until then even after the minimum interval between changes.
        for t in w + 4..w + 7 {
            let v = sz.look(look(t), 60, (t - w - 2) * LOOK_NS, Some(450_000));
            assert_eq!(v, None, "look {t}: the trial is not measured yet");
            assert_eq!(sz.measured.ratio(60, look(t).at), None, "look {t}");
        }
        assert!(look(w + 6).at - look(w + 2).at >= MIN_INTERVAL_NS);
        sz.look(look(w + 7), 60, 5 * LOOK_NS, Some(450_000));
        assert_eq!(sz.measured.ratio(60, look(w + 7).at), Some(1.0));
        // Each reversal within a minute doubles the interval before the next; a search that
        // goes on down the sizes does not.
        assert_eq!(sz.min_interval(), MIN_INTERVAL_NS, "one change so far");
        sz.look(look(w + 8), 40, 2 * LOOK_NS, Some(450_000));
        assert_eq!(sz.min_interval(), MIN_INTERVAL_NS, "0 -> 60 -> 40: on down");
        sz.look(look(w + 9), 60, 0, Some(450_000));
        assert_eq!(sz.min_interval(), 2 * MIN_INTERVAL_NS, "40 -> 60: back up");
        sz.look(look(w + 10), 40, 0, Some(450_000));
        assert_eq!(sz.min_interval(), 4 * MIN_INTERVAL_NS, "60 -> 40: down again");
        sz.look(look(w + 11), 0, 0, Some(450_000));
        assert_eq!(sz.min_interval(), 8 * MIN_INTERVAL_NS, "40 -> the whole GPU: up again");
        let later = |t: u64| Look { at: t * LOOK_NS + BACKOFF_WINDOW_NS, ..look(t) };
        sz.look(later(w + 12), 0, BACKOFF_WINDOW_NS, Some(450_000));
        sz.look(later(w + 13), 0, BACKOFF_WINDOW_NS, Some(450_000));
        assert_eq!(sz.min_interval(), MIN_INTERVAL_NS, "a quiet minute forgets them");
        // A process that does not lead measures and never decides.
        let mut follower = Sizer::new(SIZES.to_vec(), 80, 110);
        let not_leading = |t| Look { leader: false, ..look(t) };
        follower.look(not_leading(1), 0, 0, Some(450_000));
        assert_eq!(follower.look(not_leading(2), 0, 10 * LOOK_NS, Some(450_000)), None);
        assert!(follower.measured.ratio(0, look(2).at).is_some());
    }
}
