# Fixture standing in for PyTorch's cmake/VulkanDependencies.cmake (v2.8.0): on Android, USE_VULKAN compiles
# the NDK's vulkan_wrapper sources, which NDK r23 and later no longer ship -- so configuring fails there
# ("Cannot find source file: .../vulkan_wrapper.h"), as with the real tree (pytorch/pytorch#126394).
if(NOT USE_VULKAN)
  return()
endif()
if(ANDROID)
  if(NOT ANDROID_NDK)
    message(FATAL_ERROR "USE_VULKAN requires ANDROID_NDK set.")
  endif()
  set(VULKAN_WRAPPER_DIR "${ANDROID_NDK}/sources/third_party/vulkan/src/common")
  message(STATUS "Vulkan_ANDROID_NDK_WRAPPER_DIR:${VULKAN_WRAPPER_DIR}")
  add_library(VulkanWrapper STATIC ${VULKAN_WRAPPER_DIR}/vulkan_wrapper.h ${VULKAN_WRAPPER_DIR}/vulkan_wrapper.cpp)
  target_include_directories(VulkanWrapper PUBLIC ${VULKAN_WRAPPER_DIR})
  list(APPEND Vulkan_LIBS VulkanWrapper)
endif()
