// Fixture speed_benchmark_torch: prints what it was built for, then times the fixture library's work loop with
// upstream's flags (--model must name a readable file, --warmup, --iter, --report_pep) and output lines
// ("Starting benchmark.", "Main runs.", one PyTorchObserver line per timed run, "Main run finished. ...").
// The latencies are real: the time this machine (or qemu, on a virtual arm64 phone) took for the loop.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "c10/c10.h"

static const char* flag(int argc, char** argv, const char* name, const char* dflt) {
  size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) == 0 && std::strncmp(argv[i] + 2, name, n) == 0 && argv[i][2 + n] == '=')
      return argv[i] + 3 + n;
  }
  return dflt;
}

static double timed_work_us() {
  auto start = std::chrono::steady_clock::now();
  volatile long sink = fixture_torch_work(20000);
  (void)sink;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

int main(int argc, char** argv) {
  std::printf("speed_benchmark_torch fixture abi=%s api_level=%d\n", FIXTURE_ABI, FIXTURE_API_LEVEL);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) return 0;
  }
  const char* model = flag(argc, argv, "model", "");
  std::FILE* f = std::fopen(model, "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "terminate called after throwing an instance of 'c10::Error'\n");
    std::fprintf(stderr, "  what():  open file failed, file path: %s\n", model);
    std::abort();
  }
  std::fclose(f);
  int warmup = std::atoi(flag(argc, argv, "warmup", "0"));
  int iters = std::atoi(flag(argc, argv, "iter", "10"));
  bool pep = std::strcmp(flag(argc, argv, "report_pep", "false"), "true") == 0;
  std::printf("Starting benchmark.\nRunning warmup runs.\n");
  for (int i = 0; i < warmup; ++i) timed_work_us();
  std::printf("Main runs.\n");
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    double us = timed_work_us();
    total += us;
    if (pep) std::printf("PyTorchObserver {\"type\": \"NET\", \"unit\": \"us\", \"metric\": \"latency\", \"value\": \"%g\"}\n", us);
  }
  double per = iters > 0 ? total / iters : 0;
  std::printf("Main run finished. Microseconds per iter: %g. Iters per second: %g\n", per, per > 0 ? 1e6 / per : 0);
  return 0;
}
