// The emulated device's c10/cuda/CUDAStream.h: a few distinct streams, one of them current
// (emulator.cpp), each its own c10::Stream.
#pragma once
#include <c10/core/Stream.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace c10 {
namespace cuda {

class CUDAStream {
 public:
  explicit CUDAStream(cudaStream_t stream) : stream_(stream) {}
  operator cudaStream_t() const { return stream_; }
  c10::Stream unwrap() const {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CPU),
                       static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(stream_)));
  }

 private:
  cudaStream_t stream_;
};

inline CUDAStream getCurrentCUDAStream(c10::DeviceIndex = -1) { return CUDAStream(::emu::current_stream()); }

}  // namespace cuda
}  // namespace c10
