//! The seqlock of a board slot: one writer (the slot's owner) stores the slot's words between
//! two bumps of its sequence word; any number of readers in any process copy them and keep the
//! copy only if the sequence word was even and unchanged around it.
//!
//! - **Write**: `seq` made odd (relaxed store, then a release fence, so no word store is seen
//!   before it), the words stored (relaxed), `seq` made even with a release store.
//! - **Read**: `seq` loaded with acquire (odd: a write is under way, try again), the words
//!   loaded (relaxed), an acquire fence, `seq` loaded again: equal means no write overlapped.
//!
//! The protocol is written once over [`Word`], so that the same code runs over the mapped board
//! (`std`'s `AtomicU32`) and under loom's model checker (`RUSTFLAGS="--cfg loom" cargo test -p
//! xhsa-board --lib seqlock::loom_tests`, run by `./x test`), which explores every interleaving
//! of a writer and a reader.
//!
//! What it is not: the slot's layout or its liveness (that is [`crate::shared`]).
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;

/// A 32-bit atomic word the protocol works over.
pub trait Word {
    /// `AtomicU32::load`.
    fn load(&self, order: Ordering) -> u32;
    /// `AtomicU32::store`.
    fn store(&self, value: u32, order: Ordering);
    /// The fence of the same memory model as the word.
    fn fence(order: Ordering);
    /// A pause before trying again while a write is under way.
    fn pause();
}

impl Word for std::sync::atomic::AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::load(self, order)
    }
    fn store(&self, value: u32, order: Ordering) {
        std::sync::atomic::AtomicU32::store(self, value, order)
    }
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
    fn pause() {
        std::hint::spin_loop()
    }
}

#[cfg(loom)]
impl Word for loom::sync::atomic::AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        loom::sync::atomic::AtomicU32::load(self, order)
    }
    fn store(&self, value: u32, order: Ordering) {
        loom::sync::atomic::AtomicU32::store(self, value, order)
    }
    fn fence(order: Ordering) {
        loom::sync::atomic::fence(order)
    }
    fn pause() {
        loom::thread::yield_now()
    }
}

/// Stores `(index, value)` pairs into `words` under the sequence word `words[0]`. Only one
/// writer may write a given `words` at a time (the slot's owner).
pub fn write<W: Word>(words: &[W], values: impl IntoIterator<Item = (usize, u32)>) {
    let seq = words[0].load(Ordering::Relaxed);
    let odd = seq.wrapping_add(1) | 1;
    words[0].store(odd, Ordering::Relaxed);
    W::fence(Ordering::Release);
    for (i, v) in values {
        words[i].store(v, Ordering::Relaxed);
    }
    words[0].store(odd.wrapping_add(1), Ordering::Release);
}

/// A consistent copy of the first `N` of `words` (the sequence word among them), or `None` when
/// a write overlapped each of `attempts` tries.
pub fn read<W: Word, const N: usize>(words: &[W], attempts: usize) -> Option<[u32; N]> {
    for _ in 0..attempts {
        let before = words[0].load(Ordering::Acquire);
        if before & 1 == 1 {
            W::pause();
            continue;
        }
        let mut copy = [0u32; N];
        for (i, v) in copy.iter_mut().enumerate() {
            *v = words[i].load(Ordering::Relaxed);
        }
        W::fence(Ordering::Acquire);
        if words[0].load(Ordering::Relaxed) == before {
            return Some(copy);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn a_write_leaves_the_sequence_even_and_a_read_sees_the_words() {
        let w: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        write(&w, [(1, 7), (3, 9)]);
        assert_eq!(read::<_, 4>(&w, 1), Some([2, 7, 0, 9]));
        w[0].store(5, Ordering::Relaxed);
        assert_eq!(read::<_, 4>(&w, 3), None, "a write under way is never read");
    }
}

/// The protocol under loom: a writer writes a slot twice (every word the write's number) while
/// a reader reads it; every copy the reader keeps has all its words from one write.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU32;
    use loom::sync::Arc;

    const N: usize = 3;

    #[test]
    fn a_reader_never_keeps_a_torn_copy() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let words: Arc<Vec<AtomicU32>> = Arc::new((0..N).map(|_| AtomicU32::new(0)).collect());
            let writer = {
                let words = words.clone();
                loom::thread::spawn(move || {
                    for k in 1..=2u32 {
                        write(&words[..], (1..N).map(|i| (i, k)));
                    }
                })
            };
            if let Some(copy) = read::<_, N>(&words[..], 2) {
                assert_eq!(copy[0] & 1, 0, "kept a copy taken during a write: {copy:?}");
                assert!(copy[1..].iter().all(|&v| v == copy[1]), "torn copy: {copy:?}");
            }
            writer.join().unwrap();
            let end = read::<_, N>(&words[..], 1).expect("no write under way");
            assert_eq!(end, [4, 2, 2]);
        });
    }
}
