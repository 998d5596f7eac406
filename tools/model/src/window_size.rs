//! `W`, the size of the level-1 window: how many packets a contended queue may keep in flight.
//!
//! A setting (`XHSA_WINDOW`, the config's `window`) and a property of each CU partition; the
//! window rule itself lives with the forwarding path.
#![forbid(unsafe_code)]

use std::fmt;

/// `W`, the number of packets a contended queue may have in flight: `1..=1024`, default 2.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowSize(u32);

impl WindowSize {
    /// The smallest accepted W.
    pub const MIN: u32 = 1;
    /// The largest accepted W.
    pub const MAX: u32 = 1024;
    /// The default W.
    pub const DEFAULT: WindowSize = WindowSize(2);

    /// `W = n`, or `None` outside `1..=1024`.
    pub fn new(n: u64) -> Option<WindowSize> {
        (WindowSize::MIN as u64..=WindowSize::MAX as u64)
            .contains(&n)
            .then_some(WindowSize(n as u32))
    }

    /// The value of W.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for WindowSize {
    fn default() -> WindowSize {
        WindowSize::DEFAULT
    }
}

impl fmt::Display for WindowSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
