// kfd_spy: an LD_PRELOAD library that interposes libc's `ioctl` and records every successful
// AMDKFD_IOC_CREATE_QUEUE (type 'K', nr 0x02, any argument size: uapi 1.11's 88 bytes or
// 1.17's 96), so that a program can learn the KFD ids of the queues its runtime created, as a
// tool interposing ioctl would on a real system. Every call is forwarded unchanged to the next
// `ioctl` (dlsym(RTLD_NEXT)): preloaded before the emulator's thunk, that is the thunk's
// `/dev/kfd` interposer; on a real system, libc's.
//
// Build: gcc -shared -fPIC -O2 -Wall -I tests/programs -o libkfd_spy.so kfd_spy.c -ldl
// Use:   LD_PRELOAD=/path/libkfd_spy.so xhsa-emu run -- PROGRAM   (the launcher appends its own
//        library after existing LD_PRELOAD entries, so the spy comes first)
//
// Exports (look them up with dlsym(RTLD_DEFAULT, ...)):
//   int kfd_spy_queue_ids(unsigned* out, int max)   queue ids in creation order; returns how
//                                                   many were recorded (may exceed max)
//   int kfd_spy_queue_info(int i, struct kfd_spy_queue* out)   details of the i-th; 0 if none
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "kfd_spy.h"
#include "kfd_uapi.h"

#define MAX_QUEUES 1024
static struct kfd_spy_queue g_queues[MAX_QUEUES];
static int g_count;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

typedef int (*ioctl_fn)(int, unsigned long, void*);

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    static ioctl_fn next;
    if (!next) next = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
    if (!next) return -1;
    int r = next(fd, request, arg);
    if (r == 0 && arg && KFD117_IOC_TYPE(request) == KFD117_IOCTL_BASE && KFD117_IOC_NR(request) == 0x02 &&
        KFD117_IOC_SIZE(request) >= offsetof(struct kfd117_create_queue_args, queue_id) + 4) {
        const struct kfd117_create_queue_args* a = (const struct kfd117_create_queue_args*)arg;
        pthread_mutex_lock(&g_lock);
        if (g_count < MAX_QUEUES) {
            struct kfd_spy_queue* q = &g_queues[g_count];
            q->queue_id = a->queue_id;
            q->queue_type = a->queue_type;
            q->queue_priority = a->queue_priority;
            q->queue_percentage = a->queue_percentage;
            q->ring_base_address = a->ring_base_address;
            q->ring_size = a->ring_size;
            q->request_size = KFD117_IOC_SIZE(request);
        }
        g_count++;
        pthread_mutex_unlock(&g_lock);
    }
    return r;
}

__attribute__((visibility("default"))) int kfd_spy_queue_ids(unsigned* out, int max) {
    pthread_mutex_lock(&g_lock);
    int n = g_count;
    for (int i = 0; i < n && i < max && i < MAX_QUEUES; i++) out[i] = g_queues[i].queue_id;
    pthread_mutex_unlock(&g_lock);
    return n;
}

__attribute__((visibility("default"))) int kfd_spy_queue_info(int i, struct kfd_spy_queue* out) {
    pthread_mutex_lock(&g_lock);
    int ok = i >= 0 && i < g_count && i < MAX_QUEUES;
    if (ok) *out = g_queues[i];
    pthread_mutex_unlock(&g_lock);
    return ok;
}
