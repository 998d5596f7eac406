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
        SdmaQueue { ring, size: size.max(4), rptr_addr, wptr_addr, runnable: true, busy_until: 0, poll_at: None, failed: false }
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
pub fn run_all(queues: &mut BTreeMap<QueueKey, SdmaQueue>, env: &Env, cfg: &Config, now: u64) -> bool {
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
        if !env.memory.device_accessible(q.rptr_addr, 8) || !env.memory.device_accessible(q.wptr_addr, 8) {
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
        let dw: Vec<u32> = raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect();
        let need = |n: usize| dw.len() >= n;
        let op = dw[0] & 0xff;
        let sub = dw[0] >> 8 & 0xff;
        let len_dw = match op {
            OP_NOP => 1 + (dw[0] >> 16 & 0x3fff) as usize,
            OP_COPY if sub == SUB_COPY_LINEAR && need(7) => {
                let bytes = u64::from(dw[1] & 0x3f_ffff) + 1;
                let (src, dst) = (lohi(dw[3], dw[4]), lohi(dw[5], dw[6]));
                if !(env.memory.device_accessible(src, bytes) && env.memory.device_accessible(dst, bytes)) {
                    return fault(q, env, if env.memory.device_accessible(src, bytes) { dst } else { src });
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
                    tracing::warn!(op = dw[0] >> 25, "xhsa-emu: unsupported SDMA atomic operation ignored");
                }
                8
            }
            OP_CONST_FILL if need(5) => {
                let dst = lohi(dw[1], dw[2]);
                let bytes = u64::from(dw[4] & 0x3f_ffff) + 4;
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
        failure: xhsa_ioctl::abi::event::MemoryExceptionFailure { not_present: 1, ..Default::default() },
        va: addr,
        gpu_id: env.gpu_id,
        ..Default::default()
    };
    env.events.memory_fault(data);
    true
}
