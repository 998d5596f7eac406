//! Dispatch-to-completion latency of one queue's packets: when each batch was written to the
//! hardware ring, and, when a completion report covers it, how long it took, counted into the
//! histogram the board publishes ([`xhsa_model::stats::QueueStats::latency`]).
//!
//! The time is what libxhsa observes: from the forwarding pass that wrote the packet to the
//! moment a completion of a tracking barrier after it was seen. Completions that are counted at a
//! later pass rather than woken for (a process alone on the GPU with one priority) are seen late,
//! so the histogram is an upper bound of the packets' own time then. Time is passed in.
#![forbid(unsafe_code)]

use crate::path::window::{Nanos, Seq};
use std::collections::VecDeque;
use xhsa_model::stats::{latency_bucket, LATENCY_BUCKETS};

/// Most batches remembered: beyond, the two oldest merge (their packets count from the older
/// one's time, an upper bound), so a queue whose completions are not observed for a long time
/// (untracked while it is alone) keeps bounded memory.
pub const MAX_BATCHES: usize = 1024;

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
            if self.batches.len() >= MAX_BATCHES {
                if let (Some((_, n0, at0)), Some(second)) =
                    (self.batches.pop_front(), self.batches.front_mut())
                {
                    second.1 += n0;
                    second.2 = at0;
                }
            }
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
            self.histogram[b] =
                self.histogram[b].saturating_add(packets.min(u32::MAX as u64) as u32);
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

    #[test]
    fn unobserved_batches_stay_bounded_and_every_packet_still_counts() {
        let mut l = Latency::default();
        for i in 0..(MAX_BATCHES as u64 * 3) {
            l.forwarded(i, 2, i * 1_000);
        }
        assert_eq!(l.outstanding(), MAX_BATCHES);
        l.completed_through(MAX_BATCHES as u64 * 3, 10_000_000_000);
        assert_eq!(l.histogram().iter().sum::<u32>(), MAX_BATCHES as u32 * 6);
        assert_eq!(l.outstanding(), 0);
    }
}
