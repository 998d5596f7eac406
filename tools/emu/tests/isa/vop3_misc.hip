// Kernels for the legacy multiply-add, packing conversion, sum-of-absolute-differences, f16
// multiply-add and LDS append/consume tests (tools/emu/tests/isa_exec.rs): one wave, lane l reads
// a[l], b[l], c[l] (32-bit words; 64-bit operands read two), runs one instruction in inline
// assembly (so the encoding and its modifiers are exactly the ones named) and stores the result
// word(s) to d.
#include <hip/hip_runtime.h>

typedef unsigned u32x4 __attribute__((ext_vector_type(4)));

#define ABC                                                                        \
    unsigned i = threadIdx.x, x = a[i], y = b[i], z = c[i], r;                     \
    (void)x, (void)y, (void)z

#define K3(NAME, ASM)                                                                                       \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        asm volatile(ASM : "=v"(r) : "v"(x), "v"(y), "v"(z));                                               \
        d[i] = r;                                                                                           \
    }

// Accumulating VOP2 forms: D is also the third operand.
#define KACC(NAME, ASM)                                                                                     \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        r = z;                                                                                              \
        asm volatile(ASM : "+v"(r) : "v"(x), "v"(y));                                                       \
        d[i] = r;                                                                                           \
    }

K3(mul_legacy_f32, "v_mul_legacy_f32 %0, %1, %2")
K3(mad_legacy_f32, "v_mad_legacy_f32 %0, %1, %2, %3")
K3(mad_legacy_f32_neg, "v_mad_legacy_f32 %0, -%1, %2, %3")

K3(cvt_pkrtz_f16_f32, "v_cvt_pkrtz_f16_f32 %0, %1, %2")
K3(cvt_pknorm_i16_f32, "v_cvt_pknorm_i16_f32 %0, %1, %2")
K3(cvt_pknorm_u16_f32, "v_cvt_pknorm_u16_f32 %0, %1, %2")
K3(cvt_pknorm_i16_f16, "v_cvt_pknorm_i16_f16 %0, %1, %2")
// op_sel: both sources' high halves.
K3(cvt_pknorm_u16_f16_hi, "v_cvt_pknorm_u16_f16 %0, %1, %2 op_sel:[1,1,0]")
K3(cvt_pk_u16_u32, "v_cvt_pk_u16_u32 %0, %1, %2")
K3(cvt_pk_i16_i32, "v_cvt_pk_i16_i32 %0, %1, %2")
K3(cvt_pk_u8_f32, "v_cvt_pk_u8_f32 %0, %1, %2, %3")

K3(sad_u8, "v_sad_u8 %0, %1, %2, %3")
K3(sad_hi_u8, "v_sad_hi_u8 %0, %1, %2, %3")
K3(sad_u16, "v_sad_u16 %0, %1, %2, %3")
K3(sad_u32, "v_sad_u32 %0, %1, %2, %3")
K3(msad_u8, "v_msad_u8 %0, %1, %2, %3")

// 64-bit S0 and S2 (a and c hold a pair per lane), 64- or 128-bit results; D must not overlap
// a source.
#define KQ(NAME, ASM)                                                                                       \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        unsigned i = threadIdx.x;                                                                           \
        unsigned long long x = ((const unsigned long long*)a)[i], z = ((const unsigned long long*)c)[i], r; \
        asm volatile(ASM : "=&v"(r) : "v"(x), "v"(b[i]), "v"(z));                                            \
        ((unsigned long long*)d)[i] = r;                                                                     \
    }
KQ(qsad_pk_u16_u8, "v_qsad_pk_u16_u8 %0, %1, %2, %3")
KQ(mqsad_pk_u16_u8, "v_mqsad_pk_u16_u8 %0, %1, %2, %3")

// c holds four words per lane (the 32-bit accumulators), d gets four.
extern "C" __global__ void mqsad_u32_u8(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    unsigned i = threadIdx.x;
    unsigned long long x = ((const unsigned long long*)a)[i];
    u32x4 z = ((const u32x4*)c)[i], r;
    asm volatile("v_mqsad_u32_u8 %0, %1, %2, %3" : "=&v"(r) : "v"(x), "v"(b[i]), "v"(z));
    ((u32x4*)d)[i] = r;
}

KACC(mac_f16, "v_mac_f16 %0, %1, %2")
K3(madmk_f16, "v_madmk_f16 %0, %1, 0x4100, %2")  // K = 2.5
K3(madak_f16, "v_madak_f16 %0, %1, %2, 0xbd00")  // K = -1.25
KACC(pk_fmac_f16, "v_pk_fmac_f16 %0, %1, %2")

// ds_append / ds_consume on LDS counters: cnt[0..3] start as a[0..3]. M0 = the address of
// cnt[2] (8 bytes in), so that "M0 + offset" and "offset alone" address different counters.
// Every lane appends to cnt[3] (offset 4); the lanes whose b is odd consume from cnt[2] (offset
// 0); the lanes whose b is 2 mod 4 append to cnt[3] again. d[4 l .. 4 l + 3]: the three returned
// values (0xdeadbeef where a lane did not take part) and, in lanes 0-3, the final cnt[l].
extern "C" __global__ void append_consume(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    __shared__ unsigned cnt[4];
    unsigned i = threadIdx.x;
    if (i < 4) cnt[i] = a[i];
    __syncthreads();
    unsigned base = (unsigned)(size_t)&cnt[2];
    unsigned r0, r1 = 0xdeadbeef, r2 = 0xdeadbeef;
    asm volatile("s_mov_b32 m0, %1\n\ts_nop 0\n\tds_append %0 offset:4\n\ts_waitcnt lgkmcnt(0)" : "=v"(r0) : "s"(base) : "memory");
    if (b[i] & 1) {
        asm volatile("s_mov_b32 m0, %1\n\ts_nop 0\n\tds_consume %0\n\ts_waitcnt lgkmcnt(0)" : "=v"(r1) : "s"(base) : "memory");
    } else if (b[i] & 2) {
        asm volatile("s_mov_b32 m0, %1\n\ts_nop 0\n\tds_append %0 offset:4\n\ts_waitcnt lgkmcnt(0)" : "=v"(r2) : "s"(base) : "memory");
    }
    __syncthreads();
    d[4 * i] = r0;
    d[4 * i + 1] = r1;
    d[4 * i + 2] = r2;
    d[4 * i + 3] = i < 4 ? cnt[i] : 0;
}

// gfx9 VOP3-only 16-bit multiply-adds: D starts as c ^ 0xa5a5a5a5, so that the half the result
// does not go to is seen kept (or not).
#define KD(NAME, ASM)                                                                                       \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        r = z ^ 0xa5a5a5a5u;                                                                                \
        asm volatile(ASM : "+v"(r) : "v"(x), "v"(y), "v"(z));                                               \
        d[i] = r;                                                                                           \
    }
KD(mad_u16, "v_mad_u16 %0, %1, %2, %3")
KD(mad_u16_hi_clamp, "v_mad_u16 %0, %1, %2, %3 op_sel:[1,0,1,1] clamp")
KD(mad_i16, "v_mad_i16 %0, %1, %2, %3")
KD(mad_i16_clamp, "v_mad_i16 %0, %1, %2, %3 clamp")
KD(mad_legacy_u16, "v_mad_legacy_u16 %0, %1, %2, %3")
KD(mad_legacy_u16_clamp, "v_mad_legacy_u16 %0, %1, %2, %3 clamp")
KD(mad_legacy_i16, "v_mad_legacy_i16 %0, %1, %2, %3")
KD(mad_legacy_i16_clamp, "v_mad_legacy_i16 %0, %1, %2, %3 clamp")
KD(mad_f16, "v_mad_f16 %0, %1, %2, %3")
KD(mad_f16_hi, "v_mad_f16 %0, %1, -%2, %3 op_sel:[0,1,0,1]")
KD(fma_f16, "v_fma_f16 %0, %1, %2, %3")
KD(div_fixup_f16, "v_div_fixup_f16 %0, %1, %2, %3")
K3(mad_i32_i16, "v_mad_i32_i16 %0, %1, %2, %3")
// gfx9 VOP3-only 16-bit min3/max3/med3 and signed add/sub (the same op_sel and kept half).
KD(max3_u16, "v_max3_u16 %0, %1, %2, %3")
KD(min3_u16_hi, "v_min3_u16 %0, %1, %2, %3 op_sel:[1,0,1,1]")
KD(med3_u16, "v_med3_u16 %0, %1, %2, %3")
KD(max3_i16, "v_max3_i16 %0, %1, %2, %3")
KD(min3_i16, "v_min3_i16 %0, %1, %2, %3")
KD(med3_i16_hi, "v_med3_i16 %0, %1, %2, %3 op_sel:[0,1,1,1]")
KD(max3_f16, "v_max3_f16 %0, %1, -%2, %3")
KD(min3_f16_hi, "v_min3_f16 %0, %1, %2, %3 op_sel:[1,1,0,1]")
KD(med3_f16, "v_med3_f16 %0, %1, %2, |%3|")
KD(add_i16_clamp, "v_add_i16 %0, %1, %2 clamp")
KD(sub_i16_hi, "v_sub_i16 %0, %1, %2 op_sel:[1,0,1]")

// VOP1 16-bit conversions (the high half of D zeroed).
K3(cvt_norm_i16_f16, "v_cvt_norm_i16_f16 %0, %1")
K3(cvt_norm_u16_f16, "v_cvt_norm_u16_f16 %0, %1")
K3(cvt_norm_i16_f16_hi, "v_cvt_norm_i16_f16_sdwa %0, -%1 dst_sel:WORD_0 dst_unused:UNUSED_PAD src0_sel:WORD_1")
K3(sat_pk_u8_i16, "v_sat_pk_u8_i16 %0, %1")

// v_cndmask_b32_e64 with source modifiers (abs/neg act on bit 31, as on floats); the lane mask
// 0x00ff00ff0f0f3333 in an SGPR pair: lanes whose bit is set take src1.
#define KSEL(NAME, ASM)                                                                                     \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        unsigned long long m = 0x00ff00ff0f0f3333ull;                                                       \
        asm volatile(ASM : "=v"(r) : "v"(x), "v"(y), "s"(m));                                               \
        d[i] = r;                                                                                           \
    }
KSEL(cndmask_neg1, "v_cndmask_b32_e64 %0, %1, -%2, %3")
KSEL(cndmask_abs0_neg1, "v_cndmask_b32_e64 %0, |%1|, -%2, %3")
KSEL(cndmask_negabs0, "v_cndmask_b32_e64 %0, -|%1|, %2, %3")
