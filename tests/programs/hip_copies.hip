// hip_copies: every kind of copy and fill HIP sends to the SDMA engines or its blit kernels,
// byte-exact, at sizes around page and SDMA packet boundaries:
//
//   hip_copies [quick] [noregister] [size=N]
//
// - hipMemcpy / hipMemcpyAsync H2D, D2H and D2D of pageable (malloc), pinned (hipHostMalloc),
//   registered (hipHostRegister) and managed (hipMallocManaged) memory, sizes 1 .. 64 MiB + odd;
// - pageable buffers freed and reallocated between asynchronous copies (the reuse a program's
//   allocator does), and a copy right after a kernel that writes the same device buffer;
// - hipMemset, hipMemsetD8/D16/D32 (and async), on odd offsets and sizes;
// - hipMemcpy2D / hipMemcpy3D with pitches;
// - eight streams copying at once;
// - device-to-device between every pair of GPUs the program sees (hipMemcpyPeer, after enabling
//   peer access where hipDeviceCanAccessPeer says so).
//
// Build: hipcc --offload-arch=gfx90a -I tests/programs -o hip_copies hip_copies.hip
// Prints one PASS/FAIL line per check and `RESULT: PASS|FAIL`. An ordinary HIP program.
#include <hip/hip_runtime.h>

#include <vector>

#include "common.h"

#define HIP_TRY(expr)                                                                            \
    do {                                                                                         \
        g_step = #expr;                                                                          \
        hipError_t e_ = (expr);                                                                  \
        if (e_ != hipSuccess) {                                                                  \
            check(0, name, "%s: %s (%d) at line %d", #expr, hipGetErrorString(e_), (int)e_, \
                  __LINE__);                                                                     \
            return;                                                                              \
        }                                                                                        \
    } while (0)

__global__ void add_one(unsigned char* p, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (unsigned char)(p[i] + 1);
}

enum Host { PAGEABLE, PINNED, REGISTERED, MANAGED };
static const char* HOST_NAMES[] = {"pageable", "pinned", "registered", "managed"};

static unsigned char* host_alloc(Host kind, size_t n) {
    void* p = nullptr;
    switch (kind) {
    case PAGEABLE: p = malloc(n); break;
    case PINNED: if (hipHostMalloc(&p, n, 0) != hipSuccess) p = nullptr; break;
    case REGISTERED:
        p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
        if (p && hipHostRegister(p, n, hipHostRegisterDefault) != hipSuccess) {
            free(p);
            p = nullptr;
        }
        break;
    case MANAGED: if (hipMallocManaged(&p, n) != hipSuccess) p = nullptr; break;
    }
    return (unsigned char*)p;
}

static void host_free(Host kind, unsigned char* p) {
    switch (kind) {
    case PAGEABLE: free(p); break;
    case PINNED: (void)hipHostFree(p); break;
    case REGISTERED: (void)hipHostUnregister(p); free(p); break;
    case MANAGED: (void)hipFree(p); break;
    }
}

// H2D, a kernel adding one to every byte, D2H (sync or on a stream), D2D into a second buffer
// and back: byte-exact against the host's own arithmetic.
static void round_trip(Host kind, size_t n, bool async, hipStream_t s, uint64_t seed) {
    char name[96];
    snprintf(name, sizeof name, "copy.%s.%s.%zu", HOST_NAMES[kind], async ? "async" : "sync", n);
    unsigned char* src = host_alloc(kind, n);
    unsigned char* dst = host_alloc(kind, n);
    if (!src || !dst) {
        check(0, name, "host allocation failed");
        return;
    }
    fill_pattern(src, n, seed);
    memset(dst, 0, n);
    unsigned char *d1 = nullptr, *d2 = nullptr;
    HIP_TRY(hipMalloc((void**)&d1, n));
    HIP_TRY(hipMalloc((void**)&d2, n));
    if (async) {
        HIP_TRY(hipMemcpyAsync(d1, src, n, hipMemcpyHostToDevice, s));
        hipLaunchKernelGGL(add_one, dim3(64), dim3(256), 0, s, d1, n);
        HIP_TRY(hipMemcpyAsync(d2, d1, n, hipMemcpyDeviceToDevice, s));
        HIP_TRY(hipMemcpyAsync(dst, d2, n, hipMemcpyDeviceToHost, s));
        HIP_TRY(hipStreamSynchronize(s));
    } else {
        HIP_TRY(hipMemcpy(d1, src, n, hipMemcpyHostToDevice));
        hipLaunchKernelGGL(add_one, dim3(64), dim3(256), 0, 0, d1, n);
        HIP_TRY(hipMemcpy(d2, d1, n, hipMemcpyDeviceToDevice));
        HIP_TRY(hipMemcpy(dst, d2, n, hipMemcpyDeviceToHost));
    }
    long bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++)
        if (dst[i] != (unsigned char)(src[i] + 1)) bad = (long)i;
    check(bad < 0, name, "first difference at byte %ld", bad);
    HIP_TRY(hipFree(d1));
    HIP_TRY(hipFree(d2));
    host_free(kind, src);
    host_free(kind, dst);
}

// Asynchronous copies into pageable buffers that are freed and allocated again at once (the
// allocator hands the same pages back), alternating sizes, then one large copy each way.
static void freed_and_reused(hipStream_t s) {
    const char* name = "copy.pageable.freed_and_reused";
    unsigned char* d = nullptr;
    HIP_TRY(hipMalloc((void**)&d, 8u << 20));
    bool ok = true;
    for (int r = 0; r < 24 && ok; r++) {
        size_t n = r % 3 == 0 ? 4096 : r % 3 == 1 ? (64u << 10) + 17 : (4u << 20) + 3;
        unsigned char* h = (unsigned char*)malloc(n);
        HIP_TRY(hipMemsetAsync(d, r + 1, n, s));
        HIP_TRY(hipMemcpyAsync(h, d, n, hipMemcpyDeviceToHost, s));
        HIP_TRY(hipStreamSynchronize(s));
        ok = h[0] == r + 1 && h[n / 2] == r + 1 && h[n - 1] == r + 1;
        free(h);
        unsigned char* g = (unsigned char*)malloc(n);
        memset(g, r + 7, n);
        HIP_TRY(hipMemcpyAsync(d, g, n, hipMemcpyHostToDevice, s));
        HIP_TRY(hipStreamSynchronize(s));
        free(g);
        unsigned char tail = 0;
        HIP_TRY(hipMemcpy(&tail, d + n - 1, 1, hipMemcpyDeviceToHost));
        ok = ok && tail == (unsigned char)(r + 7);
    }
    check(ok, name, "a value came back different");
    HIP_TRY(hipFree(d));
}

static void fills() {
    const char* name = "fill.memset_d8_d16_d32";
    const size_t n = (4u << 20) + 40;
    unsigned char* d = nullptr;
    HIP_TRY(hipMalloc((void**)&d, n));
    std::vector<unsigned char> h(n);
    HIP_TRY(hipMemset(d, 0x11, n));
    HIP_TRY(hipMemset(d + 3, 0x22, 4093));                          // odd offset and size
    HIP_TRY(hipMemsetD8((hipDeviceptr_t)(d + 5000), 0x33, 70001));
    HIP_TRY(hipMemsetD16((hipDeviceptr_t)(d + 80002), 0x4455, 33333));
    HIP_TRY(hipMemsetD32((hipDeviceptr_t)(d + 200004), 0x66778899u, 900000));
    HIP_TRY(hipMemsetAsync(d + n - 9, 0xaa, 9, 0));
    HIP_TRY(hipDeviceSynchronize());
    HIP_TRY(hipMemcpy(h.data(), d, n, hipMemcpyDeviceToHost));
    std::vector<unsigned char> w(n, 0x11);
    memset(&w[3], 0x22, 4093);
    memset(&w[5000], 0x33, 70001);
    for (size_t i = 0; i < 33333; i++) { w[80002 + 2 * i] = 0x55; w[80003 + 2 * i] = 0x44; }
    for (size_t i = 0; i < 900000; i++) {
        w[200004 + 4 * i] = 0x99; w[200005 + 4 * i] = 0x88; w[200006 + 4 * i] = 0x77; w[200007 + 4 * i] = 0x66;
    }
    memset(&w[n - 9], 0xaa, 9);
    long bad = first_diff(w.data(), h.data(), n);
    check(bad < 0, name, "first difference at byte %ld: got 0x%02x want 0x%02x", bad,
          bad >= 0 ? h[bad] : 0, bad >= 0 ? w[bad] : 0);
    HIP_TRY(hipFree(d));
}

static void copies_2d_3d() {
    const char* name = "copy.2d_3d";
    const size_t w = 1000, hgt = 300, dp = 5;  // bytes per row, rows, slices
    std::vector<unsigned char> src(w * hgt * dp), back(w * hgt * dp, 0);
    fill_pattern(src.data(), src.size(), 99);
    size_t pitch = 0;
    unsigned char* d = nullptr;
    HIP_TRY(hipMallocPitch((void**)&d, &pitch, w, hgt));
    HIP_TRY(hipMemcpy2D(d, pitch, src.data(), w, w, hgt, hipMemcpyHostToDevice));
    HIP_TRY(hipMemcpy2D(back.data(), w, d, pitch, w, hgt, hipMemcpyDeviceToHost));
    long bad = first_diff(src.data(), back.data(), w * hgt);
    check(bad < 0, "copy.2d", "pitch %zu: first difference at byte %ld", pitch, bad);
    HIP_TRY(hipFree(d));

    hipPitchedPtr dev;
    HIP_TRY(hipMalloc3D(&dev, make_hipExtent(w, hgt, dp)));
    hipMemcpy3DParms p = {};
    p.srcPtr = make_hipPitchedPtr(src.data(), w, w, hgt);
    p.dstPtr = dev;
    p.extent = make_hipExtent(w, hgt, dp);
    p.kind = hipMemcpyHostToDevice;
    HIP_TRY(hipMemcpy3D(&p));
    hipMemcpy3DParms q = {};
    q.srcPtr = dev;
    q.dstPtr = make_hipPitchedPtr(back.data(), w, w, hgt);
    q.extent = make_hipExtent(w, hgt, dp);
    q.kind = hipMemcpyDeviceToHost;
    HIP_TRY(hipMemcpy3D(&q));
    bad = first_diff(src.data(), back.data(), src.size());
    check(bad < 0, "copy.3d", "pitch %zu: first difference at byte %ld", dev.pitch, bad);
    HIP_TRY(hipFree(dev.ptr));
}

static void many_streams() {
    const char* name = "copy.eight_streams";
    const int S = 8;
    const size_t n = (1u << 20) + 333;
    hipStream_t st[S];
    unsigned char *h[S], *b[S], *d[S];
    for (int k = 0; k < S; k++) {
        HIP_TRY(hipStreamCreate(&st[k]));
        HIP_TRY(hipHostMalloc((void**)&h[k], n, 0));
        b[k] = (unsigned char*)malloc(n);
        HIP_TRY(hipMalloc((void**)&d[k], n));
        fill_pattern(h[k], n, 1000 + k);
    }
    for (int k = 0; k < S; k++) {
        HIP_TRY(hipMemcpyAsync(d[k], h[k], n, hipMemcpyHostToDevice, st[k]));
        hipLaunchKernelGGL(add_one, dim3(32), dim3(256), 0, st[k], d[k], n);
        HIP_TRY(hipMemcpyAsync(b[k], d[k], n, hipMemcpyDeviceToHost, st[k]));
    }
    bool ok = true;
    for (int k = 0; k < S; k++) {
        HIP_TRY(hipStreamSynchronize(st[k]));
        for (size_t i = 0; i < n && ok; i++) ok = b[k][i] == (unsigned char)(h[k][i] + 1);
    }
    check(ok, name, "a stream's bytes came back different");
    for (int k = 0; k < S; k++) {
        HIP_TRY(hipStreamDestroy(st[k]));
        HIP_TRY(hipHostFree(h[k]));
        free(b[k]);
        HIP_TRY(hipFree(d[k]));
    }
}

static void peers() {
    const char* name = "copy.peer";
    int count = 0;
    HIP_TRY(hipGetDeviceCount(&count));
    const size_t n = (4u << 20) + 7;
    std::vector<unsigned char> src(n), back(n);
    fill_pattern(src.data(), n, 5);
    std::vector<unsigned char*> d(count, nullptr);
    for (int g = 0; g < count; g++) {
        HIP_TRY(hipSetDevice(g));
        HIP_TRY(hipMalloc((void**)&d[g], n));
    }
    int pairs = 0, bad_pairs = 0;
    for (int a = 0; a < count; a++) {
        HIP_TRY(hipSetDevice(a));
        HIP_TRY(hipMemcpy(d[a], src.data(), n, hipMemcpyHostToDevice));
        int b = (a + 1) % count;
        if (b == a) break;
        int can = 0;
        HIP_TRY(hipDeviceCanAccessPeer(&can, a, b));
        if (can) {
            hipError_t e = hipDeviceEnablePeerAccess(b, 0);
            if (e != hipSuccess && e != hipErrorPeerAccessAlreadyEnabled) can = 0;
        }
        HIP_TRY(hipMemcpyPeer(d[b], b, d[a], a, n));
        HIP_TRY(hipSetDevice(b));
        std::fill(back.begin(), back.end(), 0);
        HIP_TRY(hipMemcpy(back.data(), d[b], n, hipMemcpyDeviceToHost));
        pairs++;
        if (first_diff(src.data(), back.data(), n) >= 0) bad_pairs++;
    }
    note("%d devices, %d peer copies", count, pairs);
    check(bad_pairs == 0, name, "%d of %d peer copies came back different", bad_pairs, pairs);
    for (int g = 0; g < count; g++) {
        HIP_TRY(hipSetDevice(g));
        HIP_TRY(hipFree(d[g]));
    }
    HIP_TRY(hipSetDevice(0));
}

int main(int argc, char** argv) {
    g_program = "hip_copies";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(600);
    bool quick = false, registered = true;
    size_t only = 0;  // size=N: the round trips of that size alone
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "size=", 5)) only = strtoull(argv[i] + 5, nullptr, 0);
        quick |= !strcmp(argv[i], "quick");
        // ROCm 5.2's HIP aborts in hipHostUnregister ("Memobj map does not have ptr").
        registered &= strcmp(argv[i], "noregister") != 0;
    }
    hipStream_t s;
    const char* name = "init";
    g_step = "init";
    if (hipStreamCreate(&s) != hipSuccess) {
        check(0, name, "hipStreamCreate failed");
        return summary();
    }
    const size_t sizes[] = {1, 4095, 4096, 4097, (64u << 10) - 1, 64u << 10, (64u << 10) + 1,
                            (4u << 20) + 308, 64u << 20};
    uint64_t seed = 1;
    for (size_t n : sizes) {
        if ((quick && n > (4u << 20) + 308) || (only && n != only)) continue;
        for (int k = PAGEABLE; k <= MANAGED; k++) {
            // managed and registered memory only at the smaller sizes (each a separate path)
            if (k >= REGISTERED && n > (4u << 20) + 308) continue;
            if (k == REGISTERED && !registered) continue;
            round_trip((Host)k, n, false, s, seed++);
            round_trip((Host)k, n, true, s, seed++);
        }
    }
    if (only) {
        (void)hipStreamDestroy(s);
        return summary();
    }
    freed_and_reused(s);
    fills();
    copies_2d_3d();
    many_streams();
    peers();
    (void)hipStreamDestroy(s);
    return summary();
}
