// hiprand_gen: a ROCm library (hipRAND over rocRAND) launching its own kernels.
//
//   hiprand_gen
//
// Build: hipcc --offload-arch=gfx90a -I tests/programs -o hiprand_gen hiprand_gen.cpp -lhiprand
//
// Creates generators, seeds them, generates uniform and normal floats into device memory and
// copies them back. Only status codes are checked: under xhsa-emu rocRAND's kernels have no
// CPU model, so they complete with no memory effect and the values are meaningless there (on a
// real GPU the uniform values also land in (0, 1], which is printed, not checked).
#include <hip/hip_runtime.h>

// <hiprand/hiprand.h> includes <rocrand/rocrand.h>, which Debian ships in librocrand-dev, a
// package libhiprand-dev does not depend on. Without it, declare the few entry points used
// here ourselves (plain C ABI of libhiprand.so.1, values as in hiprand.h 5.x).
#if __has_include(<rocrand/rocrand.h>)
#include <hiprand/hiprand.h>
#define XHSA_HIPRAND_HEADER "hiprand.h"
#else
#define XHSA_HIPRAND_HEADER "own declarations (librocrand-dev not installed)"
extern "C" {
typedef struct hiprandGenerator_st* hiprandGenerator_t;
typedef enum hiprandStatus {
    HIPRAND_STATUS_SUCCESS = 0,
    HIPRAND_STATUS_VERSION_MISMATCH = 100,
    HIPRAND_STATUS_NOT_INITIALIZED = 101,
    HIPRAND_STATUS_ALLOCATION_FAILED = 102,
    HIPRAND_STATUS_TYPE_ERROR = 103,
    HIPRAND_STATUS_OUT_OF_RANGE = 104,
    HIPRAND_STATUS_LENGTH_NOT_MULTIPLE = 105,
    HIPRAND_STATUS_DOUBLE_PRECISION_REQUIRED = 106,
    HIPRAND_STATUS_LAUNCH_FAILURE = 201,
    HIPRAND_STATUS_PREEXISTING_FAILURE = 202,
    HIPRAND_STATUS_INITIALIZATION_FAILED = 203,
    HIPRAND_STATUS_ARCH_MISMATCH = 204,
    HIPRAND_STATUS_INTERNAL_ERROR = 999,
    HIPRAND_STATUS_NOT_IMPLEMENTED = 1000
} hiprandStatus_t;
typedef enum hiprandRngType {
    HIPRAND_RNG_PSEUDO_DEFAULT = 400,
    HIPRAND_RNG_PSEUDO_XORWOW = 401,
    HIPRAND_RNG_PSEUDO_PHILOX4_32_10 = 405
} hiprandRngType_t;
hiprandStatus_t hiprandCreateGenerator(hiprandGenerator_t* generator, hiprandRngType_t rng_type);
hiprandStatus_t hiprandDestroyGenerator(hiprandGenerator_t generator);
hiprandStatus_t hiprandSetPseudoRandomGeneratorSeed(hiprandGenerator_t generator, unsigned long long seed);
hiprandStatus_t hiprandGenerateUniform(hiprandGenerator_t generator, float* output_data, size_t n);
hiprandStatus_t hiprandGenerateNormal(hiprandGenerator_t generator, float* output_data, size_t n,
                                      float mean, float stddev);
hiprandStatus_t hiprandGetVersion(int* version);
}
#endif

#include <vector>

#include "common.h"

static const char* rng_status_name(hiprandStatus_t s) {
    switch (s) {
        case HIPRAND_STATUS_SUCCESS: return "HIPRAND_STATUS_SUCCESS";
        case HIPRAND_STATUS_VERSION_MISMATCH: return "HIPRAND_STATUS_VERSION_MISMATCH";
        case HIPRAND_STATUS_NOT_INITIALIZED: return "HIPRAND_STATUS_NOT_INITIALIZED";
        case HIPRAND_STATUS_ALLOCATION_FAILED: return "HIPRAND_STATUS_ALLOCATION_FAILED";
        case HIPRAND_STATUS_TYPE_ERROR: return "HIPRAND_STATUS_TYPE_ERROR";
        case HIPRAND_STATUS_OUT_OF_RANGE: return "HIPRAND_STATUS_OUT_OF_RANGE";
        case HIPRAND_STATUS_LENGTH_NOT_MULTIPLE: return "HIPRAND_STATUS_LENGTH_NOT_MULTIPLE";
        case HIPRAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "HIPRAND_STATUS_DOUBLE_PRECISION_REQUIRED";
        case HIPRAND_STATUS_LAUNCH_FAILURE: return "HIPRAND_STATUS_LAUNCH_FAILURE";
        case HIPRAND_STATUS_PREEXISTING_FAILURE: return "HIPRAND_STATUS_PREEXISTING_FAILURE";
        case HIPRAND_STATUS_INITIALIZATION_FAILED: return "HIPRAND_STATUS_INITIALIZATION_FAILED";
        case HIPRAND_STATUS_ARCH_MISMATCH: return "HIPRAND_STATUS_ARCH_MISMATCH";
        case HIPRAND_STATUS_INTERNAL_ERROR: return "HIPRAND_STATUS_INTERNAL_ERROR";
        case HIPRAND_STATUS_NOT_IMPLEMENTED: return "HIPRAND_STATUS_NOT_IMPLEMENTED";
        default: return "unknown hiprandStatus_t";
    }
}

// Checks (and prints) one hipRAND call; false if it failed.
static bool rng_ok(const char* what, hiprandStatus_t s) {
    printf("  %s -> %d (%s)\n", what, (int)s, rng_status_name(s));
    check(s == HIPRAND_STATUS_SUCCESS, what, "status %d (%s)", (int)s, rng_status_name(s));
    return s == HIPRAND_STATUS_SUCCESS;
}

static bool hip_ok(const char* what, hipError_t e) {
    check(e == hipSuccess, what, "%s (%d)", hipGetErrorString(e), (int)e);
    return e == hipSuccess;
}

// One generator type: create, seed, generate uniform (and normal) floats, copy back, destroy.
static void run_generator(const char* label, hiprandRngType_t type, size_t n) {
    char what[160];
    g_step = label;
    printf("== %s (type %d), %zu floats\n", label, (int)type, n);
    float* d = nullptr;
    snprintf(what, sizeof what, "%s.hipMalloc", label);
    if (!hip_ok(what, hipMalloc((void**)&d, n * sizeof(float)))) return;

    hiprandGenerator_t gen;
    snprintf(what, sizeof what, "%s.hiprandCreateGenerator", label);
    double t0 = now_s();
    if (!rng_ok(what, hiprandCreateGenerator(&gen, type))) return;
    snprintf(what, sizeof what, "%s.hiprandSetPseudoRandomGeneratorSeed", label);
    rng_ok(what, hiprandSetPseudoRandomGeneratorSeed(gen, 1234567ull));
    snprintf(what, sizeof what, "%s.hiprandGenerateUniform", label);
    double t1 = now_s();
    rng_ok(what, hiprandGenerateUniform(gen, d, n));
    snprintf(what, sizeof what, "%s.hipDeviceSynchronize", label);
    hip_ok(what, hipDeviceSynchronize());
    double t2 = now_s();

    std::vector<float> h(n, -1.0f);
    snprintf(what, sizeof what, "%s.copy_back", label);
    if (hip_ok(what, hipMemcpy(h.data(), d, n * sizeof(float), hipMemcpyDeviceToHost))) {
        size_t in_range = 0;
        for (float v : h) in_range += (v > 0.0f && v <= 1.0f);
        note("%s: uniform values in (0, 1]: %zu of %zu (informative only; first %g %g %g)", label,
             in_range, n, h[0], h[1], h[2]);
    }

    // Normal floats: n must be even for hipRAND's normal generators.
    snprintf(what, sizeof what, "%s.hiprandGenerateNormal", label);
    rng_ok(what, hiprandGenerateNormal(gen, d, n & ~(size_t)1, 0.0f, 1.0f));
    snprintf(what, sizeof what, "%s.hipDeviceSynchronize_normal", label);
    hip_ok(what, hipDeviceSynchronize());

    snprintf(what, sizeof what, "%s.hiprandDestroyGenerator", label);
    rng_ok(what, hiprandDestroyGenerator(gen));
    snprintf(what, sizeof what, "%s.hipFree", label);
    hip_ok(what, hipFree(d));
    note("%s: create+seed %.1f ms, generate+sync %.1f ms", label, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
}

int main() {
    g_program = "hiprand_gen";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(110);
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    check(e == hipSuccess && count >= 1, "init", "hipGetDeviceCount: %s, count %d", hipGetErrorString(e),
          count);
    if (e != hipSuccess || count < 1) return summary();
    int version = 0;
    if (hiprandGetVersion(&version) == HIPRAND_STATUS_SUCCESS) note("hipRAND version %d", version);
    note("hipRAND API from %s", XHSA_HIPRAND_HEADER);

    run_generator("default", HIPRAND_RNG_PSEUDO_DEFAULT, (1u << 20) + 2);
    run_generator("xorwow", HIPRAND_RNG_PSEUDO_XORWOW, 100000);
    run_generator("philox", HIPRAND_RNG_PSEUDO_PHILOX4_32_10, 65536);
    g_step = "exit";
    return summary();
}
