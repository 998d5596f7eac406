// hip_basic: the basic HIP runtime surface on one device, checked end to end.
//
//   hip_basic [SUBSET...]      SUBSET: device memcpy memset kernels streams priority events
//                              launches, or all (the default)
//
// Build: hipcc --offload-arch=gfx90a -I tests/kernels -I tests/programs -o hip_basic hip_basic.hip
// Prints one PASS/FAIL line per check, timings, and `RESULT: PASS|FAIL`; exits 0 only if every
// check passed. It is an ordinary HIP program: it runs the same way on a real gfx90a GPU.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "xhsa_kernels.hip"

// Records a failed check and leaves the current subset if a HIP call fails.
#define HIP_OK(expr)                                                                     \
    do {                                                                                 \
        g_step = #expr;                                                                  \
        hipError_t e_ = (expr);                                                          \
        if (e_ != hipSuccess) {                                                          \
            check(0, #expr, "%s (%d) at %s:%d", hipGetErrorString(e_), (int)e_, __FILE__, \
                  __LINE__);                                                             \
            return;                                                                      \
        }                                                                                \
    } while (0)

static hipDeviceProp_t g_props;
static int g_cus = 80;

static unsigned blocks_for(size_t n, unsigned block) { return (unsigned)((n + block - 1) / block); }

// ---------------------------------------------------------------------------------------------
static void test_device() {
    int count = 0;
    HIP_OK(hipGetDeviceCount(&count));
    check(count >= 1, "device.count", "hipGetDeviceCount = %d, want >= 1", count);
    if (count < 1) return;
    HIP_OK(hipSetDevice(0));
    hipDeviceProp_t& p = g_props;
    HIP_OK(hipGetDeviceProperties(&p, 0));
    note("device 0: name '%s', gcnArchName '%s', %d CUs, warpSize %d, %.1f GiB, clock %d kHz, "
         "pciBusID %d",
         p.name, p.gcnArchName, p.multiProcessorCount, p.warpSize,
         (double)p.totalGlobalMem / (1024.0 * 1024 * 1024), p.clockRate, p.pciBusID);
    // The emulated MI308X: gfx90a under ROCm 5.2 (which cannot target gfx942), gfx942 under 6.4.
    check(strncmp(p.gcnArchName, "gfx90a", 6) == 0 || strncmp(p.gcnArchName, "gfx942", 6) == 0, "device.arch",
          "gcnArchName '%s', want gfx90a* or gfx942*", p.gcnArchName);
    check(p.multiProcessorCount == 80, "device.cu_count", "multiProcessorCount = %d, want 80",
          p.multiProcessorCount);
    check(p.warpSize == 64, "device.warp_size", "warpSize = %d, want 64", p.warpSize);
    int attr = 0;
    HIP_OK(hipDeviceGetAttribute(&attr, hipDeviceAttributeMultiprocessorCount, 0));
    check(attr == 80, "device.attr_cu_count", "hipDeviceAttributeMultiprocessorCount = %d", attr);

    size_t free_b = 0, total_b = 0;
    HIP_OK(hipMemGetInfo(&free_b, &total_b));
    note("hipMemGetInfo: free %.1f GiB of %.1f GiB", free_b / 1073741824.0, total_b / 1073741824.0);
    check(total_b > 0 && free_b <= total_b, "device.mem_info", "free %zu total %zu", free_b, total_b);

    // hipMalloc / hipFree at several sizes: distinct, 256-byte aligned pointers.
    const size_t sizes[] = {1, 4096, (1u << 20) + 3, 64u << 20};
    void* ptrs[4] = {};
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        HIP_OK(hipMalloc(&ptrs[i], sizes[i]));
        if (!ptrs[i] || ((uintptr_t)ptrs[i] & 255) != 0) ok = 0;
        for (int j = 0; j < i; j++)
            if (ptrs[j] == ptrs[i]) ok = 0;
    }
    check(ok, "device.malloc", "pointers %p %p %p %p (want distinct, 256-byte aligned)", ptrs[0],
          ptrs[1], ptrs[2], ptrs[3]);
    for (int i = 0; i < 4; i++) HIP_OK(hipFree(ptrs[i]));
    check(1, "device.free", "");
}

// ---------------------------------------------------------------------------------------------
// One size, one kind of host memory: H2D, D2D (whole and misaligned), D2H, byte-exact.
static void memcpy_case(size_t n, bool pinned, uint64_t seed) {
    char name[96];
    snprintf(name, sizeof name, "memcpy.%s.%zu", pinned ? "pinned" : "pageable", n);
    g_step = name;
    unsigned char *src = nullptr, *dst = nullptr;
    if (pinned) {
        HIP_OK(hipHostMalloc((void**)&src, n, hipHostMallocDefault));
        HIP_OK(hipHostMalloc((void**)&dst, n, hipHostMallocDefault));
    } else {
        src = (unsigned char*)malloc(n);
        dst = (unsigned char*)malloc(n);
    }
    fill_pattern(src, n, seed);
    memset(dst, 0, n);
    unsigned char *d1 = nullptr, *d2 = nullptr;
    HIP_OK(hipMalloc((void**)&d1, n));
    HIP_OK(hipMalloc((void**)&d2, n));

    double t0 = now_s();
    HIP_OK(hipMemcpy(d1, src, n, hipMemcpyHostToDevice));
    double t1 = now_s();
    HIP_OK(hipMemcpy(dst, d1, n, hipMemcpyDeviceToHost));
    double t2 = now_s();
    long d = first_diff(src, dst, n);
    char sub[128];
    snprintf(sub, sizeof sub, "%s.h2d_d2h", name);
    check(d < 0, sub, "first difference at byte %ld: got 0x%02x want 0x%02x", d, d >= 0 ? dst[d] : 0,
          d >= 0 ? src[d] : 0);

    memset(dst, 0, n);
    HIP_OK(hipMemset(d2, 0, n));
    double t3 = now_s();
    HIP_OK(hipMemcpy(d2, d1, n, hipMemcpyDeviceToDevice));
    double t4 = now_s();
    HIP_OK(hipMemcpy(dst, d2, n, hipMemcpyDeviceToHost));
    d = first_diff(src, dst, n);
    snprintf(sub, sizeof sub, "%s.d2d", name);
    check(d < 0, sub, "first difference at byte %ld: got 0x%02x want 0x%02x", d, d >= 0 ? dst[d] : 0,
          d >= 0 ? src[d] : 0);

    if (n >= 8) {
        // Misaligned device-to-device: d1+1 -> d2+3, n-4 bytes; the bytes around stay as set.
        HIP_OK(hipMemset(d2, 0x5c, n));
        HIP_OK(hipMemcpy(d2 + 3, d1 + 1, n - 4, hipMemcpyDeviceToDevice));
        HIP_OK(hipMemcpy(dst, d2, n, hipMemcpyDeviceToHost));
        int ok = dst[0] == 0x5c && dst[1] == 0x5c && dst[2] == 0x5c && dst[n - 1] == 0x5c;
        long dd = first_diff(src + 1, dst + 3, n - 4);
        snprintf(sub, sizeof sub, "%s.d2d_misaligned", name);
        check(ok && dd < 0, sub, "borders %02x %02x %02x .. %02x (want 5c), first difference at %ld",
              dst[0], dst[1], dst[2], dst[n - 1], dd);
    }
    note("%s: H2D %.3f ms, D2H %.3f ms, D2D %.3f ms", name, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
         (t4 - t3) * 1e3);

    HIP_OK(hipFree(d1));
    HIP_OK(hipFree(d2));
    if (pinned) {
        HIP_OK(hipHostFree(src));
        HIP_OK(hipHostFree(dst));
    } else {
        free(src);
        free(dst);
    }
}

// Asynchronous device-to-host copies into pageable memory on a created stream, those host and
// device buffers freed, then a 12 MiB pageable host-to-device copy and back: issue 12 reported
// an "SDMA memory fault" (ROCr's "GPU memory access fault" abort) for this sequence natively on
// the emulator; the copies must simply work, as on the GPU.
static void memcpy_after_freed_async_case() {
    g_step = "memcpy.after_freed_async";
    hipStream_t s;
    if (hipStreamCreate(&s) != hipSuccess) {
        check(0, "memcpy.after_freed_async", "hipStreamCreate failed");
        return;
    }
    bool ok = true;
    for (int r = 0; r < 4 && ok; r++) {
        size_t n = (size_t)(1u << 20) << r;  // 1, 2, 4, 8 MiB
        unsigned char* h = (unsigned char*)malloc(n);
        unsigned char* d = nullptr;
        ok = h && hipMalloc((void**)&d, n) == hipSuccess && hipMemsetAsync(d, r + 1, n, s) == hipSuccess &&
             hipMemcpyAsync(h, d, n, hipMemcpyDeviceToHost, s) == hipSuccess && hipStreamSynchronize(s) == hipSuccess &&
             h[0] == r + 1 && h[n - 1] == r + 1;
        free(h);
        hipFree(d);
    }
    const size_t big = 12u << 20;
    unsigned char* src = (unsigned char*)malloc(big);
    unsigned char* back = (unsigned char*)malloc(big);
    unsigned char* d = nullptr;
    fill_pattern(src, big, 77);
    ok = ok && hipMalloc((void**)&d, big) == hipSuccess && hipMemcpy(d, src, big, hipMemcpyHostToDevice) == hipSuccess &&
         hipMemcpy(back, d, big, hipMemcpyDeviceToHost) == hipSuccess;
    long diff = ok ? first_diff(src, back, big) : -2;
    check(ok && diff < 0, "memcpy.after_freed_async", "a copy failed or the 12 MiB came back different (first difference %ld)", diff);
    hipFree(d);
    free(src);
    free(back);
    hipStreamDestroy(s);
}

static void test_memcpy() {
    const size_t sizes[] = {1, 1024, (1u << 20) + 3, 8u << 20};
    uint64_t seed = 1;
    for (size_t n : sizes) {
        memcpy_case(n, false, seed++);
        memcpy_case(n, true, seed++);
    }
    memcpy_after_freed_async_case();
}

// ---------------------------------------------------------------------------------------------
static void test_memset() {
    g_step = "memset";
    const size_t n = (1u << 20) + 5;
    unsigned char* d = nullptr;
    HIP_OK(hipMalloc((void**)&d, n));
    std::vector<unsigned char> h(n, 0x11);
    HIP_OK(hipMemset(d, 0x00, n));
    HIP_OK(hipMemset(d + 1, 0xa5, n - 2));
    HIP_OK(hipMemcpy(h.data(), d, n, hipMemcpyDeviceToHost));
    long bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++) {
        unsigned char want = (i == 0 || i == n - 1) ? 0x00 : 0xa5;
        if (h[i] != want) bad = (long)i;
    }
    check(bad < 0, "memset.bytes", "byte %ld = 0x%02x", bad, bad >= 0 ? h[bad] : 0);

    const size_t words = 4097;
    HIP_OK(hipMemsetD32((hipDeviceptr_t)d, (int)0xdeadbeef, words));
    std::vector<uint32_t> w(words + 1, 0);
    HIP_OK(hipMemcpy(w.data(), d, (words + 1) * 4, hipMemcpyDeviceToHost));
    bad = -1;
    for (size_t i = 0; i < words && bad < 0; i++)
        if (w[i] != 0xdeadbeefu) bad = (long)i;
    // The word after the range still holds the 0xa5 bytes of the byte memset.
    int tail_ok = w[words] == 0xa5a5a5a5u;
    check(bad < 0 && tail_ok, "memset.d32", "word %ld = 0x%08x, word after the range 0x%08x", bad,
          bad >= 0 ? w[bad] : 0, w[words]);

    unsigned char small[16];
    HIP_OK(hipMemsetAsync(d, 0x3c, sizeof small, 0));
    HIP_OK(hipStreamSynchronize(0));
    HIP_OK(hipMemcpy(small, d, sizeof small, hipMemcpyDeviceToHost));
    int ok = 1;
    for (unsigned char c : small) ok &= c == 0x3c;
    check(ok, "memset.async_small", "bytes %02x %02x .. %02x", small[0], small[1], small[15]);
    HIP_OK(hipFree(d));
}

// ---------------------------------------------------------------------------------------------
static bool close_to(float got, float want) {
    return std::fabs(got - want) <= 1e-5f * std::max(1.0f, std::fabs(want));
}

static void test_matmul(unsigned n) {
    char name[64];
    snprintf(name, sizeof name, "kernels.matmul_%u", n);
    g_step = name;
    // Small integers: every product and partial sum is exact in float, so the GPU's summation
    // order (or fused multiply-adds) cannot change the result.
    std::vector<float> A(n * n), B(n * n), C(n * n, -7.0f), R(n * n, 0.0f);
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            A[i * n + j] = (float)((int)((i * 7 + j * 3) % 11) - 5);
            B[i * n + j] = (float)((int)((i * 5 + j * 13) % 9) - 4);
        }
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            float acc = 0;
            for (unsigned k = 0; k < n; k++) acc += A[i * n + k] * B[k * n + j];
            R[i * n + j] = acc;
        }
    float *dA, *dB, *dC;
    size_t bytes = sizeof(float) * n * n;
    HIP_OK(hipMalloc((void**)&dA, bytes));
    HIP_OK(hipMalloc((void**)&dB, bytes));
    HIP_OK(hipMalloc((void**)&dC, bytes));
    HIP_OK(hipMemcpy(dA, A.data(), bytes, hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(dB, B.data(), bytes, hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(dC, C.data(), bytes, hipMemcpyHostToDevice));
    dim3 block(16, 16);
    dim3 grid(blocks_for(n, 16), blocks_for(n, 16));
    hipLaunchKernelGGL(xhsa_matmul, grid, block, 0, 0, dA, dB, dC, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipMemcpy(C.data(), dC, bytes, hipMemcpyDeviceToHost));
    long bad = -1;
    for (size_t i = 0; i < (size_t)n * n && bad < 0; i++)
        if (C[i] != R[i]) bad = (long)i;
    check(bad < 0, name, "C[%ld] (row %ld, col %ld) = %g, want %g", bad, bad / (long)n, bad % (long)n,
          bad >= 0 ? C[bad] : 0.0f, bad >= 0 ? R[bad] : 0.0f);
    HIP_OK(hipFree(dA));
    HIP_OK(hipFree(dB));
    HIP_OK(hipFree(dC));
}

static void test_kernels() {
    g_step = "kernels.vadd";
    const unsigned n = (1u << 20) + 5;
    std::vector<float> a(n), b(n), c(n, -1.0f);
    for (unsigned i = 0; i < n; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 1000.0f - (float)(i % 977) * 0.25f;
    }
    float *da, *db, *dc;
    HIP_OK(hipMalloc((void**)&da, n * sizeof(float)));
    HIP_OK(hipMalloc((void**)&db, n * sizeof(float)));
    HIP_OK(hipMalloc((void**)&dc, n * sizeof(float)));
    HIP_OK(hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
    HIP_OK(hipMemset(dc, 0, n * sizeof(float)));
    double t0 = now_s();
    hipLaunchKernelGGL(xhsa_vadd, dim3(blocks_for(n, 256)), dim3(256), 0, 0, da, db, dc, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipDeviceSynchronize());
    double t1 = now_s();
    HIP_OK(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
    long bad = -1;
    for (unsigned i = 0; i < n && bad < 0; i++)
        if (c[i] != a[i] + b[i]) bad = i;
    check(bad < 0, "kernels.vadd", "c[%ld] = %g, want %g", bad, bad >= 0 ? c[bad] : 0.0f,
          bad >= 0 ? a[bad] + b[bad] : 0.0f);
    note("vadd of %u elements: %.3f ms launch-to-sync", n, (t1 - t0) * 1e3);

    // saxpy on a prefix of the same buffers: y = dc, x = da; elements past m keep vadd's values.
    g_step = "kernels.saxpy";
    const unsigned m = 100003;
    const float alpha = 2.5f;
    hipLaunchKernelGGL(xhsa_saxpy, dim3(blocks_for(m, 256)), dim3(256), 0, 0, alpha, (const float*)da,
                       dc, m);
    HIP_OK(hipGetLastError());
    std::vector<float> y(n);
    HIP_OK(hipMemcpy(y.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
    bad = -1;
    for (unsigned i = 0; i < n && bad < 0; i++) {
        float want = i < m ? std::fmaf(alpha, a[i], a[i] + b[i]) : a[i] + b[i];
        if (!close_to(y[i], want)) bad = i;
    }
    check(bad < 0, "kernels.saxpy", "y[%ld] = %g, want %g", bad, bad >= 0 ? y[bad] : 0.0f,
          bad >= 0 ? (bad < (long)m ? std::fmaf(alpha, a[bad], a[bad] + b[bad]) : a[bad] + b[bad])
                   : 0.0f);
    HIP_OK(hipFree(da));
    HIP_OK(hipFree(db));
    HIP_OK(hipFree(dc));

    test_matmul(64);
    test_matmul(50);
}

// ---------------------------------------------------------------------------------------------
// Per-stream work: c = a + b (vadd), then c = k*a + c (saxpy), async copies with pinned memory.
struct StreamWork {
    hipStream_t s = nullptr;
    unsigned n = 0;
    float k = 0;
    float *ha = nullptr, *hb = nullptr, *hc = nullptr;
    float *da = nullptr, *db = nullptr, *dc = nullptr;
};

static hipError_t enqueue_work(StreamWork& w) {
    hipError_t e;
    size_t bytes = w.n * sizeof(float);
    if ((e = hipHostMalloc((void**)&w.ha, bytes, hipHostMallocDefault))) return e;
    if ((e = hipHostMalloc((void**)&w.hb, bytes, hipHostMallocDefault))) return e;
    if ((e = hipHostMalloc((void**)&w.hc, bytes, hipHostMallocDefault))) return e;
    if ((e = hipMalloc((void**)&w.da, bytes))) return e;
    if ((e = hipMalloc((void**)&w.db, bytes))) return e;
    if ((e = hipMalloc((void**)&w.dc, bytes))) return e;
    for (unsigned i = 0; i < w.n; i++) {
        w.ha[i] = (float)(i % 1000) * 0.125f + w.k;
        w.hb[i] = (float)(i % 37) - 18.0f;
        w.hc[i] = -12345.0f;
    }
    if ((e = hipMemcpyAsync(w.da, w.ha, bytes, hipMemcpyHostToDevice, w.s))) return e;
    if ((e = hipMemcpyAsync(w.db, w.hb, bytes, hipMemcpyHostToDevice, w.s))) return e;
    hipLaunchKernelGGL(xhsa_vadd, dim3(blocks_for(w.n, 256)), dim3(256), 0, w.s, (const float*)w.da,
                       (const float*)w.db, w.dc, w.n);
    if ((e = hipGetLastError())) return e;
    hipLaunchKernelGGL(xhsa_saxpy, dim3(blocks_for(w.n, 256)), dim3(256), 0, w.s, w.k,
                       (const float*)w.da, w.dc, w.n);
    if ((e = hipGetLastError())) return e;
    return hipMemcpyAsync(w.hc, w.dc, bytes, hipMemcpyDeviceToHost, w.s);
}

static long verify_work(const StreamWork& w, float* got, float* want) {
    for (unsigned i = 0; i < w.n; i++) {
        float r = std::fmaf(w.k, w.ha[i], w.ha[i] + w.hb[i]);
        if (!close_to(w.hc[i], r)) {
            *got = w.hc[i];
            *want = r;
            return i;
        }
    }
    return -1;
}

static hipError_t free_work(StreamWork& w) {
    hipError_t e = hipSuccess, r;
    if ((r = hipHostFree(w.ha))) e = r;
    if ((r = hipHostFree(w.hb))) e = r;
    if ((r = hipHostFree(w.hc))) e = r;
    if ((r = hipFree(w.da))) e = r;
    if ((r = hipFree(w.db))) e = r;
    if ((r = hipFree(w.dc))) e = r;
    return e;
}

static void test_streams() {
    g_step = "streams";
    const int N = 4;
    StreamWork w[N + 1];
    for (int i = 0; i < N; i++) {
        HIP_OK(hipStreamCreate(&w[i].s));
        w[i].n = 65536 + 1000 * i;
        w[i].k = (float)(i + 1);
    }
    // The null stream does the same kind of work.
    w[N].s = 0;
    w[N].n = 50000;
    w[N].k = -3.0f;
    double t0 = now_s();
    for (int i = 0; i <= N; i++) HIP_OK(enqueue_work(w[i]));
    for (int i = 0; i < N; i++) HIP_OK(hipStreamSynchronize(w[i].s));
    HIP_OK(hipDeviceSynchronize());
    double t1 = now_s();
    for (int i = 0; i <= N; i++) {
        char name[64];
        if (i < N)
            snprintf(name, sizeof name, "streams.stream%d", i);
        else
            snprintf(name, sizeof name, "streams.null_stream");
        float got = 0, want = 0;
        long bad = verify_work(w[i], &got, &want);
        check(bad < 0, name, "element %ld = %g, want %g", bad, got, want);
        if (i < N) {
            hipError_t q = hipStreamQuery(w[i].s);
            char qn[64];
            snprintf(qn, sizeof qn, "%s.query_idle", name);
            check(q == hipSuccess, qn, "hipStreamQuery after sync = %s", hipGetErrorString(q));
        }
    }
    note("%d streams + null stream: %.3f ms enqueue-to-sync", N, (t1 - t0) * 1e3);

    // Cross-stream dependency: stream 1 waits (hipStreamWaitEvent) for an event recorded on
    // stream 0 after a long kernel and a vadd; its saxpy reads the vadd's output.
    g_step = "streams.wait_event";
    const unsigned n = 40000;
    std::vector<float> a(n), b(n), out(n);
    for (unsigned i = 0; i < n; i++) {
        a[i] = (float)(i % 101);
        b[i] = (float)(i % 7) * 2.0f;
    }
    float *da, *db, *dc;
    HIP_OK(hipMalloc((void**)&da, n * 4));
    HIP_OK(hipMalloc((void**)&db, n * 4));
    HIP_OK(hipMalloc((void**)&dc, n * 4));
    HIP_OK(hipMemcpy(da, a.data(), n * 4, hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(db, b.data(), n * 4, hipMemcpyHostToDevice));
    HIP_OK(hipMemset(dc, 0, n * 4));
    hipEvent_t ev;
    HIP_OK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
    // 10 ms of modelled work first, so that stream 1's saxpy really has to wait.
    hipLaunchKernelGGL(xhsa_synthetic, dim3(g_cus * 8), dim3(64), 0, w[0].s, 10000000ull);
    hipLaunchKernelGGL(xhsa_vadd, dim3(blocks_for(n, 256)), dim3(256), 0, w[0].s, (const float*)da,
                       (const float*)db, dc, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipEventRecord(ev, w[0].s));
    HIP_OK(hipStreamWaitEvent(w[1].s, ev, 0));
    hipLaunchKernelGGL(xhsa_saxpy, dim3(blocks_for(n, 256)), dim3(256), 0, w[1].s, 2.0f,
                       (const float*)da, dc, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipStreamSynchronize(w[1].s));
    HIP_OK(hipMemcpy(out.data(), dc, n * 4, hipMemcpyDeviceToHost));
    long bad = -1;
    for (unsigned i = 0; i < n && bad < 0; i++)
        if (!close_to(out[i], std::fmaf(2.0f, a[i], a[i] + b[i]))) bad = i;
    check(bad < 0, "streams.wait_event", "element %ld = %g, want %g (saxpy ran before the vadd?)", bad,
          bad >= 0 ? out[bad] : 0.0f, bad >= 0 ? std::fmaf(2.0f, a[bad], a[bad] + b[bad]) : 0.0f);
    HIP_OK(hipEventDestroy(ev));
    HIP_OK(hipFree(da));
    HIP_OK(hipFree(db));
    HIP_OK(hipFree(dc));

    for (int i = 0; i <= N; i++) HIP_OK(free_work(w[i]));
    for (int i = 0; i < N; i++) HIP_OK(hipStreamDestroy(w[i].s));
}

// ---------------------------------------------------------------------------------------------
static void test_priority() {
    g_step = "priority";
    int least = 0, greatest = 0;
    HIP_OK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    note("stream priority range: least %d, greatest %d", least, greatest);
    check(greatest <= least, "priority.range", "greatest %d > least %d", greatest, least);
    const int prios[2] = {greatest, least};
    const char* names[2] = {"priority.greatest", "priority.least"};
    StreamWork w[2];
    for (int i = 0; i < 2; i++) {
        HIP_OK(hipStreamCreateWithPriority(&w[i].s, hipStreamDefault, prios[i]));
        int got = 12345;
        HIP_OK(hipStreamGetPriority(w[i].s, &got));
        char name[64];
        snprintf(name, sizeof name, "%s.get", names[i]);
        check(got == prios[i], name, "hipStreamGetPriority = %d, want %d", got, prios[i]);
        w[i].n = 30000 + 17 * i;
        w[i].k = 0.5f + i;
    }
    for (int i = 0; i < 2; i++) HIP_OK(enqueue_work(w[i]));
    for (int i = 0; i < 2; i++) HIP_OK(hipStreamSynchronize(w[i].s));
    for (int i = 0; i < 2; i++) {
        float got = 0, want = 0;
        long bad = verify_work(w[i], &got, &want);
        char name[64];
        snprintf(name, sizeof name, "%s.work", names[i]);
        check(bad < 0, name, "element %ld = %g, want %g", bad, got, want);
        HIP_OK(free_work(w[i]));
        HIP_OK(hipStreamDestroy(w[i].s));
    }
}

// ---------------------------------------------------------------------------------------------
// Events around xhsa_synthetic: grid = CUs x 8 workgroups of 64 work-items (one wave each), so
// every workgroup fits in one round on the device (80 CUs x 32 wave slots) and the kernel
// takes wg_ns. A 5 ms kernel first keeps the queue busy, so that both markers and the kernel
// are queued before the device reaches them and host submission latency is not measured.
// The emulator shows device spans on the host clock: at --time-scale X (the launcher passes X in
// XHSA_EMU_TIME_SCALE) every modelled duration reads X times longer.
static double time_scale() {
    const char* s = getenv("XHSA_EMU_TIME_SCALE");
    double x = s ? atof(s) : 1.0;
    return x >= 1.0 ? x : 1.0;
}

static void test_events() {
    g_step = "events";
    const double scale = time_scale();
    hipStream_t s;
    HIP_OK(hipStreamCreate(&s));
    hipEvent_t start, stop;
    HIP_OK(hipEventCreate(&start));
    HIP_OK(hipEventCreate(&stop));
    const unsigned wgs = (unsigned)g_cus * 8;
    const unsigned long long warmup_ns = 5000000ull;

    struct Case {
        const char* name;
        unsigned long long wg_ns;
        int kernels;
        double want_ms;
    } cases[] = {
        {"events.synthetic_2ms", 2000000ull, 1, 2.0},
        {"events.two_kernels_2x1ms", 1000000ull, 2, 2.0},
    };
    for (const Case& c : cases) {
        g_step = c.name;
        const int trials = 5;
        double ms[trials];
        double wall[trials];
        for (int t = 0; t < trials; t++) {
            double w0 = now_s();
            hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, warmup_ns);
            HIP_OK(hipEventRecord(start, s));
            for (int k = 0; k < c.kernels; k++)
                hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, c.wg_ns);
            HIP_OK(hipGetLastError());
            HIP_OK(hipEventRecord(stop, s));
            HIP_OK(hipEventSynchronize(stop));
            wall[t] = (now_s() - w0) * 1e3;
            float e = -1;
            HIP_OK(hipEventElapsedTime(&e, start, stop));
            ms[t] = e;
        }
        double sorted[trials];
        memcpy(sorted, ms, sizeof ms);
        std::sort(sorted, sorted + trials);
        double median = sorted[trials / 2];
        const double want_ms = c.want_ms * scale;
        printf("  %s: hipEventElapsedTime", c.name);
        for (int t = 0; t < trials; t++) printf(" %.4f", ms[t]);
        printf(" ms (median %.4f, want %.3f +-10%%); host wall per trial incl. %.0f ms warm-up:",
               median, want_ms, warmup_ns / 1e6);
        for (int t = 0; t < trials; t++) printf(" %.2f", wall[t]);
        printf(" ms\n");
        check(std::fabs(median - want_ms) <= 0.1 * want_ms, c.name,
              "median elapsed %.4f ms, want %.3f ms +- 10%%", median, want_ms);
    }

    // Two markers back to back on a busy queue: nothing between them.
    g_step = "events.empty";
    hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, warmup_ns);
    HIP_OK(hipEventRecord(start, s));
    HIP_OK(hipEventRecord(stop, s));
    HIP_OK(hipEventSynchronize(stop));
    float e = -1;
    HIP_OK(hipEventElapsedTime(&e, start, stop));
    note("events.empty: two back-to-back markers: %.4f ms", e);
    check(e >= 0 && e < 0.5 * scale, "events.empty", "elapsed %.4f ms between back-to-back markers, want [0, %.1f)",
          e, 0.5 * scale);
    HIP_OK(hipEventQuery(stop));
    HIP_OK(hipEventDestroy(start));
    HIP_OK(hipEventDestroy(stop));
    HIP_OK(hipStreamDestroy(s));
}

// ---------------------------------------------------------------------------------------------
static void test_launches() {
    g_step = "launches";
    const int N = 10000;
    // A first launch outside the timing (module load on first use).
    hipLaunchKernelGGL(xhsa_null, dim3(1), dim3(64), 0, 0);
    HIP_OK(hipDeviceSynchronize());
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        hipLaunchKernelGGL(xhsa_null, dim3(1), dim3(64), 0, 0);
        if ((i & 1023) == 0) {
            hipError_t e = hipGetLastError();
            if (e != hipSuccess) {
                check(0, "launches.enqueue", "launch %d: %s", i, hipGetErrorString(e));
                return;
            }
        }
    }
    HIP_OK(hipGetLastError());
    double t1 = now_s();
    g_step = "launches.sync";
    HIP_OK(hipDeviceSynchronize());
    double t2 = now_s();
    note("%d xhsa_null launches: enqueue %.1f ms (%.0f launches/s), sync %.1f ms, total %.0f launches/s",
         N, (t1 - t0) * 1e3, N / (t1 - t0), (t2 - t1) * 1e3, N / (t2 - t0));
    check(1, "launches.10000_null", "");

    // The queue is still healthy after wrapping around many times.
    g_step = "launches.after";
    const unsigned n = 1000;
    std::vector<float> a(n, 1.5f), b(n, 2.0f), c(n, 0.0f);
    float *da, *db, *dc;
    HIP_OK(hipMalloc((void**)&da, n * 4));
    HIP_OK(hipMalloc((void**)&db, n * 4));
    HIP_OK(hipMalloc((void**)&dc, n * 4));
    HIP_OK(hipMemcpy(da, a.data(), n * 4, hipMemcpyHostToDevice));
    HIP_OK(hipMemcpy(db, b.data(), n * 4, hipMemcpyHostToDevice));
    hipLaunchKernelGGL(xhsa_vadd, dim3(blocks_for(n, 256)), dim3(256), 0, 0, (const float*)da,
                       (const float*)db, dc, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipMemcpy(c.data(), dc, n * 4, hipMemcpyDeviceToHost));
    int ok = 1;
    for (float v : c) ok &= v == 3.5f;
    check(ok, "launches.vadd_after", "c[0] = %g, want 3.5", c[0]);
    HIP_OK(hipFree(da));
    HIP_OK(hipFree(db));
    HIP_OK(hipFree(dc));
}

// ---------------------------------------------------------------------------------------------
struct Subset {
    const char* name;
    void (*run)();
};

static const Subset SUBSETS[] = {
    {"device", test_device},     {"memcpy", test_memcpy},     {"memset", test_memset},
    {"kernels", test_kernels},   {"streams", test_streams},   {"priority", test_priority},
    {"events", test_events},     {"launches", test_launches},
};
static const int NSUBSETS = sizeof SUBSETS / sizeof SUBSETS[0];

int main(int argc, char** argv) {
    g_program = "hip_basic";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(110);
    bool want[NSUBSETS] = {};
    bool any = false;
    for (int i = 1; i < argc; i++) {
        bool known = false;
        for (int j = 0; j < NSUBSETS; j++)
            if (!strcmp(argv[i], SUBSETS[j].name) || !strcmp(argv[i], "all")) {
                want[j] = true;
                known = true;
            }
        if (!known) {
            fprintf(stderr, "hip_basic: unknown subset '%s'; accepted: all", argv[i]);
            for (int j = 0; j < NSUBSETS; j++) fprintf(stderr, " %s", SUBSETS[j].name);
            fprintf(stderr, "\n");
            return 2;
        }
        any = true;
    }
    if (!any)
        for (int j = 0; j < NSUBSETS; j++) want[j] = true;

    // Device init and properties are needed by every subset (CU count for the grids).
    g_step = "init";
    double t0 = now_s();
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    check(e == hipSuccess && count >= 1, "init", "hipGetDeviceCount: %s, count %d", hipGetErrorString(e),
          count);
    if (e != hipSuccess || count < 1) return summary();
    e = hipGetDeviceProperties(&g_props, 0);
    if (e == hipSuccess && g_props.multiProcessorCount > 0) g_cus = g_props.multiProcessorCount;
    note("runtime init: %.1f ms", (now_s() - t0) * 1e3);

    for (int j = 0; j < NSUBSETS; j++) {
        if (!want[j]) continue;
        printf("== %s\n", SUBSETS[j].name);
        double s0 = now_s();
        SUBSETS[j].run();
        note("%s took %.1f ms", SUBSETS[j].name, (now_s() - s0) * 1e3);
    }
    g_step = "exit";
    return summary();
}
