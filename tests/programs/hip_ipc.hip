// hip_ipc: device memory shared between two processes through HIP IPC handles
// (hipIpcGetMemHandle / hipIpcOpenMemHandle; on ROCm 6.x and 7.x ROCr passes a DMA-buf of the
// buffer to the other process through a Unix socket and imports it there with KFD's
// GET_DMABUF_INFO and IMPORT_DMABUF).
//
//   hip_ipc                 the parent (what the tests run)
//   hip_ipc child H1 N1 H2 N2   started by the parent: H = a handle in hex, N = its int count
//
// Build: hipcc --offload-arch=gfx942 -I tests/programs -o hip_ipc hip_ipc.hip
//
// The parent allocates two buffers (a large one, and a small one that ROCr may carve out of a
// larger block: a fragment, shared with an offset), fills them with a kernel, gets an IPC
// handle of each and fork+execs itself as the child with the handles on the command line. The
// child opens each handle, checks the parent's values with a kernel and by copying them to the
// host, writes new values with a kernel, closes the handle, opens the large one once more (the
// child's writes are there), closes it, and exits 0 if all its checks passed. The parent checks
// the child's exit and the child's values, with a kernel and on the host.
#include <hip/hip_runtime.h>
#include <sys/wait.h>

#include "common.h"

__global__ void fill(int* p, unsigned n, int mul, int add) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = mul * (int)i + add;
}

// Counts the elements that are not mul * i + add.
__global__ void count_wrong(const int* p, unsigned n, int mul, int add, unsigned* wrong) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && p[i] != mul * (int)i + add) atomicAdd(wrong, 1u);
}

static const unsigned kBig = 1u << 18;  // 1 MiB of ints
static const unsigned kSmall = 1000;

// The parent's values and the child's, per buffer (`seed` tells the two buffers apart).
static int parent_add(int seed) { return 7 + seed; }
static int child_add(int seed) { return 1 + seed; }

#define CHECK_HIP(expr, name)                                                             \
    do {                                                                                  \
        hipError_t e_ = (expr);                                                           \
        check(e_ == hipSuccess, name, "%s: %s", #expr, hipGetErrorString(e_));            \
        if (e_ != hipSuccess) return 0;                                                   \
    } while (0)

// Elements of p[0..n) that are not mul * i + add, counted on the device (-1 on an error).
static long wrong_on_device(const int* p, unsigned n, int mul, int add) {
    unsigned* wrong = nullptr;
    if (hipMalloc(&wrong, sizeof(unsigned)) != hipSuccess) return -1;
    unsigned host = 0;
    long r = -1;
    if (hipMemset(wrong, 0, sizeof(unsigned)) == hipSuccess) {
        hipLaunchKernelGGL(count_wrong, dim3((n + 255) / 256), dim3(256), 0, 0, p, n, mul, add, wrong);
        if (hipDeviceSynchronize() == hipSuccess &&
            hipMemcpy(&host, wrong, sizeof(unsigned), hipMemcpyDeviceToHost) == hipSuccess)
            r = host;
    }
    (void)hipFree(wrong);
    return r;
}

// Elements of p[0..n) that are not mul * i + add, copied to the host (-1 on an error).
static long wrong_on_host(const int* p, unsigned n, int mul, int add) {
    int* h = (int*)malloc(n * sizeof(int));
    long r = -1;
    if (hipMemcpy(h, p, n * sizeof(int), hipMemcpyDeviceToHost) == hipSuccess) {
        r = 0;
        for (unsigned i = 0; i < n; i++) r += h[i] != mul * (int)i + add;
    }
    free(h);
    return r;
}

static void to_hex(const hipIpcMemHandle_t& h, char* out) {
    const unsigned char* b = (const unsigned char*)&h;
    for (size_t i = 0; i < sizeof h; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static int from_hex(const char* s, hipIpcMemHandle_t* h) {
    unsigned char* b = (unsigned char*)h;
    if (strlen(s) != 2 * sizeof *h) return 0;
    for (size_t i = 0; i < sizeof *h; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return 0;
        b[i] = (unsigned char)v;
    }
    return 1;
}

// The child's part for one buffer; returns 1 if every step succeeded.
static int child_buffer(const char* tag, const hipIpcMemHandle_t& h, unsigned n, int seed) {
    char name[96];
    int* p = nullptr;
    snprintf(name, sizeof name, "ipc.child.%s.open", tag);
    CHECK_HIP(hipIpcOpenMemHandle((void**)&p, h, hipIpcMemLazyEnablePeerAccess), name);
    long w = wrong_on_device(p, n, 3, parent_add(seed));
    snprintf(name, sizeof name, "ipc.child.%s.kernel_reads_parent_values", tag);
    check(w == 0, name, "%ld of %u wrong", w, n);
    w = wrong_on_host(p, n, 3, parent_add(seed));
    snprintf(name, sizeof name, "ipc.child.%s.copy_reads_parent_values", tag);
    check(w == 0, name, "%ld of %u wrong", w, n);
    hipLaunchKernelGGL(fill, dim3((n + 255) / 256), dim3(256), 0, 0, p, n, 5, child_add(seed));
    snprintf(name, sizeof name, "ipc.child.%s.write", tag);
    CHECK_HIP(hipDeviceSynchronize(), name);
    snprintf(name, sizeof name, "ipc.child.%s.close", tag);
    CHECK_HIP(hipIpcCloseMemHandle(p), name);
    return w == 0;
}

// The emulator's buffers this process holds: descriptors of them, and mappings of them (an
// emulated buffer's memfd is named `xhsa-emu-bo`; on a real GPU there are none of either).
static long bo_fds(void) {
    long n = 0;
    char path[64], link[256];
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0) continue;
        link[len] = 0;
        n += strncmp(link, "/memfd:xhsa-emu-bo", 18) == 0;
    }
    return n;
}

static long bo_maps(void) {
    FILE* f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    long n = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) n += strstr(line, "/memfd:xhsa-emu-bo") != NULL;
    fclose(f);
    return n;
}

static int child(int argc, char** argv) {
    g_program = "hip_ipc child";
    if (argc < 6) {
        fprintf(stderr, "usage: hip_ipc child H1 N1 H2 N2\n");
        return 2;
    }
    hipIpcMemHandle_t big, small;
    check(from_hex(argv[2], &big) && from_hex(argv[4], &small), "ipc.child.handles", "bad handle text");
    unsigned nbig = (unsigned)strtoul(argv[3], NULL, 10), nsmall = (unsigned)strtoul(argv[5], NULL, 10);
    g_step = "child: big";
    child_buffer("big", big, nbig, 0);
    g_step = "child: small";
    child_buffer("small", small, nsmall, 1);
    // Opened again after a close: the same memory, now holding the child's values.
    g_step = "child: reopen";
    int* p = nullptr;
    hipError_t e = hipIpcOpenMemHandle((void**)&p, big, hipIpcMemLazyEnablePeerAccess);
    check(e == hipSuccess, "ipc.child.reopen", "%s", hipGetErrorString(e));
    if (e == hipSuccess) {
        long w = wrong_on_device(p, nbig, 5, child_add(0));
        check(w == 0, "ipc.child.reopen_sees_child_values", "%ld of %u wrong", w, nbig);
        e = hipIpcCloseMemHandle(p);
        check(e == hipSuccess, "ipc.child.reclose", "%s", hipGetErrorString(e));
    }
    // Opening and closing again leaves nothing behind: no descriptor, no mapping.
    g_step = "child: open/close cycles";
    long fds = bo_fds(), maps = bo_maps();
    int cycles_ok = 1;
    for (int i = 0; i < 3 && cycles_ok; i++) {
        cycles_ok = hipIpcOpenMemHandle((void**)&p, big, hipIpcMemLazyEnablePeerAccess) == hipSuccess &&
                    hipIpcCloseMemHandle(p) == hipSuccess;
    }
    check(cycles_ok, "ipc.child.cycles", "open/close cycles failed");
    check(bo_fds() == fds && bo_maps() == maps, "ipc.child.nothing_left_behind",
          "buffer descriptors %ld -> %ld, mappings %ld -> %ld", fds, bo_fds(), maps, bo_maps());
    return g_failures == 0 && g_checks > 0 ? 0 : 1;
}

// Waits up to `secs` for child `pid`; its wait status, or -1 if it did not end.
static int wait_child(pid_t pid, double secs) {
    double end = now_s() + secs;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 || now_s() > end) return -1;
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, nullptr);
    }
}

static int parent(char** argv) {
    int *big = nullptr, *small = nullptr;
    g_step = "allocate and fill";
    CHECK_HIP(hipMalloc(&big, kBig * sizeof(int)), "ipc.parent.alloc_big");
    CHECK_HIP(hipMalloc(&small, kSmall * sizeof(int)), "ipc.parent.alloc_small");
    hipLaunchKernelGGL(fill, dim3((kBig + 255) / 256), dim3(256), 0, 0, big, kBig, 3, parent_add(0));
    hipLaunchKernelGGL(fill, dim3((kSmall + 255) / 256), dim3(256), 0, 0, small, kSmall, 3, parent_add(1));
    CHECK_HIP(hipDeviceSynchronize(), "ipc.parent.fill");
    g_step = "get handles";
    hipIpcMemHandle_t hbig, hsmall;
    CHECK_HIP(hipIpcGetMemHandle(&hbig, big), "ipc.parent.handle_big");
    CHECK_HIP(hipIpcGetMemHandle(&hsmall, small), "ipc.parent.handle_small");
    char xbig[2 * sizeof hbig + 1], xsmall[2 * sizeof hsmall + 1], nbig[16], nsmall[16];
    to_hex(hbig, xbig);
    to_hex(hsmall, xsmall);
    snprintf(nbig, sizeof nbig, "%u", kBig);
    snprintf(nsmall, sizeof nsmall, "%u", kSmall);
    g_step = "child";
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "child", xbig, nbig, xsmall, nsmall, (char*)nullptr);
        _exit(127);
    }
    int st = wait_child(pid, 150);
    if (st == -1) kill(pid, SIGKILL);
    check(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "ipc.parent.child_ok",
          "the child failed or did not end (status %d)", st);
    g_step = "check the child's values";
    long w = wrong_on_device(big, kBig, 5, child_add(0));
    check(w == 0, "ipc.parent.kernel_sees_child_writes_big", "%ld of %u wrong", w, kBig);
    w = wrong_on_host(big, kBig, 5, child_add(0));
    check(w == 0, "ipc.parent.copy_sees_child_writes_big", "%ld of %u wrong", w, kBig);
    w = wrong_on_device(small, kSmall, 5, child_add(1));
    check(w == 0, "ipc.parent.kernel_sees_child_writes_small", "%ld of %u wrong", w, kSmall);
    w = wrong_on_host(small, kSmall, 5, child_add(1));
    check(w == 0, "ipc.parent.copy_sees_child_writes_small", "%ld of %u wrong", w, kSmall);
    CHECK_HIP(hipFree(big), "ipc.parent.free_big");
    CHECK_HIP(hipFree(small), "ipc.parent.free_small");
    return 1;
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "child")) {
        start_watchdog(140);
        return child(argc, argv);
    }
    g_program = "hip_ipc";
    start_watchdog(200);
    parent(argv);
    return summary();
}
