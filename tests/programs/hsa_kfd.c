// hsa_kfd: a plain-C HSA program that drives its own user queue through KFD ioctls it issues
// itself on /dev/kfd, as a tool on a real system would (shared-device issue).
//
//   hsa_kfd spy CODE_OBJECT          the ioctl interposer saw ROCr's CREATE_QUEUE of the user
//                                    queue; GET_VERSION on our own /dev/kfd descriptor is 1.17;
//                                    UPDATE_QUEUE and DBG_TRAP accept the id
//   hsa_kfd pct0 CODE_OBJECT         UPDATE_QUEUE percentage 0: a dispatched vadd makes no
//                                    progress; percentage 100: it completes, results right
//   hsa_kfd suspend CODE_OBJECT      DBG_TRAP SUSPEND_QUEUES / RESUME_QUEUES on the queue: a
//                                    new queue is refused until QUERY_EXCEPTION_INFO clears
//                                    EC_QUEUE_NEW; no progress while suspended, completes
//                                    after resume; an id that does not exist gets the invalid
//                                    bit; another process's pid is refused with EPERM
//   hsa_kfd suspend_cost CODE_OBJECT N TRIGGER_FILE
//                                    prints READY, waits until TRIGGER_FILE exists, then does N
//                                    SUSPEND+RESUME pairs on its (idle) queue as fast as it can
//
// It must run with tests/programs/kfd_spy.c's library preloaded (LD_PRELOAD, before the
// emulator's thunk): the user queue's KFD id comes from the spy's record of the CREATE_QUEUE
// ioctls ROCr issued during hsa_queue_create (kfd_spy_queue_ids, found with dlsym).
//
// CODE_OBJECT is the raw gfx90a code object of tests/kernels/xhsa_kernels.hip, as for
// hsa_queues. The HSA plumbing (runtime setup, allocation, code objects, AQL packets) is
// hsa_queues.c's, included below.
// Build: gcc -std=gnu11 -O2 -I tests/programs -o hsa_kfd hsa_kfd.c -lhsa-runtime64 -lm -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>

// hsa_queues.c's helpers; its main becomes hsa_queues_main (unused here).
#define main hsa_queues_main
#include "hsa_queues.c"
#undef main

#include "kfd_spy.h"
#include "kfd_uapi.h"

static int g_kfd = -1;

// ---------------------------------------------------------------------------------------------
// KFD ioctls on our own descriptor. Each returns the ioctl's value (-1 with errno on failure).

static int kfd_update_queue(const struct kfd_spy_queue* q, uint32_t percentage) {
    struct kfd117_update_queue_args a = {0};
    a.ring_base_address = q->ring_base_address;
    a.queue_id = q->queue_id;
    a.ring_size = q->ring_size;
    a.queue_percentage = percentage;
    a.queue_priority = q->queue_priority;
    return ioctl(g_kfd, KFD117_IOC_UPDATE_QUEUE, &a);
}

static int kfd_dbg_enable(uint32_t pid, bool enable) {
    static struct kfd117_runtime_info rinfo;
    struct kfd117_dbg_trap_args a;
    memset(&a, 0, sizeof a);
    a.pid = pid;
    a.op = enable ? KFD117_DBG_TRAP_ENABLE : KFD117_DBG_TRAP_DISABLE;
    if (enable) {
        static int efd = -1;
        if (efd < 0) efd = eventfd(0, EFD_CLOEXEC);
        a.enable.exception_mask = 0;
        a.enable.rinfo_ptr = (uint64_t)(uintptr_t)&rinfo;
        a.enable.rinfo_size = sizeof rinfo;
        a.enable.dbg_fd = (uint32_t)efd;
    }
    return ioctl(g_kfd, KFD117_IOC_DBG_TRAP, &a);
}

// SUSPEND_QUEUES (suspend) or RESUME_QUEUES on `ids` (in/out: status bits ORed in).
static int kfd_suspend(uint32_t pid, uint32_t* ids, uint32_t n, bool suspend) {
    struct kfd117_dbg_trap_args a;
    memset(&a, 0, sizeof a);
    a.pid = pid;
    if (suspend) {
        a.op = KFD117_DBG_TRAP_SUSPEND_QUEUES;
        a.suspend_queues.queue_array_ptr = (uint64_t)(uintptr_t)ids;
        a.suspend_queues.num_queues = n;
        a.suspend_queues.grace_period = 0;
    } else {
        a.op = KFD117_DBG_TRAP_RESUME_QUEUES;
        a.resume_queues.queue_array_ptr = (uint64_t)(uintptr_t)ids;
        a.resume_queues.num_queues = n;
    }
    return ioctl(g_kfd, KFD117_IOC_DBG_TRAP, &a);
}

// QUERY_EXCEPTION_INFO(queue, EC_QUEUE_NEW, clear): clears the new-queue flag KFD sets on every
// queue it creates, after which SUSPEND_QUEUES accepts the queue. ENODATA: already clear.
static int kfd_clear_new(uint32_t pid, uint32_t queue_id) {
    static uint64_t scratch;
    struct kfd117_dbg_trap_args a;
    memset(&a, 0, sizeof a);
    a.pid = pid;
    a.op = KFD117_DBG_TRAP_QUERY_EXCEPTION_INFO;
    a.query_exception_info.info_ptr = (uint64_t)(uintptr_t)&scratch;
    a.query_exception_info.info_size = 0;
    a.query_exception_info.source_id = queue_id;
    a.query_exception_info.exception_code = KFD117_EC_QUEUE_NEW;
    a.query_exception_info.clear_exception = 1;
    return ioctl(g_kfd, KFD117_IOC_DBG_TRAP, &a);
}

// ---------------------------------------------------------------------------------------------
// Setup: runtime, kernels, /dev/kfd, the spy, and one user queue whose KFD id we learn.

typedef struct {
    CodeObject co;
    Kernel vadd, synthetic;
    hsa_queue_t* q;
    QueueErrors errors;
    struct kfd_spy_queue kq;  // the spy's record of the user queue
} Setup;

static kfd_spy_queue_ids_fn g_spy_ids;
static kfd_spy_queue_info_fn g_spy_info;

static const char* type_name(uint32_t t) {
    switch (t) {
        case KFD117_QUEUE_TYPE_COMPUTE: return "compute";
        case KFD117_QUEUE_TYPE_SDMA: return "sdma";
        case KFD117_QUEUE_TYPE_COMPUTE_AQL: return "compute_aql";
        case KFD117_QUEUE_TYPE_SDMA_XGMI: return "sdma_xgmi";
        default: return "?";
    }
}

static void print_spy(const char* when) {
    unsigned ids[64];
    int n = g_spy_ids(ids, 64);
    note("spy %s: %d CREATE_QUEUE(s) seen", when, n);
    for (int i = 0; i < n && i < 64; i++) {
        struct kfd_spy_queue r;
        if (!g_spy_info(i, &r)) continue;
        note("  #%d: queue id %u, type %s, priority %u, percentage %u, ring %#llx (%u bytes), request size %u", i,
             r.queue_id, type_name(r.queue_type), r.queue_priority, r.queue_percentage,
             (unsigned long long)r.ring_base_address, r.ring_size, r.request_size);
    }
}

static bool setup(const char* path, Setup* s) {
    memset(s, 0, sizeof *s);
    g_step = "spy lookup";
    g_spy_ids = (kfd_spy_queue_ids_fn)dlsym(RTLD_DEFAULT, "kfd_spy_queue_ids");
    g_spy_info = (kfd_spy_queue_info_fn)dlsym(RTLD_DEFAULT, "kfd_spy_queue_info");
    check(g_spy_ids && g_spy_info, "spy.loaded", "kfd_spy_queue_ids/kfd_spy_queue_info not found: preload libkfd_spy.so");
    if (!g_spy_ids || !g_spy_info) return false;

    if (!setup_runtime()) return false;
    if (!load_code_object(path, false, &s->co)) return false;
    if (!get_kernel(&s->co, "xhsa_vadd", 28, &s->vadd) || !get_kernel(&s->co, "xhsa_synthetic", 8, &s->synthetic))
        return false;

    g_step = "open /dev/kfd";
    g_kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    check(g_kfd >= 0, "kfd.open", "open(/dev/kfd): %s", strerror(errno));
    if (g_kfd < 0) return false;
    struct kfd117_get_version_args v = {0};
    int r = ioctl(g_kfd, KFD117_IOC_GET_VERSION, &v);
    note("GET_VERSION on our own descriptor %d: returned %d, uapi %u.%u", g_kfd, r, v.major_version, v.minor_version);
    check(r == 0 && v.major_version == 1 && v.minor_version == 17, "kfd.get_version_1_17",
          "returned %d (%s), version %u.%u, want 1.17", r, r ? strerror(errno) : "ok", v.major_version,
          v.minor_version);

    print_spy("before hsa_queue_create");
    unsigned before[64];
    int n0 = g_spy_ids(before, 64);
    s->q = make_queue(&s->errors, "user");
    if (!s->q) return false;
    // Warm-up: the first dispatch makes the runtime finish its own set-up (and the code object's
    // first use) before anything is timed or suspended.
    if (!vadd_probe(s->q, &s->vadd, "queue.works_before")) return false;
    int n1 = g_spy_ids(before, 64);
    print_spy("after hsa_queue_create");
    // The user queue: the last compute (AQL) queue created by hsa_queue_create.
    int found = -1;
    for (int i = n0; i < n1; i++) {
        struct kfd_spy_queue r2;
        if (g_spy_info(i, &r2) && r2.queue_type == KFD117_QUEUE_TYPE_COMPUTE_AQL &&
            r2.ring_base_address == (uint64_t)(uintptr_t)s->q->base_address)
            found = i;
    }
    if (found < 0)  // no ring match: fall back to the last AQL queue created in that window
        for (int i = n0; i < n1; i++) {
            struct kfd_spy_queue r2;
            if (g_spy_info(i, &r2) && r2.queue_type == KFD117_QUEUE_TYPE_COMPUTE_AQL) found = i;
        }
    check(n1 >= 1 && found >= 0, "spy.user_queue_found",
          "%d CREATE_QUEUE(s) seen in all, %d during hsa_queue_create, none an AQL queue%s", n1, n1 - n0,
          n1 == 0 ? " (the runtime's CREATE_QUEUE ioctls did not go through the global `ioctl` symbol, so no "
                    "interposer preloaded before the thunk can see them)"
                  : "");
    if (found < 0) return false;
    g_spy_info(found, &s->kq);
    note("user queue: KFD id %u (spy record #%d of %d), ring %#llx = hsa ring %p, %u bytes, priority %u", s->kq.queue_id,
         found, n1, (unsigned long long)s->kq.ring_base_address, s->q->base_address, s->kq.ring_size,
         s->kq.queue_priority);
    check(s->kq.ring_base_address == (uint64_t)(uintptr_t)s->q->base_address, "spy.ring_matches",
          "spy ring %#llx, hsa_queue base %p", (unsigned long long)s->kq.ring_base_address, s->q->base_address);
    return true;
}

static void teardown(Setup* s) {
    g_step = "teardown";
    check(errors_seen(&s->errors) == 0, "queue.no_errors", "error callback called %d times (status 0x%x)",
          errors_seen(&s->errors), (unsigned)s->errors.status);
    HSA_OK(hsa_queue_destroy(s->q), NO_RET);
    unload_code_object(&s->co);
    if (g_kfd >= 0) close(g_kfd);
    HSA_OK(hsa_shut_down(), NO_RET);
    check(1, "shutdown", "");
}

// ---------------------------------------------------------------------------------------------
// A vadd dispatched while the queue cannot run: it must make no progress for `hold_ms`, then
// complete once `release` has run, with the right results.

typedef struct {
    uint32_t n;
    float *a, *b, *c;
    void* kernarg;
    hsa_signal_t done;
    uint64_t idx;
    uint64_t read0;
} Pending;

static bool pending_dispatch(Setup* s, Pending* p) {
    memset(p, 0, sizeof *p);
    p->n = 100000;
    p->a = (float*)alloc_fine(p->n * 4);
    p->b = (float*)alloc_fine(p->n * 4);
    p->c = (float*)alloc_fine(p->n * 4);
    if (!p->a || !p->b || !p->c) return false;
    for (uint32_t i = 0; i < p->n; i++) {
        p->a[i] = (float)(i % 1000) * 0.5f;
        p->b[i] = 3.0f - (float)(i % 7);
        p->c[i] = -1.0f;
    }
    VaddArgs args = {p->a, p->b, p->c, p->n};
    p->kernarg = make_kernarg(&s->vadd, &args, sizeof args);
    HSA_OK(hsa_signal_create(1, 0, NULL, &p->done), false);
    p->read0 = hsa_queue_load_read_index_scacquire(s->q);
    p->idx = hsa_queue_load_write_index_scacquire(s->q);
    dispatch(s->q, &s->vadd, p->kernarg, grid_for(p->n, 256), 256, p->done);
    return true;
}

// Polls for `hold_ms`: the completion signal stays 1, the read index stays put, c is untouched.
static bool no_progress(Setup* s, Pending* p, double hold_ms, const char* name) {
    g_step = name;
    double t0 = now_s();
    long polls = 0;
    hsa_signal_value_t v = 1;
    uint64_t rd = p->read0;
    while ((now_s() - t0) * 1e3 < hold_ms) {
        v = hsa_signal_load_scacquire(p->done);
        rd = hsa_queue_load_read_index_scacquire(s->q);
        polls++;
        if (v != 1 || rd != p->read0) break;
        usleep(1000);
    }
    double held = (now_s() - t0) * 1e3;
    bool untouched = p->c[0] == -1.0f && p->c[p->n - 1] == -1.0f;
    note("%s: %ld polls over %.1f ms: signal %lld, read index %llu (packet %llu, read index before %llu), c %s", name,
         polls, held, (long long)v, (unsigned long long)rd, (unsigned long long)p->idx,
         (unsigned long long)p->read0, untouched ? "untouched" : "WRITTEN");
    check(v == 1 && rd == p->read0 && untouched && held >= hold_ms, name,
          "after %.1f ms: completion signal %lld (want 1), read index %llu (want %llu), c %s", held, (long long)v,
          (unsigned long long)rd, (unsigned long long)p->read0, untouched ? "untouched" : "written");
    return v == 1 && rd == p->read0;
}

static bool completes(Pending* p, const char* name) {
    double t0 = now_s();
    bool ok = wait_zero(p->done, 20, name);
    note("%s: completed %.2f ms after the release", name, (now_s() - t0) * 1e3);
    long bad = -1;
    for (uint32_t i = 0; ok && i < p->n && bad < 0; i++)
        if (p->c[i] != p->a[i] + p->b[i]) bad = i;
    if (ok)
        check(bad < 0, name, "c[%ld] = %g, want %g", bad, bad >= 0 ? p->c[bad] : 0.0,
              bad >= 0 ? p->a[bad] + p->b[bad] : 0.0);
    hsa_signal_destroy(p->done);
    hsa_memory_free(p->kernarg);
    hsa_amd_memory_pool_free(p->a);
    hsa_amd_memory_pool_free(p->b);
    hsa_amd_memory_pool_free(p->c);
    return ok && bad < 0;
}

// ---------------------------------------------------------------------------------------------
// Modes.

static int run_spy(const char* path) {
    Setup s;
    if (!setup(path, &s)) return summary();
    uint32_t me = (uint32_t)getpid();

    int r = kfd_update_queue(&s.kq, 100);
    check(r == 0, "spy.update_queue_accepts_id", "UPDATE_QUEUE(id %u, 100 %%) returned %d (%s)", s.kq.queue_id, r,
          r ? strerror(errno) : "ok");
    r = kfd_dbg_enable(me, true);
    check(r == 0, "spy.dbg_trap_enable", "DBG_TRAP ENABLE(pid %u) returned %d (%s)", me, r, r ? strerror(errno) : "ok");
    r = kfd_clear_new(me, s.kq.queue_id);
    check(r == 0, "spy.clear_queue_new", "QUERY_EXCEPTION_INFO(id %u, EC_QUEUE_NEW, clear) returned %d (%s)", s.kq.queue_id, r,
          r ? strerror(errno) : "ok");
    uint32_t ids[1] = {s.kq.queue_id};
    r = kfd_suspend(me, ids, 1, true);
    check(r == 1 && ids[0] == s.kq.queue_id, "spy.dbg_trap_suspend_accepts_id",
          "SUSPEND_QUEUES(id %u) returned %d (%s), id slot now %#x", s.kq.queue_id, r, r < 0 ? strerror(errno) : "ok",
          ids[0]);
    ids[0] = s.kq.queue_id;
    r = kfd_suspend(me, ids, 1, false);
    check(r == 1 && ids[0] == s.kq.queue_id, "spy.dbg_trap_resume_accepts_id",
          "RESUME_QUEUES(id %u) returned %d (%s), id slot now %#x", s.kq.queue_id, r, r < 0 ? strerror(errno) : "ok",
          ids[0]);
    r = kfd_dbg_enable(me, false);
    check(r == 0, "spy.dbg_trap_disable", "DBG_TRAP DISABLE returned %d (%s)", r, r ? strerror(errno) : "ok");
    vadd_probe(s.q, &s.vadd, "spy.queue_works_after");
    teardown(&s);
    return summary();
}

static int run_pct0(const char* path) {
    Setup s;
    if (!setup(path, &s)) return summary();

    int r = kfd_update_queue(&s.kq, 0);
    check(r == 0, "pct0.update_to_0", "UPDATE_QUEUE(id %u, percentage 0) returned %d (%s)", s.kq.queue_id, r,
          r ? strerror(errno) : "ok");
    Pending p;
    if (!pending_dispatch(&s, &p)) return summary();
    bool held = no_progress(&s, &p, 50, "pct0.no_progress_50ms");

    r = kfd_update_queue(&s.kq, 100);
    check(r == 0, "pct0.update_to_100", "UPDATE_QUEUE(id %u, percentage 100) returned %d (%s)", s.kq.queue_id, r,
          r ? strerror(errno) : "ok");
    completes(&p, "pct0.completes_after_100");
    (void)held;
    vadd_probe(s.q, &s.vadd, "pct0.queue_works_after");
    teardown(&s);
    return summary();
}

static int run_suspend(const char* path) {
    Setup s;
    if (!setup(path, &s)) return summary();
    uint32_t me = (uint32_t)getpid();

    int r = kfd_dbg_enable(me, true);
    check(r == 0, "suspend.dbg_trap_enable", "DBG_TRAP ENABLE(pid %u) returned %d (%s)", me, r,
          r ? strerror(errno) : "ok");

    // A queue is created new (EC_QUEUE_NEW): KFD refuses to suspend it, with the invalid bit,
    // until a debug op clears the flag.
    uint32_t ids[1] = {s.kq.queue_id};
    r = kfd_suspend(me, ids, 1, true);
    check(r == 0 && ids[0] == (s.kq.queue_id | KFD117_DBG_QUEUE_INVALID_MASK), "suspend.new_queue_refused",
          "SUSPEND_QUEUES(new queue %u) returned %d (%s), id slot %#x; want 0, %#x", s.kq.queue_id, r,
          r < 0 ? strerror(errno) : "ok", ids[0], s.kq.queue_id | KFD117_DBG_QUEUE_INVALID_MASK);
    r = kfd_clear_new(me, s.kq.queue_id);
    check(r == 0, "suspend.clear_queue_new", "QUERY_EXCEPTION_INFO(id %u, EC_QUEUE_NEW, clear) returned %d (%s)",
          s.kq.queue_id, r, r ? strerror(errno) : "ok");

    ids[0] = s.kq.queue_id;
    r = kfd_suspend(me, ids, 1, true);
    check(r == 1 && (ids[0] & (KFD117_DBG_QUEUE_INVALID_MASK | KFD117_DBG_QUEUE_ERROR_MASK)) == 0,
          "suspend.suspend_returns_1", "SUSPEND_QUEUES(id %u) returned %d (%s), id slot %#x", s.kq.queue_id, r,
          r < 0 ? strerror(errno) : "ok", ids[0]);

    Pending p;
    if (!pending_dispatch(&s, &p)) return summary();
    no_progress(&s, &p, 50, "suspend.no_progress_50ms");

    ids[0] = s.kq.queue_id;
    r = kfd_suspend(me, ids, 1, false);
    check(r == 1 && (ids[0] & (KFD117_DBG_QUEUE_INVALID_MASK | KFD117_DBG_QUEUE_ERROR_MASK)) == 0,
          "suspend.resume_returns_1", "RESUME_QUEUES(id %u) returned %d (%s), id slot %#x", s.kq.queue_id, r,
          r < 0 ? strerror(errno) : "ok", ids[0]);
    completes(&p, "suspend.completes_after_resume");

    // A queue id that does not exist, next to ours: only that entry is marked invalid.
    const uint32_t bogus = 0x3fffu;
    uint32_t two[2] = {s.kq.queue_id, bogus};
    r = kfd_suspend(me, two, 2, true);
    note("SUSPEND_QUEUES({%u, %u}) returned %d, slots now {%#x, %#x}", s.kq.queue_id, bogus, r, two[0], two[1]);
    check(r == 1 && two[0] == s.kq.queue_id && two[1] == (bogus | KFD117_DBG_QUEUE_INVALID_MASK),
          "suspend.unknown_id_marked_invalid",
          "SUSPEND_QUEUES({%u, %u}) returned %d (%s), slots {%#x, %#x}; want 1, {%#x, %#x}", s.kq.queue_id, bogus, r,
          r < 0 ? strerror(errno) : "ok", two[0], two[1], s.kq.queue_id, bogus | KFD117_DBG_QUEUE_INVALID_MASK);
    two[0] = s.kq.queue_id;
    two[1] = bogus;
    r = kfd_suspend(me, two, 2, false);
    check(r == 1 && two[0] == s.kq.queue_id && two[1] == (bogus | KFD117_DBG_QUEUE_INVALID_MASK),
          "suspend.unknown_id_resume_marked_invalid",
          "RESUME_QUEUES({%u, %u}) returned %d (%s), slots {%#x, %#x}", s.kq.queue_id, bogus, r,
          r < 0 ? strerror(errno) : "ok", two[0], two[1]);

    // Another process's queues: refused with EPERM (neither us nor a ptrace child of ours).
    uint32_t others[2] = {(uint32_t)getppid(), 1};
    for (int i = 0; i < 2; i++) {
        uint32_t id1[1] = {s.kq.queue_id};
        errno = 0;
        r = kfd_suspend(others[i], id1, 1, true);
        int e = errno;
        char name[64];
        snprintf(name, sizeof name, "suspend.other_pid_eperm.%s", i == 0 ? "parent" : "pid1");
        note("SUSPEND_QUEUES(pid %u, id %u): returned %d, errno %d (%s)", others[i], s.kq.queue_id, r, e, strerror(e));
        check(r == -1 && e == EPERM, name, "SUSPEND_QUEUES with pid %u returned %d, errno %d (%s); want -1, EPERM",
              others[i], r, e, strerror(e));
    }
    // Our queue is still running (the refused suspends did nothing).
    vadd_probe(s.q, &s.vadd, "suspend.queue_works_after");

    r = kfd_dbg_enable(me, false);
    check(r == 0, "suspend.dbg_trap_disable", "DBG_TRAP DISABLE returned %d (%s)", r, r ? strerror(errno) : "ok");
    teardown(&s);
    return summary();
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static int run_suspend_cost(const char* path, int pairs, const char* trigger) {
    Setup s;
    if (!setup(path, &s)) return summary();
    uint32_t me = (uint32_t)getpid();
    int r = kfd_dbg_enable(me, true);
    check(r == 0, "cost.dbg_trap_enable", "DBG_TRAP ENABLE returned %d (%s)", r, r ? strerror(errno) : "ok");
    if (r != 0) return summary();
    r = kfd_clear_new(me, s.kq.queue_id);
    check(r == 0, "cost.clear_queue_new", "QUERY_EXCEPTION_INFO(EC_QUEUE_NEW, clear) returned %d (%s)", r,
          r ? strerror(errno) : "ok");

    printf("READY\n");
    fflush(stdout);
    g_step = "wait for the trigger file";
    double t0 = now_s();
    while (access(trigger, F_OK) != 0) {
        if (now_s() - t0 > 60) {
            check(0, "cost.triggered", "%s did not appear within 60 s", trigger);
            return summary();
        }
        usleep(200);
    }
    double t1 = now_s();
    g_step = "suspend/resume pairs";
    double* each = (double*)calloc((size_t)pairs, sizeof(double));
    int ok = 0;
    for (int i = 0; i < pairs; i++) {
        double a = now_s();
        uint32_t ids[1] = {s.kq.queue_id};
        int rs = kfd_suspend(me, ids, 1, true);
        ids[0] = s.kq.queue_id;
        int rr = kfd_suspend(me, ids, 1, false);
        each[i] = (now_s() - a) * 1e3;
        ok += rs == 1 && rr == 1;
    }
    double t2 = now_s();
    printf("pairs=%d\n", pairs);
    printf("pairs_wall_ms=%.3f\n", (t2 - t1) * 1e3);
    printf("trigger_wait_ms=%.3f\n", (t1 - t0) * 1e3);
    qsort(each, (size_t)pairs, sizeof(double), cmp_double);
    printf("pair_ms_median=%.3f\n", each[pairs / 2]);
    printf("pair_ms_max=%.3f\n", each[pairs - 1]);
    free(each);
    check(ok == pairs, "cost.pairs_returned_1", "%d of %d pairs returned 1 for both suspend and resume", ok, pairs);
    r = kfd_dbg_enable(me, false);
    check(r == 0, "cost.dbg_trap_disable", "DBG_TRAP DISABLE returned %d (%s)", r, r ? strerror(errno) : "ok");
    vadd_probe(s.q, &s.vadd, "cost.queue_works_after");
    teardown(&s);
    return summary();
}

int main(int argc, char** argv) {
    g_program = "hsa_kfd";
    setvbuf(stdout, NULL, _IOLBF, 0);
    start_watchdog(110);
    const char* mode = argc > 1 ? argv[1] : "";
    const char* path = argc > 2 ? argv[2] : NULL;
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        fprintf(stderr, "usage: hsa_kfd spy|pct0|suspend|suspend_cost CODE_OBJECT [N TRIGGER_FILE]\n");
        return 2;
    }
    printf("hsa_kfd %s, pid %d, code object %s\n", mode, (int)getpid(), path);
    if (!strcmp(mode, "spy")) return run_spy(path);
    if (!strcmp(mode, "pct0")) return run_pct0(path);
    if (!strcmp(mode, "suspend")) return run_suspend(path);
    if (!strcmp(mode, "suspend_cost") && argc == 5) return run_suspend_cost(path, atoi(argv[3]), argv[4]);
    fprintf(stderr, "hsa_kfd: unknown mode or arguments\n");
    return 2;
}
