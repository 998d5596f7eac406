// The README demo: two streams at different priorities on the emulated MI308X.
//
// A latency-critical stream (high priority) sends short "inference requests" while a batch
// stream (low priority) keeps the GPU full of long kernels. Hardware queue priority only
// decides whose workgroups go next when CU slots free up; it never preempts running waves, so
// the high-priority requests still wait behind the batch kernels already on the GPU. That is
// the problem xhsa solves one layer below HIP.
//
// Kernels are the emulator's synthetic kernel: each workgroup runs for the time given as its
// argument, so the figures below follow from the device model, not from host speed.
#include <hip/hip_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include <unistd.h>

extern "C" __global__ void xhsa_synthetic(unsigned long long wg_ns) {}

#define CHECK(x)                                                                        \
  do {                                                                                  \
    hipError_t e_ = (x);                                                                \
    if (e_ != hipSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #x, hipGetErrorString(e_));             \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

// One request: 8 kernels of 640 workgroups (one wave of the 80 CUs) x 100 us = ~0.8 ms alone.
static int request(hipStream_t s, hipEvent_t start, hipEvent_t stop, float* ms) {
  CHECK(hipEventRecord(start, s));
  for (int k = 0; k < 8; k++) hipLaunchKernelGGL(xhsa_synthetic, dim3(640), dim3(64), 0, s, 100000ull);
  CHECK(hipEventRecord(stop, s));
  // Wait without spinning: HIP's hipEventSynchronize spins a core, which on a small host
  // would compete with the emulated device's own threads.
  while (hipEventQuery(stop) == hipErrorNotReady) usleep(50);
  CHECK(hipEventElapsedTime(ms, start, stop));
  return 0;
}

static void summary(const char* label, std::vector<float> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (float x : v) sum += x;
  auto pct = [&](double p) { return v[std::min(v.size() - 1, size_t(p * (v.size() - 1) + 0.5))]; };
  std::printf("  %-34s mean %6.2f ms   p50 %6.2f ms   p99 %6.2f ms   (n=%zu)\n", label, sum / v.size(), pct(0.5), pct(0.99), v.size());
}

int main() {
  hipDeviceProp_t p;
  CHECK(hipGetDeviceProperties(&p, 0));
  std::printf("Device: %s (%s), %d compute units\n\n", p.name, p.gcnArchName, p.multiProcessorCount);
  int least, greatest;
  CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
  hipStream_t hi, lo;
  CHECK(hipStreamCreateWithPriority(&hi, hipStreamDefault, greatest));
  CHECK(hipStreamCreateWithPriority(&lo, hipStreamDefault, least));
  hipEvent_t a, b;
  CHECK(hipEventCreate(&a));
  CHECK(hipEventCreate(&b));

  const int n = 40;
  std::vector<float> alone, loaded;
  float ms;
  if (request(hi, a, b, &ms)) return 1;  // warm-up: loads the code object
  for (int i = 0; i < n; i++) {
    if (request(hi, a, b, &ms)) return 1;
    alone.push_back(ms);
  }
  // Batch load: long kernels (2,560 workgroups x 2 ms = 4 rounds of the GPU) kept queued.
  hipEvent_t lo_done;
  CHECK(hipEventCreate(&lo_done));
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 2; k++) hipLaunchKernelGGL(xhsa_synthetic, dim3(2560), dim3(64), 0, lo, 2000000ull);
    if (request(hi, a, b, &ms)) return 1;
    loaded.push_back(ms);
  }
  CHECK(hipEventRecord(lo_done, lo));
  while (hipEventQuery(lo_done) == hipErrorNotReady) usleep(200);

  std::printf("High-priority stream (priority %d), requests of 8 kernels:\n", greatest);
  summary("alone", alone);
  summary("beside a low-priority batch stream", loaded);
  std::printf("\nHardware priority alone does not preempt the batch kernels already running.\n");
  CHECK(hipStreamDestroy(hi));
  CHECK(hipStreamDestroy(lo));
  return 0;
}
