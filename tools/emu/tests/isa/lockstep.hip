// Waves of a workgroup leave a barrier together (tools/emu/tests/isa_exec.rs,
// waves_leave_a_barrier_together): every work-item reads an LDS word after a barrier, and
// work-item 0 overwrites it a dozen instructions later, before the next barrier. On a
// compute unit the waves issue side by side, so every wave reads the old word; an interpreter
// that runs one wave to its next barrier before the others start lets waves 1.. read the new
// one. rocSOLVER's potf2 small kernel has this pattern (every wave reads the diagonal element,
// work-item 0 writes its square root over it).
#include <hip/hip_runtime.h>

// The LDS accesses in inline assembly (at LDS address 0; the test launches with 64 bytes of
// dynamic LDS): a plain or volatile __shared__ variable may be compiled to flat accesses.
extern "C" __global__ void read_then_overwrite(unsigned* out) {
    unsigned t = threadIdx.x, v;
    if (t == 0) asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : : "v"(0u), "v"(7u) : "memory");
    __syncthreads();
    asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(0u) : "memory");
    if (t == 0) {
        unsigned x = v;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
        }
        asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : : "v"(0u), "v"(x) : "memory");
    }
    __syncthreads();
    out[t] = v;
}
