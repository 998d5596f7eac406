// Kernels whose waves wait for each other or for the host, for the tests that the ISA
// interpreter runs workgroups side by side when they wait (as the GPU's resident workgroups
// do) and sleeps rather than spins when only the host can end the wait.
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

__device__ int load_acquire(int* p) {
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}

// Workgroup k waits until workgroup k + 1 has written its flag (the last one starts the
// chain): only workgroups that run side by side finish. `sleep` chooses an s_sleep loop or a
// pure spin.
extern "C" __global__ void isa_reverse_chain(int* flags, int n, int sleep) {
    int k = blockIdx.x;
    if (threadIdx.x == 0) {
        int v = 1;
        if (k + 1 < n) {
            while ((v = load_acquire(&flags[k + 1])) == 0) {
                if (sleep) __builtin_amdgcn_s_sleep(1);
            }
            v += 1;
        }
        __hip_atomic_store(&flags[k], v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
    }
}

// Two phases separated by a grid-wide sync: each workgroup reads what its neighbour wrote
// before the sync, and the sum of everything written.
extern "C" __global__ void isa_grid_sync(int* data, int* out) {
    cg::grid_group grid = cg::this_grid();
    int n = gridDim.x;
    int k = blockIdx.x;
    if (threadIdx.x == 0) data[k] = 3 * k + 1;
    grid.sync();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int j = 0; j < n; ++j) s += data[j];
        out[2 * k] = data[(k + 1) % n];
        out[2 * k + 1] = s;
    }
    grid.sync();
    // A second use of the same barrier: everyone saw every first-phase result.
    if (threadIdx.x == 0) data[k] = -1;
}

// One lane waits (s_sleep loop) until the host writes a non-zero value into *flag, then
// writes twice that value.
extern "C" __global__ void isa_wait_for_host(int* flag, int* out) {
    if (threadIdx.x == 0) {
        int v;
        while ((v = load_acquire(flag)) == 0) __builtin_amdgcn_s_sleep(2);
        out[0] = 2 * v;
    }
}

// Raises the host interrupt (as ockl's signal functions do after writing a mailbox) with
// M0 = 0x1234 (the low 8 bits travel).
extern "C" __global__ void isa_interrupt(int* out) {
    __builtin_amdgcn_s_sendmsg(1, 0x1234);
    out[threadIdx.x] = 1;
}

// Global atomics from every work-item of every workgroup on a few shared words (as a
// histogram or a counter does): with the workgroups shared out among threads, each update
// must land. counts: [0] += 1 per item (atomicAdd), [1] max of the item ids, [2] an
// increment by compare-and-swap; sum64 += id; fsum += 1.0f (exact below 2^24). Each workgroup
// also marks its own word once (plain store): every workgroup ran, once.
extern "C" __global__ void isa_atomic_counts(unsigned* counts, unsigned long long* sum64, float* fsum, int* marks, int rounds) {
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < rounds; ++r) {
        atomicAdd(&counts[0], 1u);
        atomicMax(&counts[1], id);
        unsigned old = counts[2], seen;
        while ((seen = atomicCAS(&counts[2], old, old + 1)) != old) old = seen;
        atomicAdd(sum64, (unsigned long long)id);
        atomicAdd(fsum, 1.0f);
    }
    if (threadIdx.x == 0) marks[blockIdx.x] += 1;
}

// Every workgroup counts itself in and waits until all `n` have (a grid barrier on a counter,
// spinning without s_sleep); then writes what it saw.
extern "C" __global__ void isa_count_barrier(int* count, int* out, int n) {
    if (threadIdx.x == 0) {
        atomicAdd(count, 1);
        while (__hip_atomic_load(count, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT) < n) {
        }
        out[blockIdx.x] = __hip_atomic_load(count, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    }
}
