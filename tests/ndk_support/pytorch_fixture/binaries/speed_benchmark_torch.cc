// Fixture speed_benchmark_torch: prints what it was built for, then "benchmarks" a loop.
#include <cstdio>
#include <cstring>
#include "c10/c10.h"

int main(int argc, char** argv) {
  std::printf("speed_benchmark_torch fixture abi=%s api_level=%d\n", FIXTURE_ABI, FIXTURE_API_LEVEL);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) return 0;
  }
  std::printf("sum=%ld\n", fixture_torch_work(1000));
  return 0;
}
