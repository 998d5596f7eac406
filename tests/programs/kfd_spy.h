// The interface of kfd_spy.c (an LD_PRELOAD ioctl interposer recording KFD queue creations),
// shared by the library and the programs that query it through dlsym.
#ifndef XHSA_KFD_SPY_H
#define XHSA_KFD_SPY_H

#include <stdint.h>

// What the spy recorded about one successful AMDKFD_IOC_CREATE_QUEUE.
struct kfd_spy_queue {
    uint32_t queue_id;
    uint32_t queue_type;  // KFD117_QUEUE_TYPE_*
    uint32_t queue_priority;
    uint32_t queue_percentage;
    uint64_t ring_base_address;
    uint32_t ring_size;     // bytes
    uint32_t request_size;  // the argument size encoded in the request number (88 or 96)
};

// int kfd_spy_queue_ids(unsigned* out, int max): the queue ids in creation order; returns how
// many were recorded (which may exceed max).
typedef int (*kfd_spy_queue_ids_fn)(unsigned* out, int max);
// int kfd_spy_queue_info(int i, struct kfd_spy_queue* out): the i-th record; 0 if none.
typedef int (*kfd_spy_queue_info_fn)(int i, struct kfd_spy_queue* out);

#endif  // XHSA_KFD_SPY_H
