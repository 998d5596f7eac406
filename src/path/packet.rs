//! AQL packets as values: 64 bytes copied out of the application's shadow queue.
//!
//! libxhsa never modifies an application's packet: a [`Packet`] has no setters, only accessors
//! over the bytes it was built from, and it is forwarded byte for byte. The only packets libxhsa
//! writes itself are built whole by the constructors here (the barrier-AND that tracks completion
//! with libxhsa's own signal).
//!
//! Layout (HSA 1.2 §2.9, little endian): bytes 0..2 are the header —
//!
//! | bits  | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 0-7   | type: 0 vendor, 1 invalid, 2 kernel dispatch, 3 barrier-AND, 4 agent dispatch, 5 barrier-OR |
//! | 8     | barrier: start only when all preceding packets completed      |
//! | 9-10  | acquire fence scope (0 none, 1 agent, 2 system)               |
//! | 11-12 | release fence scope                                           |
//!
//! The completion signal handle is the `u64` at offset 56 of every architected packet type; a
//! kernel dispatch's `kernel_object` is the `u64` at offset 32. A barrier packet has up to five
//! dependency signals at offsets 8..48.
#![forbid(unsafe_code)]

use std::fmt;

/// Size of one AQL packet in bytes.
pub const PACKET_SIZE: usize = 64;

/// Byte offset of the completion signal handle.
pub const COMPLETION_SIGNAL_OFFSET: usize = 56;
/// Byte offset of a kernel dispatch's `kernel_object`.
pub const KERNEL_OBJECT_OFFSET: usize = 32;
/// Byte offset of a barrier packet's first dependency signal.
pub const DEP_SIGNAL_OFFSET: usize = 8;
/// Number of dependency signals a barrier packet carries.
pub const DEP_SIGNALS: usize = 5;

const HEADER_BARRIER_BIT: u16 = 1 << 8;
const ACQUIRE_SHIFT: u16 = 9;
const RELEASE_SHIFT: u16 = 11;

/// The packet type in header bits 0-7.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// `HSA_PACKET_TYPE_VENDOR_SPECIFIC` (0), e.g. AMD's PM4 indirect buffer packets.
    VendorSpecific,
    /// `HSA_PACKET_TYPE_INVALID` (1): the slot is not yet (or no longer) a packet.
    Invalid,
    /// `HSA_PACKET_TYPE_KERNEL_DISPATCH` (2).
    KernelDispatch,
    /// `HSA_PACKET_TYPE_BARRIER_AND` (3).
    BarrierAnd,
    /// `HSA_PACKET_TYPE_AGENT_DISPATCH` (4).
    AgentDispatch,
    /// `HSA_PACKET_TYPE_BARRIER_OR` (5).
    BarrierOr,
    /// Any other value; forwarded untouched (the packet processor decides what it means).
    Other(u8),
}

impl PacketType {
    /// Decodes header bits 0-7.
    pub fn from_raw(raw: u8) -> PacketType {
        match raw {
            0 => PacketType::VendorSpecific,
            1 => PacketType::Invalid,
            2 => PacketType::KernelDispatch,
            3 => PacketType::BarrierAnd,
            4 => PacketType::AgentDispatch,
            5 => PacketType::BarrierOr,
            other => PacketType::Other(other),
        }
    }

    /// The raw header bits 0-7.
    pub fn to_raw(self) -> u8 {
        match self {
            PacketType::VendorSpecific => 0,
            PacketType::Invalid => 1,
            PacketType::KernelDispatch => 2,
            PacketType::BarrierAnd => 3,
            PacketType::AgentDispatch => 4,
            PacketType::BarrierOr => 5,
            PacketType::Other(raw) => raw,
        }
    }
}

/// A memory fence scope (header bits 9-10 and 11-12).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FenceScope {
    /// `HSA_FENCE_SCOPE_NONE` (0).
    None,
    /// `HSA_FENCE_SCOPE_AGENT` (1).
    Agent,
    /// `HSA_FENCE_SCOPE_SYSTEM` (2).
    System,
    /// The reserved encoding 3.
    Reserved,
}

impl FenceScope {
    /// Decodes a two-bit field.
    pub fn from_bits(bits: u16) -> FenceScope {
        match bits & 0b11 {
            0 => FenceScope::None,
            1 => FenceScope::Agent,
            2 => FenceScope::System,
            _ => FenceScope::Reserved,
        }
    }

    /// The two-bit encoding.
    pub fn to_bits(self) -> u16 {
        match self {
            FenceScope::None => 0,
            FenceScope::Agent => 1,
            FenceScope::System => 2,
            FenceScope::Reserved => 3,
        }
    }
}

/// What a kernel dispatch asks of the CUs ([`Packet::dispatch_shape`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DispatchShape {
    /// Work-items per work-group in x, y, z.
    pub workgroup: [u16; 3],
    /// Work-items in the grid in x, y, z.
    pub grid: [u32; 3],
    /// LDS bytes each work-group holds.
    pub group_segment_bytes: u32,
}

impl DispatchShape {
    /// Work-groups in the grid (a partial work-group at an edge counts as one); 0 when a
    /// dimension is 0 (a malformed packet: the packet processor decides what it does).
    pub fn workgroups(&self) -> u64 {
        self.grid.iter().zip(self.workgroup).fold(1u64, |n, (&g, w)| {
            if w == 0 {
                0
            } else {
                n.saturating_mul(u64::from(g).div_ceil(u64::from(w)))
            }
        })
    }

    /// Work-items per work-group.
    pub fn workgroup_items(&self) -> u64 {
        self.workgroup.iter().map(|&w| u64::from(w)).product()
    }
}

/// One 64-byte AQL packet, by value.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct Packet {
    bytes: [u8; PACKET_SIZE],
}

impl Packet {
    /// The packet made of these bytes (as copied from a queue slot).
    pub const fn from_bytes(bytes: [u8; PACKET_SIZE]) -> Packet {
        Packet { bytes }
    }

    /// The packet's bytes, exactly as they were received.
    pub fn as_bytes(&self) -> &[u8; PACKET_SIZE] {
        &self.bytes
    }

    /// The packet's bytes by value (the edge writes bytes 2..64 first and the header word last,
    /// with release ordering, as the AQL protocol requires).
    pub fn to_bytes(self) -> [u8; PACKET_SIZE] {
        self.bytes
    }

    fn u16_at(&self, offset: usize) -> u16 {
        u16::from_le_bytes([self.bytes[offset], self.bytes[offset + 1]])
    }

    fn u32_at(&self, offset: usize) -> u32 {
        let mut word = [0u8; 4];
        word.copy_from_slice(&self.bytes[offset..offset + 4]);
        u32::from_le_bytes(word)
    }

    fn u64_at(&self, offset: usize) -> u64 {
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.bytes[offset..offset + 8]);
        u64::from_le_bytes(word)
    }

    /// The 16-bit header.
    pub fn header(&self) -> u16 {
        self.u16_at(0)
    }

    /// Header bits 0-7.
    pub fn packet_type(&self) -> PacketType {
        PacketType::from_raw(self.header() as u8)
    }

    /// Header bit 8.
    pub fn barrier(&self) -> bool {
        self.header() & HEADER_BARRIER_BIT != 0
    }

    /// Header bits 9-10.
    pub fn acquire_fence_scope(&self) -> FenceScope {
        FenceScope::from_bits(self.header() >> ACQUIRE_SHIFT)
    }

    /// Header bits 11-12.
    pub fn release_fence_scope(&self) -> FenceScope {
        FenceScope::from_bits(self.header() >> RELEASE_SHIFT)
    }

    /// The completion signal handle (offset 56); 0 means none.
    pub fn completion_signal(&self) -> u64 {
        self.u64_at(COMPLETION_SIGNAL_OFFSET)
    }

    /// The `kernel_object` (offset 32) of a kernel dispatch; `None` for other types.
    pub fn kernel_object(&self) -> Option<u64> {
        (self.packet_type() == PacketType::KernelDispatch)
            .then(|| self.u64_at(KERNEL_OBJECT_OFFSET))
    }

    /// A kernel dispatch's shape: its work-group size (offsets 4, 6, 8: `u16` each), grid size
    /// (offsets 12, 16, 20: `u32` each, in work-items) and group segment bytes per work-group
    /// (offset 28: static and dynamic LDS, as the runtime fills it); `None` for other types.
    pub fn dispatch_shape(&self) -> Option<DispatchShape> {
        (self.packet_type() == PacketType::KernelDispatch).then(|| DispatchShape {
            workgroup: [self.u16_at(4), self.u16_at(6), self.u16_at(8)],
            grid: [self.u32_at(12), self.u32_at(16), self.u32_at(20)],
            group_segment_bytes: self.u32_at(28),
        })
    }

    /// The dependency signals (offsets 8..48) of a barrier-AND or barrier-OR packet; `None` for
    /// other types. Zero handles are "no dependency".
    pub fn dep_signals(&self) -> Option<[u64; DEP_SIGNALS]> {
        match self.packet_type() {
            PacketType::BarrierAnd | PacketType::BarrierOr => {
                let mut deps = [0u64; DEP_SIGNALS];
                for (i, dep) in deps.iter_mut().enumerate() {
                    *dep = self.u64_at(DEP_SIGNAL_OFFSET + 8 * i);
                }
                Some(deps)
            }
            _ => None,
        }
    }

    /// Builds a header word.
    pub fn make_header(
        ty: PacketType,
        barrier: bool,
        acquire: FenceScope,
        release: FenceScope,
    ) -> u16 {
        ty.to_raw() as u16
            | if barrier { HEADER_BARRIER_BIT } else { 0 }
            | acquire.to_bits() << ACQUIRE_SHIFT
            | release.to_bits() << RELEASE_SHIFT
    }

    /// A barrier-AND packet of libxhsa's own: waits for `deps` (zero = none), then decrements
    /// `completion_signal`. All other fields are zero.
    pub fn barrier_and(
        deps: [u64; DEP_SIGNALS],
        completion_signal: u64,
        barrier: bool,
        acquire: FenceScope,
        release: FenceScope,
    ) -> Packet {
        let mut bytes = [0u8; PACKET_SIZE];
        let header = Packet::make_header(PacketType::BarrierAnd, barrier, acquire, release);
        bytes[0..2].copy_from_slice(&header.to_le_bytes());
        for (i, dep) in deps.iter().enumerate() {
            let at = DEP_SIGNAL_OFFSET + 8 * i;
            bytes[at..at + 8].copy_from_slice(&dep.to_le_bytes());
        }
        bytes[COMPLETION_SIGNAL_OFFSET..].copy_from_slice(&completion_signal.to_le_bytes());
        Packet { bytes }
    }

    /// The completion-tracking packet libxhsa forwards after the application's packets: a
    /// barrier-AND with the barrier bit set (it starts only once every preceding packet of the
    /// hardware queue has completed, so its signal firing means they all did), no dependencies, no
    /// fences of its own (the application's packets carry theirs; libxhsa reads nothing the GPU
    /// wrote), completing `signal`, libxhsa's signal.
    pub fn tracking_barrier(signal: u64) -> Packet {
        Packet::barrier_and([0; DEP_SIGNALS], signal, true, FenceScope::None, FenceScope::None)
    }

    /// A BARRIER_AND without dependencies, fences or completion signal: it completes at once
    /// and signals nothing. libxhsa writes it into a reserved hardware slot whose intended packet
    /// could not be written, so that the packet processor moves on instead of stopping at an
    /// invalid header.
    pub fn no_op() -> Packet {
        Packet::barrier_and([0; DEP_SIGNALS], 0, true, FenceScope::None, FenceScope::None)
    }

    /// An `HSA_PACKET_TYPE_INVALID` packet (what an empty queue slot holds).
    pub fn invalid() -> Packet {
        let mut bytes = [0u8; PACKET_SIZE];
        bytes[0] = PacketType::Invalid.to_raw();
        Packet { bytes }
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Packet");
        s.field("type", &self.packet_type())
            .field("barrier", &self.barrier())
            .field("acquire", &self.acquire_fence_scope())
            .field("release", &self.release_fence_scope())
            .field("completion_signal", &format_args!("{:#x}", self.completion_signal()));
        if let Some(ko) = self.kernel_object() {
            s.field("kernel_object", &format_args!("{ko:#x}"));
        }
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A kernel dispatch as HIP writes it: type 2, barrier 0, acquire system, release system,
    /// setup dims 1 at bits 16..18.
    fn dispatch() -> Packet {
        let mut b = [0u8; PACKET_SIZE];
        let header = Packet::make_header(
            PacketType::KernelDispatch,
            false,
            FenceScope::System,
            FenceScope::System,
        );
        assert_eq!(header, 0x1402);
        b[0..2].copy_from_slice(&header.to_le_bytes());
        b[2..4].copy_from_slice(&1u16.to_le_bytes()); // setup: 1 dimension
        b[32..40].copy_from_slice(&0x7f00_dead_beef_u64.to_le_bytes());
        b[56..64].copy_from_slice(&0x1234_5678_u64.to_le_bytes());
        Packet::from_bytes(b)
    }

    #[test]
    fn layout_is_64_bytes_aligned() {
        assert_eq!(std::mem::size_of::<Packet>(), 64);
        assert_eq!(std::mem::align_of::<Packet>(), 64);
    }

    #[test]
    fn dispatch_accessors() {
        let p = dispatch();
        assert_eq!(p.packet_type(), PacketType::KernelDispatch);
        assert!(!p.barrier());
        assert_eq!(p.acquire_fence_scope(), FenceScope::System);
        assert_eq!(p.release_fence_scope(), FenceScope::System);
        assert_eq!(p.kernel_object(), Some(0x7f00_dead_beef));
        assert_eq!(p.completion_signal(), 0x1234_5678);
        assert_eq!(p.dep_signals(), None);
        assert!(format!("{p:?}").contains("kernel_object: 0x7f00deadbeef"));
    }

    #[test]
    fn a_dispatch_shape_counts_its_workgroups_partial_ones_included() {
        let mut b = dispatch().to_bytes();
        for (i, w) in [256u16, 2, 1].iter().enumerate() {
            b[4 + 2 * i..6 + 2 * i].copy_from_slice(&w.to_le_bytes());
        }
        for (i, g) in [1000u32, 4, 3].iter().enumerate() {
            b[12 + 4 * i..16 + 4 * i].copy_from_slice(&g.to_le_bytes());
        }
        b[28..32].copy_from_slice(&10_240u32.to_le_bytes());
        let s = Packet::from_bytes(b).dispatch_shape().expect("a dispatch");
        assert_eq!(s.workgroup, [256, 2, 1]);
        assert_eq!(s.grid, [1000, 4, 3]);
        assert_eq!(s.group_segment_bytes, 10_240);
        // x: 1000 / 256 -> 4 (the last partial), y: 2, z: 3.
        assert_eq!(s.workgroups(), 4 * 2 * 3);
        assert_eq!(s.workgroup_items(), 512);
        // A zero work-group size (malformed) counts no work-group; other types have no shape.
        b[6..8].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(Packet::from_bytes(b).dispatch_shape().map(|s| s.workgroups()), Some(0));
        assert_eq!(Packet::tracking_barrier(5).dispatch_shape(), None);
    }

    #[test]
    fn kernel_object_only_for_dispatch() {
        let p = Packet::tracking_barrier(5);
        assert_eq!(p.kernel_object(), None);
        assert_eq!(Packet::invalid().packet_type(), PacketType::Invalid);
        assert_eq!(Packet::invalid().completion_signal(), 0);
    }

    #[test]
    fn tracking_barrier_is_a_plain_barrier_and() {
        let p = Packet::tracking_barrier(0xabc0_0000_0042);
        assert_eq!(p.header(), 3 | 1 << 8);
        assert_eq!(p.packet_type(), PacketType::BarrierAnd);
        assert!(p.barrier());
        assert_eq!(p.acquire_fence_scope(), FenceScope::None);
        assert_eq!(p.release_fence_scope(), FenceScope::None);
        assert_eq!(p.dep_signals(), Some([0; 5]));
        assert_eq!(p.completion_signal(), 0xabc0_0000_0042);
        // Everything but the header and the signal is zero.
        assert!(p.as_bytes()[2..56].iter().all(|&b| b == 0));
    }

    #[test]
    fn barrier_and_with_deps_and_fences() {
        let p =
            Packet::barrier_and([1, 2, 0, 0, 5], 9, false, FenceScope::Agent, FenceScope::System);
        assert_eq!(p.header(), 3 | 1 << 9 | 2 << 11);
        assert!(!p.barrier());
        assert_eq!(p.acquire_fence_scope(), FenceScope::Agent);
        assert_eq!(p.release_fence_scope(), FenceScope::System);
        assert_eq!(p.dep_signals(), Some([1, 2, 0, 0, 5]));
        assert_eq!(p.completion_signal(), 9);
    }

    #[test]
    fn packet_types_round_trip() {
        for raw in 0..=255u8 {
            assert_eq!(PacketType::from_raw(raw).to_raw(), raw);
        }
        assert_eq!(PacketType::from_raw(5), PacketType::BarrierOr);
        assert_eq!(PacketType::from_raw(4), PacketType::AgentDispatch);
        assert_eq!(PacketType::from_raw(0), PacketType::VendorSpecific);
        assert_eq!(PacketType::from_raw(0x80), PacketType::Other(0x80));
        for bits in 0..4 {
            assert_eq!(FenceScope::from_bits(bits).to_bits(), bits);
        }
    }

    proptest! {
        /// Reading never changes a packet: the bytes out are the bytes in, and the accessors read
        /// the documented offsets.
        #[test]
        fn accessors_read_documented_bits(bytes in proptest::array::uniform32(any::<u8>()),
                                          tail in proptest::array::uniform32(any::<u8>())) {
            let mut b = [0u8; 64];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&tail);
            let p = Packet::from_bytes(b);
            prop_assert_eq!(p.as_bytes(), &b);
            prop_assert_eq!(p.to_bytes(), b);
            let header = u16::from_le_bytes([b[0], b[1]]);
            prop_assert_eq!(p.header(), header);
            prop_assert_eq!(p.packet_type().to_raw(), b[0]);
            prop_assert_eq!(p.barrier(), header & 0x100 != 0);
            prop_assert_eq!(p.acquire_fence_scope().to_bits(), (header >> 9) & 3);
            prop_assert_eq!(p.release_fence_scope().to_bits(), (header >> 11) & 3);
            prop_assert_eq!(p.completion_signal(), u64::from_le_bytes(b[56..64].try_into().unwrap()));
            if b[0] == 2 {
                prop_assert_eq!(p.kernel_object(), Some(u64::from_le_bytes(b[32..40].try_into().unwrap())));
            } else {
                prop_assert_eq!(p.kernel_object(), None);
            }
        }
    }
}
