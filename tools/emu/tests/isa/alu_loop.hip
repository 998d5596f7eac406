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
