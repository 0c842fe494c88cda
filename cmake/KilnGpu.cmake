# The gpu target (src/targets/gpu): found CUDA 13 (runtime, NVRTC, cuBLASLt) and cuDNN 9.
# KILN_ENABLE_GPU: AUTO builds it when both are found (else the build goes on without it,
# and `gpu` reports "built without CUDA"); ON fails the configure without them; OFF never.
# Only the runtime API is linked (libcudart, which loads the driver itself when a program
# first asks for a device), never libcuda: a binary that needs libcuda.so.1 would not
# start on a machine without the driver. tests/gpu checks the built binaries for it.
set(KILN_ENABLE_GPU AUTO CACHE STRING "Build the gpu target: AUTO, ON or OFF")
set_property(CACHE KILN_ENABLE_GPU PROPERTY STRINGS AUTO ON OFF)
# Real architectures NVRTC compiles generated kernels for by default (--gpu-arch overrides).
set(KILN_CUDA_ARCHS 90 CACHE STRING "CUDA architectures of the gpu target (e.g. 90)")

set(KILN_HAVE_GPU OFF)
if(NOT KILN_ENABLE_GPU STREQUAL "OFF")
  find_package(CUDAToolkit 13 QUIET)
  set(_why "")
  if(NOT CUDAToolkit_FOUND)
    set(_why "CUDA Toolkit 13 not found")
  elseif(NOT TARGET CUDA::nvrtc OR NOT TARGET CUDA::cublasLt)
    set(_why "the CUDA Toolkit lacks NVRTC or cuBLASLt")
  else()
    find_path(KILN_CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(KILN_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(KILN_CUDNN_INCLUDE_DIR AND KILN_CUDNN_LIBRARY)
      file(STRINGS ${KILN_CUDNN_INCLUDE_DIR}/cudnn_version.h _cudnn_major REGEX "^#define CUDNN_MAJOR [0-9]+")
      string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _cudnn_major "${_cudnn_major}")
    endif()
    if(NOT _cudnn_major STREQUAL "9")
      set(_why "cuDNN 9 not found")
    endif()
  endif()
  if(_why STREQUAL "")
    set(KILN_HAVE_GPU ON)
    add_library(kiln_cudnn UNKNOWN IMPORTED)
    set_target_properties(kiln_cudnn PROPERTIES IMPORTED_LOCATION ${KILN_CUDNN_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${KILN_CUDNN_INCLUDE_DIR})
    # CMake's CUDA::nvrtc lists CUDA::cuda_driver (libcuda's stub) as a dependency; only a
    # linker that drops unneeded libraries (--as-needed: Debian's default, lost under
    # -fsanitize) leaves it out of the binary. NVRTC's library alone, then.
    get_target_property(_nvrtc_library CUDA::nvrtc IMPORTED_LOCATION)
    add_library(kiln_nvrtc UNKNOWN IMPORTED)
    set_target_properties(kiln_nvrtc PROPERTIES IMPORTED_LOCATION ${_nvrtc_library}
      INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
    message(STATUS "gpu target: CUDA ${CUDAToolkit_VERSION}, cuDNN ${_cudnn_major}, archs ${KILN_CUDA_ARCHS}")
  elseif(KILN_ENABLE_GPU STREQUAL "ON")
    message(FATAL_ERROR "KILN_ENABLE_GPU=ON: ${_why}")
  else()
    message(STATUS "gpu target: not built (${_why})")
  endif()
endif()
# For scripts/run_tests.py, which runs the gpu suites only in builds that have them.
set(KILN_HAVE_GPU ${KILN_HAVE_GPU} CACHE INTERNAL "the gpu target is built (cmake/KilnGpu.cmake)")
