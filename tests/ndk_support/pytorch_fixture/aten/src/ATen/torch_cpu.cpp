#include "c10/c10.h"
extern "C" long fakedep_scale(long);
long fixture_torch_work(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s = fixture_c10_add(s, fakedep_scale(i));
  return s;
}
