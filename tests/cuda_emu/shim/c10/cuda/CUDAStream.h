// The emulated device's c10/cuda/CUDAStream.h: one stream, which is the current one.
#pragma once
#include <c10/core/Stream.h>
#include <cuda_runtime.h>

namespace c10 {
namespace cuda {

class CUDAStream {
 public:
  operator cudaStream_t() const { return nullptr; }
  c10::Stream unwrap() const {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CPU));
  }
};

inline CUDAStream getCurrentCUDAStream(c10::DeviceIndex = -1) { return CUDAStream(); }

}  // namespace cuda
}  // namespace c10
