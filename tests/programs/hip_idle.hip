// hip_idle: launch a kernel, stay idle, launch again (the emulator's idle CPU cost).
//
//   hip_idle [SECONDS]      idle time in seconds (default 2; 0 gives the baseline run)
//
// Build: hipcc --offload-arch=gfx90a -I tests/kernels -I tests/programs -o hip_idle hip_idle.hip
//
// After the first kernel has completed the program prints `XHSA_IDLE_BEGIN`, sleeps SECONDS,
// prints `XHSA_IDLE_END`, then sleeps another 300 ms before launching again, so that a harness
// sampling CPU times when it reads those lines measures only idle time. It also prints its own
// process CPU time over the idle window (`idle_self_cpu_ms=`, all threads, CLOCK_PROCESS_CPUTIME_ID)
// and its thread count; the harness judges the figures.
#include <hip/hip_runtime.h>

#include "common.h"
#include "xhsa_kernels.hip"

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec t;
    t.tv_sec = (time_t)s;
    t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
    while (nanosleep(&t, &t) != 0) {
    }
}

static int threads_now() {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
    return n;
}

#define HIP_OK(expr)                                                                        \
    do {                                                                                    \
        g_step = #expr;                                                                     \
        hipError_t e_ = (expr);                                                             \
        check(e_ == hipSuccess, #expr, "%s (%d)", hipGetErrorString(e_), (int)e_);           \
        if (e_ != hipSuccess) return summary();                                             \
    } while (0)

int main(int argc, char** argv) {
    g_program = "hip_idle";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    double idle = argc > 1 ? atof(argv[1]) : 2.0;
    start_watchdog(110);

    double t0 = now_s();
    HIP_OK(hipSetDevice(0));
    hipLaunchKernelGGL(xhsa_null, dim3(1), dim3(64), 0, 0);
    HIP_OK(hipGetLastError());
    HIP_OK(hipDeviceSynchronize());
    double t1 = now_s();
    note("init + first launch: %.1f ms wall, %.1f ms process CPU, %d threads", (t1 - t0) * 1e3,
         process_cpu_s() * 1e3, threads_now());

    g_step = "idle";
    double cpu0 = process_cpu_s(), w0 = now_s();
    printf("XHSA_IDLE_BEGIN\n");
    fflush(stdout);
    sleep_s(idle);
    double cpu1 = process_cpu_s(), w1 = now_s();
    printf("XHSA_IDLE_END\n");
    fflush(stdout);
    int threads = threads_now();
    // Room for the harness to sample before the next launch costs anything.
    sleep_s(0.3);

    hipLaunchKernelGGL(xhsa_null, dim3(1), dim3(64), 0, 0);
    HIP_OK(hipGetLastError());
    HIP_OK(hipDeviceSynchronize());

    printf("idle_seconds=%.3f\n", idle);
    printf("idle_wall_ms=%.3f\n", (w1 - w0) * 1e3);
    printf("idle_self_cpu_ms=%.3f\n", (cpu1 - cpu0) * 1e3);
    printf("threads=%d\n", threads);
    printf("total_self_cpu_ms=%.3f\n", process_cpu_s() * 1e3);
    check(w1 - w0 >= idle * 0.99, "idle.slept", "slept %.3f s of %.3f", w1 - w0, idle);
    return summary();
}
