// xhsa workload: replays a model's kernel sequence (a table from tools/workloads/models/) on
// one or more streams, as an inference server or a batch job would, and reports every request.
//
// Kernels are the emulator's synthetic kernel (tests/kernels/xhsa_kernels.hip): each
// workgroup runs the `wg_ns` it is given, so timing follows from the device model; grid,
// workgroup size and dynamic LDS give each kernel its occupancy. A table line with a
// contention profile (two trailing columns: CU pipe thousandths, HBM bytes per workgroup) is
// launched as xhsa_synthetic_p, which hands the profile to the emulator's contention model.
// On a real gfx90a the kernel body busy-waits for the same time.
//
//   workload --table FILE [--step-table FILE --steps N] [--time-scale X] [--null-stream]
//            --stream ROLE[:RATE[:PRIO]] ...
//
//   ROLE   hp | lp (only reported back); RATE requests per device-second, 0 or absent: back
//          to back. One thread per stream. --null-stream: a single stream submits through
//          HIP's default stream, as PyTorch does. PRIO high | normal | low: the stream is
//          created with hipStreamCreateWithPriority (absent: hipStreamCreate).
//   --step-table FILE --steps N: an LLM server. A request is the --table (the prefill, which
//          yields the first token) and then N decode steps, each the --step-table followed by a
//          hipStreamSynchronize (the server reads every step's sampled tokens before the next).
//
// Protocol (the harness, xhsa-bench, drives it): after HIP init and two warm-up requests per
// stream it prints {"ev":"warm","stream":S} and waits for a line "go" on stdin; requests then run until
// "stop" (or end of input). Every finished request is a line
//   {"ev":"req","stream":S,"t0":NS,"t1":NS}
// with CLOCK_MONOTONIC nanoseconds (host time; device time is host time / time scale) of its
// submission and of its completion seen by the host; {"ev":"done"} ends the output. An LLM
// server's request line also has "arrival" (when it was due: its submission unless it queued
// behind the previous request), "first" (the prefill's end: the first token) and "steps" (the
// end of each decode step, in order):
//   {"ev":"req","stream":S,"t0":NS,"t1":NS,"arrival":NS,"first":NS,"steps":[NS,...]}
#include <hip/hip_runtime.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <sys/prctl.h>
#include <string>
#include <thread>
#include <vector>

#include "xhsa_kernels.hip"

namespace {

struct Kernel {
  std::string label;
  unsigned long long workgroups;
  unsigned threads;
  unsigned lds;
  unsigned long long wg_ns;
  unsigned long long host_ns;
  unsigned long long util_permille = 0;  // contention profile (0 0: none)
  unsigned long long bytes_per_wg = 0;
};

struct Table {
  std::string model;
  unsigned items = 1;
  std::vector<Kernel> kernels;
};

struct StreamSpec {
  std::string role;
  double rate = 0;  // requests per device-second; 0: back to back
  std::string prio;  // high | normal | low; empty: a plain hipStreamCreate stream
};

// The decode step of an LLM server (--step-table), and its steps per request (0: none).
Table step_table;
int decode_steps = 0;

std::mutex out_mutex;
std::atomic<int> state{0};  // 0 waiting, 1 running, 2 stopping
long long go_ns = 0;
double time_scale = 1.0;

long long now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void sleep_until(long long t) {
  timespec ts{(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void emit(const std::string& line) {
  std::lock_guard<std::mutex> g(out_mutex);
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "workload: %s\n", msg.c_str());
  std::exit(2);
}

#define CHECK(x)                                                                           \
  do {                                                                                     \
    hipError_t e_ = (x);                                                                   \
    if (e_ != hipSuccess) die(std::string(#x) + " failed: " + hipGetErrorString(e_));      \
  } while (0)

Table load(const std::string& path) {
  std::ifstream f(path);
  if (!f) die("cannot read table " + path);
  Table t;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    n++;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string word;
    if (!(in >> word)) continue;
    if (word == "model") {
      in >> t.model;
    } else if (word == "items") {
      in >> t.items;
    } else if (word == "unit") {
      std::string u;
      in >> u;
    } else if (word == "kernel") {
      Kernel k;
      if (!(in >> k.label >> k.workgroups >> k.threads >> k.lds >> k.wg_ns) || k.threads == 0 || k.threads > 1024)
        die(path + ":" + std::to_string(n) + ": bad kernel line");
      if (!(in >> k.host_ns)) k.host_ns = 0;
      if (in >> k.util_permille) {
        if (!(in >> k.bytes_per_wg) || k.util_permille > 1000)
          die(path + ":" + std::to_string(n) + ": bad contention profile (expected UTIL_PERMILLE 0-1000 and BYTES_PER_WG)");
      }
      t.kernels.push_back(k);
    } else {
      die(path + ":" + std::to_string(n) + ": unknown line");
    }
  }
  if (t.kernels.empty()) die(path + ": no kernels");
  return t;
}

// One request: every kernel of the table, in order, on `s`; the host issues each kernel no
// earlier than the sum of the host times up to it after the start (the framework's own CPU
// time per operation, which it spends whether or not the GPU is busy: modelled by sleeping to
// absolute deadlines, so that oversleeping one does not push back the others).
void request(const Table& t, hipStream_t s, long long start) {
  double host = 0;
  for (size_t i = 0; i < t.kernels.size(); i++) {
    const Kernel& k = t.kernels[i];
    host += (double)k.host_ns * time_scale;
    if (host > 0) {
      long long due = start + (long long)host;
      if (now_ns() < due) sleep_until(due);
    }
    if (k.util_permille || k.bytes_per_wg)
      hipLaunchKernelGGL(xhsa_synthetic_p, dim3((unsigned)k.workgroups), dim3(k.threads), k.lds, s, k.wg_ns,
                         k.util_permille, k.bytes_per_wg);
    else
      hipLaunchKernelGGL(xhsa_synthetic, dim3((unsigned)k.workgroups), dim3(k.threads), k.lds, s, k.wg_ns);
  }
  CHECK(hipGetLastError());
  CHECK(hipStreamSynchronize(s));
}

void run_stream(int idx, const Table& t, StreamSpec spec, bool null_stream) {
  // Timed sleeps overshoot by ~50-80 us with the default 50 us slack; 1 ns narrows that.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  hipStream_t s = nullptr;
  if (!null_stream && spec.prio.empty()) {
    CHECK(hipStreamCreate(&s));
  } else if (!null_stream) {
    // HIP: numerically lower is more urgent; the range is [greatest, least].
    int least = 0, greatest = 0;
    CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    int p = spec.prio == "high" ? greatest : spec.prio == "low" ? least : (least + greatest) / 2;
    CHECK(hipStreamCreateWithPriority(&s, hipStreamDefault, p));
  }
  auto serve = [&](long long start, std::string* steps) {
    request(t, s, start);
    for (int k = 0; k < decode_steps; k++) {
      long long end = now_ns();
      if (k == 0 && steps) *steps += ",\"first\":" + std::to_string(end) + ",\"steps\":[";
      request(step_table, s, end);
      if (steps) *steps += (k ? "," : "") + std::to_string(now_ns());
    }
    if (steps && decode_steps > 0) *steps += "]";
  };
  for (int w = 0; w < 2; w++) serve(now_ns(), nullptr);
  emit("{\"ev\":\"warm\",\"stream\":" + std::to_string(idx) + "}");
  while (state.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double period = spec.rate > 0 ? 1e9 * time_scale / spec.rate : 0;
  // Fixed-rate streams start at a stream-specific phase so that several do not fire together.
  const long long first = go_ns + (long long)(period * ((idx * 0.37) - (long long)(idx * 0.37)));
  for (long long i = 0; state.load() == 1; i++) {
    long long start = now_ns();
    long long arrival = start;
    if (period > 0) {
      long long due = first + (long long)(period * (double)i);
      arrival = due;
      if (start < due) {
        // In steps of at most 100 ms, so that "stop" ends a stream that waits long (an idle
        // server at a low rate) at once.
        while (state.load() == 1 && now_ns() < due) sleep_until(std::min(due, now_ns() + 100000000LL));
        start = now_ns();
      }
      // A request that arrived while the previous one ran starts at once (synchronous loop).
    }
    if (state.load() != 1) break;
    std::string tokens;
    if (decode_steps > 0) tokens = ",\"arrival\":" + std::to_string(std::min(arrival, start));
    serve(start, &tokens);
    long long end = now_ns();
    emit("{\"ev\":\"req\",\"stream\":" + std::to_string(idx) + ",\"t0\":" + std::to_string(start) + ",\"t1\":" + std::to_string(end) + tokens + "}");
  }
  if (s) CHECK(hipStreamDestroy(s));
}

}  // namespace

const char* const USAGE =
    "workload --table FILE [--step-table FILE --steps N] [--time-scale X] [--null-stream] --stream ROLE[:RATE[:PRIO]] ...";

int main(int argc, char** argv) {
  std::string table_path, step_path;
  std::vector<StreamSpec> specs;
  bool null_stream = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--table") {
      table_path = value();
    } else if (a == "--step-table") {
      step_path = value();
    } else if (a == "--steps") {
      std::string v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 100000) die("--steps N: decode steps per request, 1-100000, not " + v);
      decode_steps = (int)n;
    } else if (a == "--time-scale") {
      time_scale = std::atof(value().c_str());
      if (!(time_scale >= 1.0)) die("--time-scale must be >= 1");
    } else if (a == "--null-stream") {
      null_stream = true;
    } else if (a == "--stream") {
      std::string v = value();
      StreamSpec s;
      auto colon = v.find(':');
      s.role = v.substr(0, colon);
      if (colon != std::string::npos) {
        s.rate = std::atof(v.c_str() + colon + 1);
        auto second = v.find(':', colon + 1);
        if (second != std::string::npos) s.prio = v.substr(second + 1);
      }
      if (s.role != "hp" && s.role != "lp") die("--stream ROLE[:RATE[:PRIO]]: role is hp or lp, not " + s.role);
      if (!s.prio.empty() && s.prio != "high" && s.prio != "normal" && s.prio != "low")
        die("--stream ROLE[:RATE[:PRIO]]: priority is high, normal or low, not " + s.prio);
      specs.push_back(s);
    } else {
      die("unknown argument " + a + " (usage: " + USAGE + ")");
    }
  }
  if (table_path.empty() || specs.empty()) die(std::string("usage: ") + USAGE);
  if (step_path.empty() != (decode_steps == 0)) die("--step-table FILE and --steps N go together (an LLM server's decode steps)");
  if (null_stream && specs.size() != 1) die("--null-stream takes exactly one --stream");
  Table t = load(table_path);
  if (decode_steps > 0) step_table = load(step_path);
  // Block in waits instead of spinning: this host has two cores for every process.
  CHECK(hipSetDeviceFlags(hipDeviceScheduleBlockingSync));
  CHECK(hipSetDevice(0));

  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); i++) threads.emplace_back(run_stream, (int)i, std::cref(t), specs[i], null_stream);
  std::string line;
  // Each stream thread prints {"ev":"warm"} after its warm-up; the harness sends "go" once it
  // has them all (from every process of the phase).
  emit("{\"ev\":\"started\",\"streams\":" + std::to_string(specs.size()) + ",\"kernels\":" + std::to_string(t.kernels.size()) + "}");
  while (std::getline(std::cin, line)) {
    if (line == "go") {
      go_ns = now_ns();
      state.store(1);
    } else if (line == "stop") {
      break;
    }
  }
  if (state.load() == 0) go_ns = now_ns();
  state.store(2);
  for (auto& th : threads) th.join();
  emit("{\"ev\":\"done\"}");
  return 0;
}
