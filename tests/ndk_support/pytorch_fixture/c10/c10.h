#pragma once
long fixture_c10_add(long a, long b);
long fixture_torch_work(long n);
