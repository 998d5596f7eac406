// A kernel with an instruction xhsa-emu's ISA interpreter does not implement (ds_gws_init: GWS
// is not modelled), for the test that such a dispatch fails with a message naming it.
#include <hip/hip_runtime.h>

extern "C" __global__ void isa_unimplemented(int* out) {
    int x = threadIdx.x;
    asm volatile("s_mov_b32 m0, 0\n\tds_gws_init %0 gds" : : "v"(x) : "memory");
    out[threadIdx.x] = x;
}
