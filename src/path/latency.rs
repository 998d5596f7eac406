//! Dispatch-to-completion latency of one queue's packets: when each batch was written to the
//! hardware ring, and, when a completion report covers it, how long it took, counted into the
//! histogram the board publishes ([`crate::board::stats::QueueStats::latency`]).
//!
//! The time is what libxhsa observes: from the forwarding pass that wrote the packet to the
//! moment a completion of a tracking barrier after it was seen. Completions that are counted at a
//! later pass rather than woken for (a process alone on the GPU with one priority) are seen late,
//! so the histogram is an upper bound of the packets' own time then. Time is passed in.
#![forbid(unsafe_code)]

use crate::board::stats::{latency_bucket, LATENCY_BUCKETS};
use crate::path::window::{Nanos, Seq};
use std::collections::VecDeque;

/// Batches in flight and the histogram of those completed; see the module doc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// (last sequence number of the batch, packets in it, when it was written), oldest first.
    batches: VecDeque<(Seq, u64, Nanos)>,
    histogram: [u32; LATENCY_BUCKETS],
}

impl Latency {
    /// `packets` packets ending with sequence number `last` were written to the hardware at `now`.
    pub fn forwarded(&mut self, last: Seq, packets: u64, now: Nanos) {
        if packets > 0 {
            self.batches.push_back((last, packets, now));
        }
    }

    /// Every packet up to and including `seq` is known complete at `now`.
    pub fn completed_through(&mut self, seq: Seq, now: Nanos) {
        while let Some(&(last, packets, at)) = self.batches.front() {
            if last > seq {
                break;
            }
            self.batches.pop_front();
            let b = latency_bucket(now.saturating_sub(at));
            self.histogram[b] = self.histogram[b].saturating_add(packets.min(u32::MAX as u64) as u32);
        }
    }

    /// The histogram so far.
    pub fn histogram(&self) -> [u32; LATENCY_BUCKETS] {
        self.histogram
    }

    /// Batches written and not yet seen complete.
    pub fn outstanding(&self) -> usize {
        self.batches.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_packet_counts_once_in_the_bucket_of_its_batch() {
        let mut l = Latency::default();
        l.forwarded(2, 3, 1_000); // packets 0..=2 at 1 us
        l.forwarded(4, 2, 5_000); // 3..=4 at 5 us
        l.forwarded(5, 0, 6_000); // an empty batch is not kept
        assert_eq!(l.outstanding(), 2);
        l.completed_through(1, 9_000);
        assert_eq!(l.histogram().iter().sum::<u32>(), 0, "a batch counts when all of it completed");
        l.completed_through(2, 11_000); // 10 us
        assert_eq!(l.histogram()[0], 3);
        l.completed_through(4, 2_005_000); // 2 ms: [1024, 2048) us, bucket 7
        assert_eq!(l.histogram()[7], 2);
        assert_eq!(l.outstanding(), 0);
        l.completed_through(4, 9_000_000);
        assert_eq!(l.histogram().iter().sum::<u32>(), 5, "idempotent");
    }
}
