//! The copy and fill kernels the runtimes dispatch themselves, so that `hipMemcpy` and
//! `hipMemset` work with SDMA on or off.
//!
//! - ROCr's raw blit kernels (`amd_blit_kernel.cpp`: CopyAligned, CopyMisaligned, Fill) are not
//!   in any loaded code object: their `kernel_object` is an `amd_kernel_code_t` (version 0,
//!   code at +256) that ROCr writes into a page. [`identify_rocr_blit`] recognises them by that
//!   header and their register granules, which differ per kernel.
//! - HIP's (ROCclr's) `__amd_rocclr_*` kernels are an ordinary code object, named through the
//!   loader. Kernel-argument layouts: `docs/rocr-thunk-facts.md` §11.

use super::{no_profile, streaming_wg_ns, Fault, KernelCtx, Model};
use crate::sys::devmem::DeviceMemory;

pub const ROCR_COPY_ALIGNED: &str = "rocr:CopyAligned";
pub const ROCR_COPY_MISALIGNED: &str = "rocr:CopyMisaligned";
pub const ROCR_FILL: &str = "rocr:Fill";

/// `s_load_dwordx4`, the first instruction of each ROCr blit kernel.
const FIRST_INSTRUCTION: u32 = 0xC00A_0100;

/// Which ROCr blit kernel, if any, `kernel_object` is. The caller has checked that the 260
/// bytes at `kernel_object` are readable.
pub fn identify_rocr_blit(mem: &dyn DeviceMemory, kernel_object: u64) -> Option<&'static str> {
    let version_major = mem.read_u32(kernel_object);
    let entry = mem.read_u64(kernel_object + 16);
    let rsrc1 = mem.read_u32(kernel_object + 48);
    let first = mem.read_u32(kernel_object + 256);
    if version_major != 0 || entry != 256 || first != FIRST_INSTRUCTION {
        return None;
    }
    let vgpr_granules = rsrc1 & 0x3f;
    let sgpr_granules = rsrc1 >> 6 & 0xf;
    match (sgpr_granules, vgpr_granules) {
        (3, 2) => Some(ROCR_COPY_ALIGNED),
        (2, 2) => Some(ROCR_COPY_MISALIGNED),
        (2, 1) => Some(ROCR_FILL),
        _ => None,
    }
}

fn rocr_copy_aligned(ctx: &KernelCtx) -> Result<(), Fault> {
    let (src, dst, src_end) = (ctx.arg_u64(0)?, ctx.arg_u64(8)?, ctx.arg_u64(64)?);
    ctx.copy(dst, src, src_end.saturating_sub(src))
}

fn rocr_copy_misaligned(ctx: &KernelCtx) -> Result<(), Fault> {
    let (src, dst, src_end) = (ctx.arg_u64(0)?, ctx.arg_u64(8)?, ctx.arg_u64(32)?);
    ctx.copy(dst, src, src_end.saturating_sub(src))
}

fn rocr_fill(ctx: &KernelCtx) -> Result<(), Fault> {
    let (dst, end, value) = (ctx.arg_u64(0)?, ctx.arg_u64(16)?, ctx.arg_u32(24)?);
    let bytes = end.saturating_sub(dst);
    ctx.check_write(dst, bytes)?;
    ctx.mem.fill32(dst, value, bytes / 4);
    Ok(())
}

/// Bytes one workgroup moves when `bytes` are spread over the grid's workgroups.
fn per_wg(ctx: &KernelCtx, bytes: u64) -> u64 {
    streaming_wg_ns(bytes.div_ceil(ctx.dispatch.workgroups().max(1)) * 2)
}

fn rocr_copy_aligned_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    Ok(per_wg(ctx, ctx.arg_u64(64)?.saturating_sub(ctx.arg_u64(0)?)))
}

fn rocr_copy_misaligned_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    Ok(per_wg(ctx, ctx.arg_u64(32)?.saturating_sub(ctx.arg_u64(0)?)))
}

fn rocr_fill_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    Ok(per_wg(ctx, ctx.arg_u64(16)?.saturating_sub(ctx.arg_u64(0)?) / 2))
}

/// Bytes `__amd_rocclr_copyBuffer` copies: `size` work-items, each a dword except the last,
/// which copies `remain` bytes; `remain == 8` means byte-wise copying.
fn copy_buffer_bytes(size: u64, remain: u32) -> u64 {
    if remain == 8 {
        size
    } else {
        size.saturating_sub(1) * 4 + u64::from(remain)
    }
}

/// Which `__amd_rocclr_copyBuffer` a dispatch runs. ROCm 5.x: `(srcI, dstI, srcOrigin,
/// dstOrigin, size, remain)`. ROCm 6.x (clr's blitcl.cpp since 6.2): `(src, dst, size,
/// remainder, aligned_size, end_ptr, next_chunk)`, where `end_ptr` (at +32) is an address past
/// `dst` (at +8); in the 5.x layout +32 holds a work-item count, far below any address.
fn copy_buffer_v6(ctx: &KernelCtx) -> Result<bool, Fault> {
    let (dst, at32) = (ctx.arg_u64(8)?, ctx.arg_u64(32)?);
    Ok(dst != 0 && at32 >= dst)
}

/// Bytes and (dst, src) of a `__amd_rocclr_copyBuffer` dispatch, either layout. The 6.x kernel
/// copies `size` bytes: the aligned part up to `end_ptr`, then the `remainder` tail.
fn copy_buffer_args(ctx: &KernelCtx) -> Result<(u64, u64, u64), Fault> {
    if copy_buffer_v6(ctx)? {
        Ok((ctx.arg_u64(8)?, ctx.arg_u64(0)?, ctx.arg_u64(16)?))
    } else {
        let (src, dst, so, d_o, size, remain) = (
            ctx.arg_u64(0)?,
            ctx.arg_u64(8)?,
            ctx.arg_u64(16)?,
            ctx.arg_u64(24)?,
            ctx.arg_u64(32)?,
            ctx.arg_u32(40)?,
        );
        let size = size.min(ctx.dispatch.work_items());
        Ok((dst + d_o, src + so, copy_buffer_bytes(size, remain)))
    }
}

fn hip_copy_buffer(ctx: &KernelCtx) -> Result<(), Fault> {
    let (dst, src, bytes) = copy_buffer_args(ctx)?;
    ctx.copy(dst, src, bytes)
}

fn hip_copy_buffer_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    Ok(per_wg(ctx, copy_buffer_args(ctx)?.2))
}

fn hip_copy_buffer_aligned(ctx: &KernelCtx) -> Result<(), Fault> {
    let (src, dst, so, d_o, size, align) = (
        ctx.arg_u64(0)?,
        ctx.arg_u64(8)?,
        ctx.arg_u64(16)?,
        ctx.arg_u64(24)?,
        ctx.arg_u64(32)?,
        ctx.arg_u32(40)?,
    );
    let elem: u64 = if align == 16 { 16 } else { 4 };
    let size = size.min(ctx.dispatch.work_items());
    ctx.copy(dst + d_o * elem, src + so * elem, size * elem)
}

fn hip_copy_buffer_aligned_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    let elem: u64 = if ctx.arg_u32(40)? == 16 { 16 } else { 4 };
    Ok(per_wg(ctx, ctx.arg_u64(32)? * elem))
}

/// `__amd_rocclr_fillBufferAligned`: element width from the first non-null of the ulong,
/// uint, ushort and uchar views; work-item `gid < size` writes the `patternSize`-element
/// pattern at element `gid * patternSize + offset`.
fn fill_width(ctx: &KernelCtx) -> Result<(u64, u64), Fault> {
    for (off, width) in [(24u64, 8u64), (16, 4), (8, 2), (0, 1)] {
        let p = ctx.arg_u64(off)?;
        if p != 0 {
            return Ok((p, width));
        }
    }
    Ok((0, 1))
}

/// Which `__amd_rocclr_fillBufferAligned` a dispatch runs. ROCm 5.x: four views of the buffer
/// (uchar, ushort, uint, ulong: one non-null), then `pattern, patternSize, offset, size`. ROCm
/// 6.x: `(buf, pattern, pattern_size, alignment, end_ptr, next_chunk)`: the buffer, the pattern
/// and end_ptr are all non-null.
fn fill_buffer_v6(ctx: &KernelCtx) -> Result<bool, Fault> {
    Ok(ctx.arg_u64(0)? != 0 && ctx.arg_u64(8)? != 0 && ctx.arg_u64(24)? != 0)
}

/// The 6.x fill: `[buf, end_ptr)` gets the pattern of `pattern_size` elements of `alignment`
/// bytes, repeated.
fn fill_v6_args(ctx: &KernelCtx) -> Result<(u64, u64, u64, u64), Fault> {
    let (buf, pattern, n, align, end) = (
        ctx.arg_u64(0)?,
        ctx.arg_u64(8)?,
        u64::from(ctx.arg_u32(16)?),
        u64::from(ctx.arg_u32(20)?),
        ctx.arg_u64(24)?,
    );
    Ok((buf, pattern, (n * align.max(1)).max(1), end.saturating_sub(buf)))
}

fn hip_fill_buffer(ctx: &KernelCtx) -> Result<(), Fault> {
    if fill_buffer_v6(ctx)? {
        let (buf, pattern, pat_bytes, total) = fill_v6_args(ctx)?;
        let mut pat = vec![0u8; pat_bytes as usize];
        ctx.read_bytes(pattern, &mut pat)?;
        let mut out = Vec::with_capacity(total as usize);
        while (out.len() as u64) < total {
            out.extend_from_slice(&pat);
        }
        out.truncate(total as usize);
        return ctx.write_bytes(buf, &out);
    }
    let (base, width) = fill_width(ctx)?;
    let (pattern, pattern_size, offset, size) =
        (ctx.arg_u64(32)?, u64::from(ctx.arg_u32(40)?), ctx.arg_u64(48)?, ctx.arg_u64(56)?);
    let size = size.min(ctx.dispatch.work_items());
    let mut pat = vec![0u8; (pattern_size * width) as usize];
    ctx.read_bytes(pattern, &mut pat)?;
    let start = base + offset * width;
    let total = size * pattern_size * width;
    let mut buf = Vec::with_capacity(total as usize);
    while (buf.len() as u64) < total {
        buf.extend_from_slice(&pat);
    }
    buf.truncate(total as usize);
    ctx.write_bytes(start, &buf)
}

fn hip_fill_buffer_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    if fill_buffer_v6(ctx)? {
        return Ok(per_wg(ctx, fill_v6_args(ctx)?.3 / 2));
    }
    let (_, width) = fill_width(ctx)?;
    Ok(per_wg(ctx, ctx.arg_u64(56)? * u64::from(ctx.arg_u32(40)?) * width / 2))
}

/// `__amd_rocclr_copyBufferRect(Aligned)`: rects are `(row pitch, slice pitch, base offset, _)`
/// and the size `(x, y, z, element)`, with x in elements of 1 byte (or `uint`/`uint4` for the
/// aligned variant).
fn rect_copy(ctx: &KernelCtx, elem: u64) -> Result<(), Fault> {
    let (src, dst) = (ctx.arg_u64(0)?, ctx.arg_u64(8)?);
    let sr = [ctx.arg_u64(16)?, ctx.arg_u64(24)?, ctx.arg_u64(32)?];
    let dr = [ctx.arg_u64(48)?, ctx.arg_u64(56)?, ctx.arg_u64(64)?];
    let sz = [ctx.arg_u64(80)?, ctx.arg_u64(88)?, ctx.arg_u64(96)?, ctx.arg_u64(104)?];
    let elem = if elem == 4 && sz[3] == 16 { 16 } else { elem };
    for z in 0..sz[2] {
        for y in 0..sz[1] {
            let s = src + (sr[2] + y * sr[0] + z * sr[1]) * elem;
            let d = dst + (dr[2] + y * dr[0] + z * dr[1]) * elem;
            ctx.copy(d, s, sz[0] * elem)?;
        }
    }
    Ok(())
}

fn hip_copy_rect(ctx: &KernelCtx) -> Result<(), Fault> {
    rect_copy(ctx, 1)
}

fn hip_copy_rect_aligned(ctx: &KernelCtx) -> Result<(), Fault> {
    rect_copy(ctx, 4)
}

fn hip_rect_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    Ok(per_wg(ctx, ctx.arg_u64(80)? * ctx.arg_u64(88)? * ctx.arg_u64(96)?.max(1)))
}

pub static MODELS: &[Model] = &[
    Model {
        name: ROCR_COPY_ALIGNED,
        run: rocr_copy_aligned,
        wg_ns: rocr_copy_aligned_ns,
        profile: no_profile,
    },
    Model {
        name: ROCR_COPY_MISALIGNED,
        run: rocr_copy_misaligned,
        wg_ns: rocr_copy_misaligned_ns,
        profile: no_profile,
    },
    Model { name: ROCR_FILL, run: rocr_fill, wg_ns: rocr_fill_ns, profile: no_profile },
    Model {
        name: "__amd_rocclr_copyBuffer",
        run: hip_copy_buffer,
        wg_ns: hip_copy_buffer_ns,
        profile: no_profile,
    },
    Model {
        name: "__amd_rocclr_copyBufferAligned",
        run: hip_copy_buffer_aligned,
        wg_ns: hip_copy_buffer_aligned_ns,
        profile: no_profile,
    },
    Model {
        name: "__amd_rocclr_fillBufferAligned",
        run: hip_fill_buffer,
        wg_ns: hip_fill_buffer_ns,
        profile: no_profile,
    },
    Model {
        name: "__amd_rocclr_copyBufferRect",
        run: hip_copy_rect,
        wg_ns: hip_rect_ns,
        profile: no_profile,
    },
    Model {
        name: "__amd_rocclr_copyBufferRectAligned",
        run: hip_copy_rect_aligned,
        wg_ns: hip_rect_ns,
        profile: no_profile,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Dispatch;
    use crate::sys::devmem::fake::FakeMemory;

    fn ctx<'a>(
        d: &'a Dispatch,
        m: &'a FakeMemory,
        ok: &'a dyn Fn(u64, u64) -> bool,
    ) -> KernelCtx<'a> {
        KernelCtx { dispatch: d, mem: m, accessible: ok }
    }

    fn args(m: &FakeMemory, at: u64, words: &[(u64, u64)]) {
        for &(off, v) in words {
            m.write(at + off, &v.to_le_bytes());
        }
    }

    #[test]
    fn rocr_blits_are_recognised_by_header_and_granules() {
        let m = FakeMemory::default();
        let ko = 0x4000;
        m.write(ko + 16, &256u64.to_le_bytes());
        m.write(ko + 256, &FIRST_INSTRUCTION.to_le_bytes());
        for (rsrc1, name) in [
            ((3 << 6) | 2, ROCR_COPY_ALIGNED),
            ((2 << 6) | 2, ROCR_COPY_MISALIGNED),
            ((2 << 6) | 1, ROCR_FILL),
        ] {
            m.write(ko + 48, &(rsrc1 as u32).to_le_bytes());
            assert_eq!(identify_rocr_blit(&m, ko), Some(name));
        }
        m.write(ko + 16, &512u64.to_le_bytes());
        assert_eq!(identify_rocr_blit(&m, ko), None);
    }

    #[test]
    fn hip_copy_buffer_copies_dwords_and_the_remainder() {
        let m = FakeMemory::default();
        m.write(0x1000, b"abcdefghij");
        // 10 bytes: size = 10/4 + 1 = 3 work-items, remain = 2.
        args(&m, 0x100, &[(0, 0x1000), (8, 0x2000), (16, 0), (24, 0), (32, 3)]);
        m.write(0x100 + 40, &2u32.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [256, 1, 1],
            wg: [256, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        hip_copy_buffer(&ctx(&d, &m, &ok)).unwrap();
        let mut out = [0u8; 11];
        m.read(0x2000, &mut out);
        assert_eq!(&out, b"abcdefghij\0");
    }

    #[test]
    fn hip_fill_writes_the_pattern_at_element_offsets() {
        let m = FakeMemory::default();
        m.write(0x3000, &[0xab]);
        args(&m, 0x100, &[(0, 0x1000), (8, 0), (16, 0), (24, 0), (32, 0x3000), (48, 2), (56, 5)]);
        m.write(0x100 + 40, &1u32.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [256, 1, 1],
            wg: [256, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        hip_fill_buffer(&ctx(&d, &m, &ok)).unwrap();
        let mut out = [0u8; 8];
        m.read(0x1000, &mut out);
        assert_eq!(out, [0, 0, 0xab, 0xab, 0xab, 0xab, 0xab, 0]);
    }

    #[test]
    fn rocr_fill_fills_dwords() {
        let m = FakeMemory::default();
        args(&m, 0x100, &[(0, 0x1000), (8, 0x1000), (16, 0x1010)]);
        m.write(0x100 + 24, &7u32.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [64, 1, 1],
            wg: [64, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        rocr_fill(&ctx(&d, &m, &ok)).unwrap();
        assert_eq!(m.read_u32(0x100c), 7);
        assert_eq!(m.read_u32(0x1010), 0);
    }
}
