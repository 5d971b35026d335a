// The CUDA kernel of the pack ops: one launch per pack or unpack, whatever the number of tensors
// (multi_tensor_apply.cuh). Rows copy bytes at the widest width both addresses allow, zero the
// padding of a fresh flat tensor, or multiply by the unpack's scale (integers rounded to nearest,
// ties to even, as the CPU kernels and the PyTorch twins do).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

#include "multi_tensor_apply.cuh"
#include "pack.h"

namespace minimm {
namespace {

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ inline T scaled(T v, double scale) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(nearbyint(__dmul_rn(static_cast<double>(v), scale)));
  } else {
    using A = acc_t<T>;
    return static_cast<T>(mul_rn(static_cast<A>(v), static_cast<A>(scale)));
  }
}

template <typename T>
__device__ inline void scale_chunk(const Row& row, const Chunk& chunk, double scale) {
  T* __restrict__ dst = static_cast<T*>(row.dst) + chunk.first;
  const T* __restrict__ src = static_cast<const T*>(row.src) + chunk.first;
  for (int j = threadIdx.x; j < chunk.n; j += kThreads) dst[j] = scaled(src[j], scale);
}

__device__ inline void zero_bytes(char* dst, int n) {
  for (int j = threadIdx.x; j < n; j += kThreads) dst[j] = 0;
}

template <int I>
using Scaled = std::tuple_element_t<I, std::tuple<uint8_t, int8_t, int16_t, int32_t, int64_t, at::Half, float, double,
                                                  at::BFloat16>>;

template <int K = 0>
__device__ inline void run_chunk(int kernel, const Row& row, const Chunk& chunk, double scale) {
  if constexpr (K < kScale0 + kScaleTypes) {
    if (kernel != K) return run_chunk<K + 1>(kernel, row, chunk, scale);
    char* dst = static_cast<char*>(row.dst) + chunk.first;
    if constexpr (K == kPackBytes) copy_bytes(dst, static_cast<const char*>(row.src) + chunk.first, chunk.n);
    else if constexpr (K == kZeroBytes) zero_bytes(dst, chunk.n);
    else scale_chunk<Scaled<K - kScale0>>(row, chunk, scale);
  }
}

__global__ void __launch_bounds__(kThreads)
    pack_kernel(const unsigned char* __restrict__ table, int32_t rows, int64_t chunks, double scale) {
  const Row* row_of = table_rows(table);
  const Chunk* chunk_of = table_chunks(table, rows);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const Chunk chunk = chunk_of[c];
    const Row row = row_of[chunk.row];
    run_chunk(row.kernel, row, chunk, scale);
  }
}

void pack_run_cuda(Table& table, const at::Device& device, double scale) {
  if (table.chunks.empty()) return;
  const c10::cuda::CUDAGuard guard(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (!table.device.defined()) upload(table, device, stream_is_capturing(stream), "pack");
  pack_kernel<<<grid_for(table), kThreads, 0, stream>>>(table.device.const_data_ptr<unsigned char>(),
                                                        static_cast<int32_t>(table.rows.size()),
                                                        static_cast<int64_t>(table.chunks.size()), scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

const bool registered = (cuda_pack_run = &pack_run_cuda, true);

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) {
  m.impl("pack", &minimm::pack_any);
  m.impl("unpack_", &minimm::unpack_any);
}
