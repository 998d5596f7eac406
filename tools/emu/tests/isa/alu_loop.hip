// An ALU-bound kernel for the interpreter's rate: each work-item runs `iters` rounds of a
// xorshift/multiply mix and stores the result (checked against the CPU).
#include <hip/hip_runtime.h>

extern "C" __global__ void isa_alu_loop(unsigned* out, unsigned iters) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    for (unsigned k = 0; k < iters; ++k) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x = x * 2654435761u + k;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

// Per-class rates: `iters` rounds of 8 scalar ALU instructions (SALU), of 8 vector ALU ones
// (VALU: 32-bit logic and shifts), of 4 scalar loads (SMEM), each round with a scalar loop
// counter and branch.
extern "C" __global__ void isa_salu_loop(unsigned* out, unsigned iters) {
    unsigned a = blockIdx.x, b = 3;
    asm volatile(
        "1:\n\t"
        "s_add_u32 %0, %0, %1\n\ts_addc_u32 %1, %1, 0\n\ts_lshl_b32 %1, %1, 1\n\ts_xor_b32 %0, %0, %1\n\t"
        "s_add_i32 %0, %0, 7\n\ts_and_b32 %1, %1, 0xffff\n\ts_mov_b32 %1, %0\n\ts_lshr_b32 %1, %1, 3\n\t"
        "s_sub_u32 %2, %2, 1\n\ts_cmp_lg_u32 %2, 0\n\ts_cbranch_scc1 1b"
        : "+s"(a), "+s"(b), "+s"(iters));
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}

extern "C" __global__ void isa_valu_loop(unsigned* out, unsigned iters) {
    unsigned x = threadIdx.x + 1, y = 5;
    asm volatile(
        "1:\n\t"
        "v_xor_b32 %0, %0, %1\n\tv_lshlrev_b32 %1, 3, %0\n\tv_and_b32 %1, 0xfff, %1\n\tv_add_u32 %0, %0, %1\n\t"
        "v_lshrrev_b32 %1, 2, %0\n\tv_or_b32 %1, %1, %0\n\tv_sub_u32 %0, %1, %0\n\tv_xor_b32 %0, %0, %1\n\t"
        "s_sub_u32 %2, %2, 1\n\ts_cmp_lg_u32 %2, 0\n\ts_cbranch_scc1 1b"
        : "+v"(x), "+v"(y), "+s"(iters));
    out[blockIdx.x * blockDim.x + threadIdx.x] = x + y;
}

extern "C" __global__ void isa_smem_loop(unsigned* out, const unsigned* table, unsigned iters) {
    unsigned a = 0, t;
    asm volatile(
        "1:\n\t"
        "s_load_dword %1, %3, 0x0\n\ts_load_dword %1, %3, 0x4\n\ts_load_dword %1, %3, 0x8\n\ts_load_dword %1, %3, 0xc\n\t"
        "s_waitcnt lgkmcnt(0)\n\ts_add_u32 %0, %0, %1\n\t"
        "s_sub_u32 %2, %2, 1\n\ts_cmp_lg_u32 %2, 0\n\ts_cbranch_scc1 1b"
        : "+s"(a), "=&s"(t), "+s"(iters) : "s"(table));
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

// The ALU loop with divergent lanes: a third of each wave's work-items (tid % 3 == 0) skip the
// loop, so it runs under a partial EXEC as divergent library code does.
extern "C" __global__ void isa_divergent_loop(unsigned* out, unsigned iters) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = t + 1;
    if (t % 3 != 0) {
        for (unsigned k = 0; k < iters; ++k) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x = x * 2654435761u + k;
        }
    }
    out[t] = x;
}

// Double precision, the mix of rocRAND's Poisson sampler and the device libraries' f64 math
// (adds, multiplies, fused multiply-adds, and a division: LLVM's div_scale, rcp, fma chain,
// div_fmas, div_fixup): `iters` rounds per work-item. The products and sums are spelled out
// (`__dmul_rn`, `__dadd_rn`, `fma`) so that the compiler contracts nothing and the CPU can
// restate the result exactly.
extern "C" __global__ void isa_f64_loop(double* out, unsigned iters) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    double x = 1.0 + t * 0x1p-10, y = 0.5;
    for (unsigned k = 0; k < iters; ++k) {
        x = fma(x, 0.9990234375, 0.0078125);
        y = __dadd_rn(y, __dmul_rn(x, 0.25));
        y = y / __dadd_rn(x, 1.0);
    }
    out[t] = __dadd_rn(x, y);
}
