// The emulated device's c10/cuda/CUDAGuard.h: there is one device, always current.
#pragma once
#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

namespace c10 {
namespace cuda {
struct CUDAGuard {
  explicit CUDAGuard(c10::Device) {}
};
}  // namespace cuda
}  // namespace c10
