/* Stand-in for kernels/optimized/cpu/op_grid_sampler_2d_fp16_hw.cpp, the Arm-only OBJECT library (TC1). */
int fixture_grid_sampler_2d_fp16_hw(void) { return 2; }
