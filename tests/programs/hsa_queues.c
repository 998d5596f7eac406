// hsa_queues: a plain-C HSA program (no HIP) driving two user-mode AQL queues by hand.
//
//   hsa_queues [normal] CODE_OBJECT     agents, pools, two queues, vadd/saxpy dispatches, a
//                                       cross-queue BARRIER_AND, SDMA copies through HSA
//   hsa_queues badpacket CODE_OBJECT    a packet of invalid type on one queue: its error
//                                       callback must report HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
//                                       and other queues must keep working
//   hsa_queues reinit CODE_OBJECT       `normal` (which ends with hsa_shut_down), then `normal`
//                                       again in a runtime started anew by hsa_init
//   hsa_queues fill CODE_OBJECT         one queue filled twice over behind a 1 s kernel, then only
//                                       a wait on the last packet's completion signal (the read
//                                       index is never read after the last doorbell); every
//                                       packet must run exactly once
//
// CODE_OBJECT is a raw gfx90a code object (ELF) of tests/kernels/xhsa_kernels.hip:
//   hipcc --genco --no-gpu-bundle-output --offload-arch=gfx90a -o xhsa_kernels.hsaco xhsa_kernels.hip
// Build: gcc -std=gnu11 -O2 -I tests/programs -o hsa_queues hsa_queues.c -lhsa-runtime64 -lm
// Prints one PASS/FAIL line per check and `RESULT: PASS|FAIL`; exits 0 only if all passed.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hsa/hsa.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/hsa_ext_amd.h>

#include "common.h"

// Records a failed check (with the HSA status string) and returns `ret` from the function.
#define HSA_OK(expr, ret)                                                                    \
    do {                                                                                     \
        g_step = #expr;                                                                      \
        hsa_status_t s_ = (expr);                                                            \
        if (s_ != HSA_STATUS_SUCCESS) {                                                      \
            const char* m_ = NULL;                                                           \
            hsa_status_string(s_, &m_);                                                      \
            check(0, #expr, "status 0x%x (%s) at %s:%d", (unsigned)s_, m_ ? m_ : "?", __FILE__, \
                  __LINE__);                                                                 \
            return ret;                                                                      \
        }                                                                                    \
    } while (0)

#define NO_RET /* nothing */

// ---------------------------------------------------------------------------------------------
// Agents and memory.

static hsa_agent_t g_gpu, g_cpu;
static bool g_have_gpu, g_have_cpu;
static hsa_region_t g_kernarg_region;
static bool g_have_kernarg;
static hsa_amd_memory_pool_t g_fine_pool, g_vram_pool;
static bool g_have_fine, g_have_vram;
static uint64_t g_ts_freq = 1000000000ull;

static hsa_status_t find_agents(hsa_agent_t agent, void* data) {
    (void)data;
    hsa_device_type_t type;
    hsa_status_t s = hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
    if (s != HSA_STATUS_SUCCESS) return s;
    char name[64] = {0};
    hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name);
    note("agent %#llx: type %s, name '%s'", (unsigned long long)agent.handle,
         type == HSA_DEVICE_TYPE_GPU ? "GPU" : type == HSA_DEVICE_TYPE_CPU ? "CPU" : "other", name);
    if (type == HSA_DEVICE_TYPE_GPU && !g_have_gpu) {
        g_gpu = agent;
        g_have_gpu = true;
    } else if (type == HSA_DEVICE_TYPE_CPU && !g_have_cpu) {
        g_cpu = agent;
        g_have_cpu = true;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_kernarg_region(hsa_region_t region, void* data) {
    (void)data;
    hsa_region_segment_t seg;
    hsa_region_get_info(region, HSA_REGION_INFO_SEGMENT, &seg);
    if (seg != HSA_REGION_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
    uint32_t flags = 0;
    hsa_region_get_info(region, HSA_REGION_INFO_GLOBAL_FLAGS, &flags);
    if ((flags & HSA_REGION_GLOBAL_FLAG_KERNARG) && !g_have_kernarg) {
        g_kernarg_region = region;
        g_have_kernarg = true;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_pools(hsa_amd_memory_pool_t pool, void* data) {
    bool gpu = data != NULL;
    hsa_amd_segment_t seg;
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg);
    uint32_t flags = 0;
    bool alloc = false;
    size_t size = 0;
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc);
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size);
    note("%s pool %#llx: segment %d, global flags %#x, alloc %d, %.1f MiB", gpu ? "GPU" : "CPU",
         (unsigned long long)pool.handle, (int)seg, flags, (int)alloc, size / 1048576.0);
    if (seg != HSA_AMD_SEGMENT_GLOBAL || !alloc) return HSA_STATUS_SUCCESS;
    if (!gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) && !g_have_fine) {
        g_fine_pool = pool;
        g_have_fine = true;
    }
    if (gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) && !g_have_vram) {
        g_vram_pool = pool;
        g_have_vram = true;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t print_isa(hsa_isa_t isa, void* data) {
    char* out = (char*)data;
    uint32_t len = 0;
    if (hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, &len) == HSA_STATUS_SUCCESS && len < 256) {
        char name[256] = {0};
        hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name);
        note("GPU ISA: %s", name);
        if (!out[0]) snprintf(out, 256, "%s", name);
    }
    return HSA_STATUS_SUCCESS;
}

// hsa_init, the GPU and CPU agents, their properties, regions and pools.
static bool setup_runtime(void) {
    // A runtime started again (reinit) has new agents, regions and pools.
    g_have_gpu = g_have_cpu = g_have_kernarg = g_have_fine = g_have_vram = false;
    HSA_OK(hsa_init(), false);
    uint16_t major = 0, minor = 0;
    hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major);
    hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor);
    hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &g_ts_freq);
    note("HSA runtime %u.%u, timestamp frequency %llu Hz", major, minor, (unsigned long long)g_ts_freq);
    if (g_ts_freq == 0) g_ts_freq = 1000000000ull;

    HSA_OK(hsa_iterate_agents(find_agents, NULL), false);
    check(g_have_gpu, "agents.gpu", "no GPU agent");
    check(g_have_cpu, "agents.cpu", "no CPU agent");
    if (!g_have_gpu || !g_have_cpu) return false;

    char name[64] = {0}, product[64] = {0};
    uint32_t cus = 0, qmax = 0;
    hsa_profile_t profile;
    HSA_OK(hsa_agent_get_info(g_gpu, HSA_AGENT_INFO_NAME, name), false);
    hsa_agent_get_info(g_gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME, product);
    HSA_OK(hsa_agent_get_info(g_gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &cus), false);
    HSA_OK(hsa_agent_get_info(g_gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &qmax), false);
    HSA_OK(hsa_agent_get_info(g_gpu, HSA_AGENT_INFO_PROFILE, &profile), false);
    note("GPU agent: name '%s', product '%s', %u compute units, max queue size %u, profile %s", name,
         product, cus, qmax, profile == HSA_PROFILE_FULL ? "FULL" : "BASE");
    // The emulated MI308X: gfx90a under ROCm 5.2, gfx942 under 6.4.
    check(strncmp(name, "gfx90a", 6) == 0 || strncmp(name, "gfx942", 6) == 0, "gpu.name", "agent name '%s', want gfx90a or gfx942", name);
    check(cus == 80, "gpu.compute_units", "HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT = %u, want 80", cus);
    check(qmax >= 256, "gpu.queue_max_size", "HSA_AGENT_INFO_QUEUE_MAX_SIZE = %u, want >= 256", qmax);
    char isa[256] = {0};
    HSA_OK(hsa_agent_iterate_isas(g_gpu, print_isa, isa), false);
    check(strstr(isa, name) != NULL, "gpu.isa", "first ISA '%s', want amdgcn-amd-amdhsa--%s*", isa, name);

    // Kernel arguments: the classic region API (ROCr lists the system regions on the GPU agent
    // too; fall back to the CPU agent's own).
    HSA_OK(hsa_agent_iterate_regions(g_gpu, find_kernarg_region, NULL), false);
    if (!g_have_kernarg) HSA_OK(hsa_agent_iterate_regions(g_cpu, find_kernarg_region, NULL), false);
    check(g_have_kernarg, "memory.kernarg_region", "no region with HSA_REGION_GLOBAL_FLAG_KERNARG");
    // Data: fine-grained system memory (CPU pool) and VRAM (GPU pool).
    HSA_OK(hsa_amd_agent_iterate_memory_pools(g_cpu, find_pools, NULL), false);
    HSA_OK(hsa_amd_agent_iterate_memory_pools(g_gpu, find_pools, (void*)1), false);
    check(g_have_fine, "memory.fine_grained_pool", "no fine-grained, allocatable CPU pool");
    check(g_have_vram, "memory.vram_pool", "no coarse-grained, allocatable GPU pool");
    return g_have_kernarg && g_have_fine && g_have_vram;
}

// Fine-grained system memory the GPU may access.
static void* alloc_fine(size_t bytes) {
    void* p = NULL;
    HSA_OK(hsa_amd_memory_pool_allocate(g_fine_pool, bytes, 0, &p), NULL);
    HSA_OK(hsa_amd_agents_allow_access(1, &g_gpu, NULL, p), NULL);
    return p;
}

static void* alloc_vram(size_t bytes) {
    void* p = NULL;
    HSA_OK(hsa_amd_memory_pool_allocate(g_vram_pool, bytes, 0, &p), NULL);
    return p;
}

static void* alloc_kernarg(size_t bytes) {
    void* p = NULL;
    HSA_OK(hsa_memory_allocate(g_kernarg_region, bytes, &p), NULL);
    memset(p, 0, bytes);
    return p;
}

// ---------------------------------------------------------------------------------------------
// Code object and kernels.

typedef struct {
    const char* name;
    uint64_t object;
    uint32_t kernarg_size, group_size, private_size;
} Kernel;

typedef struct {
    hsa_code_object_reader_t reader;
    hsa_executable_t exe;
    int fd;
    void* image;
} CodeObject;

// Loads the code object from the file (`from_memory` false, loader URI file://...) or from a
// copy in memory (URI memory://...).
static bool load_code_object(const char* path, bool from_memory, CodeObject* co) {
    memset(co, 0, sizeof *co);
    co->fd = -1;
    g_step = "load code object";
    if (from_memory) {
        FILE* f = fopen(path, "rb");
        if (!f) {
            check(0, "code_object.open", "%s: %s", path, strerror(errno));
            return false;
        }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        co->image = malloc((size_t)size);
        size_t got = fread(co->image, 1, (size_t)size, f);
        fclose(f);
        if (size <= 0 || got != (size_t)size) {
            check(0, "code_object.read", "%s: read %zu of %ld bytes", path, got, size);
            return false;
        }
        HSA_OK(hsa_code_object_reader_create_from_memory(co->image, (size_t)size, &co->reader), false);
    } else {
        co->fd = open(path, O_RDONLY);
        if (co->fd < 0) {
            check(0, "code_object.open", "%s: %s", path, strerror(errno));
            return false;
        }
        HSA_OK(hsa_code_object_reader_create_from_file(co->fd, &co->reader), false);
    }
    hsa_profile_t profile;
    HSA_OK(hsa_agent_get_info(g_gpu, HSA_AGENT_INFO_PROFILE, &profile), false);
    HSA_OK(hsa_executable_create_alt(profile, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &co->exe),
           false);
    HSA_OK(hsa_executable_load_agent_code_object(co->exe, g_gpu, co->reader, NULL, NULL), false);
    HSA_OK(hsa_executable_freeze(co->exe, NULL), false);
    uint32_t result = 1;
    HSA_OK(hsa_executable_validate(co->exe, &result), false);
    check(result == 0, "code_object.validate", "hsa_executable_validate result %u", result);
    check(1, from_memory ? "code_object.load_from_memory" : "code_object.load_from_file", "");
    return result == 0;
}

static void unload_code_object(CodeObject* co) {
    HSA_OK(hsa_executable_destroy(co->exe), NO_RET);
    HSA_OK(hsa_code_object_reader_destroy(co->reader), NO_RET);
    if (co->fd >= 0) close(co->fd);
    free(co->image);
}

static bool get_kernel(const CodeObject* co, const char* name, uint32_t min_kernarg, Kernel* k) {
    char sym_name[128];
    snprintf(sym_name, sizeof sym_name, "%s.kd", name);
    hsa_executable_symbol_t sym;
    HSA_OK(hsa_executable_get_symbol_by_name(co->exe, sym_name, &g_gpu, &sym), false);
    k->name = name;
    HSA_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &k->object), false);
    HSA_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                                          &k->kernarg_size),
           false);
    HSA_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
                                          &k->group_size),
           false);
    HSA_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                                          &k->private_size),
           false);
    note("kernel %s: object %#llx, kernarg %u bytes, group %u, private %u", sym_name,
         (unsigned long long)k->object, k->kernarg_size, k->group_size, k->private_size);
    char cname[128];
    snprintf(cname, sizeof cname, "kernel.%s", name);
    check(k->object != 0 && k->kernarg_size >= min_kernarg, cname,
          "kernel object %#llx, kernarg segment %u bytes (want >= %u)", (unsigned long long)k->object,
          k->kernarg_size, min_kernarg);
    return k->object != 0 && k->kernarg_size >= min_kernarg;
}

// Kernel argument blocks, laid out as clang lays out the kernarg segment.
typedef struct {
    const float* a;  // @0
    const float* b;  // @8
    float* c;        // @16
    uint32_t n;      // @24
} VaddArgs;

typedef struct {
    float a;         // @0
    uint32_t pad;
    const float* x;  // @8
    float* y;        // @16
    uint32_t n;      // @24
} SaxpyArgs;

typedef struct {
    uint64_t wg_ns;  // @0
} SyntheticArgs;

static void* make_kernarg(const Kernel* k, const void* args, size_t size) {
    size_t bytes = k->kernarg_size > size ? k->kernarg_size : size;
    void* p = alloc_kernarg(bytes);
    if (p) memcpy(p, args, size);
    return p;
}

// ---------------------------------------------------------------------------------------------
// AQL packets.

static uint16_t header_of(hsa_packet_type_t type) {
    return (uint16_t)((type << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
}

// Reserves a slot (waiting while the ring is full) and returns its packet index.
static uint64_t reserve_slot(hsa_queue_t* q) {
    uint64_t idx = hsa_queue_add_write_index_scacq_screl(q, 1);
    while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) sched_yield();
    return idx;
}

static void* slot_at(hsa_queue_t* q, uint64_t idx) {
    return (char*)q->base_address + (idx & (q->size - 1)) * 64;
}

// Publishes the first 32 bits of a packet (header + setup/reserved) with a release store, then
// rings the doorbell with the packet's index.
static void publish(hsa_queue_t* q, uint64_t idx, void* pkt, uint16_t header, uint16_t rest) {
    __atomic_store_n((uint32_t*)pkt, (uint32_t)header | ((uint32_t)rest << 16), __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)idx);
}

// Writes a dispatch into slot `idx` (already reserved, and free) and rings the doorbell.
static void dispatch_at(hsa_queue_t* q, uint64_t idx, const Kernel* k, void* kernarg, uint32_t grid_x,
                        uint16_t wg_x, hsa_signal_t completion) {
    hsa_kernel_dispatch_packet_t* p = (hsa_kernel_dispatch_packet_t*)slot_at(q, idx);
    // The body first; the header last (below), so the packet processor never sees half a packet.
    p->workgroup_size_x = wg_x;
    p->workgroup_size_y = 1;
    p->workgroup_size_z = 1;
    p->reserved0 = 0;
    p->grid_size_x = grid_x;
    p->grid_size_y = 1;
    p->grid_size_z = 1;
    p->private_segment_size = k->private_size;
    p->group_segment_size = k->group_size;
    p->kernel_object = k->object;
    p->kernarg_address = kernarg;
    p->reserved2 = 0;
    p->completion_signal = completion;
    publish(q, idx, p, header_of(HSA_PACKET_TYPE_KERNEL_DISPATCH),
            (uint16_t)(1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS));
}

static void dispatch(hsa_queue_t* q, const Kernel* k, void* kernarg, uint32_t grid_x, uint16_t wg_x,
                     hsa_signal_t completion) {
    dispatch_at(q, reserve_slot(q), k, kernarg, grid_x, wg_x, completion);
}

// Writes a BARRIER_AND into slot `idx` (already reserved, and free) and rings the doorbell.
static void barrier_and_at(hsa_queue_t* q, uint64_t idx, const hsa_signal_t* deps, int ndeps,
                           hsa_signal_t completion) {
    hsa_barrier_and_packet_t* p = (hsa_barrier_and_packet_t*)slot_at(q, idx);
    p->reserved1 = 0;
    for (int i = 0; i < 5; i++) p->dep_signal[i].handle = i < ndeps ? deps[i].handle : 0;
    p->reserved2 = 0;
    p->completion_signal = completion;
    publish(q, idx, p, header_of(HSA_PACKET_TYPE_BARRIER_AND), 0);
}

static void barrier_and(hsa_queue_t* q, const hsa_signal_t* deps, int ndeps, hsa_signal_t completion) {
    barrier_and_at(q, reserve_slot(q), deps, ndeps, completion);
}

// Rounds `n` up to whole workgroups (HIP-compiled kernels assume uniform workgroups).
static uint32_t grid_for(uint32_t n, uint32_t wg) { return (n + wg - 1) / wg * wg; }

// Blocking wait for the signal to reach 0, at most `timeout_s`; a check named `what`.
static bool wait_zero(hsa_signal_t s, double timeout_s, const char* what) {
    g_step = what;
    double deadline = now_s() + timeout_s;
    hsa_signal_value_t v;
    while ((v = hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, g_ts_freq / 2,
                                          HSA_WAIT_STATE_BLOCKED)) != 0) {
        if (now_s() > deadline) {
            check(0, what, "signal still %lld after %.0f s", (long long)v, timeout_s);
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Queue error callbacks.

typedef struct {
    const char* label;
    int called;  // atomic
    hsa_status_t status;
    hsa_queue_t* source;
} QueueErrors;

static void queue_error(hsa_status_t status, hsa_queue_t* source, void* data) {
    QueueErrors* e = (QueueErrors*)data;
    e->status = status;
    e->source = source;
    __atomic_add_fetch(&e->called, 1, __ATOMIC_RELEASE);
    const char* m = NULL;
    hsa_status_string(status, &m);
    printf("  queue error callback (%s): status 0x%x (%s), queue %p\n", e->label, (unsigned)status,
           m ? m : "?", (void*)source);
    fflush(stdout);
}

static int errors_seen(QueueErrors* e) { return __atomic_load_n(&e->called, __ATOMIC_ACQUIRE); }

static hsa_queue_t* make_queue(QueueErrors* errors, const char* label) {
    hsa_queue_t* q = NULL;
    errors->label = label;
    HSA_OK(hsa_queue_create(g_gpu, 256, HSA_QUEUE_TYPE_SINGLE, queue_error, errors, UINT32_MAX,
                            UINT32_MAX, &q),
           NULL);
    note("queue %s: %p, id %llu, %u packets, ring %p", label, (void*)q, (unsigned long long)q->id, q->size,
         q->base_address);
    return q;
}

// ---------------------------------------------------------------------------------------------
// vadd on `q` with fresh buffers; checks the result (the "this queue still works" probe).
static bool vadd_probe(hsa_queue_t* q, const Kernel* vadd, const char* name) {
    const uint32_t n = 5000;
    float* a = (float*)alloc_fine(n * 4);
    float* b = (float*)alloc_fine(n * 4);
    float* c = (float*)alloc_fine(n * 4);
    if (!a || !b || !c) return false;
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)(i % 13);
        c[i] = -1.0f;
    }
    VaddArgs args = {a, b, c, n};
    void* ka = make_kernarg(vadd, &args, sizeof args);
    hsa_signal_t done;
    HSA_OK(hsa_signal_create(1, 0, NULL, &done), false);
    dispatch(q, vadd, ka, grid_for(n, 256), 256, done);
    bool ok = wait_zero(done, 30, name);
    long bad = -1;
    for (uint32_t i = 0; ok && i < n && bad < 0; i++)
        if (c[i] != a[i] + b[i]) bad = i;
    if (ok) check(bad < 0, name, "c[%ld] = %g, want %g", bad, bad >= 0 ? c[bad] : 0.0, bad >= 0 ? a[bad] + b[bad] : 0.0);
    hsa_signal_destroy(done);
    hsa_memory_free(ka);
    hsa_amd_memory_pool_free(a);
    hsa_amd_memory_pool_free(b);
    hsa_amd_memory_pool_free(c);
    return ok && bad < 0;
}

static bool close_to(float got, float want) {
    return fabsf(got - want) <= 1e-5f * fmaxf(1.0f, fabsf(want));
}

// ---------------------------------------------------------------------------------------------
// Normal mode.
//
// queue 1: vadd(a, b_vram -> c) ; BARRIER_AND(dep = saxpy's signal) ; vadd(y, b_vram -> d)
// queue 2: synthetic (20 ms)    ; saxpy(alpha, x, y)
// Queue 1's packets are submitted first: its second vadd reads y, so d = (alpha*x + y0) + b only
// if the barrier really waited for queue 2's saxpy.
static int run_normal(const char* path) {
    if (!setup_runtime()) return summary();
    CodeObject co;
    if (!load_code_object(path, false, &co)) return summary();
    Kernel vadd, saxpy, synthetic;
    if (!get_kernel(&co, "xhsa_vadd", 28, &vadd) || !get_kernel(&co, "xhsa_saxpy", 28, &saxpy) ||
        !get_kernel(&co, "xhsa_synthetic", 8, &synthetic))
        return summary();

    QueueErrors e1 = {0}, e2 = {0};
    hsa_queue_t* q1 = make_queue(&e1, "q1");
    hsa_queue_t* q2 = make_queue(&e2, "q2");
    if (!q1 || !q2) return summary();
    check(q1 != q2 && q1->doorbell_signal.handle != q2->doorbell_signal.handle, "queues.two_distinct",
          "q1 %p q2 %p", (void*)q1, (void*)q2);
    // ROCr keeps a pointer to its queue object right after the queue's amd_queue struct (its
    // private SharedQueue): amd_queue_v2_t in the headers that define it (ROCm 6.4 on),
    // amd_queue_t before. Every queue handed out carries it, a shadow included.
#ifdef MAX_NUM_XCC
    const size_t core_word = sizeof(amd_queue_v2_t);
#else
    const size_t core_word = sizeof(amd_queue_t);
#endif
    const uint64_t core1 = *(const volatile uint64_t*)((const char*)q1 + core_word);
    const uint64_t core2 = *(const volatile uint64_t*)((const char*)q2 + core_word);
    check(core1 != 0 && core2 != 0 && core1 != core2, "queues.core_queue_word",
          "words at +%zu: q1 %#llx, q2 %#llx", core_word, (unsigned long long)core1,
          (unsigned long long)core2);
#if HSA_AMD_INTERFACE_VERSION_MINOR >= 7
    // ROCm 6.x: hsa_amd_queue_get_info names the agent that owns the queue.
    hsa_agent_t owner = {0};
    HSA_OK(hsa_amd_queue_get_info(q1, HSA_AMD_QUEUE_INFO_AGENT, &owner), summary());
    check(owner.handle == g_gpu.handle, "queues.get_info_agent", "owner %#llx, want the GPU %#llx",
          (unsigned long long)owner.handle, (unsigned long long)g_gpu.handle);
#endif

    const uint32_t n = 100000;
    const float alpha = 1.75f;
    float* a = (float*)alloc_fine(n * 4);
    float* b = (float*)alloc_fine(n * 4);
    float* b_back = (float*)alloc_fine(n * 4);
    float* c = (float*)alloc_fine(n * 4);
    float* d = (float*)alloc_fine(n * 4);
    float* x = (float*)alloc_fine(n * 4);
    float* y = (float*)alloc_fine(n * 4);
    float* y0 = (float*)malloc(n * 4);
    float* b_vram = (float*)alloc_vram(n * 4);
    if (!a || !b || !b_back || !c || !d || !x || !y || !b_vram) return summary();
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000) * 0.25f;
        b[i] = (float)(i % 17) - 8.0f;
        x[i] = (float)(i % 251) * 0.5f;
        y[i] = y0[i] = (float)(i % 7) + 100.0f;
        c[i] = d[i] = b_back[i] = -1.0f;
    }

    // b -> VRAM and back through the runtime's copy engine (SDMA or blit kernels).
    g_step = "async copy";
    hsa_signal_t copied;
    HSA_OK(hsa_signal_create(1, 0, NULL, &copied), summary());
    HSA_OK(hsa_amd_memory_async_copy(b_vram, g_gpu, b, g_cpu, n * 4, 0, NULL, copied), summary());
    if (!wait_zero(copied, 30, "copy.h2d")) return summary();
    hsa_signal_store_screlease(copied, 1);
    HSA_OK(hsa_amd_memory_async_copy(b_back, g_cpu, b_vram, g_gpu, n * 4, 0, NULL, copied), summary());
    if (!wait_zero(copied, 30, "copy.d2h")) return summary();
    long dc = first_diff((const unsigned char*)b, (const unsigned char*)b_back, n * 4);
    check(dc < 0, "copy.roundtrip", "first difference at byte %ld", dc);
    hsa_signal_destroy(copied);

    hsa_signal_t s_vadd, s_bar, s_vadd2, s_syn, s_saxpy;
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_vadd), summary());
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_bar), summary());
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_vadd2), summary());
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_syn), summary());
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_saxpy), summary());

    VaddArgs va1 = {a, b_vram, c, n};
    VaddArgs va2 = {y, b_vram, d, n};
    SaxpyArgs sa = {alpha, 0, x, y, n};
    SyntheticArgs syn = {20000000ull};
    void* k_va1 = make_kernarg(&vadd, &va1, sizeof va1);
    void* k_va2 = make_kernarg(&vadd, &va2, sizeof va2);
    void* k_sa = make_kernarg(&saxpy, &sa, sizeof sa);
    void* k_syn = make_kernarg(&synthetic, &syn, sizeof syn);
    if (!k_va1 || !k_va2 || !k_sa || !k_syn) return summary();

    g_step = "submit";
    double t0 = now_s();
    dispatch(q1, &vadd, k_va1, grid_for(n, 256), 256, s_vadd);
    barrier_and(q1, &s_saxpy, 1, s_bar);
    dispatch(q1, &vadd, k_va2, grid_for(n, 256), 256, s_vadd2);
    // 80 CUs x 8 workgroups of 64 work-items: one round, 20 ms.
    dispatch(q2, &synthetic, k_syn, 80 * 8 * 64, 64, s_syn);
    dispatch(q2, &saxpy, k_sa, grid_for(n, 256), 256, s_saxpy);

    bool done = wait_zero(s_vadd2, 30, "dispatch.wait_last");
    double t1 = now_s();
    note("five packets on two queues: %.2f ms submit-to-completion (queue 2 holds 20 ms of modelled work)",
         (t1 - t0) * 1e3);
    if (done) {
        hsa_signal_value_t v[4] = {hsa_signal_load_scacquire(s_vadd), hsa_signal_load_scacquire(s_bar),
                                   hsa_signal_load_scacquire(s_syn), hsa_signal_load_scacquire(s_saxpy)};
        check(v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0, "dispatch.signals",
              "after the last packet: vadd %lld, barrier %lld, synthetic %lld, saxpy %lld (want all 0)",
              (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
        long bad = -1;
        for (uint32_t i = 0; i < n && bad < 0; i++)
            if (c[i] != a[i] + b[i]) bad = i;
        check(bad < 0, "dispatch.vadd_q1", "c[%ld] = %g, want %g", bad, bad >= 0 ? c[bad] : 0.0,
              bad >= 0 ? a[bad] + b[bad] : 0.0);
        bad = -1;
        for (uint32_t i = 0; i < n && bad < 0; i++)
            if (!close_to(y[i], fmaf(alpha, x[i], y0[i]))) bad = i;
        check(bad < 0, "dispatch.saxpy_q2", "y[%ld] = %g, want %g", bad, bad >= 0 ? y[bad] : 0.0,
              bad >= 0 ? fmaf(alpha, x[bad], y0[bad]) : 0.0);
        bad = -1;
        bool stale = false;
        for (uint32_t i = 0; i < n && bad < 0; i++)
            if (!close_to(d[i], fmaf(alpha, x[i], y0[i]) + b[i])) {
                bad = i;
                stale = close_to(d[i], y0[i] + b[i]);
            }
        check(bad < 0, "dispatch.barrier_and_cross_queue", "d[%ld] = %g, want %g%s", bad,
              bad >= 0 ? d[bad] : 0.0, bad >= 0 ? fmaf(alpha, x[bad], y0[bad]) + b[bad] : 0.0,
              stale ? " (it read y before saxpy: the barrier did not wait for queue 2)" : "");
    }
    check(errors_seen(&e1) == 0 && errors_seen(&e2) == 0, "queues.no_errors",
          "error callbacks: q1 %d (status 0x%x), q2 %d (status 0x%x)", errors_seen(&e1),
          (unsigned)e1.status, errors_seen(&e2), (unsigned)e2.status);

    // A second round on the same queues (ring indices move on; signals reused).
    g_step = "second round";
    bool probe1 = vadd_probe(q1, &vadd, "dispatch.q1_again");
    bool probe2 = vadd_probe(q2, &vadd, "dispatch.q2_again");
    (void)probe1;
    (void)probe2;

    hsa_signal_destroy(s_vadd);
    hsa_signal_destroy(s_bar);
    hsa_signal_destroy(s_vadd2);
    hsa_signal_destroy(s_syn);
    hsa_signal_destroy(s_saxpy);
    hsa_memory_free(k_va1);
    hsa_memory_free(k_va2);
    hsa_memory_free(k_sa);
    hsa_memory_free(k_syn);
    float* bufs[] = {a, b, b_back, c, d, x, y, b_vram};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hsa_amd_memory_pool_free(bufs[i]);
    free(y0);
    HSA_OK(hsa_queue_destroy(q1), summary());
    HSA_OK(hsa_queue_destroy(q2), summary());
    unload_code_object(&co);
    HSA_OK(hsa_shut_down(), summary());
    check(1, "shutdown", "");
    return summary();
}

// ---------------------------------------------------------------------------------------------
// badpacket mode.
static int run_badpacket(const char* path) {
    if (!setup_runtime()) return summary();
    CodeObject co;
    if (!load_code_object(path, true, &co)) return summary();
    Kernel vadd;
    if (!get_kernel(&co, "xhsa_vadd", 28, &vadd)) return summary();

    QueueErrors e_good = {0}, e_bad = {0}, e_new = {0};
    hsa_queue_t* good = make_queue(&e_good, "good");
    hsa_queue_t* bad = make_queue(&e_bad, "bad");
    if (!good || !bad) return summary();
    vadd_probe(good, &vadd, "badpacket.good_queue_before");

    // A packet of type 7 (no such AQL packet type).
    g_step = "submit invalid packet";
    hsa_signal_t s_bad;
    HSA_OK(hsa_signal_create(1, 0, NULL, &s_bad), summary());
    uint64_t idx = reserve_slot(bad);
    unsigned char* p = (unsigned char*)slot_at(bad, idx);
    memset(p + 4, 0, 60);
    memcpy(p + 56, &s_bad, sizeof s_bad);
    uint16_t header = (uint16_t)((7 << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
    double t0 = now_s();
    publish(bad, idx, p, header, 0);

    g_step = "wait for the error callback";
    while (errors_seen(&e_bad) == 0 && now_s() - t0 < 20) usleep(1000);
    double t1 = now_s();
    int called = errors_seen(&e_bad);
    note("error callback after %.2f ms", (t1 - t0) * 1e3);
    check(called == 1, "badpacket.callback_called", "bad queue's callback called %d times in %.0f s", called,
          t1 - t0);
    if (called) {
        check(e_bad.status == HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "badpacket.status",
              "status 0x%x, want HSA_STATUS_ERROR_INVALID_PACKET_FORMAT (0x%x)", (unsigned)e_bad.status,
              (unsigned)HSA_STATUS_ERROR_INVALID_PACKET_FORMAT);
        check(e_bad.source == bad, "badpacket.source", "callback source %p, want the bad queue %p",
              (void*)e_bad.source, (void*)bad);
    }
    hsa_signal_value_t v = hsa_signal_load_scacquire(s_bad);
    check(v == 1, "badpacket.not_completed", "the invalid packet's completion signal is %lld, want 1",
          (long long)v);
    uint64_t rd = hsa_queue_load_read_index_scacquire(bad);
    note("bad queue: read index %llu, packet index %llu", (unsigned long long)rd, (unsigned long long)idx);

    // The other queue, and a queue created after the error, still work.
    vadd_probe(good, &vadd, "badpacket.good_queue_after");
    hsa_queue_t* fresh = make_queue(&e_new, "new");
    if (fresh) vadd_probe(fresh, &vadd, "badpacket.new_queue_after");
    check(errors_seen(&e_good) == 0 && errors_seen(&e_new) == 0, "badpacket.only_bad_queue_failed",
          "good queue callback %d, new queue callback %d", errors_seen(&e_good), errors_seen(&e_new));

    g_step = "teardown";
    HSA_OK(hsa_queue_destroy(bad), summary());
    check(1, "badpacket.destroy_failed_queue", "");
    if (fresh) HSA_OK(hsa_queue_destroy(fresh), summary());
    HSA_OK(hsa_queue_destroy(good), summary());
    hsa_signal_destroy(s_bad);
    unload_code_object(&co);
    HSA_OK(hsa_shut_down(), summary());
    check(1, "shutdown", "");
    return summary();
}

// ---------------------------------------------------------------------------------------------
// fill mode.
//
// One queue, 2 x size packets: packet 0 a 1 s synthetic kernel, the others BARRIER_ANDs without
// dependencies, each rung at once; all but the last decrement one counting signal, the last has
// its own. The application reuses a slot once the read index it last loaded is past it, and
// loads the read index only when the ring looks full (once, at packet `size`). After the last
// doorbell it only waits on the last packet's completion signal, as an HSA program may: the
// queue must make progress by itself. Every packet runs exactly once: the counter ends at 0.
static int run_fill(const char* path) {
    if (!setup_runtime()) return summary();
    CodeObject co;
    if (!load_code_object(path, false, &co)) return summary();
    Kernel synthetic;
    if (!get_kernel(&co, "xhsa_synthetic", 8, &synthetic)) return summary();
    QueueErrors e = {0};
    hsa_queue_t* q = make_queue(&e, "fill");
    if (!q) return summary();
    const uint64_t total = 2ull * q->size;
    hsa_signal_t counter, last;
    HSA_OK(hsa_signal_create((hsa_signal_value_t)(total - 1), 0, NULL, &counter), summary());
    HSA_OK(hsa_signal_create(1, 0, NULL, &last), summary());
    SyntheticArgs syn = {1000000000ull};
    void* k_syn = make_kernarg(&synthetic, &syn, sizeof syn);
    if (!k_syn) return summary();

    g_step = "fill: submit";
    uint64_t seen_read = 0, read_loads = 0;
    double t0 = now_s(), t_ring = 0;
    for (uint64_t i = 0; i < total; i++) {
        if (i == q->size) t_ring = now_s();
        uint64_t idx = hsa_queue_add_write_index_scacq_screl(q, 1);
        while (idx - seen_read >= q->size) {
            seen_read = hsa_queue_load_read_index_scacquire(q);
            read_loads++;
            if (idx - seen_read >= q->size) sched_yield();
        }
        hsa_signal_t done = i + 1 == total ? last : counter;
        if (i == 0)
            // 80 CUs x 8 workgroups of 64 work-items: one round, 1 s.
            dispatch_at(q, idx, &synthetic, k_syn, 80 * 8 * 64, 64, done);
        else
            barrier_and_at(q, idx, NULL, 0, done);
    }
    double t1 = now_s();
    note("%llu packets submitted in %.1f ms (the first %u in %.1f ms), %llu read-index loads",
         (unsigned long long)total, (t1 - t0) * 1e3, q->size, (t_ring - t0) * 1e3, (unsigned long long)read_loads);
    // Natively the application then waits (loading the read index) until the kernel is done.
    check(t_ring - t0 < 0.9, "fill.ring_filled_behind_the_kernel",
          "filling the ring took %.2f s: the 1 s kernel may have ended before", t_ring - t0);

    g_step = "fill: wait for the last packet";
    if (wait_zero(last, 20, "fill.last_completed")) {
        check(1, "fill.last_completed", "");
        note("last packet completed %.1f ms after the last doorbell", (now_s() - t1) * 1e3);
        hsa_signal_value_t v = hsa_signal_load_scacquire(counter);
        check(v == 0, "fill.counts", "counter %lld after the last packet, want 0 (%llu packets, each once)",
              (long long)v, (unsigned long long)(total - 1));
    }
    check(errors_seen(&e) == 0, "fill.no_errors", "error callback called %d times (status 0x%x)", errors_seen(&e),
          (unsigned)e.status);

    g_step = "fill: teardown";
    HSA_OK(hsa_queue_destroy(q), summary());
    hsa_signal_destroy(counter);
    hsa_signal_destroy(last);
    hsa_memory_free(k_syn);
    unload_code_object(&co);
    HSA_OK(hsa_shut_down(), summary());
    check(1, "shutdown", "");
    return summary();
}

int main(int argc, char** argv) {
    g_program = "hsa_queues";
    setvbuf(stdout, NULL, _IOLBF, 0);
    start_watchdog(110);
    const char* mode = "normal";
    const char* path = NULL;
    if (argc == 2) {
        path = argv[1];
    } else if (argc == 3) {
        mode = argv[1];
        path = argv[2];
    }
    if (!path || (strcmp(mode, "normal") && strcmp(mode, "badpacket") && strcmp(mode, "fill") && strcmp(mode, "reinit"))) {
        fprintf(stderr, "usage: hsa_queues [normal|badpacket|fill|reinit] CODE_OBJECT\n");
        return 2;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "hsa_queues: code object %s: %s\n", path, strerror(errno));
        return 2;
    }
    printf("hsa_queues %s, code object %s (%lld bytes)\n", mode, path, (long long)st.st_size);
    if (strcmp(mode, "fill") == 0) return run_fill(path);
    if (strcmp(mode, "reinit") == 0) {
        int first = run_normal(path);
        if (first != 0) return first;
        printf("REINIT\n");
        return run_normal(path);
    }
    return strcmp(mode, "badpacket") == 0 ? run_badpacket(path) : run_normal(path);
}
