#include "c10/c10.h"
long fixture_c10_add(long a, long b) { return a + b; }
