// A kernel with an instruction xhsa-emu's ISA interpreter does not implement (v_sat_pk_u8_i16),
// for the test that such a dispatch fails with a message naming it.
#include <hip/hip_runtime.h>

extern "C" __global__ void isa_unimplemented(int* out) {
    int r;
    asm volatile("v_sat_pk_u8_i16 %0, %1" : "=v"(r) : "v"((int)threadIdx.x));
    out[threadIdx.x] = r;
}
