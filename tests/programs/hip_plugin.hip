// A HIP "plugin": a shared library the host program loads with dlopen(RTLD_LOCAL), as Python
// loads PyTorch's extension module (and with it HIP and ROCr). Runs a vector add three times
// (each waited for) and checks it.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

extern "C" __global__ void xhsa_vadd(const float* a, const float* b, float* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" int plugin_run(void) {
    const unsigned n = 1 << 16;
    std::vector<float> a(n), b(n), c(n);
    for (unsigned i = 0; i < n; i++) {
        a[i] = float(i);
        b[i] = 2.0f * float(i);
    }
    float *da, *db, *dc;
    if (hipMalloc(&da, n * 4) || hipMalloc(&db, n * 4) || hipMalloc(&dc, n * 4)) return 2;
    if (hipMemcpy(da, a.data(), n * 4, hipMemcpyHostToDevice) || hipMemcpy(db, b.data(), n * 4, hipMemcpyHostToDevice)) return 3;
    for (int round = 0; round < 3; round++) {
        hipLaunchKernelGGL(xhsa_vadd, dim3(n / 256), dim3(256), 0, 0, da, db, dc, n);
        if (hipGetLastError() || hipMemcpy(c.data(), dc, n * 4, hipMemcpyDeviceToHost)) return 4;
        for (unsigned i = 0; i < n; i++)
            if (c[i] != 3.0f * float(i)) return 5;
    }
    hipFree(da);
    hipFree(db);
    hipFree(dc);
    return 0;
}
