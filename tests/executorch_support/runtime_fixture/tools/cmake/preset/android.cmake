# Fixture of ExecuTorch's tools/cmake/preset/android.cmake (the options torchdroid's build depends on, E4).
set_overridable_option(BUILD_TESTING OFF)
set_overridable_option(EXECUTORCH_BUILD_ANDROID_JNI ON)
set_overridable_option(EXECUTORCH_PAL_DEFAULT android)
set_overridable_option(EXECUTORCH_BUILD_XNNPACK ON)
set_overridable_option(EXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL ON)
set_overridable_option(EXECUTORCH_ENABLE_EVENT_TRACER OFF)
set_overridable_option(EXECUTORCH_BUILD_DEVTOOLS ON)
set_overridable_option(EXECUTORCH_BUILD_KERNELS_OPTIMIZED ON)  # TC4
