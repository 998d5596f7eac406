// fp64_lanes: double-precision math (sqrt, exp, sin, log1p, division) on 4096 lanes whose
// operands include denormals, tiny, huge and large-argument values, checked against the host's
// libm in the same program; the inputs go up and the results come back with hipMemcpy (pageable)
// and hipMemcpyAsync (pinned), as an ordinary test program would do it.
//
//   fp64_lanes
//
// Build: hipcc --offload-arch=gfx90a -I tests/programs -o fp64_lanes fp64_lanes.hip
// Prints one PASS/FAIL line per function (with the first wrong lane), and `RESULT: PASS|FAIL`.
// It is an ordinary HIP program: it runs the same way on a real GPU.
#include <hip/hip_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common.h"

#define N 4096
#define N_OUT 5

#define HIP_OK(expr)                                                                        \
    do {                                                                                    \
        g_step = #expr;                                                                     \
        hipError_t e_ = (expr);                                                             \
        if (e_ != hipSuccess) {                                                             \
            check(0, #expr, "%s (%d) at %s:%d", hipGetErrorString(e_), (int)e_, __FILE__, \
                  __LINE__);                                                                \
            return summary();                                                               \
        }                                                                                   \
    } while (0)

extern "C" __global__ void fp64_lanes(const double* x, const double* y, double* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a = x[i], b = y[i];
    double* o = out + (size_t)i * N_OUT;
    o[0] = sqrt(fabs(a));
    o[1] = exp(b);
    o[2] = sin(a);
    o[3] = log1p(fabs(a));
    o[4] = a / b;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

// Units in the last place between two doubles (0 when equal or both NaN).
static uint64_t ulps(double x, double y) {
    if ((std::isnan(x) && std::isnan(y)) || x == y) return 0;
    if (std::isnan(x) || std::isnan(y) || std::signbit(x) != std::signbit(y)) return UINT64_MAX;
    uint64_t a, b;
    memcpy(&a, &x, 8);
    memcpy(&b, &y, 8);
    return a > b ? a - b : b - a;
}

int main() {
    g_program = "fp64_lanes";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(300);
    std::vector<double> x(N), y(N);
    for (int i = 0; i < N; i++) {
        uint64_t u = next_u64(), v = next_u64();
        double frac = 1.0 + (double)(u % 1000003) / 1000003.0;
        double sign = (u >> 40) & 1 ? -1.0 : 1.0;
        switch (i % 8) {
        case 0: case 1: case 2: x[i] = sign * frac * ldexp(1.0, (int)(u % 121) - 60); break;
        case 3: x[i] = sign * frac * ldexp(1.0, 20 + (int)(u % 1000)); break;      // large
        case 4: x[i] = sign * frac * ldexp(1.0, -1074 + (int)(u % 52)); break;      // denormal
        case 5: x[i] = sign * frac * ldexp(1.0, -1022 + (int)(u % 100)); break;     // tiny
        case 6: x[i] = sign * frac * ldexp(1.0, 1000 + (int)(u % 23)); break;       // huge
        default: x[i] = (double)(int)(u % 2001) - 1000.0; break;
        }
        switch (i % 5) {
        case 0: case 1: y[i] = ((double)(v % 1400001) - 700000.0) / 1000.0; break;
        case 2: y[i] = frac * ldexp(1.0, -1074 + (int)(v % 60)); break;            // denormal
        case 3: y[i] = frac * ldexp(1.0, (int)(v % 2001) - 1000); break;
        default: y[i] = (double)(int)(v % 41) - 20.0; break;
        }
    }
    double *dx, *dy, *dout, *hout;
    HIP_OK(hipMalloc((void**)&dx, N * 8));
    HIP_OK(hipMalloc((void**)&dy, N * 8));
    HIP_OK(hipMalloc((void**)&dout, N * N_OUT * 8));
    HIP_OK(hipHostMalloc((void**)&hout, N * N_OUT * 8, 0));
    HIP_OK(hipMemcpy(dx, x.data(), N * 8, hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(dy, y.data(), N * 8, hipMemcpyHostToDevice));
    HIP_OK(hipMemset(dout, 0xff, N * N_OUT * 8));
    hipLaunchKernelGGL(fp64_lanes, dim3(N / 256), dim3(256), 0, 0, (const double*)dx,
                       (const double*)dy, dout, (unsigned)N);
    HIP_OK(hipGetLastError());
    HIP_OK(hipMemcpyAsync(hout, dout, N * N_OUT * 8, hipMemcpyDeviceToHost, 0));
    HIP_OK(hipStreamSynchronize(0));
    struct F {
        const char* name;
        double (*f)(double, double);
        uint64_t tol;
    };
    // OCML: sqrt and division correctly rounded, exp/sin/log1p within 1-2 ulp (glibc: 1).
    const F funcs[N_OUT] = {
        {"sqrt", [](double a, double) { return sqrt(fabs(a)); }, 0},
        {"exp", [](double, double b) { return exp(b); }, 2},
        {"sin", [](double a, double) { return sin(a); }, 2},
        {"log1p", [](double a, double) { return log1p(fabs(a)); }, 2},
        {"div", [](double a, double b) { return a / b; }, 0},
    };
    int lanes_wrong = 0;
    std::vector<int> lane_bad(N, 0);
    for (int k = 0; k < N_OUT; k++) {
        int bad = 0, first = -1;
        for (int i = 0; i < N; i++) {
            double want = funcs[k].f(x[i], y[i]), got = hout[i * N_OUT + k];
            if (ulps(got, want) > funcs[k].tol) {
                if (first < 0) first = i;
                bad++;
                lane_bad[i] = 1;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "fp64.%s", funcs[k].name);
        if (first >= 0)
            check(0, name, "%d of %d lanes wrong, first lane %d: (%a, %a) gave %a, want %a", bad, N,
                  first, x[first], y[first], hout[first * N_OUT + k], funcs[k].f(x[first], y[first]));
        else
            check(1, name, "");
    }
    for (int i = 0; i < N; i++) lanes_wrong += lane_bad[i];
    note("lanes wrong: %d of %d", lanes_wrong, N);
    HIP_OK(hipHostFree(hout));
    HIP_OK(hipFree(dx));
    HIP_OK(hipFree(dy));
    HIP_OK(hipFree(dout));
    return summary();
}
