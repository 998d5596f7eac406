// Kernels for the packed-math tests (tools/emu/tests/isa_exec.rs): one wave, lane l reads a[l],
// b[l], c[l] (32-bit words), runs one instruction in inline assembly (so the encoding and its
// modifiers are exactly the ones named) and stores the result word(s) to d[l].
#include <hip/hip_runtime.h>

typedef float f32x2 __attribute__((ext_vector_type(2)));

#define ABC                                                                        \
    unsigned i = threadIdx.x, x = a[i], y = b[i], z = c[i], r;                     \
    (void)x, (void)y, (void)z

#define K3(NAME, ASM)                                                                                       \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        asm volatile(ASM : "=v"(r) : "v"(x), "v"(y), "v"(z));                                               \
        d[i] = r;                                                                                           \
    }

// Accumulating VOP2 forms (D is also the third operand) and half-writes (D's other half kept).
#define KACC(NAME, ASM)                                                                                     \
    extern "C" __global__ void NAME(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) { \
        ABC;                                                                                                \
        r = z;                                                                                              \
        asm volatile(ASM : "+v"(r) : "v"(x), "v"(y));                                                       \
        d[i] = r;                                                                                           \
    }

K3(dot2_f32_f16, "v_dot2_f32_f16 %0, %1, %2, %3")
K3(dot2_f32_f16_mods, "v_dot2_f32_f16 %0, %1, %2, %3 op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[0,1,0]")
K3(dot2_f32_f16_clamp, "v_dot2_f32_f16 %0, %1, %2, %3 clamp")
K3(dot2_i32_i16, "v_dot2_i32_i16 %0, %1, %2, %3")
K3(dot2_i32_i16_clamp, "v_dot2_i32_i16 %0, %1, %2, %3 clamp")
K3(dot2_u32_u16, "v_dot2_u32_u16 %0, %1, %2, %3")
K3(dot4_i32_i8, "v_dot4_i32_i8 %0, %1, %2, %3")
K3(dot4_u32_u8, "v_dot4_u32_u8 %0, %1, %2, %3")
K3(dot4_u32_u8_clamp, "v_dot4_u32_u8 %0, %1, %2, %3 clamp")
K3(dot8_i32_i4, "v_dot8_i32_i4 %0, %1, %2, %3")
K3(dot8_u32_u4, "v_dot8_u32_u4 %0, %1, %2, %3")
KACC(dot2c_f32_f16, "v_dot2c_f32_f16 %0, %1, %2")
KACC(dot2c_i32_i16, "v_dot2c_i32_i16 %0, %1, %2")
KACC(dot4c_i32_i8, "v_dot4c_i32_i8 %0, %1, %2")
KACC(dot8c_i32_i4, "v_dot8c_i32_i4 %0, %1, %2")
// DPP on the VOP2 form: src0 from the neighbouring lane of each pair.
KACC(dot4c_i32_i8_dpp, "v_dot4c_i32_i8_dpp %0, %1, %2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf")

K3(fma_mix_f32, "v_fma_mix_f32 %0, %1, %2, %3")
K3(fma_mix_f32_f16s, "v_fma_mix_f32 %0, -%1, |%2|, %3 op_sel:[1,0,1] op_sel_hi:[1,1,1]")
K3(fma_mix_f32_mixed, "v_fma_mix_f32 %0, %1, %2, -%3 op_sel:[0,1,0] op_sel_hi:[0,1,0]")
KACC(fma_mixlo_f16, "v_fma_mixlo_f16 %0, %1, %2, %0 op_sel_hi:[1,1,0]")
KACC(fma_mixhi_f16, "v_fma_mixhi_f16 %0, %1, %2, %0 op_sel:[1,1,0] op_sel_hi:[1,1,0] clamp")

// Packed f32 with inline constants: the constant is an f32 in the low dword, so the compiler
// selects that dword for the high half too (op_sel_hi 0), as clang emits it.
extern "C" __global__ void pk_fma_f32_const(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    unsigned i = threadIdx.x;
    f32x2 v = {__uint_as_float(a[i]), __uint_as_float(b[i])}, r;
    asm volatile("v_pk_fma_f32 %0, %1, 2.0, -4.0 op_sel_hi:[1,0,0]" : "=v"(r) : "v"(v));
    d[2 * i] = __float_as_uint(r.x);
    d[2 * i + 1] = __float_as_uint(r.y);
}

extern "C" __global__ void pk_add_f32_const_swap(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d) {
    unsigned i = threadIdx.x;
    f32x2 v = {__uint_as_float(a[i]), __uint_as_float(b[i])}, r;
    asm volatile("v_pk_add_f32 %0, %1, 0.5 op_sel:[1,0] op_sel_hi:[0,0] neg_hi:[1,0]" : "=v"(r) : "v"(v));
    d[2 * i] = __float_as_uint(r.x);
    d[2 * i + 1] = __float_as_uint(r.y);
}
