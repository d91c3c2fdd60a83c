/* Stand-in for ExecuTorch's kernels/optimized (optimized_native_cpu_ops_lib, TC4): one symbol, so the library exists. */
int fixture_optimized_kernels(void) { return 1; }
