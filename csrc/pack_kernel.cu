// The CUDA kernels of the pack ops: one launch per kind of row present, whatever the number of
// tensors (multi_tensor_apply.cuh); a pack or an unscaled unpack is one launch of byte copies.
// Rows copy bytes at the widest width both addresses allow, zero the padding of a fresh flat
// tensor, or multiply by the unpack's scale (integers rounded to nearest, ties to even, and
// clamped into their range, as the CPU kernels and the PyTorch twins do); the scale is a kernel
// argument, not part of the table.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

#include "kernel_kinds.cuh"
#include "multi_tensor_apply.cuh"
#include "pack.h"

namespace minimm {
namespace {

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ inline T scaled(T v, double scale) {
  if constexpr (std::is_integral_v<T>) {
    return round_into<T>(__dmul_rn(static_cast<double>(v), scale));
  } else {
    using A = acc_t<T>;
    return static_cast<T>(mul_rn(static_cast<A>(v), static_cast<A>(scale)));
  }
}

// One chunk of a scaled row: where both sides are aligned for vectors, elementwise over vectors
// (four of them in flight per thread, as the EMA kernels' pair_chunk), the rest over elements
// (four in flight). A vector holds four elements at most (16 bytes at most): 16 values through
// double math fit in 64 registers (four 16-byte vectors of int8, 64 values, spilled).
template <typename T>
__device__ inline void scale_chunk(const Row& row, const Chunk& chunk, double scale) {
  constexpr int N = sizeof(T) * 4 <= 16 ? 4 : static_cast<int>(16 / sizeof(T));
  using V = Vec<T, N>;
  T* __restrict__ dst = static_cast<T*>(row.dst) + chunk.first;
  const T* __restrict__ src = static_cast<const T*>(row.src) + chunk.first;
  const int n = chunk.n;
  int scalar_from = 0;
  if (vector_aligned<T, N>(dst) && vector_aligned<T, N>(src)) {
    const int vectors = n / N;
    const auto scale_vector = [=](V, V v) {
#pragma unroll
      for (int j = 0; j < N; ++j) v.x[j] = scaled(v.x[j], scale);
      return v;
    };
    elementwise<kVectorsPerThread>(reinterpret_cast<V*>(dst), reinterpret_cast<const V*>(src), 0,
                                   vectors, false, scale_vector);
    scalar_from = vectors * N;
  }
  elementwise<kVectorsPerThread>(dst, src, scalar_from, n, false,
                                 [=](T, T s) { return scaled(s, scale); });
}

__device__ inline void zero_bytes(char* dst, int n) {
  for (int j = threadIdx.x; j < n; j += kThreads) dst[j] = 0;
}

template <int I>
using Scaled = std::tuple_element_t<I, std::tuple<uint8_t, int8_t, int16_t, int32_t, int64_t, at::Half, float, double,
                                                  at::BFloat16>>;

// One kernel per Row.kernel number (pack.h): byte copy, zeroing, or scaling one dtype.
template <int K>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    pack_kernel(const unsigned char* __restrict__ table, int32_t rows, int64_t first, int64_t count, double scale) {
  const Row* row_of = table_rows(table);
  const Chunk* chunk_of = table_chunks(table, rows) + first;
  for (int64_t c = blockIdx.x; c < count; c += gridDim.x) {
    const Chunk chunk = chunk_of[c];
    const Row row = row_of[chunk.row];
    char* dst = static_cast<char*>(row.dst) + chunk.first;
    if constexpr (K == kPackBytes) copy_bytes(dst, static_cast<const char*>(row.src) + chunk.first, chunk.n);
    else if constexpr (K == kZeroBytes) zero_bytes(dst, chunk.n);
    else scale_chunk<Scaled<K - kScale0>>(row, chunk, scale);
  }
}

constexpr int32_t kKinds = kScale0 + kScaleTypes;

// The pack kernel of kind k (kernel_kinds.cuh), and its launch over segment `s`.
const auto pack_kernel_of = [](auto k) { return &pack_kernel<decltype(k)::value>; };

void launch_kind(int32_t kind, const Table& table, const Segment& s, double scale, cudaStream_t stream) {
  with_kind<kKinds>(kind, [&](auto k) {
    MINIMM_LAUNCH(pack_kernel<decltype(k)::value>, s.blocks, kThreads, stream,
                  table.device.const_data_ptr<unsigned char>(),
                  static_cast<int32_t>(table.rows.size()), s.first, s.count, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

bool pack_run_cuda(Table& table, const at::Device& device, double scale, const char* capture_error) {
  release_graph_memory();
  if (table.chunks.empty()) return false;
  const c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream();
  if (!table.device.defined()) {
    group_by_kind(table, kKinds, [](const Row& row) { return row.kernel; });
    upload(table, device, capture_error, grids_of<kKinds>(pack_kernel_of));
  }
  use_on(table, stream);
  for (const Segment& segment : table.segments) launch_kind(segment.kind, table, segment, scale, stream);
  if (!stream_is_capturing(stream)) return false;
  keep_for_graph(stream, table, {});
  return true;
}

const bool registered = (cuda_pack_run = &pack_run_cuda, true);

// The list ops refuse a capture first, before they allocate their flat tensors or staged copies.
std::vector<at::Tensor> pack_cuda(at::TensorList tensors) {
  if (!tensors.empty()) {
    const c10::cuda::CUDAGuard guard(tensors[0].device());
    refuse_capture(kListCaptureError);
  }
  return pack_with(tensors, &pack_run_cuda);
}

void unpack_cuda(at::TensorList flats, at::TensorList tensors, double scale) {
  if (tensors.empty() && flats.empty()) return;
  const c10::cuda::CUDAGuard guard((tensors.empty() ? flats : tensors)[0].device());
  refuse_capture(kListCaptureError);
  unpack_with(flats, tensors, scale, &pack_run_cuda);
}

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) {
  m.impl("pack", &minimm::pack_cuda);
  m.impl("unpack_", &minimm::unpack_cuda);
}
