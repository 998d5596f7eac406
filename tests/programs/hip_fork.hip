// hip_fork: a process that uses the GPU, then forks children that leave in every way a child
// leaves, while the parent goes on using the GPU.
//
//   hip_fork STOPFILE
//
// Build: hipcc --offload-arch=gfx90a -I tests/kernels -I tests/programs -o hip_fork hip_fork.hip
//
// The parent adds two vectors (a check), then forks, one after the other:
//   exit   the child calls exit(0): atexit handlers and library destructors run in the child
//   _exit  the child calls _exit(0)
//   exec   the child execs /bin/true
//   gpu    the child execs this program as `hip_fork --child`, which uses the GPU with a runtime
//          (and, inherited through LD_PRELOAD, a libxhsa) of its own and exits 0 if its vector
//          add is right: the way launchers start GPU workers
// (A child that uses its parent's runtime without exec is not among them: real KFD refuses the
// parent's descriptor in a child, which the emulator does not model yet.)
// Each child must end within 20 s (a check). The parent then adds two vectors again (a check),
// prints `CHILDREN_DONE`, waits until STOPFILE exists (at most 60 s; the harness looks at the
// board meanwhile), adds again and exits.
#include <hip/hip_runtime.h>
#include <sys/wait.h>

#include "common.h"
#include "xhsa_kernels.hip"

static int vadd_ok(unsigned n) {
    float *a, *b, *c;
    if (hipMalloc(&a, n * sizeof(float)) != hipSuccess || hipMalloc(&b, n * sizeof(float)) != hipSuccess ||
        hipMalloc(&c, n * sizeof(float)) != hipSuccess)
        return 0;
    float* h = (float*)malloc(n * sizeof(float));
    for (unsigned i = 0; i < n; i++) h[i] = (float)i;
    hipMemcpy(a, h, n * sizeof(float), hipMemcpyHostToDevice);
    hipMemcpy(b, h, n * sizeof(float), hipMemcpyHostToDevice);
    hipLaunchKernelGGL(xhsa_vadd, dim3((n + 63) / 64), dim3(64), 0, 0, a, b, c, n);
    hipMemcpy(h, c, n * sizeof(float), hipMemcpyDeviceToHost);
    int ok = 1;
    for (unsigned i = 0; i < n; i++) ok &= h[i] == 2.0f * (float)i;
    free(h);
    hipFree(a);
    hipFree(b);
    hipFree(c);
    return ok;
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

int main(int argc, char** argv) {
    g_program = "hip_fork";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: hip_fork STOPFILE\n");
        return 2;
    }
    if (!strcmp(argv[1], "--child")) return vadd_ok(4096) ? 0 : 1;
    start_watchdog(170);
    g_step = "first use";
    check(vadd_ok(4096), "fork.before", "vector add before the forks");
    const char* kinds[] = {"exit", "_exit", "exec", "gpu"};
    for (const char* kind : kinds) {
        g_step = kind;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (!strcmp(kind, "exit")) exit(0);
            if (!strcmp(kind, "_exit")) _exit(0);
            if (!strcmp(kind, "gpu")) execl("/proc/self/exe", argv[0], "--child", (char*)nullptr);
            else execl("/bin/true", "true", (char*)nullptr);
            _exit(127);
        }
        int st = wait_child(pid, !strcmp(kind, "gpu") ? 60 : 20);
        char name[64];
        snprintf(name, sizeof name, "fork.child_%s_ended", kind);
        check(st != -1, name, "the child (%s) did not end in time", kind);
        if (st == -1) kill(pid, SIGKILL);
        if (!strcmp(kind, "gpu"))
            check(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork.child_gpu_ok", "the child's own vector add failed (status %d)", st);
    }
    g_step = "after the forks";
    check(vadd_ok(4096), "fork.after", "vector add after the children ended");
    printf("CHILDREN_DONE\n");
    fflush(stdout);
    double end = now_s() + 60;
    while (access(argv[1], F_OK) != 0 && now_s() < end) {
        struct timespec t = {0, 20 * 1000 * 1000};
        nanosleep(&t, nullptr);
    }
    g_step = "last use";
    check(vadd_ok(4096), "fork.last", "vector add at the end");
    return summary();
}
