// The few KFD uapi 1.17 definitions the shared-device test programs use, copied from Linux
// include/uapi/linux/kfd_ioctl.h (KFD_IOCTL_MAJOR_VERSION 1, KFD_IOCTL_MINOR_VERSION 17), the
// same layouts as the Rust crate xhsa-ioctl (ioctl/src/abi). The system header
// /usr/include/linux/kfd_ioctl.h is uapi 1.11 and lacks AMDKFD_IOC_DBG_TRAP, so everything
// here carries its own `KFD117_` / `kfd117_` prefix instead of clashing with it.
#ifndef XHSA_KFD_UAPI_H
#define XHSA_KFD_UAPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define KFD117_IOCTL_BASE 'K'

// struct kfd_ioctl_get_version_args
struct kfd117_get_version_args {
    uint32_t major_version;  // from KFD
    uint32_t minor_version;  // from KFD
};

// struct kfd_ioctl_create_queue_args (96 bytes since 1.17; 88 up to 1.16)
#define KFD117_QUEUE_TYPE_COMPUTE 0x0
#define KFD117_QUEUE_TYPE_SDMA 0x1
#define KFD117_QUEUE_TYPE_COMPUTE_AQL 0x2
#define KFD117_QUEUE_TYPE_SDMA_XGMI 0x3
struct kfd117_create_queue_args {
    uint64_t ring_base_address;
    uint64_t write_pointer_address;
    uint64_t read_pointer_address;
    uint64_t doorbell_offset;
    uint32_t ring_size;
    uint32_t gpu_id;
    uint32_t queue_type;
    uint32_t queue_percentage;
    uint32_t queue_priority;
    uint32_t queue_id;  // from KFD
    uint64_t eop_buffer_address;
    uint64_t eop_buffer_size;
    uint64_t ctx_save_restore_address;
    uint32_t ctx_save_restore_size;
    uint32_t ctl_stack_size;
    uint32_t sdma_engine_id;  // 1.17
    uint32_t pad;
};

// struct kfd_ioctl_update_queue_args
struct kfd117_update_queue_args {
    uint64_t ring_base_address;
    uint32_t queue_id;
    uint32_t ring_size;
    uint32_t queue_percentage;  // 0..100; 0 makes the queue inactive
    uint32_t queue_priority;    // 0..15
};

// struct kfd_ioctl_set_cu_mask_args
struct kfd117_set_cu_mask_args {
    uint32_t queue_id;
    uint32_t num_cu_mask;  // bits, a multiple of 32
    uint64_t cu_mask_ptr;
};

// struct kfd_runtime_info
struct kfd117_runtime_info {
    uint64_t r_debug;
    uint32_t runtime_state;
    uint32_t ttmp_setup;
};

// enum kfd_dbg_trap_operations (the ones used here)
#define KFD117_DBG_TRAP_ENABLE 0
#define KFD117_DBG_TRAP_DISABLE 1
#define KFD117_DBG_TRAP_SUSPEND_QUEUES 6
#define KFD117_DBG_TRAP_RESUME_QUEUES 7
#define KFD117_DBG_TRAP_QUERY_EXCEPTION_INFO 12

// enum kfd_dbg_trap_exception_code: every queue is created with EC_QUEUE_NEW raised, and
// SUSPEND_QUEUES refuses it (invalid bit) until a debug op clears it.
#define KFD117_EC_QUEUE_NEW 31

// Per-queue status bits KFD ORs into the queue-id array of SUSPEND/RESUME_QUEUES.
#define KFD117_DBG_QUEUE_ERROR_MASK (1u << 30)
#define KFD117_DBG_QUEUE_INVALID_MASK (1u << 31)

struct kfd117_dbg_trap_enable_args {
    uint64_t exception_mask;
    uint64_t rinfo_ptr;  // struct kfd117_runtime_info*
    uint32_t rinfo_size;
    uint32_t dbg_fd;
};

struct kfd117_dbg_trap_suspend_queues_args {
    uint64_t exception_mask;
    uint64_t queue_array_ptr;  // uint32_t[num_queues], in/out
    uint32_t num_queues;
    uint32_t grace_period;  // units of 1K GPU clock cycles
};

struct kfd117_dbg_trap_resume_queues_args {
    uint64_t queue_array_ptr;  // uint32_t[num_queues], in/out
    uint32_t num_queues;
    uint32_t pad;
};

struct kfd117_dbg_trap_query_exception_info_args {
    uint64_t info_ptr;  // must not be NULL
    uint32_t info_size;
    uint32_t source_id;  // queue id for queue exceptions
    uint32_t exception_code;
    uint32_t clear_exception;
};

// struct kfd_ioctl_dbg_trap_args: { pid, op, union of 24 bytes }
struct kfd117_dbg_trap_args {
    uint32_t pid;
    uint32_t op;
    union {
        struct kfd117_dbg_trap_enable_args enable;
        struct kfd117_dbg_trap_suspend_queues_args suspend_queues;
        struct kfd117_dbg_trap_resume_queues_args resume_queues;
        struct kfd117_dbg_trap_query_exception_info_args query_exception_info;
    };
};

#define KFD117_IOC_GET_VERSION _IOR(KFD117_IOCTL_BASE, 0x01, struct kfd117_get_version_args)
#define KFD117_IOC_CREATE_QUEUE _IOWR(KFD117_IOCTL_BASE, 0x02, struct kfd117_create_queue_args)
#define KFD117_IOC_UPDATE_QUEUE _IOW(KFD117_IOCTL_BASE, 0x07, struct kfd117_update_queue_args)
#define KFD117_IOC_SET_CU_MASK _IOW(KFD117_IOCTL_BASE, 0x1A, struct kfd117_set_cu_mask_args)
#define KFD117_IOC_DBG_TRAP _IOWR(KFD117_IOCTL_BASE, 0x26, struct kfd117_dbg_trap_args)

// The numbers of uapi 1.17 (xhsa_ioctl::abi::request).
_Static_assert(sizeof(struct kfd117_create_queue_args) == 96, "create_queue_args");
_Static_assert(offsetof(struct kfd117_create_queue_args, queue_id) == 52, "queue_id offset");
_Static_assert(sizeof(struct kfd117_dbg_trap_args) == 32, "dbg_trap_args");
_Static_assert(sizeof(struct kfd117_dbg_trap_query_exception_info_args) == 24, "query_exception_info_args");
_Static_assert(KFD117_IOC_GET_VERSION == 0x80084B01u, "GET_VERSION");
_Static_assert(KFD117_IOC_CREATE_QUEUE == 0xC0604B02u, "CREATE_QUEUE");
_Static_assert(KFD117_IOC_UPDATE_QUEUE == 0x40184B07u, "UPDATE_QUEUE");
_Static_assert(KFD117_IOC_SET_CU_MASK == 0x40104B1Au, "SET_CU_MASK");
_Static_assert(KFD117_IOC_DBG_TRAP == 0xC0204B26u, "DBG_TRAP");

// Request number fields (asm-generic/ioctl.h): nr bits 0-7, type bits 8-15, size bits 16-29.
#define KFD117_IOC_NR(req) ((unsigned)((req) & 0xff))
#define KFD117_IOC_TYPE(req) ((unsigned)(((req) >> 8) & 0xff))
#define KFD117_IOC_SIZE(req) ((unsigned)(((req) >> 16) & 0x3fff))

#endif  // XHSA_KFD_UAPI_H
