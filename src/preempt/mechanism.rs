//! The two ways a process takes its own hardware queues off the GPU through KFD, behind one
//! interface, and the choice between them.
//!
//! - **Deactivate** (`XHSA_PREEMPT=queue`): `AMDKFD_IOC_UPDATE_QUEUE` with queue percentage 0
//!   (ring, size and priority unchanged), and back with the queue's percentage. On an HWS device
//!   KFD unmaps every dynamic queue of the device (CWSR saves the running waves), and maps the
//!   active ones again: the deactivated queue's waves stay saved until it is reactivated. No
//!   debug mode is needed. One call per queue.
//! - **Suspend** (`XHSA_PREEMPT=suspend`): `DBG_TRAP SUSPEND_QUEUES` / `RESUME_QUEUES` on this
//!   process (debug trap enabled on itself once; KFD allows that without ptrace). One call for
//!   any number of queues. KFD refuses a queue it still flags new, per queue, in the array it
//!   hands back; such a queue is simply not preempted this time. A suspended queue cannot be
//!   destroyed until it is resumed (KFD blocks the destroy), so the queue's owner puts it back
//!   first ([`super::watcher::Preemption::forget`]).
//! - **Auto** (the default) deactivates. Both mechanisms cost the same device-wide unmap on an
//!   HWS GPU (both measured and logged when used); what decides is what else each does, read in
//!   amdkfd and ROCr (docs/kfd-preemption-facts.md): suspend needs the runtime enabled, which ROCr
//!   5.2 never does on an upstream kernel; a self-enabled debug trap excludes rocgdb (and ROCr's
//!   own GPU core dump) for the process's life; and ROCr 6.x's `hsa_shut_down` blocks while the
//!   debug trap is enabled. Deactivation has none of these. If deactivation is refused, auto
//!   tries suspend.
//!
//! A call that fails (not a per-queue refusal) disables preemption for the process: libxhsa
//! logs once and goes on at level 1. Queues already taken off are put back (retried until it
//! works). The KFD calls themselves are behind [`KfdPort`] (the edge implements it over the
//! runtime's `/dev/kfd` descriptor; the tests use a fake).
#![forbid(unsafe_code)]

use super::budget::Cost;
use super::settings::PreemptMode;
use xhsa_model::ids::QueueId;

/// What a KFD call failed with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KfdFailure(pub String);

/// One queue as KFD knows it (what `UPDATE_QUEUE` needs besides its id).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// libxhsa's queue.
    pub queue: QueueId,
    /// KFD's queue id.
    pub kfd_id: u32,
    /// Ring base address and size in bytes, as created.
    pub ring_base: u64,
    pub ring_bytes: u32,
    /// KFD priority (0..=15) and queue percentage the runtime last gave it.
    pub priority: u32,
    pub percentage: u32,
}

/// One queue of KFD's queue snapshot (`DBG_TRAP GET_QUEUE_SNAPSHOT`): what finds a hardware
/// queue's KFD id by its ring when the runtime's `CREATE_QUEUE` was not seen.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotQueue {
    pub kfd_id: u32,
    pub ring_base: u64,
    /// Ring size in bytes, as the runtime created it.
    pub ring_bytes: u32,
    pub gpu_id: u32,
    /// `KFD_IOC_QUEUE_TYPE_*`.
    pub queue_type: u32,
}

/// The KFD calls the mechanisms make.
pub trait KfdPort: Send {
    /// `UPDATE_QUEUE` of `t` with `percentage` (its ring and priority unchanged).
    fn update_queue(&mut self, t: &Target, percentage: u32) -> Result<(), KfdFailure>;
    /// `DBG_TRAP ENABLE` on this process (once).
    fn enable_debug_trap(&mut self) -> Result<(), KfdFailure>;
    /// `DBG_TRAP DISABLE` on this process: KFD resumes every queue it suspended. The runtime
    /// must never be left with the trap on when it shuts down: with it on, KFD's runtime-disable
    /// blocks (ROCr 6.x shutdown hangs).
    fn disable_debug_trap(&mut self) -> Result<(), KfdFailure>;
    /// `DBG_TRAP SUSPEND_QUEUES` (grace period 0) of `ids`; KFD marks refused ids in place.
    fn suspend(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure>;
    /// `DBG_TRAP RESUME_QUEUES` of `ids`.
    fn resume(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure>;
    /// Clears the "new queue" exception KFD sets on every queue it creates and until which it
    /// refuses to suspend the queue (`GET_QUEUE_SNAPSHOT` with `EC_QUEUE_NEW` in the clear mask).
    fn clear_new(&mut self) -> Result<(), KfdFailure>;
    /// This process's KFD queues (`DBG_TRAP GET_QUEUE_SNAPSHOT`, inside a debug-trap session of
    /// its own if none is on).
    fn queue_snapshot(&mut self) -> Result<Vec<SnapshotQueue>, KfdFailure> {
        Err(KfdFailure("KFD's queue snapshot is not available".into()))
    }
    /// Nanoseconds on a monotonic clock (the calls' costs are measured with it).
    fn now(&self) -> u64;
}

/// The port of a process whose KFD queues libxhsa cannot reach (preemption off, or the runtime's
/// KFD descriptor unknown): every call fails, so nothing is ever taken off.
#[derive(Copy, Clone, Debug, Default)]
pub struct NoKfd;

impl KfdPort for NoKfd {
    fn update_queue(&mut self, _: &Target, _: u32) -> Result<(), KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn enable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn disable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn suspend(&mut self, _: &mut [u32]) -> Result<u32, KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn resume(&mut self, _: &mut [u32]) -> Result<u32, KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn clear_new(&mut self) -> Result<(), KfdFailure> {
        Err(KfdFailure("no KFD access for this process's queues".into()))
    }
    fn now(&self) -> u64 {
        0
    }
}

/// How a queue was taken off.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum How {
    Deactivate,
    Suspend,
}

impl How {
    /// The name used in logs and settings.
    pub fn name(self) -> &'static str {
        match self {
            How::Deactivate => "queue deactivation (UPDATE_QUEUE percentage 0)",
            How::Suspend => "debug-trap suspend (DBG_TRAP SUSPEND_QUEUES)",
        }
    }
}

/// KFD's "queue id invalid" bit in a suspend/resume array (no such queue, new, or destroyed).
const INVALID_MASK: u32 = xhsa_ioctl::abi::debug::KFD_DBG_QUEUE_INVALID_MASK;
/// KFD's "queue error" bit.
const ERROR_MASK: u32 = xhsa_ioctl::abi::debug::KFD_DBG_QUEUE_ERROR_MASK;

/// What taking queues off did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakenOff {
    /// The queues now off the GPU, and how.
    pub queues: Vec<(QueueId, How)>,
    /// Duration of the KFD calls, nanoseconds.
    pub ns: u64,
}

/// The mechanisms and their measured costs; see the module doc.
pub struct Mechanisms {
    port: Box<dyn KfdPort>,
    mode: PreemptMode,
    /// `Some(true)` once debug trap is enabled, `Some(false)` if that failed.
    debug: Option<bool>,
    /// Measured cost of taking off and of putting back, per mechanism.
    off: [Cost; 2],
    back: [Cost; 2],
    /// A call failed: no more preemption.
    broken: Option<String>,
    /// Auto: deactivation was refused, suspend is tried instead.
    deactivate_refused: bool,
}

fn idx(h: How) -> usize {
    match h {
        How::Deactivate => 0,
        How::Suspend => 1,
    }
}

impl Mechanisms {
    /// Mechanisms over `port` in `mode` (`Off` never takes anything off).
    pub fn new(port: Box<dyn KfdPort>, mode: PreemptMode) -> Mechanisms {
        Mechanisms {
            port,
            mode,
            debug: None,
            off: Default::default(),
            back: Default::default(),
            broken: None,
            deactivate_refused: false,
        }
    }

    /// Why preemption stopped, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Whether queues may be taken off at all.
    pub fn usable(&self) -> bool {
        self.mode != PreemptMode::Off && self.broken.is_none()
    }

    /// The measured cost of taking a queue off with the mechanism the next preemption would
    /// use (`None` until measured).
    pub fn expected_cost(&self) -> Option<u64> {
        self.choose().and_then(|h| self.off[idx(h)].get())
    }

    /// The measured costs: (mechanism, taking off, putting back, samples).
    pub fn costs(&self) -> Vec<(How, Option<u64>, Option<u64>, u32)> {
        [How::Deactivate, How::Suspend]
            .iter()
            .map(|&h| {
                (h, self.off[idx(h)].get(), self.back[idx(h)].get(), self.off[idx(h)].samples())
            })
            .collect()
    }

    fn suspend_possible(&self) -> bool {
        self.debug != Some(false)
    }

    /// Whether this process's debug trap is on (libxhsa enabled it to suspend queues).
    pub fn debug_trap_on(&self) -> bool {
        self.debug == Some(true)
    }

    /// Turns this process's debug trap off if libxhsa turned it on (KFD resumes whatever is still
    /// suspended); a later suspend enables it again. `Err` if KFD refused (the caller logs it).
    pub fn disable_debug_trap(&mut self) -> Result<(), String> {
        if self.debug != Some(true) {
            return Ok(());
        }
        match self.port.disable_debug_trap() {
            Ok(()) => {
                self.debug = None;
                Ok(())
            }
            Err(e) => Err(format!("disabling the debug trap failed: {}", e.0)),
        }
    }

    /// The mechanism the next preemption uses.
    pub fn choose(&self) -> Option<How> {
        if !self.usable() {
            return None;
        }
        match self.mode {
            PreemptMode::Off => None,
            PreemptMode::Queue => Some(How::Deactivate),
            PreemptMode::Suspend => self.suspend_possible().then_some(How::Suspend),
            PreemptMode::Auto => Some(if self.deactivate_refused && self.suspend_possible() {
                How::Suspend
            } else {
                How::Deactivate
            }),
        }
    }

    fn fail(&mut self, how: How, what: &str, e: KfdFailure) -> String {
        let why = format!("{} failed while {what}: {}", how.name(), e.0);
        if self.broken.is_none() {
            self.broken = Some(why.clone());
        }
        why
    }

    /// Takes `targets` off the GPU. Queues KFD refused (per queue) are left running and not
    /// listed. On a failed call preemption stops ([`Mechanisms::broken`]) and the error is
    /// returned with whatever was taken off before it (which the caller must put back).
    pub fn take_off(&mut self, targets: &[Target]) -> Result<TakenOff, (String, TakenOff)> {
        let mut out = TakenOff::default();
        let Some(how) = self.choose() else { return Ok(out) };
        if targets.is_empty() {
            return Ok(out);
        }
        match how {
            How::Deactivate => {
                for t in targets {
                    let start = self.port.now();
                    let r = self.port.update_queue(t, 0);
                    let ns = self.port.now().saturating_sub(start);
                    out.ns += ns;
                    match r {
                        Ok(()) => {
                            self.off[idx(how)].record(ns);
                            out.queues.push((t.queue, how));
                        }
                        Err(e)
                            if self.mode == PreemptMode::Auto
                                && out.queues.is_empty()
                                && !self.deactivate_refused =>
                        {
                            tracing::info!("xhsa: KFD refused to deactivate a queue ({}); trying debug-trap suspend", e.0);
                            self.deactivate_refused = true;
                            return self.take_off(targets);
                        }
                        Err(e) => return Err((self.fail(how, "taking a queue off", e), out)),
                    }
                }
            }
            How::Suspend => {
                if self.debug.is_none() {
                    let r = self.port.enable_debug_trap();
                    self.debug = Some(r.is_ok());
                    if let Err(e) = r {
                        return Err((self.fail(how, "enabling debug trap", e), out));
                    }
                }
                // KFD refuses queues still flagged new: the first refusal clears the flag on every
                // queue of the process and the refused ones are asked again, once.
                let mut left: Vec<Target> = targets.to_vec();
                for attempt in 0..2 {
                    let mut ids: Vec<u32> = left.iter().map(|t| t.kfd_id).collect();
                    let start = self.port.now();
                    let r = self.port.suspend(&mut ids);
                    let ns = self.port.now().saturating_sub(start);
                    out.ns += ns;
                    let mut refused = Vec::new();
                    match r {
                        Ok(_) => {
                            self.off[idx(how)].record(ns);
                            for (t, slot) in left.iter().zip(&ids) {
                                if slot & ERROR_MASK != 0 {
                                    // The unmap failed (KFD reports it per queue, not as an errno);
                                    // KFD still counts the queue suspended: it must be resumed.
                                    out.queues.push((t.queue, how));
                                    let e = KfdFailure(format!("KFD reported a failed preemption of queue {} (status {slot:#x})", t.kfd_id));
                                    return Err((self.fail(how, "suspending queues", e), out));
                                } else if slot & INVALID_MASK != 0 {
                                    refused.push(*t);
                                } else {
                                    out.queues.push((t.queue, how));
                                }
                            }
                        }
                        Err(e) => return Err((self.fail(how, "suspending queues", e), out)),
                    }
                    if refused.is_empty() || attempt == 1 {
                        for t in &refused {
                            tracing::debug!(
                                "xhsa: KFD did not suspend queue {} (new or being destroyed)",
                                t.kfd_id
                            );
                        }
                        break;
                    }
                    if let Err(e) = self.port.clear_new() {
                        tracing::debug!("xhsa: clearing KFD's new-queue flags failed: {}", e.0);
                        break;
                    }
                    left = refused;
                }
            }
        }
        Ok(out)
    }

    /// This process's KFD queues, from KFD's queue snapshot.
    pub fn queue_snapshot(&mut self) -> Result<Vec<SnapshotQueue>, KfdFailure> {
        self.port.queue_snapshot()
    }

    /// Deactivates `t` again, which is off by deactivation but which the runtime's own
    /// `UPDATE_QUEUE` (a priority change libxhsa could not intercept) put back on.
    pub fn keep_off(&mut self, t: &Target) -> Result<(), String> {
        self.port
            .update_queue(t, 0)
            .map_err(|e| self.fail(How::Deactivate, "keeping a queue off", e))
    }

    /// Puts `targets` back the way each was taken off. Returns the duration of the calls, or
    /// the error (the caller retries later: a queue is never left off the GPU on purpose).
    pub fn put_back(&mut self, targets: &[(Target, How)]) -> Result<u64, String> {
        let mut ns_total = 0;
        let mut first_error = None;
        let suspended: Vec<&Target> =
            targets.iter().filter(|(_, h)| *h == How::Suspend).map(|(t, _)| t).collect();
        if !suspended.is_empty() {
            let mut ids: Vec<u32> = suspended.iter().map(|t| t.kfd_id).collect();
            let start = self.port.now();
            let r = self.port.resume(&mut ids);
            let ns = self.port.now().saturating_sub(start);
            ns_total += ns;
            match r {
                Ok(_) => self.back[idx(How::Suspend)].record(ns),
                Err(e) => first_error = Some(self.fail(How::Suspend, "resuming queues", e)),
            }
        }
        for (t, _) in targets.iter().filter(|(_, h)| *h == How::Deactivate) {
            let start = self.port.now();
            let r = self.port.update_queue(t, t.percentage.max(1));
            let ns = self.port.now().saturating_sub(start);
            ns_total += ns;
            match r {
                Ok(()) => self.back[idx(How::Deactivate)].record(ns),
                Err(e) => {
                    let why = self.fail(How::Deactivate, "putting a queue back", e);
                    first_error.get_or_insert(why);
                }
            }
        }
        match first_error {
            None => Ok(ns_total),
            Some(e) => Err(e),
        }
    }
}

impl std::fmt::Debug for Mechanisms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mechanisms")
            .field("mode", &self.mode)
            .field("debug", &self.debug)
            .field("broken", &self.broken)
            .finish()
    }
}

#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A KFD that records calls; `fail_*` make calls fail, `refuse` marks ids refused.
    #[derive(Clone, Default)]
    pub struct FakeKfd {
        pub log: Arc<Mutex<Vec<String>>>,
        pub clock: Arc<Mutex<u64>>,
        pub cost_ns: u64,
        pub fail_debug: bool,
        pub fail_suspend: bool,
        pub fail_update: bool,
        /// While `Some(n)`: `n` more updates succeed, every later one fails (a failure partway
        /// through a take-off, and a put-back after it).
        pub updates_left: Arc<Mutex<Option<u32>>>,
        pub fail_resume: Arc<Mutex<bool>>,
        pub refuse: Vec<u32>,
        /// Ids refused only until `clear_new` (new queues).
        pub new: Arc<Mutex<Vec<u32>>>,
        pub error: Vec<u32>,
        /// What `queue_snapshot` returns (`None`: it fails).
        pub snapshot: Option<Vec<SnapshotQueue>>,
    }

    impl KfdPort for FakeKfd {
        fn update_queue(&mut self, t: &Target, percentage: u32) -> Result<(), KfdFailure> {
            *self.clock.lock().unwrap() += self.cost_ns;
            self.log.lock().unwrap().push(format!("update {} {percentage}", t.kfd_id));
            if self.fail_update {
                return Err(KfdFailure("EIO".into()));
            }
            if let Some(n) = self.updates_left.lock().unwrap().as_mut() {
                if *n == 0 {
                    return Err(KfdFailure("EIO".into()));
                }
                *n -= 1;
            }
            Ok(())
        }
        fn enable_debug_trap(&mut self) -> Result<(), KfdFailure> {
            self.log.lock().unwrap().push("enable".into());
            if self.fail_debug {
                return Err(KfdFailure("EBUSY".into()));
            }
            Ok(())
        }
        fn disable_debug_trap(&mut self) -> Result<(), KfdFailure> {
            self.log.lock().unwrap().push("disable".into());
            Ok(())
        }
        fn suspend(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
            *self.clock.lock().unwrap() += self.cost_ns;
            self.log.lock().unwrap().push(format!("suspend {ids:?}"));
            if self.fail_suspend {
                return Err(KfdFailure("ETIME".into()));
            }
            let mut n = 0;
            let new = self.new.lock().unwrap().clone();
            for id in ids.iter_mut() {
                if self.error.contains(id) {
                    *id |= ERROR_MASK;
                } else if self.refuse.contains(id) || new.contains(id) {
                    *id |= INVALID_MASK;
                } else {
                    n += 1;
                }
            }
            Ok(n)
        }
        fn clear_new(&mut self) -> Result<(), KfdFailure> {
            self.log.lock().unwrap().push("clear_new".into());
            self.new.lock().unwrap().clear();
            Ok(())
        }
        fn queue_snapshot(&mut self) -> Result<Vec<SnapshotQueue>, KfdFailure> {
            self.log.lock().unwrap().push("snapshot".into());
            self.snapshot.clone().ok_or_else(|| KfdFailure("EALREADY".into()))
        }
        fn resume(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
            *self.clock.lock().unwrap() += self.cost_ns / 2;
            self.log.lock().unwrap().push(format!("resume {ids:?}"));
            if *self.fail_resume.lock().unwrap() {
                return Err(KfdFailure("EIO".into()));
            }
            Ok(ids.len() as u32)
        }
        fn now(&self) -> u64 {
            *self.clock.lock().unwrap()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeKfd;
    use super::*;
    use std::sync::{Arc, Mutex};

    fn t(q: u64, id: u32) -> Target {
        Target {
            queue: QueueId(q),
            kfd_id: id,
            ring_base: 0x1000 * q,
            ring_bytes: 4096,
            priority: 7,
            percentage: 100,
        }
    }

    #[test]
    fn queue_mode_deactivates_each_queue_and_restores_its_percentage() {
        let k = FakeKfd { cost_ns: 400, ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Queue);
        let off = m.take_off(&[t(1, 3), t(2, 4)]).unwrap();
        assert_eq!(off.queues, vec![(QueueId(1), How::Deactivate), (QueueId(2), How::Deactivate)]);
        assert_eq!(off.ns, 800);
        assert_eq!(m.expected_cost(), Some(400));
        m.put_back(&[(t(1, 3), How::Deactivate)]).unwrap();
        assert_eq!(*k.log.lock().unwrap(), vec!["update 3 0", "update 4 0", "update 3 100"]);
    }

    #[test]
    fn suspend_mode_enables_debug_once_and_skips_refused_queues() {
        let k = FakeKfd { cost_ns: 500, refuse: vec![4], ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Suspend);
        let off = m.take_off(&[t(1, 3), t(2, 4)]).unwrap();
        assert_eq!(off.queues, vec![(QueueId(1), How::Suspend)], "queue 4 was refused (new)");
        let off = m.take_off(&[t(2, 4)]).unwrap();
        assert!(off.queues.is_empty());
        m.put_back(&[(t(1, 3), How::Suspend)]).unwrap();
        assert_eq!(
            *k.log.lock().unwrap(),
            vec![
                "enable",
                "suspend [3, 4]",
                "clear_new",
                "suspend [4]",
                "suspend [4]",
                "clear_new",
                "suspend [4]",
                "resume [3]"
            ]
        );
    }

    #[test]
    fn new_queues_are_cleared_and_asked_again_and_a_reported_unmap_failure_stops_preemption() {
        let k = FakeKfd { new: Arc::new(Mutex::new(vec![4])), ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Suspend);
        let off = m.take_off(&[t(1, 3), t(2, 4)]).unwrap();
        assert_eq!(off.queues, vec![(QueueId(1), How::Suspend), (QueueId(2), How::Suspend)]);
        assert_eq!(
            *k.log.lock().unwrap(),
            vec!["enable", "suspend [3, 4]", "clear_new", "suspend [4]"]
        );
        let k = FakeKfd { error: vec![3], ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k), PreemptMode::Suspend);
        let (why, taken) = m.take_off(&[t(1, 3)]).unwrap_err();
        assert!(why.contains("failed preemption"), "{why}");
        assert_eq!(
            taken.queues,
            vec![(QueueId(1), How::Suspend)],
            "KFD counts it suspended: it must be resumed"
        );
        assert!(!m.usable());
    }

    #[test]
    fn auto_deactivates_and_tries_suspend_only_when_deactivation_is_refused() {
        let k = FakeKfd { cost_ns: 500, ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Auto);
        for _ in 0..3 {
            let off = m.take_off(&[t(1, 3)]).unwrap();
            assert_eq!(off.queues, vec![(QueueId(1), How::Deactivate)]);
            m.put_back(&[(t(1, 3), How::Deactivate)]).unwrap();
        }
        assert!(!k.log.lock().unwrap().iter().any(|l| l == "enable"), "no debug trap in auto mode");
        let k = FakeKfd { fail_update: true, ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Auto);
        let off = m.take_off(&[t(1, 3)]).unwrap();
        assert_eq!(off.queues, vec![(QueueId(1), How::Suspend)]);
        assert!(m.usable());
    }

    #[test]
    fn suspend_without_debug_trap_is_a_failure() {
        let k = FakeKfd { fail_debug: true, ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k), PreemptMode::Suspend);
        assert!(m.take_off(&[t(1, 3)]).is_err());
        assert!(!m.usable());
    }

    #[test]
    fn a_failed_call_stops_preemption_and_returns_what_was_taken_off() {
        let k = FakeKfd { fail_suspend: true, ..Default::default() };
        let mut m = Mechanisms::new(Box::new(k), PreemptMode::Suspend);
        let (why, taken) = m.take_off(&[t(1, 3)]).unwrap_err();
        assert!(why.contains("ETIME") && why.contains("suspend"), "{why}");
        assert!(taken.queues.is_empty());
        assert!(!m.usable() && m.broken().is_some());
        assert_eq!(m.choose(), None);
        // Putting back still works after preemption stopped.
        let k = FakeKfd::default();
        let mut m = Mechanisms::new(Box::new(k.clone()), PreemptMode::Queue);
        m.take_off(&[t(1, 3)]).unwrap();
        let mut k2 = k.clone();
        k2.fail_update = true;
        let mut m2 = Mechanisms::new(Box::new(k2), PreemptMode::Queue);
        assert!(m2.take_off(&[t(2, 5)]).is_err());
        assert!(m.put_back(&[(t(1, 3), How::Deactivate)]).is_ok());
    }
}
