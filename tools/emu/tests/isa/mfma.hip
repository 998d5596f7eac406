// Kernels for the MFMA tests (tools/emu/tests/isa_exec.rs): one wave of 64 lanes, lane l loads
// its A, B and C registers as raw 32-bit words from a[l*RA..], b[l*RA..], c[l*RC..], runs one
// v_mfma_* and stores D's words to d[l*RC..]. The host places matrix elements into those words
// by the ISA's layouts and checks D against its own matrix multiply.
#include <hip/hip_runtime.h>

typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef float f32x32 __attribute__((ext_vector_type(32)));
typedef int i32x4 __attribute__((ext_vector_type(4)));
typedef int i32x16 __attribute__((ext_vector_type(16)));
typedef int i32x32 __attribute__((ext_vector_type(32)));
typedef double f64x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef short s16x2 __attribute__((ext_vector_type(2)));
typedef short s16x4 __attribute__((ext_vector_type(4)));

template <typename T>
__device__ T load(const unsigned* p) {
    T v;
    __builtin_memcpy(&v, p + threadIdx.x * (sizeof(T) / 4), sizeof(T));
    return v;
}

template <typename T>
__device__ void store(unsigned* p, T v) {
    __builtin_memcpy(p + threadIdx.x * (sizeof(T) / 4), &v, sizeof(T));
}

#define MFMA(NAME, AT, CT, CBSZ, ABID, BLGP)                                                                          \
    extern "C" __global__ void mfma_##NAME##_##CBSZ##_##ABID##_##BLGP(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        store<CT>(d, __builtin_amdgcn_mfma_##NAME(load<AT>(a), load<AT>(b), load<CT>(c), CBSZ, ABID, BLGP));          \
    }

MFMA(f32_32x32x1f32, float, f32x32, 0, 0, 0)
MFMA(f32_16x16x1f32, float, f32x16, 0, 0, 0)
MFMA(f32_4x4x1f32, float, f32x4, 0, 0, 0)
MFMA(f32_32x32x2f32, float, f32x16, 0, 0, 0)
MFMA(f32_16x16x4f32, float, f32x4, 0, 0, 0)
MFMA(f32_32x32x4f16, f16x4, f32x32, 0, 0, 0)
MFMA(f32_16x16x4f16, f16x4, f32x16, 0, 0, 0)
MFMA(f32_4x4x4f16, f16x4, f32x4, 0, 0, 0)
MFMA(f32_32x32x8f16, f16x4, f32x16, 0, 0, 0)
MFMA(f32_16x16x16f16, f16x4, f32x4, 0, 0, 0)
MFMA(i32_32x32x4i8, int, i32x32, 0, 0, 0)
MFMA(i32_16x16x4i8, int, i32x16, 0, 0, 0)
MFMA(i32_4x4x4i8, int, i32x4, 0, 0, 0)
MFMA(i32_32x32x8i8, int, i32x16, 0, 0, 0)
MFMA(i32_16x16x16i8, int, i32x4, 0, 0, 0)
MFMA(f32_32x32x4bf16_1k, s16x4, f32x32, 0, 0, 0)
MFMA(f32_16x16x4bf16_1k, s16x4, f32x16, 0, 0, 0)
MFMA(f32_4x4x4bf16_1k, s16x4, f32x4, 0, 0, 0)
MFMA(f32_32x32x8bf16_1k, s16x4, f32x16, 0, 0, 0)
MFMA(f32_16x16x16bf16_1k, s16x4, f32x4, 0, 0, 0)
MFMA(f32_32x32x2bf16, s16x2, f32x32, 0, 0, 0)
MFMA(f32_16x16x2bf16, s16x2, f32x16, 0, 0, 0)
MFMA(f32_4x4x2bf16, s16x2, f32x4, 0, 0, 0)
MFMA(f32_32x32x4bf16, s16x2, f32x16, 0, 0, 0)
MFMA(f32_16x16x8bf16, s16x2, f32x4, 0, 0, 0)
MFMA(f64_16x16x4f64, double, f64x4, 0, 0, 0)
MFMA(f64_4x4x4f64, double, double, 0, 0, 0)

// Broadcast modifiers.
MFMA(f32_32x32x1f32, float, f32x32, 1, 1, 3)
MFMA(f32_16x16x1f32, float, f32x16, 2, 3, 1)
MFMA(f32_4x4x4f16, f16x4, f32x4, 4, 9, 6)
MFMA(i32_16x16x4i8, int, i32x16, 1, 0, 2)
MFMA(f32_16x16x4f32, float, f32x4, 0, 0, 7)
MFMA(f32_32x32x2bf16, s16x2, f32x32, 0, 0, 5)
// Not defined for f64 on gfx90a: the dispatch fails as not implemented.
MFMA(f64_16x16x4f64, double, f64x4, 0, 0, 1)

// The accumulation-register forms: A from an AGPR, C and D in AGPRs (acc_cd), B a VGPR.
extern "C" __global__ void mfma_agpr_16x16x4f32(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    float x = load<float>(a), xa;
    f32x4 z = load<f32x4>(c), r;
    asm volatile("v_accvgpr_write_b32 %0, %1" : "=a"(xa) : "v"(x));
    asm volatile("s_nop 2\n\tv_mfma_f32_16x16x4f32 %0, %1, %2, %3\n\ts_nop 10" : "=a"(r) : "a"(xa), "v"(load<float>(b)), "a"(z));
    store<f32x4>(d, r);
}

extern "C" __global__ void mfma_agpr_32x32x8f16(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    f32x16 z = load<f32x16>(c), r;
    asm volatile("v_mfma_f32_32x32x8f16 %0, %1, %2, %3\n\ts_nop 18" : "=a"(r) : "v"(load<f16x4>(a)), "a"(load<f16x4>(b)), "a"(z));
    store<f32x16>(d, r);
}

// C as an inline constant (1.0) with D in VGPRs.
extern "C" __global__ void mfma_const_c_4x4x1f32(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    f32x4 r;
    asm volatile("v_mfma_f32_4x4x1f32 %0, %1, %2, 1.0\n\ts_nop 4" : "=v"(r) : "v"(load<float>(a)), "v"(load<float>(b)));
    store<f32x4>(d, r);
}
