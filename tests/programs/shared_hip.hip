// shared_hip: HIP workloads for the shared-device tests (several processes on one emulated GPU).
//
//   shared_hip busy STOP_FILE MAX_S [LO HI]
//       floods a stream with xhsa_synthetic kernels of 80x32 workgroups x 4 ms (one full round
//       of the 80 CUs each), keeping 20-25 of them queued, until STOP_FILE exists or MAX_S seconds
//       passed; prints BUSY_RUNNING once the device is busy. With LO HI the stream is created
//       with hipExtStreamCreateWithCUMask on CUs LO..HI.
//   shared_hip busy-sync STOP_FILE MAX_S
//       as busy, the way PyTorch-style programs wait: device flag hipDeviceScheduleBlockingSync
//       and a hipStreamSynchronize after each chunk of 5 kernels (20 ms of device time).
//   shared_hip victim KERNELS WGS WG_NS TRIALS [LO HI]
//       measures (hipEvents) KERNELS back-to-back xhsa_synthetic kernels of WGS workgroups x
//       WG_NS ns, behind a 20 ms gate kernel so that they are all queued before the first one
//       starts; one uncounted trial, then TRIALS; prints each and `victim_ms=MEDIAN`.
//   shared_hip long WG_NS
//       launches one xhsa_synthetic kernel of 80x32 workgroups x WG_NS (the whole device), prints
//       `LONG_LAUNCHED pid=PID`, and waits for it (the test kills it meanwhile).
//   shared_hip timed WGS WG_NS [TRIGGER_FILE]
//       measures one kernel of WGS x WG_NS (hipEvents, behind a 20 ms one-workgroup gate):
//       `alone_ms=`; with TRIGGER_FILE, then measures it again, creating TRIGGER_FILE 30 ms
//       after the launch (past the gate, while the kernel runs): `with_ms=`.
//   shared_hip two_gpus KERNELS WG_NS
//       on GPU 0 a high-priority stream and on GPU 1 a low-priority one, each running KERNELS
//       xhsa_synthetic kernels of one full round x WG_NS at the same time (needs 2 GPUs).
//
// Build: hipcc --offload-arch=gfx90a -I tests/kernels -I tests/programs -o shared_hip shared_hip.hip
// Prints PASS/FAIL lines and `RESULT: PASS|FAIL` (tests/programs/common.h).
#include <hip/hip_runtime.h>

#include <fcntl.h>

#include <algorithm>
#include <vector>

#include "common.h"
#include "xhsa_kernels.hip"

#define HIP_OK(expr)                                                                         \
    do {                                                                                     \
        g_step = #expr;                                                                      \
        hipError_t e_ = (expr);                                                              \
        if (e_ != hipSuccess) {                                                              \
            check(0, #expr, "%s (%d) at %s:%d", hipGetErrorString(e_), (int)e_, __FILE__,     \
                  __LINE__);                                                                 \
            return summary();                                                                \
        }                                                                                    \
    } while (0)

static const unsigned FULL_ROUND = 80 * 32;  // workgroups of 64 work-items: 32 per CU

// A stream on CUs lo..hi (inclusive), or a plain one when lo < 0.
static hipError_t make_stream(hipStream_t* s, int lo, int hi) {
    if (lo < 0) return hipStreamCreateWithFlags(s, hipStreamNonBlocking);
    uint32_t mask[3] = {0, 0, 0};
    for (int cu = lo; cu <= hi && cu < 96; cu++) mask[cu / 32] |= 1u << (cu % 32);
    note("stream CU mask: CUs %d-%d = %08x %08x %08x", lo, hi, mask[2], mask[1], mask[0]);
    return hipExtStreamCreateWithCUMask(s, 3, mask);
}

static bool exists(const char* path) { return access(path, F_OK) == 0; }

// Waits for `ev` by polling every 1 ms: hipEventSynchronize spins a core even on a
// hipEventBlockingSync event (ROCclr 5.2), which on a 2-core host delays the emulator's
// threads of every process on the device.
static hipError_t wait_event(hipEvent_t ev) {
    hipError_t e;
    while ((e = hipEventQuery(ev)) == hipErrorNotReady) usleep(1000);
    return e;
}

static int run_busy(const char* stop, double max_s, int lo, int hi) {
    hipStream_t s;
    HIP_OK(make_stream(&s, lo, hi));
    // Up to DEPTH chunks of 5 kernels (20 ms each) queued: slack for a host thread that is late.
    const int DEPTH = 5;
    hipEvent_t ev[DEPTH];
    for (auto& e : ev) HIP_OK(hipEventCreateWithFlags(&e, hipEventBlockingSync | hipEventDisableTiming));
    const unsigned long long wg_ns = 4000000ull;
    const unsigned wgs = lo < 0 ? FULL_ROUND : (unsigned)(hi - lo + 1) * 32;
    const int chunk = 5;  // 20 ms of device time per chunk
    double t0 = now_s();
    long launched = 0;
    bool announced = false;
    for (long i = 0;; i++) {
        for (int k = 0; k < chunk; k++) hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, wg_ns);
        launched += chunk;
        HIP_OK(hipGetLastError());
        HIP_OK(hipEventRecord(ev[i % DEPTH], s));
        if (i >= DEPTH - 1) {
            HIP_OK(wait_event(ev[(i + 1) % DEPTH]));  // the oldest chunk done
            if (!announced) {
                printf("BUSY_RUNNING\n");
                fflush(stdout);
                announced = true;
            }
        }
        if (exists(stop) || now_s() - t0 > max_s) break;
    }
    HIP_OK(hipEventRecord(ev[0], s));
    HIP_OK(wait_event(ev[0]));
    double t1 = now_s();
    printf("busy_kernels=%ld\nbusy_wall_ms=%.1f\n", launched, (t1 - t0) * 1e3);
    check(announced, "busy.ran", "never had %d chunks queued", DEPTH);
    check(exists(stop), "busy.stopped_by_file", "ran %.1f s without the stop file %s", t1 - t0, stop);
    for (auto& e : ev) HIP_OK(hipEventDestroy(e));
    HIP_OK(hipStreamDestroy(s));
    return summary();
}

static int run_busy_sync(const char* stop, double max_s) {
    hipStream_t s;
    HIP_OK(make_stream(&s, -1, -1));
    const unsigned long long wg_ns = 4000000ull;
    double t0 = now_s();
    long launched = 0;
    for (;;) {
        for (int k = 0; k < 5; k++) hipLaunchKernelGGL(xhsa_synthetic, dim3(FULL_ROUND), dim3(64), 0, s, wg_ns);
        launched += 5;
        HIP_OK(hipGetLastError());
        HIP_OK(hipStreamSynchronize(s));
        if (launched == 5) {
            printf("BUSY_RUNNING\n");
            fflush(stdout);
        }
        if (exists(stop) || now_s() - t0 > max_s) break;
    }
    double t1 = now_s();
    printf("busy_kernels=%ld\nbusy_wall_ms=%.1f\n", launched, (t1 - t0) * 1e3);
    check(exists(stop), "busy.stopped_by_file", "ran %.1f s without the stop file %s", t1 - t0, stop);
    HIP_OK(hipStreamDestroy(s));
    return summary();
}

static int run_victim(int kernels, unsigned wgs, unsigned long long wg_ns, int trials, int lo, int hi) {
    hipStream_t s;
    HIP_OK(make_stream(&s, lo, hi));
    hipEvent_t start, stop;
    HIP_OK(hipEventCreateWithFlags(&start, hipEventBlockingSync));
    HIP_OK(hipEventCreateWithFlags(&stop, hipEventBlockingSync));
    // Warm-up (module load, queue creation).
    hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, wg_ns);
    HIP_OK(hipGetLastError());
    HIP_OK(hipStreamSynchronize(s));
    std::vector<double> ms;
    for (int t = -1; t < trials; t++) {  // trial -1 warms the event path up and is not counted
        g_step = "victim trial";
        // The gate: 20 ms, so that every packet below is queued before the first one can start.
        hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, 20000000ull);
        HIP_OK(hipEventRecord(start, s));
        for (int k = 0; k < kernels; k++) hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, wg_ns);
        HIP_OK(hipGetLastError());
        HIP_OK(hipEventRecord(stop, s));
        HIP_OK(wait_event(stop));
        float e = -1;
        HIP_OK(hipEventElapsedTime(&e, start, stop));
        if (t >= 0) ms.push_back(e);
    }
    printf("  victim: %d kernels of %u workgroups x %.0f us, CUs %s:", kernels, wgs, wg_ns / 1e3,
           lo < 0 ? "all" : "masked");
    for (double m : ms) printf(" %.3f", m);
    printf(" ms\n");
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    printf("victim_ms=%.4f\n", sorted[sorted.size() / 2]);
    printf("victim_min_ms=%.4f\n", sorted.front());
    check(sorted.front() > 0, "victim.measured", "elapsed times %.3f..%.3f ms", sorted.front(), sorted.back());
    HIP_OK(hipEventDestroy(start));
    HIP_OK(hipEventDestroy(stop));
    HIP_OK(hipStreamDestroy(s));
    return summary();
}

static int run_long(unsigned long long wg_ns) {
    hipStream_t s;
    HIP_OK(make_stream(&s, -1, -1));
    hipEvent_t done;
    HIP_OK(hipEventCreateWithFlags(&done, hipEventBlockingSync | hipEventDisableTiming));
    hipLaunchKernelGGL(xhsa_null, dim3(1), dim3(64), 0, s);
    HIP_OK(hipStreamSynchronize(s));
    hipLaunchKernelGGL(xhsa_synthetic, dim3(FULL_ROUND), dim3(64), 0, s, wg_ns);
    HIP_OK(hipGetLastError());
    HIP_OK(hipEventRecord(done, s));
    printf("LONG_LAUNCHED pid=%d\n", (int)getpid());
    fflush(stdout);
    double t0 = now_s();
    HIP_OK(wait_event(done));
    note("the long kernel completed after %.1f ms", (now_s() - t0) * 1e3);
    check(1, "long.completed", "");
    return summary();
}

static int run_timed(unsigned wgs, unsigned long long wg_ns, const char* trigger) {
    hipStream_t s;
    HIP_OK(make_stream(&s, -1, -1));
    hipEvent_t start, stop;
    HIP_OK(hipEventCreateWithFlags(&start, hipEventBlockingSync));
    HIP_OK(hipEventCreateWithFlags(&stop, hipEventBlockingSync));
    // Warm-up: the kernel and the event path once, untimed.
    hipLaunchKernelGGL(xhsa_synthetic, dim3(1), dim3(64), 0, s, 1000ull);
    HIP_OK(hipEventRecord(start, s));
    HIP_OK(hipEventRecord(stop, s));
    HIP_OK(hipStreamSynchronize(s));

    for (int pass = 0; pass < (trigger ? 2 : 1); pass++) {
        bool with = pass == 1;
        double w0 = now_s();
        // The gate: one workgroup for 20 ms, so that the events and the kernel are all queued
        // before the start event is stamped.
        hipLaunchKernelGGL(xhsa_synthetic, dim3(1), dim3(64), 0, s, 20000000ull);
        HIP_OK(hipEventRecord(start, s));
        hipLaunchKernelGGL(xhsa_synthetic, dim3(wgs), dim3(64), 0, s, wg_ns);
        HIP_OK(hipGetLastError());
        HIP_OK(hipEventRecord(stop, s));
        if (with) {
            usleep(30000);  // past the gate: the measured kernel runs now
            int fd = open(trigger, O_CREAT | O_WRONLY, 0600);
            if (fd >= 0) close(fd);
            check(fd >= 0, "timed.trigger_created", "%s: %s", trigger, strerror(errno));
        }
        HIP_OK(wait_event(stop));
        double wall = (now_s() - w0) * 1e3;
        float e = -1;
        HIP_OK(hipEventElapsedTime(&e, start, stop));
        printf("%s_ms=%.4f\n%s_wall_ms=%.2f\n", with ? "with" : "alone", e, with ? "with" : "alone", wall);
        check(e > 0, with ? "timed.with" : "timed.alone", "elapsed %.4f ms", e);
    }
    HIP_OK(hipEventDestroy(start));
    HIP_OK(hipEventDestroy(stop));
    HIP_OK(hipStreamDestroy(s));
    return summary();
}

static int run_two_gpus(int kernels, unsigned long long wg_ns) {
    int count = 0;
    HIP_OK(hipGetDeviceCount(&count));
    check(count >= 2, "two_gpus.count", "hipGetDeviceCount = %d, want >= 2", count);
    if (count < 2) return summary();
    int least = 0, greatest = 0;
    HIP_OK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    hipStream_t s[2];
    hipEvent_t done[2];
    for (int d = 0; d < 2; d++) {
        HIP_OK(hipSetDevice(d));
        HIP_OK(hipStreamCreateWithPriority(&s[d], hipStreamNonBlocking, d == 0 ? greatest : least));
        HIP_OK(hipEventCreateWithFlags(&done[d], hipEventBlockingSync | hipEventDisableTiming));
    }
    for (int k = 0; k < kernels; k++) {
        for (int d = 0; d < 2; d++) {
            HIP_OK(hipSetDevice(d));
            hipLaunchKernelGGL(xhsa_synthetic, dim3(FULL_ROUND), dim3(64), 0, s[d], wg_ns);
            HIP_OK(hipGetLastError());
        }
    }
    for (int d = 0; d < 2; d++) {
        HIP_OK(hipSetDevice(d));
        HIP_OK(hipEventRecord(done[d], s[d]));
    }
    for (int d = 0; d < 2; d++) HIP_OK(wait_event(done[d]));
    for (int d = 0; d < 2; d++) {
        HIP_OK(hipSetDevice(d));
        HIP_OK(hipEventDestroy(done[d]));
        HIP_OK(hipStreamDestroy(s[d]));
    }
    check(true, "two_gpus.ran", "");
    return summary();
}

int main(int argc, char** argv) {
    g_program = "shared_hip";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    start_watchdog(110);
    const char* mode = argc > 1 ? argv[1] : "";
    printf("shared_hip %s, pid %d\n", mode, (int)getpid());
    g_step = "init";
    if (!strcmp(mode, "busy-sync")) HIP_OK(hipSetDeviceFlags(hipDeviceScheduleBlockingSync));
    HIP_OK(hipSetDevice(0));
    if (!strcmp(mode, "busy-sync") && argc == 4) return run_busy_sync(argv[2], atof(argv[3]));
    if (!strcmp(mode, "busy") && (argc == 4 || argc == 6))
        return run_busy(argv[2], atof(argv[3]), argc == 6 ? atoi(argv[4]) : -1, argc == 6 ? atoi(argv[5]) : -1);
    if (!strcmp(mode, "victim") && (argc == 6 || argc == 8))
        return run_victim(atoi(argv[2]), (unsigned)atoi(argv[3]), strtoull(argv[4], nullptr, 10), atoi(argv[5]),
                          argc == 8 ? atoi(argv[6]) : -1, argc == 8 ? atoi(argv[7]) : -1);
    if (!strcmp(mode, "long") && argc == 3) return run_long(strtoull(argv[2], nullptr, 10));
    if (!strcmp(mode, "two_gpus") && argc == 4) return run_two_gpus(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
    if (!strcmp(mode, "timed") && (argc == 4 || argc == 5))
        return run_timed((unsigned)atoi(argv[2]), strtoull(argv[3], nullptr, 10), argc == 5 ? argv[4] : nullptr);
    fprintf(stderr, "usage: shared_hip busy STOP MAX_S [LO HI] | busy-sync STOP MAX_S | victim K WGS WG_NS TRIALS [LO HI] | long WG_NS | "
                    "timed WGS WG_NS [TRIGGER] | two_gpus KERNELS WG_NS\n");
    return 2;
}
