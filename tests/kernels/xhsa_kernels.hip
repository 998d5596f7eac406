// The project's own test kernels: real GPU code, `extern "C"` so the symbols are unmangled
// (`xhsa_vadd`, descriptor `xhsa_vadd.kd`). The emulator has CPU models of exactly these
// kernels (tools/emu/src/kernels/test_kernels.rs); the arguments below must keep the layout
// those models read: pointers at kernarg offsets 0/8/16, the u32 `n` at 24 (the float `a` of
// xhsa_saxpy at 0, the u64 `wg_ns` of xhsa_synthetic at 0; xhsa_synthetic_p's three u64 at
// 0/8/16).
//
// Used two ways:
//   * included by the HIP test programs (`#include "xhsa_kernels.hip"`, -I tests/kernels);
//   * compiled alone into a raw code object for the HSA test program:
//       hipcc --genco --no-gpu-bundle-output --offload-arch=gfx90a -o xhsa_kernels.hsaco \
//             tests/kernels/xhsa_kernels.hip
//
// Work-item `i` of the x dimension handles element `i`; launches must cover whole workgroups
// (grid = workgroups x workgroup size, as HIP always does) and the kernels guard `i < n`.
#ifndef XHSA_KERNELS_HIP
#define XHSA_KERNELS_HIP

#include <hip/hip_runtime.h>

// c[i] = a[i] + b[i]
extern "C" __global__ void xhsa_vadd(const float* a, const float* b, float* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// y[i] = a * x[i] + y[i]
extern "C" __global__ void xhsa_saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// C = A * B, n x n row-major; one work-item per element of C (x = column, y = row).
extern "C" __global__ void xhsa_matmul(const float* A, const float* B, float* C, unsigned n) {
    unsigned col = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (unsigned k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

// No memory effect; every workgroup runs for `wg_ns` nanoseconds. The emulator does not run
// this code: its timing model charges `wg_ns` per workgroup. On a real gfx90a the body
// busy-waits on the constant 100 MHz `s_memrealtime` counter, so the program measures the
// same duration on real hardware.
extern "C" __global__ void xhsa_synthetic(unsigned long long wg_ns) {
    const unsigned long long ticks = wg_ns / 10;  // 100 MHz: 10 ns per tick
    const unsigned long long start = __builtin_amdgcn_s_memrealtime();
    while (__builtin_amdgcn_s_memrealtime() - start < ticks) {
        __builtin_amdgcn_s_sleep(1);
    }
}

// As xhsa_synthetic, with a contention profile for the emulator's timing model
// (docs/timing-model-contention.md): each workgroup uses `util_permille` / 1000 of its CU's
// pipe and moves `bytes_per_wg` bytes of HBM, so co-resident workgroups of other kernels may
// slow it (and it them). Kernarg layout: wg_ns @0, util_permille @8, bytes_per_wg @16. On real
// hardware the body only busy-waits, like xhsa_synthetic; the profile is a model input.
extern "C" __global__ void xhsa_synthetic_p(unsigned long long wg_ns, unsigned long long util_permille,
                                            unsigned long long bytes_per_wg) {
    (void)util_permille;
    (void)bytes_per_wg;
    const unsigned long long ticks = wg_ns / 10;  // 100 MHz: 10 ns per tick
    const unsigned long long start = __builtin_amdgcn_s_memrealtime();
    while (__builtin_amdgcn_s_memrealtime() - start < ticks) {
        __builtin_amdgcn_s_sleep(1);
    }
}

// No memory effect, shortest possible run.
extern "C" __global__ void xhsa_null() {}

#endif  // XHSA_KERNELS_HIP
