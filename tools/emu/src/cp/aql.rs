//! AQL queues as the command processor sees them: the ring, `amd_queue_t`'s dispatch ids and
//! properties, and the decoding and validation of the 64-byte packets.
//!
//! Offsets: `amd_queue_t` (amd_hsa_queue.h) write_dispatch_id @56, read_dispatch_id @128,
//! queue_properties @180, queue_inactive_signal @192; packets (hsa.h, hsa_ext_amd.h) as in
//! `docs/rocr-thunk-facts.md` §2.3.

use std::collections::VecDeque;

use crate::device::QueueKey;
use crate::kernels::Dispatch;
use crate::sys::devmem::DeviceMemory;

pub const WRITE_DISPATCH_ID: u64 = 56;
pub const READ_DISPATCH_ID: u64 = 128;
pub const QUEUE_PROPERTIES: u64 = 180;
pub const QUEUE_INACTIVE_SIGNAL: u64 = 192;
/// `AMD_QUEUE_PROPERTIES_ENABLE_PROFILING`.
pub const PROFILING: u32 = 1 << 3;

pub const TYPE_VENDOR: u8 = 0;
pub const TYPE_INVALID: u8 = 1;
pub const TYPE_KERNEL_DISPATCH: u8 = 2;
pub const TYPE_BARRIER_AND: u8 = 3;
pub const TYPE_AGENT_DISPATCH: u8 = 4;
pub const TYPE_BARRIER_OR: u8 = 5;
/// `AMD_AQL_FORMAT_PM4_IB` and `HSA_AMD_PACKET_TYPE_BARRIER_VALUE` in a vendor packet's byte 2.
pub const VENDOR_PM4_IB: u8 = 1;
pub const VENDOR_BARRIER_VALUE: u8 = 2;

/// The error codes the CP stores into `queue_inactive_signal`, as ROCr decodes them
/// (`AqlQueue::DynamicScratchHandler`).
pub mod error {
    pub const INVALID_DIMENSIONS: i64 = 2;
    pub const INVALID_GROUP_MEMORY: i64 = 4;
    pub const INVALID_CODE: i64 = 8;
    pub const INVALID_PACKET: i64 = 32;
    pub const WORKGROUP_TOO_LARGE: i64 = 64;
    pub const INVALID_VENDOR_PACKET: i64 = 256;
    pub const MEMORY_VIOLATION: i64 = 0x2000_0000;
    /// A wave executed an illegal instruction (HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION); the
    /// emulator also reports an instruction its ISA interpreter does not implement this way.
    pub const ILLEGAL_INSTRUCTION: i64 = 0x4000_0000;
}

/// A decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    Kernel(Dispatch),
    /// Barrier-AND (`any == false`) or barrier-OR over the non-zero dependency signals.
    Barrier {
        deps: Vec<u64>,
        any: bool,
    },
    /// AMD barrier-value: wait until `(value(signal) & mask) cond value`.
    BarrierValue {
        signal: u64,
        value: i64,
        mask: i64,
        cond: u32,
    },
    /// A PM4 indirect buffer (ROCr's cache invalidation): nothing to model.
    Pm4,
}

/// One 64-byte packet with its header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub packet: Packet,
    pub barrier_bit: bool,
    pub completion_signal: u64,
}

fn u16_at(p: &[u8; 64], o: usize) -> u16 {
    u16::from_le_bytes([p[o], p[o + 1]])
}
fn u32_at(p: &[u8; 64], o: usize) -> u32 {
    u32::from_le_bytes(p[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(p: &[u8; 64], o: usize) -> u64 {
    u64::from_le_bytes(p[o..o + 8].try_into().expect("8 bytes"))
}

/// Decodes and validates a packet the way the CP does; `Err` carries the queue error code.
pub fn decode(p: &[u8; 64], max_group_segment: u32) -> Result<Decoded, i64> {
    let header = u16_at(p, 0);
    let kind = (header & 0xff) as u8;
    let barrier_bit = header >> 8 & 1 == 1;
    let completion_signal = u64_at(p, 56);
    let packet = match kind {
        TYPE_KERNEL_DISPATCH => {
            let dims = u16_at(p, 2) & 0x3;
            let wg = [u16_at(p, 4), u16_at(p, 6), u16_at(p, 8)];
            let grid = [u32_at(p, 12), u32_at(p, 16), u32_at(p, 20)];
            let d = Dispatch {
                kernel_object: u64_at(p, 32),
                grid,
                wg,
                kernarg: u64_at(p, 40),
                group_segment: u32_at(p, 28),
                private_segment: u32_at(p, 24),
            };
            if !(1..=3).contains(&dims) || wg.contains(&0) || grid.contains(&0) {
                return Err(error::INVALID_DIMENSIONS);
            }
            if d.work_items_per_wg() > 1024 {
                return Err(error::WORKGROUP_TOO_LARGE);
            }
            if d.group_segment > max_group_segment {
                return Err(error::INVALID_GROUP_MEMORY);
            }
            if d.kernel_object == 0 {
                return Err(error::INVALID_CODE);
            }
            Packet::Kernel(d)
        }
        TYPE_BARRIER_AND | TYPE_BARRIER_OR => {
            let deps = (0..5).map(|i| u64_at(p, 8 + 8 * i)).filter(|&s| s != 0).collect();
            Packet::Barrier { deps, any: kind == TYPE_BARRIER_OR }
        }
        TYPE_VENDOR => match p[2] {
            VENDOR_PM4_IB => Packet::Pm4,
            VENDOR_BARRIER_VALUE => Packet::BarrierValue {
                signal: u64_at(p, 8),
                value: u64_at(p, 16) as i64,
                mask: u64_at(p, 24) as i64,
                cond: u32_at(p, 32),
            },
            _ => return Err(error::INVALID_VENDOR_PACKET),
        },
        // Agent dispatch is not a GPU queue's packet; other types do not exist.
        _ => return Err(error::INVALID_PACKET),
    };
    Ok(Decoded { packet, barrier_bit, completion_signal })
}

/// Whether a barrier-value condition holds (`hsa_signal_condition_t`: EQ, NE, LT, GTE).
pub fn condition_holds(current: i64, value: i64, mask: i64, cond: u32) -> bool {
    let v = current & mask;
    match cond {
        0 => v == value,
        1 => v != value,
        2 => v < value,
        3 => v >= value,
        _ => false,
    }
}

/// What keeps a queue from fetching its next packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// The packet's barrier bit: earlier packets must complete first.
    BarrierBit,
    /// A barrier packet's dependencies are not yet satisfied; re-check at `poll_at`.
    Dependencies { poll_at: u64, backoff: u64 },
}

/// A fetched packet not yet completed.
#[derive(Clone, Debug)]
pub struct InFlight {
    /// The packet's id (its dispatch index in the queue).
    pub id: u64,
    /// HWS tag for kernels; `None` for packets that complete when fetched.
    pub tag: Option<u64>,
    pub completion_signal: u64,
    pub start: u64,
    pub end: Option<u64>,
    pub kernel: Option<(Dispatch, super::resolve::Resolved)>,
    /// Where its execution on the ISA interpreter stands (kernels that execute).
    pub exec: Exec,
}

/// A packet's execution on the ISA interpreter's thread.
#[derive(Clone, Debug, Default)]
pub enum Exec {
    /// Not handed over (or nothing to execute).
    #[default]
    NotStarted,
    /// Handed to the executor as this job id.
    Running(u64),
    /// Finished with this result.
    Done(Result<crate::isa::Stats, crate::isa::IsaError>),
}

/// A user-mode AQL queue.
#[derive(Debug)]
pub struct AqlQueue {
    pub key: QueueKey,
    pub ring: u64,
    pub slots: u64,
    /// Address of the queue's `amd_queue_t`.
    pub amd_queue: u64,
    /// Next packet id to fetch.
    pub read: u64,
    /// Packet ids below this were visible when the current CP run began.
    pub visible: u64,
    /// Host address of the queue's doorbell (the packet id of the last packet announced;
    /// `u64::MAX` until the first ring).
    pub doorbell: u64,
    /// Packet ids below this were announced: by a doorbell ring (its value + 1), or read from
    /// the write index when the queue was (re)mapped.
    pub published: u64,
    /// The queue was mapped (created, or made runnable again): the CP picks up the write index
    /// from memory, as the hardware does when a queue is mapped.
    pub remapped: bool,
    pub runnable: bool,
    pub failed: bool,
    /// The queue holds the GPU's GWS (see `Cp::set_gws`).
    pub gws: bool,
    pub blocked: Option<Blocked>,
    pub inflight: VecDeque<InFlight>,
    /// Device time the last packet completed.
    pub last_end: u64,
    pub packets: u64,
}

impl AqlQueue {
    pub fn new(key: QueueKey, ring: u64, ring_bytes: u64, read_ptr: u64, doorbell: u64) -> Self {
        AqlQueue {
            key,
            ring,
            slots: (ring_bytes / 64).max(1),
            amd_queue: read_ptr.wrapping_sub(READ_DISPATCH_ID),
            read: 0,
            visible: 0,
            doorbell,
            published: 0,
            // Created = mapped: the CP reads the write index from memory once (a packet
            // written before CREATE_QUEUE runs without a ring).
            remapped: true,
            runnable: true,
            gws: false,
            failed: false,
            blocked: None,
            inflight: VecDeque::new(),
            last_end: 0,
            packets: 0,
        }
    }

    /// Packet ids below the returned one may be fetched: announced by the doorbell (or picked
    /// up at a (re)map), written (the write index), and not more than one ring ahead of the
    /// completed ones.
    pub fn fetch_limit(&mut self, mem: &dyn DeviceMemory) -> u64 {
        let write = mem.load_u64(self.amd_queue + WRITE_DISPATCH_ID);
        if std::mem::take(&mut self.remapped) {
            self.published = self.published.max(write);
        }
        // The doorbell holds the id of the last packet announced; u64::MAX: never rung.
        let rung = mem.load_u64(self.doorbell).wrapping_add(1);
        self.published = self.published.max(rung);
        write.min(self.published)
    }

    pub fn slot_addr(&self, id: u64) -> u64 {
        self.ring + (id % self.slots) * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dispatch_packet() -> [u8; 64] {
        let mut p = [0u8; 64];
        p[0..2].copy_from_slice(&(u16::from(TYPE_KERNEL_DISPATCH) | 1 << 8).to_le_bytes());
        p[2..4].copy_from_slice(&1u16.to_le_bytes());
        p[4..6].copy_from_slice(&256u16.to_le_bytes());
        p[6..8].copy_from_slice(&1u16.to_le_bytes());
        p[8..10].copy_from_slice(&1u16.to_le_bytes());
        p[12..16].copy_from_slice(&1024u32.to_le_bytes());
        p[16..20].copy_from_slice(&1u32.to_le_bytes());
        p[20..24].copy_from_slice(&1u32.to_le_bytes());
        p[32..40].copy_from_slice(&0x7000u64.to_le_bytes());
        p[40..48].copy_from_slice(&0x8000u64.to_le_bytes());
        p[56..64].copy_from_slice(&0x9000u64.to_le_bytes());
        p
    }

    #[test]
    fn decodes_a_dispatch() {
        let d = decode(&dispatch_packet(), 65536).unwrap();
        assert!(d.barrier_bit);
        assert_eq!(d.completion_signal, 0x9000);
        match d.packet {
            Packet::Kernel(k) => {
                assert_eq!(k.workgroups(), 4);
                assert_eq!(k.kernarg, 0x8000);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_packets_get_the_codes_rocr_decodes() {
        let mut p = dispatch_packet();
        p[0] = 9;
        assert_eq!(decode(&p, 65536), Err(error::INVALID_PACKET));
        p[0] = TYPE_AGENT_DISPATCH;
        assert_eq!(decode(&p, 65536), Err(error::INVALID_PACKET));
        let mut p = dispatch_packet();
        p[4..6].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(decode(&p, 65536), Err(error::INVALID_DIMENSIONS));
        let mut p = dispatch_packet();
        p[6..8].copy_from_slice(&8u16.to_le_bytes());
        assert_eq!(decode(&p, 65536), Err(error::WORKGROUP_TOO_LARGE));
        let mut p = dispatch_packet();
        p[28..32].copy_from_slice(&100_000u32.to_le_bytes());
        assert_eq!(decode(&p, 65536), Err(error::INVALID_GROUP_MEMORY));
        let mut p = dispatch_packet();
        p[32..40].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(decode(&p, 65536), Err(error::INVALID_CODE));
        let mut p = [0u8; 64];
        p[2] = 7;
        assert_eq!(decode(&p, 65536), Err(error::INVALID_VENDOR_PACKET));
    }

    #[test]
    fn barriers_keep_only_real_dependencies() {
        let mut p = [0u8; 64];
        p[0] = TYPE_BARRIER_OR;
        p[16..24].copy_from_slice(&0x5000u64.to_le_bytes());
        let d = decode(&p, 0).unwrap();
        assert_eq!(d.packet, Packet::Barrier { deps: vec![0x5000], any: true });
    }

    #[test]
    fn barrier_value_conditions() {
        assert!(condition_holds(5, 5, -1, 0));
        assert!(condition_holds(0x15, 5, 0xf, 0));
        assert!(condition_holds(4, 5, -1, 1));
        assert!(condition_holds(4, 5, -1, 2));
        assert!(condition_holds(6, 5, -1, 3));
        assert!(!condition_holds(6, 5, -1, 9));
    }
}
