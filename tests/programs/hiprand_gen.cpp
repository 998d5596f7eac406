// hiprand_gen: a ROCm library (hipRAND over rocRAND) launching its own kernels.
//
//   hiprand_gen [all|xorwow|philox]     (default all)
//
// Build: hipcc --offload-arch=gfx90a -I tests/programs -o hiprand_gen hiprand_gen.cpp -lhiprand
//
// Creates XORWOW (as the default type and by name) and Philox generators, seeds them, generates
// uniform and normal floats into device memory and copies them back, then checks what came
// back as a user of the library would:
//   - statistics: every uniform in (0, 1]; mean 1/2 and variance 1/12 within 6 standard errors;
//     a 16-bin chi-square below 45 (15 degrees of freedom, p < 1e-4); lag-1 serial
//     correlation within 6/sqrt(n); normals' mean 0 and variance 1 within 6 standard errors;
//   - determinism per seed: the default type and XORWOW seeded alike give the same values (two
//     generators, two runs of rocRAND's state set-up); Philox seeded alike twice gives the same
//     values, and another seed other values.
// The program asks HIP for blocking waits (hipDeviceScheduleBlockingSync): by default HIP spins
// a CPU core in every wait when the machine has more cores than GPUs, and rocRAND's XORWOW
// set-up is a long kernel wherever its code is interpreted.
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

#include <math.h>

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

// Checks a sample of uniforms as a user would (see the top of the file).
static void check_uniforms(const char* label, const std::vector<float>& h) {
    char what[160];
    const size_t n = h.size();
    size_t outside = 0;
    double sum = 0, sq = 0, lag = 0;
    size_t bins[16] = {0};
    for (size_t i = 0; i < n; i++) {
        float v = h[i];
        if (!(v > 0.0f && v <= 1.0f)) outside++;
        sum += v;
        sq += (double)v * v;
        if (i > 0) lag += (double)(h[i - 1] - 0.5) * (v - 0.5);
        int b = (int)(v * 16.0f);
        bins[b < 0 ? 0 : b > 15 ? 15 : b]++;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    snprintf(what, sizeof what, "%s.uniform_range", label);
    check(outside == 0, what, "%zu of %zu values outside (0, 1] (first %g %g %g)", outside, n, h[0], h[1], h[2]);
    double se_mean = sqrt(1.0 / 12 / n), se_var = sqrt((1.0 / 80 - 1.0 / 144) / n);
    snprintf(what, sizeof what, "%s.uniform_mean", label);
    check(fabs(mean - 0.5) < 6 * se_mean, what, "mean %.6f, expected 0.5 +- %.6f", mean, 6 * se_mean);
    snprintf(what, sizeof what, "%s.uniform_variance", label);
    check(fabs(var - 1.0 / 12) < 6 * se_var, what, "variance %.6f, expected %.6f +- %.6f", var, 1.0 / 12, 6 * se_var);
    double chi2 = 0, expect = (double)n / 16;
    for (size_t b : bins) chi2 += (b - expect) * (b - expect) / expect;
    snprintf(what, sizeof what, "%s.uniform_chi2", label);
    check(chi2 < 45, what, "chi-square %.1f over 16 bins, expected below 45", chi2);
    double corr = lag / (n - 1) / (1.0 / 12);
    snprintf(what, sizeof what, "%s.uniform_serial_correlation", label);
    check(fabs(corr) < 6 / sqrt((double)n), what, "lag-1 correlation %.5f, expected within %.5f", corr, 6 / sqrt((double)n));
    note("%s: %zu uniforms: mean %.5f variance %.5f chi2 %.1f lag-1 correlation %.5f; first %g %g %g", label, n, mean,
         var, chi2, corr, h[0], h[1], h[2]);
}

static void check_normals(const char* label, const std::vector<float>& h) {
    char what[160];
    const size_t n = h.size();
    double sum = 0, sq = 0;
    size_t bad = 0;
    for (float v : h) {
        if (!isfinite(v)) bad++;
        sum += v;
        sq += (double)v * v;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    snprintf(what, sizeof what, "%s.normal_moments", label);
    check(bad == 0 && fabs(mean) < 6 / sqrt((double)n) && fabs(var - 1) < 6 * sqrt(2.0 / n), what,
          "%zu not finite, mean %.5f (expected 0 +- %.5f), variance %.5f (expected 1 +- %.5f)", bad, mean,
          6 / sqrt((double)n), var, 6 * sqrt(2.0 / n));
    note("%s: %zu normals: mean %.5f variance %.5f", label, n, mean, var);
}

// One generator: create, seed, generate uniform floats (returned, empty on failure) and normal
// floats, copy both back and check them, destroy.
static std::vector<float> run_generator(const char* label, hiprandRngType_t type, size_t n, unsigned long long seed) {
    char what[160];
    std::vector<float> uniforms;
    g_step = label;
    printf("== %s (type %d, seed %llu), %zu floats\n", label, (int)type, seed, n);
    float* d = nullptr;
    snprintf(what, sizeof what, "%s.hipMalloc", label);
    if (!hip_ok(what, hipMalloc((void**)&d, n * sizeof(float)))) return uniforms;

    hiprandGenerator_t gen;
    snprintf(what, sizeof what, "%s.hiprandCreateGenerator", label);
    double t0 = now_s();
    if (!rng_ok(what, hiprandCreateGenerator(&gen, type))) return uniforms;
    snprintf(what, sizeof what, "%s.hiprandSetPseudoRandomGeneratorSeed", label);
    rng_ok(what, hiprandSetPseudoRandomGeneratorSeed(gen, seed));
    snprintf(what, sizeof what, "%s.hiprandGenerateUniform", label);
    double t1 = now_s();
    bool generated = rng_ok(what, hiprandGenerateUniform(gen, d, n));
    snprintf(what, sizeof what, "%s.hipDeviceSynchronize", label);
    hip_ok(what, hipDeviceSynchronize());
    double t2 = now_s();

    std::vector<float> h(n, -1.0f);
    snprintf(what, sizeof what, "%s.copy_back", label);
    if (hip_ok(what, hipMemcpy(h.data(), d, n * sizeof(float), hipMemcpyDeviceToHost)) && generated) {
        check_uniforms(label, h);
        uniforms = h;
    }

    // Normal floats: n must be even for hipRAND's normal generators.
    size_t even = n & ~(size_t)1;
    snprintf(what, sizeof what, "%s.hiprandGenerateNormal", label);
    generated = rng_ok(what, hiprandGenerateNormal(gen, d, even, 0.0f, 1.0f));
    snprintf(what, sizeof what, "%s.hipDeviceSynchronize_normal", label);
    hip_ok(what, hipDeviceSynchronize());
    h.resize(even);
    snprintf(what, sizeof what, "%s.copy_back_normal", label);
    if (hip_ok(what, hipMemcpy(h.data(), d, even * sizeof(float), hipMemcpyDeviceToHost)) && generated)
        check_normals(label, h);

    snprintf(what, sizeof what, "%s.hiprandDestroyGenerator", label);
    rng_ok(what, hiprandDestroyGenerator(gen));
    snprintf(what, sizeof what, "%s.hipFree", label);
    hip_ok(what, hipFree(d));
    note("%s: create+seed %.1f ms, generate+sync %.1f ms", label, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    return uniforms;
}

// How many positions of two equally long samples hold the same value.
static size_t equal_positions(const std::vector<float>& a, const std::vector<float>& b) {
    size_t same = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) same += a[i] == b[i];
    return same;
}

static void check_same(const char* name, const std::vector<float>& a, const std::vector<float>& b) {
    if (a.empty() || b.empty() || a.size() != b.size()) {
        check(0, name, "a run produced no values to compare");
        return;
    }
    size_t same = equal_positions(a, b);
    check(same == a.size(), name, "%zu of %zu values equal", same, a.size());
}

int main(int argc, char** argv) {
    g_program = "hiprand_gen";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(240);
    // Blocking waits: see the top of the file.
    hipError_t flags = hipSetDeviceFlags(hipDeviceScheduleBlockingSync);
    check(flags == hipSuccess, "init.hipSetDeviceFlags", "%s", hipGetErrorString(flags));
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    check(e == hipSuccess && count >= 1, "init", "hipGetDeviceCount: %s, count %d", hipGetErrorString(e),
          count);
    if (e != hipSuccess || count < 1) return summary();
    int version = 0;
    if (hiprandGetVersion(&version) == HIPRAND_STATUS_SUCCESS) note("hipRAND version %d", version);
    note("hipRAND API from %s", XHSA_HIPRAND_HEADER);

    const char* which = argc > 1 ? argv[1] : "all";
    bool xorwow_on = !strcmp(which, "all") || !strcmp(which, "xorwow");
    bool philox_on = !strcmp(which, "all") || !strcmp(which, "philox");
    if (argc > 2 || (!xorwow_on && !philox_on)) {
        fprintf(stderr, "hiprand_gen: unknown arguments (first '%s'); accepted: all, xorwow, philox\n", which);
        return 2;
    }
    const unsigned long long seed = 1234567ull;
    if (xorwow_on) {
        // 2^20 + 2: not a multiple of rocRAND's vector width, so its tail path runs too.
        const size_t n = (1u << 20) + 2;
        std::vector<float> dflt = run_generator("default", HIPRAND_RNG_PSEUDO_DEFAULT, n, seed);
        std::vector<float> xorwow = run_generator("xorwow", HIPRAND_RNG_PSEUDO_XORWOW, n, seed);
        check_same("determinism.default_is_xorwow_same_seed", dflt, xorwow);
    }
    if (philox_on) {
        std::vector<float> philox = run_generator("philox", HIPRAND_RNG_PSEUDO_PHILOX4_32_10, 65536, seed);
        std::vector<float> again = run_generator("philox_again", HIPRAND_RNG_PSEUDO_PHILOX4_32_10, 65536, seed);
        check_same("determinism.philox_same_seed", philox, again);
        std::vector<float> other = run_generator("philox_other_seed", HIPRAND_RNG_PSEUDO_PHILOX4_32_10, 65536, 7654321ull);
        size_t same = equal_positions(philox, other);
        check(!philox.empty() && !other.empty() && same < philox.size() / 100, "determinism.philox_other_seed_differs",
              "%zu of %zu values equal to seed %llu's", same, philox.size(), seed);
    }
    g_step = "exit";
    return summary();
}
