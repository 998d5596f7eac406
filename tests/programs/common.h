// Shared by the test programs (C and HIP): check bookkeeping, timing, a watchdog.
//
// Every check prints one line, `PASS <name>` or `FAIL <name>: <detail>`; `summary()` prints the
// totals and the final `RESULT: PASS` / `RESULT: FAIL` line and returns the exit code (0 only
// if at least one check ran and none failed). The integration tests read these lines.
#ifndef XHSA_TEST_COMMON_H
#define XHSA_TEST_COMMON_H

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Not every program uses every helper.
#define XHSA_MAYBE_UNUSED __attribute__((unused))

static const char* g_program = "program";
XHSA_MAYBE_UNUSED static int g_checks = 0;
XHSA_MAYBE_UNUSED static int g_failures = 0;
// What the program is doing now, printed by the watchdog if it fires.
static const char* volatile g_step = "start";

XHSA_MAYBE_UNUSED static void check(int ok, const char* name, const char* fmt, ...) {
    g_checks++;
    if (ok) {
        printf("PASS %s\n", name);
    } else {
        g_failures++;
        printf("FAIL %s: ", name);
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
}

XHSA_MAYBE_UNUSED static void note(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  ");
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

XHSA_MAYBE_UNUSED static int summary(void) {
    int ok = g_checks > 0 && g_failures == 0;
    printf("%s: %d checks, %d failed\nRESULT: %s\n", g_program, g_checks, g_failures, ok ? "PASS" : "FAIL");
    fflush(stdout);
    return ok ? 0 : 1;
}

XHSA_MAYBE_UNUSED static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

XHSA_MAYBE_UNUSED static double process_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

XHSA_MAYBE_UNUSED static void watchdog_fired(int sig) {
    (void)sig;
    // Only async-signal-safe calls here.
    const char* a = "\nWATCHDOG: timed out during step: ";
    ssize_t r = write(STDOUT_FILENO, a, strlen(a));
    r = write(STDOUT_FILENO, (const char*)g_step, strlen((const char*)g_step));
    const char* b = "\nRESULT: FAIL\n";
    r = write(STDOUT_FILENO, b, strlen(b));
    (void)r;
    _exit(3);
}

// Ends the process (exit code 3, naming the current step) if it runs longer than
// $XHSA_TEST_WATCHDOG_S seconds (default `seconds`; 0 disables), so that a hang reports where.
XHSA_MAYBE_UNUSED static void start_watchdog(unsigned seconds) {
    const char* env = getenv("XHSA_TEST_WATCHDOG_S");
    if (env && *env) seconds = (unsigned)strtoul(env, NULL, 10);
    if (seconds == 0) return;
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
}

// Deterministic byte pattern (xorshift64*), different per seed.
XHSA_MAYBE_UNUSED static void fill_pattern(unsigned char* p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = (unsigned char)((x * 0x2545F4914F6CDD1Dull) >> 56);
    }
}

// Index of the first differing byte, or -1.
XHSA_MAYBE_UNUSED static long first_diff(const unsigned char* a, const unsigned char* b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

#endif  // XHSA_TEST_COMMON_H
