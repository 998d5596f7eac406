// Kernels that wait: on the host (device printf goes through HIP's hostcall service, each call
// a round trip to a host thread), on the whole grid (a cooperative launch's grid sync) and on
// other workgroups (a chain of spin-waits). On the emulator they finish only when the ISA
// interpreter runs workgroups side by side and delivers the device's interrupts; and kernels
// that wait for a kernel on another stream or for the host while it creates a stream finish
// only when kernels of several queues execute at once, off the emulated CP's lock.
//
// Each part prints `PASS name` or `FAIL name: detail`; the program ends with `RESULT: PASS`
// (exit status 0) or `RESULT: FAIL` (1). The device printf lines themselves
// (`dev-printf block B thread T ...`) are checked by the test that runs the program.
//
// Usage: hip_waiting [all|printf|coop|chain|queues]
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

#define HIP_OK(x)                                                                   \
    do {                                                                            \
        hipError_t e_ = (x);                                                        \
        if (e_ != hipSuccess) {                                                     \
            std::printf("HIP error %s at %s:%d\n", hipGetErrorString(e_), __FILE__, \
                        __LINE__);                                                  \
            std::exit(2);                                                           \
        }                                                                           \
    } while (0)

static int failures = 0;

static void check(const char* name, bool ok, const char* detail) {
    if (ok)
        std::printf("PASS %s\n", name);
    else
        std::printf("FAIL %s: %s\n", name, detail);
    if (!ok) ++failures;
}

// Every thread prints one line with an int, a string, a double and a pointer-sized value;
// out[] records what printf returned.
__global__ void dev_printf(int* out, const char* word) {
    int b = blockIdx.x, t = threadIdx.x;
    out[b * blockDim.x + t] = printf("dev-printf block %d thread %d word %s half %.2f hex %llx\n", b, t, word,
                                     (b * 100 + t) / 2.0, 0xabc000ULL + b * 100 + t);
}

// Two phases around a grid-wide sync: each workgroup reads its neighbour's first-phase value
// and the sum of all of them; then again, to use the barrier twice.
__global__ void coop_grid_sync(int* data, int* out) {
    cg::grid_group grid = cg::this_grid();
    int n = gridDim.x, k = blockIdx.x;
    if (threadIdx.x == 0) data[k] = 7 * k + 3;
    grid.sync();
    if (threadIdx.x == 0) {
        long s = 0;
        for (int j = 0; j < n; ++j) s += data[j];
        out[3 * k] = data[(k + 1) % n];
        out[3 * k + 1] = (int)s;
    }
    grid.sync();
    if (threadIdx.x == 0) data[k] = -k;
    grid.sync();
    if (threadIdx.x == 0) out[3 * k + 2] = data[(k + n - 1) % n];
}

// Workgroup k waits for workgroup k + 1's flag (the last starts): ends only when workgroups
// run side by side.
__global__ void reverse_chain(int* flags, int n) {
    int k = blockIdx.x;
    if (threadIdx.x == 0) {
        int v = 1;
        if (k + 1 < n) {
            while ((v = __hip_atomic_load(&flags[k + 1], __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT)) == 0)
                __builtin_amdgcn_s_sleep(1);
            v += 1;
        }
        __hip_atomic_store(&flags[k], v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
    }
}

// Waits (s_sleep loop) until *flag is non-zero, then writes what it read plus one.
__global__ void wait_for_flag(int* flag, int* out) {
    if (threadIdx.x == 0) {
        int v;
        while ((v = __hip_atomic_load(flag, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM)) == 0) __builtin_amdgcn_s_sleep(2);
        out[0] = v + 1;
    }
}

__global__ void set_flag(int* flag, int v) {
    if (threadIdx.x == 0) __hip_atomic_store(flag, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

__global__ void fill(int* p, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}

// A kernel on one stream waits for a kernel launched after it on another stream: both run at
// once on a GPU. Then a kernel waits for the host, which meanwhile creates a stream (a new
// queue: KFD calls), runs a kernel on it to completion, and only then releases the waiter.
static void part_queues() {
    hipStream_t s1, s2;
    HIP_OK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
    HIP_OK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
    int *flag, *out;
    HIP_OK(hipMalloc(&flag, sizeof(int)));
    HIP_OK(hipMalloc(&out, sizeof(int)));
    HIP_OK(hipMemset(flag, 0, sizeof(int)));
    HIP_OK(hipMemset(out, 0, sizeof(int)));
    HIP_OK(hipDeviceSynchronize());
    hipLaunchKernelGGL(wait_for_flag, dim3(1), dim3(64), 0, s1, flag, out);
    hipLaunchKernelGGL(set_flag, dim3(1), dim3(64), 0, s2, flag, 41);
    HIP_OK(hipGetLastError());
    HIP_OK(hipStreamSynchronize(s1));
    HIP_OK(hipStreamSynchronize(s2));
    int h = 0;
    HIP_OK(hipMemcpy(&h, out, sizeof(int), hipMemcpyDeviceToHost));
    char d[160];
    std::snprintf(d, sizeof d, "the waiter read %d, not 41", h - 1);
    check("queues.kernel_waits_for_kernel_on_another_stream", h == 42, d);

    int* host_flag;
    HIP_OK(hipHostMalloc(&host_flag, sizeof(int), hipHostMallocCoherent));
    *(volatile int*)host_flag = 0;
    HIP_OK(hipMemset(out, 0, sizeof(int)));
    HIP_OK(hipDeviceSynchronize());
    hipLaunchKernelGGL(wait_for_flag, dim3(1), dim3(64), 0, s1, host_flag, out);
    HIP_OK(hipGetLastError());
    hipStream_t s3;
    HIP_OK(hipStreamCreateWithFlags(&s3, hipStreamNonBlocking));
    const int n = 4096;
    int* buf;
    HIP_OK(hipMalloc(&buf, n * sizeof(int)));
    hipLaunchKernelGGL(fill, dim3(n / 256), dim3(256), 0, s3, buf, 7, n);
    HIP_OK(hipStreamSynchronize(s3));
    std::vector<int> hb(n);
    HIP_OK(hipMemcpyAsync(hb.data(), buf, n * sizeof(int), hipMemcpyDeviceToHost, s3));
    HIP_OK(hipStreamSynchronize(s3));
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += hb[i] != 7 + i;
    hipError_t still = hipStreamQuery(s1);
    __atomic_store_n(host_flag, 99, __ATOMIC_RELEASE);
    HIP_OK(hipStreamSynchronize(s1));
    HIP_OK(hipMemcpy(&h, out, sizeof(int), hipMemcpyDeviceToHost));
    std::snprintf(d, sizeof d, "%d wrong values from the new stream; waiter %s before the host wrote; it read %d", bad,
                  still == hipErrorNotReady ? "still running" : "not running", h - 1);
    check("queues.host_creates_a_stream_while_a_kernel_waits", bad == 0 && still == hipErrorNotReady && h == 100, d);
    HIP_OK(hipFree(buf));
    HIP_OK(hipHostFree(host_flag));
    HIP_OK(hipFree(flag));
    HIP_OK(hipFree(out));
    HIP_OK(hipStreamDestroy(s1));
    HIP_OK(hipStreamDestroy(s2));
    HIP_OK(hipStreamDestroy(s3));
}

static void part_printf() {
    const int blocks = 2, threads = 64, n = blocks * threads;
    int* out;
    char* word;
    HIP_OK(hipMalloc(&out, n * sizeof(int)));
    HIP_OK(hipMalloc(&word, 8));
    HIP_OK(hipMemcpy(word, "emu", 4, hipMemcpyHostToDevice));
    HIP_OK(hipMemset(out, 0xff, n * sizeof(int)));
    hipLaunchKernelGGL(dev_printf, dim3(blocks), dim3(threads), 0, 0, out, word);
    HIP_OK(hipGetLastError());
    HIP_OK(hipDeviceSynchronize());
    std::fflush(stdout);
    std::vector<int> h(n);
    HIP_OK(hipMemcpy(h.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += h[i] < 0;
    char d[128];
    std::snprintf(d, sizeof d, "%d of %d printf calls returned an error", bad, n);
    check("printf.returned", bad == 0, d);
    HIP_OK(hipFree(out));
    HIP_OK(hipFree(word));
}

static void part_coop() {
    int dev = 0, coop = 0, cus = 0, per_cu = 0;
    HIP_OK(hipDeviceGetAttribute(&coop, hipDeviceAttributeCooperativeLaunch, dev));
    HIP_OK(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev));
    check("coop.supported", coop == 1, "hipDeviceAttributeCooperativeLaunch is 0");
    if (coop != 1) return;
    const int threads = 256;
    HIP_OK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, coop_grid_sync, threads, 0));
    char d[256];
    std::snprintf(d, sizeof d, "%d blocks of %d per CU", per_cu, threads);
    check("coop.occupancy", per_cu >= 1, d);
    if (per_cu < 1) return;
    // One workgroup per CU, twice: the grid the device holds at once with room to spare.
    int n = cus * (per_cu < 2 ? per_cu : 2);
    int *data, *out;
    HIP_OK(hipMalloc(&data, n * sizeof(int)));
    HIP_OK(hipMalloc(&out, 3 * n * sizeof(int)));
    HIP_OK(hipMemset(out, 0, 3 * n * sizeof(int)));
    void* args[] = {&data, &out};
    HIP_OK(hipLaunchCooperativeKernel((const void*)coop_grid_sync, dim3(n), dim3(threads), args, 0, 0));
    HIP_OK(hipDeviceSynchronize());
    std::vector<int> h(3 * n);
    HIP_OK(hipMemcpy(h.data(), out, 3 * n * sizeof(int), hipMemcpyDeviceToHost));
    long sum = 0;
    for (int k = 0; k < n; ++k) sum += 7 * k + 3;
    int bad = -1;
    for (int k = 0; k < n && bad < 0; ++k) {
        if (h[3 * k] != 7 * ((k + 1) % n) + 3 || h[3 * k + 1] != (int)sum || h[3 * k + 2] != -((k + n - 1) % n)) bad = k;
    }
    if (bad >= 0)
        std::snprintf(d, sizeof d, "workgroup %d of %d: %d %d %d", bad, n, h[3 * bad], h[3 * bad + 1], h[3 * bad + 2]);
    check("coop.grid_sync", bad < 0, d);
    // More workgroups than the device holds at once: refused by HIP before it reaches the GPU.
    int too_many = cus * per_cu + 1;
    hipError_t e = hipLaunchCooperativeKernel((const void*)coop_grid_sync, dim3(too_many), dim3(threads), args, 0, 0);
    std::snprintf(d, sizeof d, "%d workgroups: %s", too_many, hipGetErrorString(e));
    check("coop.too_large_refused", e == hipErrorCooperativeLaunchTooLarge, d);
    (void)hipGetLastError();
    HIP_OK(hipFree(data));
    HIP_OK(hipFree(out));
}

static void part_chain() {
    const int n = 96;
    int* flags;
    HIP_OK(hipMalloc(&flags, n * sizeof(int)));
    HIP_OK(hipMemset(flags, 0, n * sizeof(int)));
    hipLaunchKernelGGL(reverse_chain, dim3(n), dim3(64), 0, 0, flags, n);
    HIP_OK(hipGetLastError());
    HIP_OK(hipDeviceSynchronize());
    std::vector<int> h(n);
    HIP_OK(hipMemcpy(h.data(), flags, n * sizeof(int), hipMemcpyDeviceToHost));
    int bad = -1;
    for (int k = 0; k < n && bad < 0; ++k)
        if (h[k] != n - k) bad = k;
    char d[128];
    if (bad >= 0) std::snprintf(d, sizeof d, "flag %d is %d, not %d", bad, h[bad], n - bad);
    check("chain.spin_waits", bad < 0, d);
    HIP_OK(hipFree(flags));
}

int main(int argc, char** argv) {
    const char* which = argc > 1 ? argv[1] : "all";
    bool all = std::strcmp(which, "all") == 0;
    if (!all && std::strcmp(which, "printf") && std::strcmp(which, "coop") && std::strcmp(which, "chain") && std::strcmp(which, "queues")) {
        std::fprintf(stderr, "hip_waiting: unknown part %s; accepted: all, printf, coop, chain, queues\n", which);
        return 2;
    }
    // Waits block instead of spinning a core (HIP spins by default when it has cores to spare).
    HIP_OK(hipSetDeviceFlags(hipDeviceScheduleBlockingSync));
    if (all || !std::strcmp(which, "printf")) part_printf();
    if (all || !std::strcmp(which, "coop")) part_coop();
    if (all || !std::strcmp(which, "chain")) part_chain();
    if (all || !std::strcmp(which, "queues")) part_queues();
    std::printf("RESULT: %s\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
