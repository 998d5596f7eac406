//! Device time: real time slowed by the time scale, in nanoseconds. The device model runs in
//! device time; what it shows the host (signal and SDMA timestamps, `hsaKmtGetClockCounters`)
//! is the host's `CLOCK_MONOTONIC` at that device time ([`Clock::to_host`]), so GPU and host
//! timestamps agree. At time scale 1 the two are the same clock; at scale X every device span
//! shows X times longer (`hipEventElapsedTime` included) and tools divide by X.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    /// `CLOCK_MONOTONIC` when device time was `base_dev`.
    pub base_mono: u64,
    pub base_dev: u64,
    pub scale: f64,
}

impl Clock {
    /// A device clock starting now at the current `CLOCK_MONOTONIC` value.
    pub fn new(scale: f64) -> Self {
        let now = monotonic_ns();
        Clock { base_mono: now, base_dev: now, scale: scale.max(1.0) }
    }

    /// Device time now.
    pub fn now(&self) -> u64 {
        self.base_dev + (monotonic_ns().saturating_sub(self.base_mono) as f64 / self.scale) as u64
    }

    /// Real time from now until device time `t` (zero if it has passed).
    pub fn until(&self, t: u64) -> Duration {
        let now = self.now();
        Duration::from_nanos(((t.saturating_sub(now)) as f64 * self.scale) as u64)
    }

    /// The host's `CLOCK_MONOTONIC` at the moment device time is `t`. Every timestamp the
    /// device shows the host (signal timestamps, SDMA timestamps, the clock counters) is on
    /// the host's clock, so it agrees with host-side timestamps the runtime takes; at time
    /// scale X, a span of device time shows as X times longer.
    pub fn to_host(&self, t: u64) -> u64 {
        let d = t as i128 - self.base_dev as i128;
        (self.base_mono as i128 + (d as f64 * self.scale) as i128).max(0) as u64
    }

    /// Real time a span of device time takes.
    pub fn real(&self, device_ns: u64) -> Duration {
        Duration::from_nanos((device_ns as f64 * self.scale) as u64)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) in microseconds: what the
/// interpreter's rates per CPU second are measured against (a loaded machine stretches wall
/// time, not this).
pub fn thread_cpu_us() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// `CLOCK_MONOTONIC_RAW` in nanoseconds (the CPU counter of `hsaKmtGetClockCounters`).
pub fn monotonic_raw_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicRaw);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_time_runs_slower() {
        let c = Clock::new(4.0);
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(40));
        let dt = c.now() - t0;
        assert!((8_000_000..20_000_000).contains(&dt), "{dt}");
        let d = c.until(c.now() + 1_000_000);
        assert!(d > Duration::from_micros(3_500) && d <= Duration::from_millis(4), "{d:?}");
    }
}
