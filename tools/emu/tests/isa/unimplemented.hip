// A kernel with an instruction xhsa-emu's ISA interpreter does not implement (s_rfe_b64: there
// is no trap handler to return from), for the test that such a dispatch fails with a message
// naming it.
#include <hip/hip_runtime.h>

extern "C" __global__ void isa_unimplemented(int* out) {
    int x = threadIdx.x;
    asm volatile("s_rfe_b64 s[0:1]" : : : "memory");
    out[threadIdx.x] = x;
}
