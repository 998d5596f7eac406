//! SDMA queues: a 1 MiB byte ring with 64-bit monotonic read/write byte indices, and the gfx9
//! SDMA packets ROCr writes (`amd_blit_sdma.cpp`, `sdma_registers.h`; layouts in
//! `docs/rocr-thunk-facts.md` §12). A copy keeps its engine busy for bytes / bandwidth; the
//! packets after it (the completion's atomic, fence and trap) run when it is done.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::device::QueueKey;

use super::Env;

const OP_NOP: u32 = 0;
const OP_COPY: u32 = 1;
const OP_FENCE: u32 = 5;
const OP_TRAP: u32 = 6;
const OP_POLL_REGMEM: u32 = 8;
const OP_ATOMIC: u32 = 10;
const OP_CONST_FILL: u32 = 11;
const OP_TIMESTAMP: u32 = 13;
const SUB_COPY_LINEAR: u32 = 0;
const SUB_COPY_LINEAR_RECT: u32 = 4;
const ATOMIC_ADD64: u32 = 47;
/// COPY_LINEAR's and CONSTANT_FILL's byte count: 30 bits on the SDMA 4.4 engines of gfx90a and
/// gfx942 (22 on older gfx9). ROCr 6.4 copies up to 0x3fffffe0 bytes in one packet there
/// (ROCr 5.2 split at 0x3fffe0); reading 22 bits copied a 4 MiB + 308 byte copy's first 308
/// bytes only.
const COUNT_MASK: u32 = 0x3fff_ffff;

#[derive(Debug)]
pub struct SdmaQueue {
    pub ring: u64,
    pub size: u64,
    pub rptr_addr: u64,
    pub wptr_addr: u64,
    pub runnable: bool,
    busy_until: u64,
    poll_at: Option<u64>,
    failed: bool,
}

impl SdmaQueue {
    pub fn new(ring: u64, size: u64, rptr_addr: u64, wptr_addr: u64) -> Self {
        SdmaQueue {
            ring,
            size: size.max(4),
            rptr_addr,
            wptr_addr,
            runnable: true,
            busy_until: 0,
            poll_at: None,
            failed: false,
        }
    }

    /// When this queue needs the engine again without a doorbell.
    pub fn wake_at(&self) -> Option<u64> {
        if self.failed || !self.runnable {
            return None;
        }
        self.poll_at.map(|p| p.max(self.busy_until))
    }
}

/// Runs every SDMA queue up to device time `now`.
pub fn run_all(
    queues: &mut BTreeMap<QueueKey, SdmaQueue>,
    env: &Env,
    cfg: &Config,
    now: u64,
) -> bool {
    let mut progress = false;
    for q in queues.values_mut() {
        progress |= run(q, env, cfg, now);
    }
    progress
}

fn lohi(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

fn run(q: &mut SdmaQueue, env: &Env, cfg: &Config, now: u64) -> bool {
    let mut progress = false;
    let mem = env.mem;
    loop {
        if !q.runnable || q.failed {
            return progress;
        }
        if now < q.busy_until {
            q.poll_at = Some(q.busy_until);
            return progress;
        }
        if q.poll_at.is_some_and(|p| now < p) {
            return progress;
        }
        q.poll_at = None;
        if !env.memory.device_accessible(q.rptr_addr, 8)
            || !env.memory.device_accessible(q.wptr_addr, 8)
        {
            q.failed = true;
            return progress;
        }
        let rptr = mem.load_u64(q.rptr_addr);
        let wptr = mem.load_u64(q.wptr_addr);
        if rptr >= wptr {
            return progress;
        }
        let off = rptr % q.size;
        let avail = (q.size - off).min(wptr - rptr);
        let dwords = (avail / 4).min(16) as usize;
        if dwords == 0 || !env.memory.device_accessible(q.ring + off, 4 * dwords as u64) {
            q.failed = true;
            tracing::warn!("xhsa-emu: SDMA ring outside mapped memory");
            return progress;
        }
        let mut raw = vec![0u8; dwords * 4];
        mem.read(q.ring + off, &mut raw);
        let dw: Vec<u32> =
            raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect();
        let need = |n: usize| dw.len() >= n;
        let op = dw[0] & 0xff;
        let sub = dw[0] >> 8 & 0xff;
        let len_dw = match op {
            OP_NOP => 1 + (dw[0] >> 16 & 0x3fff) as usize,
            OP_COPY if sub == SUB_COPY_LINEAR && need(7) => {
                let bytes = u64::from(dw[1] & COUNT_MASK) + 1;
                let (src, dst) = (lohi(dw[3], dw[4]), lohi(dw[5], dw[6]));
                if !(env.memory.device_accessible(src, bytes)
                    && env.memory.device_accessible(dst, bytes))
                {
                    let near = |a: u64| {
                        env.memory.find(a).map(|r| {
                            format!("{:#x}+{:#x} {:?} host {:#x}", r.start, r.size, r.kind, r.host)
                        })
                    };
                    tracing::warn!(
                        src = format_args!("{src:#x}"),
                        dst = format_args!("{dst:#x}"),
                        bytes,
                        src_range = ?near(src),
                        src_end_range = ?near(src + bytes - 1),
                        dst_range = ?near(dst),
                        dst_end_range = ?near(dst + bytes - 1),
                        "xhsa-emu: SDMA linear copy outside one mapped range"
                    );
                    return fault(
                        q,
                        env,
                        if env.memory.device_accessible(src, bytes) { dst } else { src },
                    );
                }
                mem.copy(dst, src, bytes);
                q.busy_until = now + bytes * 1000 / cfg.timing.sdma_bytes_per_us;
                7
            }
            OP_COPY if sub == SUB_COPY_LINEAR_RECT && need(13) => {
                if let Err(addr) = copy_rect(&dw, env) {
                    return fault(q, env, addr);
                }
                13
            }
            OP_FENCE if need(4) => {
                let addr = lohi(dw[1], dw[2]);
                if !env.memory.device_accessible(addr, 4) {
                    return fault(q, env, addr);
                }
                mem.write(addr, &dw[3].to_le_bytes());
                4
            }
            OP_TRAP if need(2) => {
                env.events.interrupt(dw[1] & 0x0fff_ffff);
                2
            }
            OP_POLL_REGMEM if need(6) => {
                let mem_poll = dw[0] >> 31 & 1 == 1;
                if mem_poll {
                    let addr = lohi(dw[1], dw[2]);
                    if !env.memory.device_accessible(addr, 4) {
                        return fault(q, env, addr);
                    }
                    let v = mem.read_u32(addr) & dw[4];
                    let func = dw[0] >> 28 & 7;
                    let r = dw[3];
                    let ok = match func {
                        0 => true,
                        1 => v < r,
                        2 => v <= r,
                        3 => v == r,
                        4 => v != r,
                        5 => v >= r,
                        6 => v > r,
                        _ => true,
                    };
                    if !ok {
                        q.poll_at = Some(now + 20_000);
                        return progress;
                    }
                }
                6
            }
            OP_ATOMIC if need(8) => {
                let addr = lohi(dw[1], dw[2]);
                if !env.memory.device_accessible(addr, 8) {
                    return fault(q, env, addr);
                }
                if dw[0] >> 25 == ATOMIC_ADD64 {
                    mem.fetch_add_i64(addr, lohi(dw[3], dw[4]) as i64);
                } else {
                    tracing::warn!(
                        op = dw[0] >> 25,
                        "xhsa-emu: unsupported SDMA atomic operation ignored"
                    );
                }
                8
            }
            OP_CONST_FILL if need(5) => {
                let dst = lohi(dw[1], dw[2]);
                let bytes = u64::from(dw[4] & COUNT_MASK) + 4;
                if !env.memory.device_accessible(dst, bytes) {
                    return fault(q, env, dst);
                }
                mem.fill32(dst, dw[3], bytes / 4);
                q.busy_until = now + bytes * 1000 / cfg.timing.sdma_bytes_per_us;
                5
            }
            OP_TIMESTAMP if need(3) => {
                let addr = lohi(dw[1], dw[2]);
                if !env.memory.device_accessible(addr, 8) {
                    return fault(q, env, addr);
                }
                mem.store_u64(addr, (env.to_host)(now));
                3
            }
            _ => {
                tracing::warn!(op, sub, "xhsa-emu: unknown SDMA packet; skipped one dword");
                1
            }
        };
        mem.store_u64(q.rptr_addr, rptr + 4 * len_dw as u64);
        progress = true;
    }
}

fn copy_rect(dw: &[u32], env: &Env) -> Result<(), u64> {
    let elem = 1u64 << (dw[0] >> 29 & 7);
    let src = lohi(dw[1], dw[2]);
    let (sx, sy) = (u64::from(dw[3] & 0x3fff), u64::from(dw[3] >> 16 & 0x3fff));
    let (sz, spitch) = (u64::from(dw[4] & 0x7ff), u64::from(dw[4] >> 13) + 1);
    let sslice = u64::from(dw[5] & 0x0fff_ffff) + 1;
    let dst = lohi(dw[6], dw[7]);
    let (dx, dy) = (u64::from(dw[8] & 0x3fff), u64::from(dw[8] >> 16 & 0x3fff));
    let (dz, dpitch) = (u64::from(dw[9] & 0x7ff), u64::from(dw[9] >> 13) + 1);
    let dslice = u64::from(dw[10] & 0x0fff_ffff) + 1;
    let (rx, ry) = (u64::from(dw[11] & 0x3fff) + 1, u64::from(dw[11] >> 16 & 0x3fff) + 1);
    let rz = u64::from(dw[12] & 0x7ff) + 1;
    for z in 0..rz {
        for y in 0..ry {
            let s = src + ((sz + z) * sslice + (sy + y) * spitch + sx) * elem;
            let d = dst + ((dz + z) * dslice + (dy + y) * dpitch + dx) * elem;
            let n = rx * elem;
            if !env.memory.device_accessible(s, n) {
                return Err(s);
            }
            if !env.memory.device_accessible(d, n) {
                return Err(d);
            }
            env.mem.copy(d, s, n);
        }
    }
    Ok(())
}

fn fault(q: &mut SdmaQueue, env: &Env, addr: u64) -> bool {
    q.failed = true;
    tracing::warn!(addr = format_args!("{addr:#x}"), "xhsa-emu: SDMA memory fault");
    let data = xhsa_ioctl::abi::event::HsaMemoryExceptionData {
        failure: xhsa_ioctl::abi::event::MemoryExceptionFailure {
            not_present: 1,
            ..Default::default()
        },
        va: addr,
        gpu_id: env.gpu_id,
        ..Default::default()
    };
    env.events.memory_fault(data);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kfd::events::Events;
    use crate::kfd::memory::{MemKind, Memory, Range};
    use crate::sys::devmem::{DeviceMemory, HostMemory};

    // SAFETY: the tests give it only addresses inside the buffers they own and keep alive.
    const HOST: HostMemory = unsafe { HostMemory::new() };

    /// One SDMA packet run over host memory: a buffer of `bytes` words with the ring, the read
    /// and write indices, a source and a destination of `len` bytes each.
    fn run_packet(packet: &[u32], buf: &mut [u64]) {
        run_packet_split(packet, buf, &[]);
    }

    /// As [`run_packet`], with the buffer registered as ranges side by side, cut at the byte
    /// offsets `cuts` (as HIP locks a large pageable buffer in pieces).
    fn run_packet_split(packet: &[u32], buf: &mut [u64], cuts: &[u64]) {
        let base = buf.as_mut_ptr() as u64;
        let memory = Memory::default();
        let ends: Vec<u64> = cuts.iter().copied().chain([8 * buf.len() as u64]).collect();
        let mut start = 0;
        for (k, &end) in ends.iter().enumerate() {
            memory.insert(Range {
                host: 0,
                start: base + start,
                size: end - start,
                kind: if k == 0 { MemKind::System } else { MemKind::Userptr },
                node: 0,
                flags: 0,
                mapped_nodes: vec![1],
                user_data: 0,
                handle: 1 + k as u64,
            });
            start = end;
        }
        let (ring, rptr, wptr) = (base, base + 256, base + 264);
        for (k, d) in packet.iter().enumerate() {
            HOST.write(ring + 4 * k as u64, &d.to_le_bytes());
        }
        HOST.store_u64(rptr, 0);
        HOST.store_u64(wptr, 4 * packet.len() as u64);
        let events = Events::default();
        let clock = || 0;
        let to_host = |t| t;
        let env = Env {
            mem: &HOST,
            events: &events,
            memory: &memory,
            gpu_id: 1,
            clock: &clock,
            to_host: &to_host,
            executor: None,
        };
        let mut q = SdmaQueue::new(ring, 256, rptr, wptr);
        let cfg = Config::default();
        // The copy keeps the engine busy until its modelled end; run until the packet is done.
        let mut now = 0;
        while HOST.load_u64(rptr) < 4 * packet.len() as u64 {
            run(&mut q, &env, &cfg, now);
            assert!(!q.failed, "the queue failed");
            now = q.wake_at().unwrap_or(now + 1_000_000);
        }
    }

    #[test]
    fn a_linear_copy_above_4_mib_copies_every_byte() {
        // 4 MiB + 308 bytes in one packet (count = bytes - 1 = 0x400133, as ROCr 6.4 sends for
        // gfx90a), from an odd source offset to an odd destination offset.
        let len: usize = (4 << 20) + 308;
        let words = 64 + 2 * (len / 8 + 2);
        let mut buf = vec![0u64; words];
        let base = buf.as_mut_ptr() as u64;
        let src = base + 512 + 4;
        let dst = src + len as u64 + 12;
        let pattern = |i: usize| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4];
        for i in 0..len {
            HOST.write(src + i as u64, &[pattern(i)]);
        }
        HOST.write(dst + len as u64, &[0xee]);
        let count = len as u32 - 1;
        assert_eq!(count, 0x40_0133);
        run_packet(
            &[
                OP_COPY | SUB_COPY_LINEAR << 8,
                count,
                0,
                src as u32,
                (src >> 32) as u32,
                dst as u32,
                (dst >> 32) as u32,
            ],
            &mut buf,
        );
        let mut got = vec![0u8; len + 1];
        HOST.read(dst, &mut got);
        let wrong = (0..len).filter(|&i| got[i] != pattern(i)).count();
        assert_eq!(
            wrong,
            0,
            "{wrong} of {len} bytes not copied (first wrong at {:?})",
            (0..len).find(|&i| got[i] != pattern(i))
        );
        assert_eq!(got[len], 0xee, "the byte after the copy is left alone");
    }

    /// ROCm 5.2's HIP locks a 64 MiB pageable buffer as userptr registrations side by side, and
    /// ROCr's SDMA copies of 4 MiB - 32 bytes run from one into the next: the GPU's page tables
    /// map them as one run of addresses. The emulator took it for an access outside memory
    /// ("SDMA memory fault addr=0x7f...dfff00", ROCr's VMFaultHandler abort; reproduced by
    /// tests/programs/hip_copies.hip, natively and under libxhsa).
    #[test]
    fn a_linear_copy_across_ranges_side_by_side_copies_every_byte() {
        let len: usize = (4 << 20) - 32;
        let words = 64 + 2 * (len / 8 + 2);
        let mut buf = vec![0u64; words];
        let base = buf.as_mut_ptr() as u64;
        let src = base + 512;
        let dst = src + len as u64 + 8;
        let pattern = |i: usize| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4];
        for i in 0..len {
            HOST.write(src + i as u64, &[pattern(i)]);
        }
        // The source's first 256 bytes in one range, the rest and the destination in others.
        let cuts = [512 + 256, 512 + len as u64 / 2 + 8];
        run_packet_split(
            &[
                OP_COPY | SUB_COPY_LINEAR << 8,
                len as u32 - 1,
                0,
                src as u32,
                (src >> 32) as u32,
                dst as u32,
                (dst >> 32) as u32,
            ],
            &mut buf,
            &cuts,
        );
        let mut got = vec![0u8; len];
        HOST.read(dst, &mut got);
        assert_eq!((0..len).filter(|&i| got[i] != pattern(i)).count(), 0);
    }

    #[test]
    fn a_constant_fill_above_4_mib_fills_every_dword() {
        let dwords: usize = (1 << 20) + 3;
        let mut buf = vec![0u64; 64 + dwords / 2 + 4];
        let dst = buf.as_mut_ptr() as u64 + 512;
        HOST.write(dst + 4 * dwords as u64, &0x1234_5678u32.to_le_bytes());
        // count = bytes - 4, fill size 2 (dwords) in DW0 bits 30-31.
        let count = 4 * dwords as u32 - 4;
        run_packet(
            &[OP_CONST_FILL | 2 << 30, dst as u32, (dst >> 32) as u32, 0xa5a5_5a5a, count],
            &mut buf,
        );
        let mut got = vec![0u8; 4 * dwords + 4];
        HOST.read(dst, &mut got);
        let words: Vec<u32> =
            got.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(
            words[..dwords].iter().all(|&w| w == 0xa5a5_5a5a),
            "{} dwords not filled",
            words[..dwords].iter().filter(|&&w| w != 0xa5a5_5a5a).count()
        );
        assert_eq!(words[dwords], 0x1234_5678, "the dword after the fill is left alone");
    }
}
