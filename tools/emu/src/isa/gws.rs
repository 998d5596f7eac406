//! Global wave sync (GWS) barriers of one dispatch: 64 resources; a wave that executes
//! `ds_gws_barrier` on a resource waits until `value + 1` waves (the count in its data0, as
//! `ds_gws_init` sets it too) have arrived there, then all of them go on and the barrier is
//! ready for its next use. Cooperative groups' grid sync (`__ockl_grid_sync`) is one
//! `ds_gws_barrier` per workgroup with the workgroup count minus one.
//!
//! Waiting waves are not blocked threads: a barrier completes when the last wave arrives, and
//! a waiting wave compares the generation it waits for with the resource's ([`Gws::released`]).

/// Number of GWS resources of a queue (KFD's `num_gws` on gfx9 parts).
pub const RESOURCES: usize = 64;

#[derive(Clone, Copy, Debug, Default)]
struct Resource {
    /// Waves that arrived at the barrier in its current use.
    arrived: u32,
    /// Completed uses of the barrier.
    generation: u64,
}

#[derive(Debug)]
pub struct Gws {
    res: [Resource; RESOURCES],
}

impl Default for Gws {
    fn default() -> Self {
        Gws { res: [Resource::default(); RESOURCES] }
    }
}

/// What an arrival did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The barrier completed with this wave: it (and the waiting ones) go on.
    Released,
    /// The wave waits for the barrier's current use (`generation`) to complete.
    Wait { generation: u64 },
}

impl Gws {
    /// `ds_gws_init`: a fresh barrier on `res` (waves already waiting there stay waiting).
    pub fn init(&mut self, res: u32) {
        self.res[res as usize % RESOURCES].arrived = 0;
    }

    /// A wave arrives at `res`'s barrier, which completes with `value + 1` waves.
    pub fn arrive(&mut self, res: u32, value: u32) -> Arrival {
        let r = &mut self.res[res as usize % RESOURCES];
        r.arrived += 1;
        if u64::from(r.arrived) > u64::from(value) {
            r.arrived = 0;
            r.generation += 1;
            Arrival::Released
        } else {
            Arrival::Wait { generation: r.generation }
        }
    }

    /// Whether a wave waiting on `res` for use `generation` may go on.
    pub fn released(&self, res: u32, generation: u64) -> bool {
        self.res[res as usize % RESOURCES].generation != generation
    }

    /// Waves waiting at `res` now.
    pub fn waiting(&self, res: u32) -> u32 {
        self.res[res as usize % RESOURCES].arrived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_releases_with_its_last_wave_and_is_reusable() {
        let mut g = Gws::default();
        let a = g.arrive(3, 2);
        let Arrival::Wait { generation } = a else { panic!("first of three waits") };
        assert_eq!(g.arrive(3, 2), Arrival::Wait { generation });
        assert!(!g.released(3, generation));
        assert_eq!(g.waiting(3), 2);
        assert_eq!(g.arrive(3, 2), Arrival::Released);
        assert!(g.released(3, generation));
        assert_eq!(g.waiting(3), 0);
        // The next use counts afresh; other resources are independent.
        assert!(matches!(g.arrive(3, 1), Arrival::Wait { .. }));
        assert!(matches!(g.arrive(4, 1), Arrival::Wait { .. }));
        assert_eq!(g.arrive(3, 1), Arrival::Released);
        // A count of 0 (one wave) never waits.
        assert_eq!(g.arrive(5, 0), Arrival::Released);
    }
}
