//! Contention: what one process knows of the other processes' work on a GPU, as the board
//! summarizes it and the level-1 window consumes it.
#![forbid(unsafe_code)]

use crate::ids::PartitionId;
use crate::partition::overlaps;
use crate::priority::Priority;

/// What the policy needs to know about work outside this process: the highest priority with
/// packets pending or in flight in any *other* process on the GPU, as summarized from the board
/// ([`crate::board::layout::summarize`]). The process's own queues are known exactly and are
/// not taken from the board.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    /// Highest priority with work in other processes; `None` when they are idle.
    pub external_highest: Option<Priority>,
}

impl Contention {
    /// No other process has work.
    pub const NONE: Contention = Contention { external_highest: None };

    /// Other processes' highest priority with work.
    pub fn external(highest: Option<Priority>) -> Contention {
        Contention { external_highest: highest }
    }
}

/// Other processes' work on a GPU by CU partition: the highest priority with work of each
/// partition id on the board ([`crate::partition`]). A partition's contention is the highest
/// over the partitions that overlap it ([`crate::partition::overlaps`]).
///
/// Beside it, the highest priority *present* (a queue, with work or not) of each partition: a
/// lower queue beside a present higher priority keeps its work in flight short (the horizon,
/// `libxhsa`'s scheduler), so that when that priority's work comes it drains sooner than a
/// take-off would cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalWork {
    highest: Vec<(PartitionId, Priority)>,
    present: Vec<(PartitionId, Priority)>,
    /// The lowest priority present in each partition.
    lowest: Vec<(PartitionId, Priority)>,
}

impl ExternalWork {
    /// No other process has work.
    pub fn none() -> ExternalWork {
        ExternalWork::default()
    }

    /// Counts a queue with work at `priority` in `partition`.
    pub fn add(&mut self, partition: PartitionId, priority: Priority) {
        fold(&mut self.highest, partition, priority, Priority::max);
    }

    /// Counts a queue at `priority` in `partition`, with work or not.
    pub fn add_present(&mut self, partition: PartitionId, priority: Priority) {
        fold(&mut self.present, partition, priority, Priority::max);
        fold(&mut self.lowest, partition, priority, Priority::min);
    }

    /// Whether a queue below `priority` is present (with work or not) in a partition
    /// overlapping `partition`: whether work arriving at `priority` there is anything another
    /// process could yield to.
    pub fn below_present(&self, partition: PartitionId, priority: Priority) -> bool {
        self.lowest.iter().any(|(p, l)| *l < priority && overlaps(*p, partition))
    }

    /// The highest priority of the queues in any partition overlapping `partition`, with work
    /// or not.
    pub fn present_in(&self, partition: PartitionId) -> Option<Priority> {
        self.present.iter().filter(|(p, _)| overlaps(*p, partition)).map(|(_, h)| *h).max()
    }

    /// The contention work in `partition` meets: the highest priority with work in any
    /// partition overlapping it.
    pub fn contention_in(&self, partition: PartitionId) -> Contention {
        Contention::external(
            self.highest.iter().filter(|(p, _)| overlaps(*p, partition)).map(|(_, h)| *h).max(),
        )
    }

    /// The highest priority with work anywhere on the GPU.
    pub fn anywhere(&self) -> Contention {
        Contention::external(self.highest.iter().map(|(_, h)| *h).max())
    }

    /// Each partition's highest priority with work.
    pub fn partitions(&self) -> &[(PartitionId, Priority)] {
        &self.highest
    }
}

/// Folds `priority` into `partition`'s entry of `by_partition` with `pick` (the first value
/// of a partition is its entry).
fn fold(
    by_partition: &mut Vec<(PartitionId, Priority)>,
    partition: PartitionId,
    priority: Priority,
    pick: fn(Priority, Priority) -> Priority,
) {
    match by_partition.iter_mut().find(|(p, _)| *p == partition) {
        Some((_, v)) => *v = pick(*v, priority),
        None => by_partition.push((partition, priority)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{Reserve, Side, Split};
    use crate::priority::Level;

    #[test]
    fn work_contends_only_in_partitions_that_overlap_its_own() {
        let p = |l| Priority::at_level(Level::new(l).unwrap());
        let s = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        let (r, sh) = (s.id(Side::Reserved), s.id(Side::Shared));
        let mut w = ExternalWork::none();
        assert_eq!(w.anywhere(), Contention::NONE);
        w.add(sh, p(-10));
        w.add(sh, p(-5));
        assert_eq!(
            w.contention_in(r),
            Contention::NONE,
            "the shared side's work is not the reserved side's"
        );
        assert_eq!(w.contention_in(sh), Contention::external(Some(p(-5))));
        assert_eq!(w.contention_in(PartitionId::WHOLE), Contention::external(Some(p(-5))));
        w.add(PartitionId::WHOLE, p(3));
        assert_eq!(
            w.contention_in(r),
            Contention::external(Some(p(3))),
            "the whole GPU overlaps both"
        );
        assert_eq!(w.anywhere(), Contention::external(Some(p(3))));
        assert_eq!(w.partitions().len(), 2);
        assert_eq!(w.present_in(sh), None, "work and presence are counted apart");
        w.add_present(r, p(10));
        w.add_present(r, p(8));
        assert_eq!(w.present_in(sh), None);
        assert_eq!(w.present_in(r), Some(p(10)));
        assert_eq!(w.present_in(PartitionId::WHOLE), Some(p(10)));
        // Below whom: the lowest present, by partition.
        assert!(w.below_present(r, p(9)), "8 is below 9 on the reserved side");
        assert!(!w.below_present(r, p(8)), "nothing below 8 there");
        assert!(!w.below_present(sh, p(20)), "nobody present on the shared side");
        assert!(w.below_present(PartitionId::WHOLE, p(9)), "the whole GPU overlaps it");
    }
}
