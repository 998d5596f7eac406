//! A fixed-capacity map from non-zero `u64` keys to `u64` values whose lookups take no lock.
//!
//! libxhsa must recognise its shadow queues and shadow doorbells on every queue-index call and
//! every `hsa_signal_store_*`, and HIP stores to its own signals constantly: the miss path has to
//! cost a few loads, not a lock. Keys are queue addresses and signal handles (never 0).
//!
//! Open addressing with linear probing over `CAPACITY` slots. Writers (insert, remove) are
//! serialised by a mutex; readers only load atomics. A removed key leaves a tombstone so that
//! probes for keys placed after it still find them; an insert reuses the first tombstone on its
//! probe path. A reader racing with the removal of the key it looks up may see it or not — the
//! callers only remove a key when the object it names is being destroyed, and using an object
//! while destroying it is the application's error.
//!
//! **Tombstones are reclaimed.** Keys are addresses, so churn (streams created and destroyed
//! again and again) brings new keys whose probes often end at an empty slot rather than at a
//! tombstone: without reclamation empty slots turn into tombstones one by one, and a miss — the
//! common case — ends up scanning the whole table. Two things keep probes short:
//!
//! - a remove whose slot is followed by an empty slot empties it (and the tombstones just before
//!   it) instead of leaving a tombstone: no probe path continues past an empty slot, so no key
//!   can be behind it, and a reader that sees the empty slot returns the right answer;
//! - when tombstones still reach [`MAX_TOMBSTONES`], the writer rebuilds the live keys into the
//!   second of two tables and makes it current. Readers never wait for this: each table carries
//!   a sequence number, odd while a rebuild writes it; a reader notes it before probing and checks
//!   it after, and probes again (in the then current table) only if that table was rebuilt under
//!   it, which needs two rebuilds during one lookup. The tables are never freed, so a slow reader
//!   always reads valid memory (a seqlock over atomics: no `unsafe`).
//!
//! So at most `CAPACITY / 2` live keys and [`MAX_TOMBSTONES`] tombstones occupy a table.
#![forbid(unsafe_code)]

#[cfg(loom)]
use loom::sync::{
    atomic::{fence, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};
#[cfg(not(loom))]
use std::sync::{
    atomic::{fence, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

/// Number of slots; at most `CAPACITY / 2` live keys are accepted so probes stay short. (Eight
/// under loom, whose model checker explores every interleaving of every access.)
#[cfg(not(loom))]
pub const CAPACITY: usize = 1024;
/// Number of slots (the loom build's).
#[cfg(loom)]
pub const CAPACITY: usize = 8;
/// Tombstones that trigger a rebuild of the table (so live keys and tombstones together never
/// fill more than 5/8 of it).
pub const MAX_TOMBSTONES: usize = CAPACITY / 8;

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;

/// One table: the slots and its sequence number (odd while a rebuild writes it).
struct Table {
    keys: Vec<AtomicU64>,
    values: Vec<AtomicU64>,
    seq: AtomicU64,
}

impl Table {
    fn new() -> Table {
        Table {
            keys: (0..CAPACITY).map(|_| AtomicU64::new(EMPTY)).collect(),
            values: (0..CAPACITY).map(|_| AtomicU64::new(0)).collect(),
            seq: AtomicU64::new(0),
        }
    }

    /// Where `key` is, or `Err(slots probed)` when it is absent. The probe stops at an empty
    /// slot; a full table is probed once round.
    fn find(&self, key: u64, order: Ordering) -> Result<usize, usize> {
        let mut i = home(key);
        for n in 0..CAPACITY {
            match self.keys[i].load(order) {
                EMPTY => return Err(n + 1),
                k if k == key => return Ok(i),
                _ => i = (i + 1) % CAPACITY,
            }
        }
        Err(CAPACITY)
    }
}

/// What the writers keep, under their mutex.
#[derive(Debug, Default)]
struct Counts {
    live: usize,
    tombstones: usize,
    rebuilds: u64,
}

/// The map; see the module doc.
pub struct AddrMap {
    tables: [Table; 2],
    /// The index of the table in use.
    current: AtomicUsize,
    writer: Mutex<Counts>,
}

impl Default for AddrMap {
    fn default() -> AddrMap {
        AddrMap::new()
    }
}

impl std::fmt::Debug for AddrMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AddrMap({} keys)", self.len())
    }
}

fn home(key: u64) -> usize {
    // Fibonacci hashing: queue addresses and signal handles share their low bits.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % CAPACITY
}

impl AddrMap {
    /// An empty map.
    pub fn new() -> AddrMap {
        AddrMap {
            tables: [Table::new(), Table::new()],
            current: AtomicUsize::new(0),
            writer: Mutex::new(Counts::default()),
        }
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of `key`, without taking a lock.
    pub fn get(&self, key: u64) -> Option<u64> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        loop {
            let t = &self.tables[self.current.load(Ordering::Acquire)];
            let seq = t.seq.load(Ordering::Acquire);
            if seq % 2 == 1 {
                // Being rebuilt: `current` has already moved to the other table.
                #[cfg(not(loom))]
                std::hint::spin_loop();
                #[cfg(loom)]
                loom::thread::yield_now();
                continue;
            }
            let found =
                t.find(key, Ordering::Acquire).ok().map(|i| t.values[i].load(Ordering::Acquire));
            fence(Ordering::Acquire);
            if t.seq.load(Ordering::Relaxed) == seq {
                return found;
            }
        }
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces `key`; false when the key is 0 or `u64::MAX` or the map is full.
    pub fn insert(&self, key: u64, value: u64) -> bool {
        if key == EMPTY || key == TOMBSTONE {
            return false;
        }
        let mut counts = self.counts();
        let t = &self.tables[self.current.load(Ordering::Relaxed)];
        let mut i = home(key);
        let mut free = None;
        for _ in 0..CAPACITY {
            match t.keys[i].load(Ordering::Relaxed) {
                k if k == key => {
                    t.values[i].store(value, Ordering::Release);
                    return true;
                }
                EMPTY => {
                    free.get_or_insert(i);
                    break;
                }
                TOMBSTONE => {
                    free.get_or_insert(i);
                }
                _ => {}
            }
            i = (i + 1) % CAPACITY;
        }
        let Some(slot) = free else { return false };
        if counts.live >= CAPACITY / 2 {
            return false;
        }
        if t.keys[slot].load(Ordering::Relaxed) == TOMBSTONE {
            counts.tombstones -= 1;
        }
        // The value first: a reader that sees the key sees its value.
        t.values[slot].store(value, Ordering::Release);
        t.keys[slot].store(key, Ordering::Release);
        counts.live += 1;
        true
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, key: u64) -> Option<u64> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        let mut counts = self.counts();
        let t = &self.tables[self.current.load(Ordering::Relaxed)];
        let i = t.find(key, Ordering::Relaxed).ok()?;
        let value = t.values[i].load(Ordering::Relaxed);
        counts.live -= 1;
        if t.keys[(i + 1) % CAPACITY].load(Ordering::Relaxed) == EMPTY {
            // No probe path goes through an empty slot, so none continues past this one: it can
            // be emptied, and so can the tombstones right before it.
            let mut j = i;
            t.keys[j].store(EMPTY, Ordering::Release);
            loop {
                j = (j + CAPACITY - 1) % CAPACITY;
                if j == i || t.keys[j].load(Ordering::Relaxed) != TOMBSTONE {
                    break;
                }
                t.keys[j].store(EMPTY, Ordering::Release);
                counts.tombstones -= 1;
            }
        } else {
            t.keys[i].store(TOMBSTONE, Ordering::Release);
            counts.tombstones += 1;
            if counts.tombstones >= MAX_TOMBSTONES {
                self.rebuild(&mut counts);
            }
        }
        Some(value)
    }

    /// Copies the live keys into the other table, without tombstones, and makes it current
    /// (writers' lock held).
    fn rebuild(&self, counts: &mut Counts) {
        let from = self.current.load(Ordering::Relaxed);
        let (src, dst) = (&self.tables[from], &self.tables[1 - from]);
        // Seqlock writer: odd while the slots change, so that a reader still probing this table
        // (it was current before the last rebuild) probes again.
        let seq = dst.seq.load(Ordering::Relaxed);
        dst.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for k in &dst.keys {
            k.store(EMPTY, Ordering::Relaxed);
        }
        for (k, v) in src.keys.iter().zip(&src.values) {
            let key = k.load(Ordering::Relaxed);
            if key == EMPTY || key == TOMBSTONE {
                continue;
            }
            let mut i = home(key);
            while dst.keys[i].load(Ordering::Relaxed) != EMPTY {
                i = (i + 1) % CAPACITY;
            }
            dst.values[i].store(v.load(Ordering::Relaxed), Ordering::Relaxed);
            dst.keys[i].store(key, Ordering::Relaxed);
        }
        dst.seq.store(seq + 2, Ordering::Release);
        self.current.store(1 - from, Ordering::Release);
        counts.tombstones = 0;
        counts.rebuilds += 1;
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.counts().live
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tombstones in the current table (for tests and diagnostics).
    pub fn tombstones(&self) -> usize {
        self.counts().tombstones
    }

    /// Slots a lookup of `key` probes in the current table (for tests and diagnostics).
    pub fn probe_length(&self, key: u64) -> usize {
        let _counts = self.counts();
        let t = &self.tables[self.current.load(Ordering::Relaxed)];
        match t.find(key, Ordering::Relaxed) {
            Ok(i) => (i + CAPACITY - home(key)) % CAPACITY + 1,
            Err(n) => n,
        }
    }
}

/// The seqlock under loom's model checker: `RUSTFLAGS="--cfg loom" cargo test -p xhsa --lib
/// addr_map::loom_tests` (`./x test` runs it, in a target directory of its own).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader looking up a key that stays finds it, with its value, in every interleaving of
    /// a writer removing the keys around it and rebuilding the table under the reader (each
    /// removal here leaves a tombstone, and the second one triggers a rebuild).
    #[test]
    fn a_lookup_racing_removals_and_a_rebuild_finds_the_key_that_stays() {
        // Interleavings with up to three preemptions (loom's usual bound; unbounded takes
        // minutes and finds nothing more here).
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let m = Arc::new(AddrMap::new());
            // Keys whose probes collide (same home slot), so removals leave tombstones.
            let same_home: Vec<u64> = (1..u64::MAX).filter(|k| home(*k) == 0).take(3).collect();
            let (a, b, c) = (same_home[0], same_home[1], same_home[2]);
            assert!(m.insert(a, 10) && m.insert(b, 20) && m.insert(c, 30));
            let reader = {
                let m = m.clone();
                loom::thread::spawn(move || (m.get(c), m.get(b)))
            };
            assert_eq!(m.remove(a), Some(10));
            assert_eq!(m.remove(b), Some(20));
            let (c_seen, b_seen) = reader.join().unwrap();
            assert_eq!(c_seen, Some(30), "a key that stays is always found");
            assert!(
                b_seen.is_none() || b_seen == Some(20),
                "a key being removed is found with its value, or not at all"
            );
            assert_eq!(m.get(c), Some(30));
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_get_remove() {
        let m = AddrMap::new();
        assert!(m.is_empty());
        assert!(m.insert(0x7f00_1000, 1));
        assert!(m.insert(0x7f00_2000, 2));
        assert_eq!(m.get(0x7f00_1000), Some(1));
        assert!(m.insert(0x7f00_1000, 3), "replacing a key");
        assert_eq!(m.get(0x7f00_1000), Some(3));
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove(0x7f00_1000), Some(3));
        assert_eq!(m.get(0x7f00_1000), None);
        assert_eq!(m.get(0x7f00_2000), Some(2));
        assert_eq!(m.remove(0x7f00_1000), None);
        assert!(!m.insert(0, 1) && !m.insert(u64::MAX, 1));
        assert_eq!(m.get(0), None);
    }

    #[test]
    fn full_map_refuses_and_tombstones_are_reused() {
        let m = AddrMap::new();
        let keys: Vec<u64> = (1..=(CAPACITY as u64 / 2)).map(|k| k * 64).collect();
        for &k in &keys {
            assert!(m.insert(k, k + 1));
        }
        assert!(!m.insert(0xdead_0000, 1), "at most CAPACITY/2 keys");
        for &k in &keys {
            assert_eq!(m.get(k), Some(k + 1));
        }
        for &k in keys.iter().step_by(2) {
            m.remove(k);
        }
        for &k in keys.iter().skip(1).step_by(2) {
            assert_eq!(m.get(k), Some(k + 1), "found past tombstones");
        }
        assert!(m.insert(0xdead_0000, 7));
        assert_eq!(m.get(0xdead_0000), Some(7));
    }

    /// Streams created and destroyed over and over: every key new (addresses move on), a few
    /// live at a time. Probes must stay short — before tombstones were reclaimed, empty slots
    /// turned into tombstones one by one and a miss scanned the whole table.
    #[test]
    fn probe_lengths_stay_bounded_under_churn() {
        let m = AddrMap::new();
        let mut live = std::collections::VecDeque::new();
        let mut next = 0x7f00_0000_0000u64;
        let mut worst_miss = 0;
        for round in 0..20_000u64 {
            next += 0x1000;
            assert!(m.insert(next, round));
            live.push_back(next);
            if live.len() > 24 {
                let k = live.pop_front().unwrap();
                assert_eq!(m.remove(k), Some(round - 24));
            }
            assert!(m.tombstones() < MAX_TOMBSTONES);
            if round % 100 == 0 {
                // A miss (a signal libxhsa does not own) and every live key.
                worst_miss = worst_miss.max(m.probe_length(0xdead_0000 + round * 8));
                for &k in &live {
                    assert!(
                        m.probe_length(k) <= 32,
                        "a live key probes {} slots",
                        m.probe_length(k)
                    );
                }
            }
        }
        assert!(worst_miss <= 32, "a miss probes {worst_miss} slots after churn");
        for (i, &k) in live.iter().enumerate() {
            assert_eq!(m.get(k), Some(20_000 - live.len() as u64 + i as u64));
        }
        assert_eq!(m.len(), live.len());
    }

    #[test]
    fn removing_before_an_empty_slot_leaves_no_tombstone() {
        let m = AddrMap::new();
        assert!(m.insert(0x1000, 1));
        assert_eq!(m.remove(0x1000), Some(1));
        assert_eq!(m.tombstones(), 0);
        assert_eq!(m.probe_length(0x1000), 1, "the slot is empty again");
    }

    /// Lookups on other threads while a writer churns (and rebuilds the table many times): a
    /// key that stays in the map is always found with its value, a key never inserted never is.
    #[test]
    fn lookups_stay_correct_while_the_table_is_rebuilt() {
        use std::sync::atomic::AtomicBool;
        let m = std::sync::Arc::new(AddrMap::new());
        let stable: Vec<u64> = (1..=64).map(|k| 0x5500_0000 + k * 0x40).collect();
        for &k in &stable {
            assert!(m.insert(k, k ^ 0xabc));
        }
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let start = std::sync::Arc::new(std::sync::Barrier::new(3));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (m, stop, stable, start) =
                    (m.clone(), stop.clone(), stable.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    start.wait();
                    while !stop.load(Ordering::Relaxed) || n < 1000 {
                        let k = stable[(n as usize * 7 + r) % stable.len()];
                        assert_eq!(m.get(k), Some(k ^ 0xabc));
                        assert_eq!(m.get(0x9900_0000 + n * 8), None);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut next = 0x7f00_0000_0000u64;
        start.wait();
        for _ in 0..30_000 {
            next += 0x1000;
            assert!(m.insert(next, 1));
            assert_eq!(m.remove(next - 0x8000).is_some(), next - 0x8000 > 0x7f00_0000_0000);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("a reader saw a wrong answer");
        }
        assert!(m.counts().rebuilds >= 5, "rebuilds: {}", m.counts().rebuilds);
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u8..3, 1u64..40, 0u64..100), 1..400)) {
            let m = AddrMap::new();
            let mut model = HashMap::new();
            for (op, k, v) in ops {
                let key = k * 4096; // addresses collide in their low bits
                match op {
                    0 => { proptest::prop_assert!(m.insert(key, v)); model.insert(key, v); }
                    1 => { proptest::prop_assert_eq!(m.remove(key), model.remove(&key)); }
                    _ => { proptest::prop_assert_eq!(m.get(key), model.get(&key).copied()); }
                }
            }
            proptest::prop_assert_eq!(m.len(), model.len());
        }

        /// Churn: fresh keys (new addresses) inserted, old ones removed, lookups of live, removed
        /// and never-seen keys, long enough for many rebuilds; the map agrees with a HashMap
        /// after every step and its tombstones stay below the rebuild threshold.
        #[test]
        fn behaves_like_a_hash_map_under_churn(ops in proptest::collection::vec((0u8..4, 0usize..64, 0u64..1000), 1..3000)) {
            let m = AddrMap::new();
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut order: Vec<u64> = Vec::new();
            let mut next = 0x7f12_3400_0000u64;
            for (op, pick, v) in ops {
                match op {
                    0 | 1 if model.len() < CAPACITY / 2 => {
                        next += 0x1000 * (1 + (v % 3));
                        proptest::prop_assert!(m.insert(next, v));
                        model.insert(next, v);
                        order.push(next);
                    }
                    2 if !order.is_empty() => {
                        let key = order.swap_remove(pick % order.len());
                        proptest::prop_assert_eq!(m.remove(key), model.remove(&key));
                    }
                    _ => {
                        let key = if order.is_empty() { next + 8 } else { order[pick % order.len()] };
                        proptest::prop_assert_eq!(m.get(key), model.get(&key).copied());
                        proptest::prop_assert_eq!(m.get(next - 0x1000 * (pick as u64 + 1)), model.get(&(next - 0x1000 * (pick as u64 + 1))).copied());
                    }
                }
                proptest::prop_assert!(m.tombstones() < MAX_TOMBSTONES);
            }
            proptest::prop_assert_eq!(m.len(), model.len());
            for (k, v) in &model {
                proptest::prop_assert_eq!(m.get(*k), Some(*v));
            }
        }
    }
}
