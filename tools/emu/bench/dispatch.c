// xhsa-emu dispatch benchmark (prints figures, asserts nothing).
//
//   dispatch CODE_OBJECT [N]
//
// 1. Null-kernel dispatch rate on one AQL queue: N dispatches of `xhsa_null`, one doorbell
//    each, then wait for the last completion.
// 2. Doorbell-to-start latency: one dispatch at a time on an idle device, host time taken just
//    before the doorbell store, kernel start from the completion signal's profiling timestamp
//    (hsa_amd_profiling_get_dispatch_time, system domain). P50/P99 over N/10 samples.
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                          \
  do {                                                                    \
    hsa_status_t s_ = (x);                                                \
    if (s_ != HSA_STATUS_SUCCESS && s_ != HSA_STATUS_INFO_BREAK) {        \
      fprintf(stderr, "%s failed: 0x%x\n", #x, s_);                       \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static hsa_agent_t gpu;
static hsa_region_t kernarg_region;

static hsa_status_t find_gpu(hsa_agent_t a, void* d) {
  hsa_device_type_t t;
  hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t);
  if (t == HSA_DEVICE_TYPE_GPU) { gpu = a; return HSA_STATUS_INFO_BREAK; }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_kernarg(hsa_region_t r, void* d) {
  hsa_region_global_flag_t f;
  hsa_region_get_info(r, HSA_REGION_INFO_GLOBAL_FLAGS, &f);
  if (f & HSA_REGION_GLOBAL_FLAG_KERNARG) { kernarg_region = r; return HSA_STATUS_INFO_BREAK; }
  return HSA_STATUS_SUCCESS;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void dispatch(hsa_queue_t* q, uint64_t kernel_object, hsa_signal_t done, uint64_t* doorbell_ns) {
  uint64_t idx = hsa_queue_add_write_index_relaxed(q, 1);
  while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) {}
  hsa_kernel_dispatch_packet_t* p = (hsa_kernel_dispatch_packet_t*)q->base_address + (idx % q->size);
  memset((char*)p + 4, 0, sizeof(*p) - 4);
  p->workgroup_size_x = 64; p->workgroup_size_y = 1; p->workgroup_size_z = 1;
  p->grid_size_x = 64; p->grid_size_y = 1; p->grid_size_z = 1;
  p->kernel_object = kernel_object;
  p->completion_signal = done;
  uint16_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
  uint32_t word = header | (1u << 16);  // setup: 1 dimension
  __atomic_store_n((uint32_t*)p, word, __ATOMIC_RELEASE);
  if (doorbell_ns) *doorbell_ns = now_ns();
  hsa_signal_store_screlease(q->doorbell_signal, idx);
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: dispatch CODE_OBJECT [N]\n"); return 2; }
  int n = argc > 2 ? atoi(argv[2]) : 20000;
  CHECK(hsa_init());
  CHECK(hsa_iterate_agents(find_gpu, NULL));
  CHECK(hsa_agent_iterate_regions(gpu, find_kernarg, NULL));
  FILE* fp = fopen(argv[1], "rb");
  if (!fp) { fprintf(stderr, "cannot open %s\n", argv[1]); return 2; }
  fseek(fp, 0, SEEK_END);
  long sz = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char* buf = malloc(sz);
  if (fread(buf, 1, sz, fp) != (size_t)sz) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
  fclose(fp);
  hsa_code_object_reader_t reader;
  CHECK(hsa_code_object_reader_create_from_memory(buf, sz, &reader));
  hsa_executable_t exe;
  CHECK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &exe));
  CHECK(hsa_executable_load_agent_code_object(exe, gpu, reader, NULL, NULL));
  CHECK(hsa_executable_freeze(exe, NULL));
  hsa_executable_symbol_t sym;
  CHECK(hsa_executable_get_symbol_by_name(exe, "xhsa_null.kd", &gpu, &sym));
  uint64_t ko;
  CHECK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &ko));
  hsa_queue_t* q;
  CHECK(hsa_queue_create(gpu, 4096, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
  CHECK(hsa_amd_profiling_set_profiler_enabled(q, 1));
  hsa_signal_t done;
  CHECK(hsa_signal_create(1, 0, NULL, &done));

  // 1. Dispatch rate.
  hsa_signal_store_relaxed(done, n);
  uint64_t t0 = now_ns();
  for (int i = 0; i < n; i++) dispatch(q, ko, done, NULL);
  while (hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) != 0) {}
  double secs = (now_ns() - t0) / 1e9;
  printf("null-kernel dispatch rate (one queue): %.0f dispatches/s (%d in %.3f s)\n", n / secs, n, secs);

  // 2. Doorbell-to-start latency on an idle device.
  int m = n / 10 < 100 ? 100 : n / 10;
  uint64_t* lat = malloc(sizeof(uint64_t) * m);
  for (int i = 0; i < m; i++) {
    hsa_signal_store_relaxed(done, 1);
    uint64_t rung;
    dispatch(q, ko, done, &rung);
    while (hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) != 0) {}
    hsa_amd_profiling_dispatch_time_t t;
    CHECK(hsa_amd_profiling_get_dispatch_time(gpu, done, &t));
    lat[i] = t.start > rung ? t.start - rung : 0;
  }
  qsort(lat, m, sizeof(uint64_t), cmp);
  printf("doorbell-to-start latency (idle device): P50 %.1f us, P99 %.1f us (n=%d)\n", lat[m / 2] / 1e3, lat[(m * 99) / 100] / 1e3, m);
  hsa_queue_destroy(q);
  hsa_signal_destroy(done);
  return 0;
}
