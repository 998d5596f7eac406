// Kernels for the typed-buffer (MTBUF) and scalar-atomic tests (tools/emu/tests/isa_exec.rs),
// in inline assembly so that the format and operands are exactly the ones named. The buffer
// resource is built from the kernel's pointer: base, stride (dword 1 [29:16]), num_records.
#include <hip/hip_runtime.h>

typedef int v4i __attribute__((ext_vector_type(4)));
typedef unsigned v2u __attribute__((ext_vector_type(2)));
typedef unsigned v4u __attribute__((ext_vector_type(4)));

__device__ v4i rsrc(const void* p, unsigned stride, unsigned records) {
    unsigned long long a = (unsigned long long)p;
    return (v4i){(int)(unsigned)a, (int)((unsigned)(a >> 32) | stride << 16), (int)records, 0x00027000};
}

// Four unorm bytes per lane (raw offsets, 4 bytes apart), out to four floats; num_records cuts
// the last 16 lanes off (they read zeros).
extern "C" __global__ void tbuf_load_unorm8888(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 4 * i;
    v4u r;
    asm volatile("tbuffer_load_format_xyzw %0, %1, %2, 0 format:[BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_UNORM] offen\n\ts_waitcnt vmcnt(0)"
                 : "=v"(r) : "v"(off), "s"(rsrc(src, 0, 48 * 4)));
    for (int k = 0; k < 4; k++) out[4 * i + k] = r[k];
}

// Two signed shorts by index (stride 4), out sign-extended.
extern "C" __global__ void tbuf_load_sint1616_idx(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x;
    v2u r;
    asm volatile("tbuffer_load_format_xy %0, %1, %2, 0 format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_SINT] idxen\n\ts_waitcnt vmcnt(0)"
                 : "=v"(r) : "v"(i), "s"(rsrc(src, 4, 64)));
    out[2 * i] = r.x;
    out[2 * i + 1] = r.y;
}

// One float with an SGPR offset (8) and an immediate one (16): element 6 of lane i's row of 8.
extern "C" __global__ void tbuf_load_float32_offsets(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 32 * i, r;
    asm volatile("tbuffer_load_format_x %0, %1, %2, %3 format:[BUF_DATA_FORMAT_32,BUF_NUM_FORMAT_FLOAT] offen offset:16\n\ts_waitcnt vmcnt(0)"
                 : "=v"(r) : "v"(off), "s"(rsrc(src, 0, 64 * 32)), "s"(8));
    out[i] = r;
}

// xyzw from a two-component format: z = 0 and w = 1.0.
extern "C" __global__ void tbuf_load_xyzw_from_f16x2(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 4 * i;
    v4u r;
    asm volatile("tbuffer_load_format_xyzw %0, %1, %2, 0 format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_FLOAT] offen\n\ts_waitcnt vmcnt(0)"
                 : "=v"(r) : "v"(off), "s"(rsrc(src, 0, 64 * 4)));
    for (int k = 0; k < 4; k++) out[4 * i + k] = r[k];
}

// d16: four halves into two registers.
extern "C" __global__ void tbuf_load_d16_f16x4(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 8 * i;
    v2u r;
    asm volatile("tbuffer_load_format_d16_xyzw %0, %1, %2, 0 format:[BUF_DATA_FORMAT_16_16_16_16,BUF_NUM_FORMAT_FLOAT] offen\n\ts_waitcnt vmcnt(0)"
                 : "=v"(r) : "v"(off), "s"(rsrc(src, 0, 64 * 8)));
    out[2 * i] = r.x;
    out[2 * i + 1] = r.y;
}

// Stores: four floats as snorm bytes; two words as uint16s (truncated).
extern "C" __global__ void tbuf_store_snorm8888(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 4 * i;
    v4u v = {src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]};
    asm volatile("tbuffer_store_format_xyzw %0, %1, %2, 0 format:[BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_SNORM] offen\n\ts_waitcnt vmcnt(0)"
                 : : "v"(v), "v"(off), "s"(rsrc(out, 0, 64 * 4)) : "memory");
}

extern "C" __global__ void tbuf_store_uint1616(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 4 * i;
    v2u v = {src[2 * i], src[2 * i + 1]};
    asm volatile("tbuffer_store_format_xy %0, %1, %2, 0 format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_UINT] offen\n\ts_waitcnt vmcnt(0)"
                 : : "v"(v), "v"(off), "s"(rsrc(out, 0, 64 * 4)) : "memory");
}

// Scalar atomics, one wave per workgroup: p[0] += wg + 1 (old values out), p[1] = max, a
// 64-bit add at p[2:3], a compare-and-swap at p[4] that only the first wave wins, and an OR
// through a buffer resource at p[5].
extern "C" __global__ void s_atomics(unsigned* p, unsigned* out) {
    unsigned wg = blockIdx.x, add = wg + 1, mx = wg * 7 % 5;
    unsigned long long add64 = (1ull << 32) | (wg + 1);
    v2u cas = {1000 + wg, 7};
    unsigned orv = 1u << wg;
    asm volatile("s_atomic_add %0, %1, 0x0 glc" : "+s"(add) : "s"(p) : "memory");
    asm volatile("s_atomic_umax %0, %1, 0x4" : : "s"(mx), "s"(p) : "memory");
    asm volatile("s_atomic_add_x2 %0, %1, 0x8 glc" : "+s"(add64) : "s"(p) : "memory");
    asm volatile("s_atomic_cmpswap %0, %1, 0x10 glc" : "+s"(cas) : "s"(p) : "memory");
    asm volatile("s_buffer_atomic_or %0, %1, 0x14 glc\n\ts_waitcnt lgkmcnt(0)" : "+s"(orv) : "s"(rsrc(p, 0, 64)) : "memory");
    if (threadIdx.x == 0) {
        out[5 * wg] = add;
        out[5 * wg + 1] = (unsigned)add64;
        out[5 * wg + 2] = (unsigned)(add64 >> 32);
        out[5 * wg + 3] = cas.x;
        out[5 * wg + 4] = orv;
    }
}

// Raw-buffer range checking (MUBUF). One dword per lane at VGPR offset 4 * lane with the SGPR
// offset `soff`: in range while soff + 4 * lane < `records` (the SGPR offset counts).
extern "C" __global__ void buf_load_soffset(const unsigned* src, unsigned* out, unsigned soff, unsigned records) {
    unsigned i = threadIdx.x, off = 4 * i, r;
    asm volatile("buffer_load_dword %0, %1, %2, %3 offen\n\ts_waitcnt vmcnt(0)" : "=v"(r) : "v"(off), "s"(rsrc(src, 0, records)), "s"(soff));
    out[i] = r;
}

// Four dwords per lane at 16 * lane: each dword is checked on its own against `records`.
extern "C" __global__ void buf_load_x4_records(const unsigned* src, unsigned* out, unsigned records) {
    unsigned i = threadIdx.x, off = 16 * i;
    v4u r;
    asm volatile("buffer_load_dwordx4 %0, %1, %2, 0 offen\n\ts_waitcnt vmcnt(0)" : "=v"(r) : "v"(off), "s"(rsrc(src, 0, records)));
    for (int k = 0; k < 4; k++) out[4 * i + k] = r[k];
}

// The store: lane l writes l * 4 + k to dword k of its 16 bytes; dwords past `records` are not
// written.
extern "C" __global__ void buf_store_x4_records(unsigned* dst, unsigned records) {
    unsigned i = threadIdx.x, off = 16 * i;
    v4u v = {4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3};
    asm volatile("buffer_store_dwordx4 %0, %1, %2, 0 offen\n\ts_waitcnt vmcnt(0)" : : "v"(v), "v"(off), "s"(rsrc(dst, 0, records)) : "memory");
}

// D16 loads into registers that hold other bits: the emulated MI200/MI300 have SRAM ECC on, and
// with it a D16 load zeroes the half it does not write (lane i reads the 16-bit word i).
extern "C" __global__ void load_d16_zero_other_half(const unsigned* src, unsigned* out) {
    unsigned i = threadIdx.x, off = 2 * i;
    unsigned g_lo = 0xdead0000u | i, g_hi = 0x0000beefu ^ i, b_lo = 0xa5a50000u, b_hi = 0x00005a5au;
    const unsigned short* p = (const unsigned short*)src + i;
    asm volatile("global_load_short_d16 %0, %1, off\n\ts_waitcnt vmcnt(0)" : "+v"(g_lo) : "v"(p));
    asm volatile("global_load_short_d16_hi %0, %1, off\n\ts_waitcnt vmcnt(0)" : "+v"(g_hi) : "v"(p));
    asm volatile("buffer_load_short_d16 %0, %1, %2, 0 offen\n\ts_waitcnt vmcnt(0)" : "+v"(b_lo) : "v"(off), "s"(rsrc(src, 0, 256)));
    asm volatile("buffer_load_short_d16_hi %0, %1, %2, 0 offen\n\ts_waitcnt vmcnt(0)" : "+v"(b_hi) : "v"(off), "s"(rsrc(src, 0, 256)));
    out[4 * i] = g_lo;
    out[4 * i + 1] = g_hi;
    out[4 * i + 2] = b_lo;
    out[4 * i + 3] = b_hi;
}
