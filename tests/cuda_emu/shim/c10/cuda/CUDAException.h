// The emulated device's c10/cuda/CUDAException.h: a failed runtime call is an error.
#pragma once
#include <cuda_runtime.h>

#define C10_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    const cudaError_t emu_error = (expr);                                                 \
    TORCH_CHECK(emu_error == cudaSuccess, "emulated CUDA error: ", cudaGetErrorString(emu_error)); \
  } while (0)
// An emulated launch reports a bad configuration or a divergent barrier by throwing.
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
