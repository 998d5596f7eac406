// Double-precision math library calls (ROCm's device libraries: OCML), one per output, over
// lanes of operands chosen to reach the libraries' special paths (tools/emu/tests/isa_exec.rs,
// fp64_math_agrees_with_the_host): division's scale/fmas/fixup sequence, v_rcp/v_rsq/v_sqrt
// refinements, frexp/ldexp, trig_preop (Payne-Hanek reduction for large arguments), class
// tests and conversions. Lane i reads x[i], y[i] and writes out[i * N_OUT + k].
#include <hip/hip_runtime.h>

#define N_OUT 24

extern "C" __global__ void fp64_math(const double* x, const double* y, double* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a = x[i], b = y[i];
    double* o = out + (size_t)i * N_OUT;
    o[0] = a / b;
    o[1] = sqrt(fabs(a));
    o[2] = exp(b);
    o[3] = log(fabs(a));
    o[4] = sin(a);
    o[5] = cos(a);
    o[6] = log1p(fabs(a));
    o[7] = 1.0 / a;
    o[8] = rsqrt(fabs(a));
    o[9] = pow(fabs(a), b);
    o[10] = tan(a);
    o[11] = atan2(a, b);
    o[12] = cbrt(a);
    o[13] = exp2(b);
    o[14] = expm1(b);
    o[15] = fma(a, b, a);
    o[16] = (double)(float)a;
    o[17] = ldexp(a, (int)b);
    int e;
    o[18] = frexp(a, &e);
    o[19] = (double)e;
    o[20] = fmod(a, b);
    o[21] = tanh(b);
    o[22] = erf(b);
    o[23] = log10(fabs(a));
}
