// Kernels that the emulator has no CPU model of, so they only compute right results when the
// emulator's ISA interpreter executes their gfx90a code (tools/emu/src/isa). Each part checks
// its own results and prints `PASS name` or `FAIL name: detail`; the program ends with
// `RESULT: PASS` when every check passed (exit status 0), else `RESULT: FAIL` (exit status 1).
// The device code is also built alone (hipcc --genco) by tools/emu/tests/isa_exec.rs.
//
// Parts: a vector add (global loads/stores, work-item ids), a reduction of each workgroup's
// values through LDS with s_barrier between the steps, a warp shuffle (__shfl: ds_bpermute),
// an atomic add on global memory, fp64 math, and a private array indexed at run time (scratch
// memory: MUBUF through the private segment buffer on gfx90a, SCRATCH instructions on gfx942's
// architected flat scratch).
#include <hip/hip_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define HIP_OK(x)                                                                   \
    do {                                                                            \
        hipError_t e_ = (x);                                                        \
        if (e_ != hipSuccess) {                                                     \
            std::printf("HIP error %s at %s:%d\n", hipGetErrorString(e_), __FILE__, \
                        __LINE__);                                                  \
            std::exit(2);                                                           \
        }                                                                           \
    } while (0)

__global__ void isa_vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// out[blockIdx.x] = sum of in[] over the block's 256 elements, by tree reduction in LDS.
__global__ void isa_lds_reduce(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned s[256];
    int t = threadIdx.x;
    int i = blockIdx.x * 256 + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// out[i] = in[lane (i + shift) mod 64 of the same wave], through __shfl.
__global__ void isa_shfl(const int* in, int* out, int shift) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 64;
    out[i] = __shfl(in[i], (lane + shift) % 64);
}

// total += sum of in[] with one atomic add per element.
__global__ void isa_atomic_sum(const unsigned* in, unsigned* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(total, in[i]);
}

// y[i] = fma(sqrt(x[i]), 2.5, i) in double precision (explicitly fused, so the host computes the
// same), and a float-to-int conversion.
__global__ void isa_fp64(const double* x, double* y, int* r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = fma(sqrt(x[i]), 2.5, (double)i);
        r[i] = (int)(x[i] * 0.5f) - i;
    }
}

// A private array indexed by loaded values, so it lives in scratch memory: out[i] = sum over
// k < 8 of a[idx[(i + k) % n] % 40] with a[k] = i * k + 1.
__global__ void isa_private(const int* idx, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a[40];
    for (int k = 0; k < 40; ++k) a[k] = i * k + 1;
    int s = 0;
    for (int k = 0; k < 8; ++k) s += a[idx[(i + k) % n] % 40];
    out[i] = s;
}

static int failures = 0;

static void check(const char* name, bool ok, const char* detail) {
    if (ok)
        std::printf("PASS %s\n", name);
    else
        std::printf("FAIL %s: %s\n", name, detail);
    if (!ok) ++failures;
}

int main() {
    char detail[256] = "";
    {
        const int n = 100000;
        std::vector<float> a(n), b(n), c(n, -1.0f);
        for (int i = 0; i < n; ++i) {
            a[i] = 0.5f * i;
            b[i] = 1000.0f - i;
        }
        float *da, *db, *dc;
        HIP_OK(hipMalloc(&da, n * sizeof(float)));
        HIP_OK(hipMalloc(&db, n * sizeof(float)));
        HIP_OK(hipMalloc(&dc, n * sizeof(float)));
        HIP_OK(hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
        HIP_OK(hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
        HIP_OK(hipMemset(dc, 0, n * sizeof(float)));
        isa_vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
        int bad = -1;
        for (int i = 0; i < n && bad < 0; ++i)
            if (c[i] != a[i] + b[i]) bad = i;
        std::snprintf(detail, sizeof detail, "c[%d] = %g", bad, bad >= 0 ? c[bad] : 0.0);
        check("vadd", bad < 0, detail);
        HIP_OK(hipFree(da));
        HIP_OK(hipFree(db));
        HIP_OK(hipFree(dc));
    }
    {
        const int n = 256 * 40 + 77;
        const int blocks = (n + 255) / 256;
        std::vector<unsigned> in(n), out(blocks, 0);
        for (int i = 0; i < n; ++i) in[i] = (unsigned)(i * 7 + 3);
        unsigned *din, *dout;
        HIP_OK(hipMalloc(&din, n * sizeof(unsigned)));
        HIP_OK(hipMalloc(&dout, blocks * sizeof(unsigned)));
        HIP_OK(hipMemcpy(din, in.data(), n * sizeof(unsigned), hipMemcpyHostToDevice));
        isa_lds_reduce<<<blocks, 256>>>(din, dout, n);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(out.data(), dout, blocks * sizeof(unsigned), hipMemcpyDeviceToHost));
        int bad = -1;
        unsigned want = 0;
        for (int b = 0; b < blocks && bad < 0; ++b) {
            want = 0;
            for (int i = b * 256; i < (b + 1) * 256 && i < n; ++i) want += in[i];
            if (out[b] != want) bad = b;
        }
        std::snprintf(detail, sizeof detail, "block %d: %u, want %u", bad, bad >= 0 ? out[bad] : 0, want);
        check("lds_reduce", bad < 0, detail);
        HIP_OK(hipFree(din));
        HIP_OK(hipFree(dout));
    }
    {
        const int n = 1024, shift = 5;
        std::vector<int> in(n), out(n, 0);
        for (int i = 0; i < n; ++i) in[i] = i * 3 + 1;
        int *din, *dout;
        HIP_OK(hipMalloc(&din, n * sizeof(int)));
        HIP_OK(hipMalloc(&dout, n * sizeof(int)));
        HIP_OK(hipMemcpy(din, in.data(), n * sizeof(int), hipMemcpyHostToDevice));
        isa_shfl<<<n / 256, 256>>>(din, dout, shift);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(out.data(), dout, n * sizeof(int), hipMemcpyDeviceToHost));
        int bad = -1;
        for (int i = 0; i < n && bad < 0; ++i) {
            int src = (i / 64) * 64 + (i % 64 + shift) % 64;
            if (out[i] != in[src]) bad = i;
        }
        std::snprintf(detail, sizeof detail, "out[%d] = %d", bad, bad >= 0 ? out[bad] : 0);
        check("shfl", bad < 0, detail);
        HIP_OK(hipFree(din));
        HIP_OK(hipFree(dout));
    }
    {
        const int n = 5000;
        std::vector<unsigned> in(n);
        unsigned want = 0;
        for (int i = 0; i < n; ++i) {
            in[i] = (unsigned)(i % 13 + 1);
            want += in[i];
        }
        unsigned *din, *dtotal, total = 0;
        HIP_OK(hipMalloc(&din, n * sizeof(unsigned)));
        HIP_OK(hipMalloc(&dtotal, sizeof(unsigned)));
        HIP_OK(hipMemcpy(din, in.data(), n * sizeof(unsigned), hipMemcpyHostToDevice));
        HIP_OK(hipMemset(dtotal, 0, sizeof(unsigned)));
        isa_atomic_sum<<<(n + 127) / 128, 128>>>(din, dtotal, n);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(&total, dtotal, sizeof(unsigned), hipMemcpyDeviceToHost));
        std::snprintf(detail, sizeof detail, "total %u, want %u", total, want);
        check("atomic_sum", total == want, detail);
        HIP_OK(hipFree(din));
        HIP_OK(hipFree(dtotal));
    }
    {
        const int n = 3000;
        std::vector<double> x(n), y(n, 0.0);
        std::vector<int> r(n, 0);
        for (int i = 0; i < n; ++i) x[i] = 1.5 * i + 0.25;
        double *dx, *dy;
        int* dr;
        HIP_OK(hipMalloc(&dx, n * sizeof(double)));
        HIP_OK(hipMalloc(&dy, n * sizeof(double)));
        HIP_OK(hipMalloc(&dr, n * sizeof(int)));
        HIP_OK(hipMemcpy(dx, x.data(), n * sizeof(double), hipMemcpyHostToDevice));
        isa_fp64<<<(n + 63) / 64, 64>>>(dx, dy, dr, n);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(y.data(), dy, n * sizeof(double), hipMemcpyDeviceToHost));
        HIP_OK(hipMemcpy(r.data(), dr, n * sizeof(int), hipMemcpyDeviceToHost));
        int bad = -1;
        for (int i = 0; i < n && bad < 0; ++i) {
            double want = std::fma(std::sqrt(x[i]), 2.5, (double)i);
            int wr = (int)(x[i] * 0.5f) - i;
            if (y[i] != want || r[i] != wr) bad = i;
        }
        std::snprintf(detail, sizeof detail, "y[%d] = %.17g r = %d", bad, bad >= 0 ? y[bad] : 0.0, bad >= 0 ? r[bad] : 0);
        check("fp64", bad < 0, detail);
        HIP_OK(hipFree(dx));
        HIP_OK(hipFree(dy));
        HIP_OK(hipFree(dr));
    }
    {
        const int n = 1000;
        std::vector<int> idx(n), out(n, -1);
        for (int i = 0; i < n; ++i) idx[i] = (i * 37 + 11) % 1009;
        int *didx, *dout;
        HIP_OK(hipMalloc(&didx, n * sizeof(int)));
        HIP_OK(hipMalloc(&dout, n * sizeof(int)));
        HIP_OK(hipMemcpy(didx, idx.data(), n * sizeof(int), hipMemcpyHostToDevice));
        isa_private<<<(n + 127) / 128, 128>>>(didx, dout, n);
        HIP_OK(hipGetLastError());
        HIP_OK(hipMemcpy(out.data(), dout, n * sizeof(int), hipMemcpyDeviceToHost));
        int bad = -1, want = 0;
        for (int i = 0; i < n && bad < 0; ++i) {
            want = 0;
            for (int k = 0; k < 8; ++k) want += i * (idx[(i + k) % n] % 40) + 1;
            if (out[i] != want) bad = i;
        }
        std::snprintf(detail, sizeof detail, "out[%d] = %d, want %d", bad, bad >= 0 ? out[bad] : 0, want);
        check("private", bad < 0, detail);
        HIP_OK(hipFree(didx));
        HIP_OK(hipFree(dout));
    }
    std::printf("RESULT: %s\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
