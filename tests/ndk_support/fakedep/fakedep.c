long fakedep_scale(long x) { return 3 * x; }
