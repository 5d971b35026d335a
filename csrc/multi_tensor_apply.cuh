// Multi-tensor apply, the part every CUDA kernel of minimm shares: one launch for any number of
// tensors. Included by ema_kernel.cu and pack_kernel.cu only.
//
// The host builds a Table (table.h: one row per tensor, chunks of 16 KB) and copies it once into
// device memory behind a completion counter: [counter, 16 bytes][rows][chunks]. A launch passes
// that one pointer, so the table has no size limit and a plan's step copies nothing. The grid
// is sized to fill the GPU (enough blocks for every SM, no more than there are chunks), and
// block b takes chunks b, b + gridDim.x, ...: 2,000 small tensors and one 100 MB tensor each take
// one launch. In a chunk, thread k loads vectors k, k + 256, k + 512, k + 768 of both sides
// before it computes any of them (16 bytes each, of the wider dtype of a pair), then stores them.
// A chunk whose start is not aligned for such vectors on both sides runs element by element.
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cstring>
#include <type_traits>

#include "table.h"

namespace minimm {

constexpr int kThreads = 256;
constexpr int kVectorsPerThread = 4;
constexpr int64_t kHeaderBytes = 16;  // the completion counter, padded to 16 bytes
static_assert(kThreads * kVectorsPerThread * 16 == kChunkBytes, "a chunk is one block's vectors, 16 bytes each");
static_assert(sizeof(Row) % 16 == 0 && sizeof(Chunk) == 16, "rows and chunks keep 16-byte alignment");

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T x[N];
};

// Elements per vector: 16 bytes of the wider side of a pair.
template <typename E, typename S>
constexpr int vector_width() {
  return static_cast<int>(16 / (sizeof(E) > sizeof(S) ? sizeof(E) : sizeof(S)));
}

template <typename T, int N>
__device__ inline bool vector_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

__device__ inline const Row* table_rows(const unsigned char* table) {
  return reinterpret_cast<const Row*>(table + kHeaderBytes);
}

__device__ inline const Chunk* table_chunks(const unsigned char* table, int32_t rows) {
  return reinterpret_cast<const Chunk*>(table + kHeaderBytes + rows * static_cast<int64_t>(sizeof(Row)));
}

// Called by every thread of every block at the end of a launch that owns a counter: the last
// block to finish increments *steps (every block read it before it finished) and resets the
// completion counter for the next launch or graph replay.
__device__ inline void last_block_increments(unsigned char* table, int64_t* steps) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  unsigned int* done = reinterpret_cast<unsigned int*>(table);
  if (atomicAdd(done, 1u) == gridDim.x - 1) {
    *steps += 1;
    *done = 0;
    __threadfence();
  }
}

// Copies n bytes in words of W bytes (both pointers aligned to W), then the tail bytes.
template <typename W>
__device__ inline void copy_words(char* __restrict__ dst, const char* __restrict__ src, int n) {
  const int words = n / static_cast<int>(sizeof(W));
  W* d = reinterpret_cast<W*>(dst);
  const W* s = reinterpret_cast<const W*>(src);
  for (int base = threadIdx.x; base < words; base += kThreads * kVectorsPerThread) {
    W v[kVectorsPerThread];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k)
      if (base + k * kThreads < words) v[k] = s[base + k * kThreads];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k)
      if (base + k * kThreads < words) d[base + k * kThreads] = v[k];
  }
  for (int j = words * static_cast<int>(sizeof(W)) + threadIdx.x; j < n; j += kThreads) dst[j] = src[j];
}

// A byte copy at the widest width both addresses allow (16, 8, 4, 2 or 1 bytes).
__device__ inline void copy_bytes(char* dst, const char* src, int n) {
  const uintptr_t both = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  if (both % 16 == 0) copy_words<uint4>(dst, src, n);
  else if (both % 8 == 0) copy_words<uint2>(dst, src, n);
  else if (both % 4 == 0) copy_words<unsigned int>(dst, src, n);
  else if (both % 2 == 0) copy_words<unsigned short>(dst, src, n);
  else copy_words<char>(dst, src, n);
}

// Host side: copy `table` into device memory (once per build) through pinned memory, on the
// current stream and without waiting for it. Not allowed while the stream is being captured: the
// graph would keep reading the pinned buffer, which is reused once the copy has run.
inline void upload(Table& table, const at::Device& device, bool capturing, const char* op) {
  TORCH_CHECK(!capturing, op, ": the first call (or the first after a tensor moved) copies its table to the GPU "
              "and cannot be captured in a CUDA graph; call it once before capturing");
  const int64_t row_bytes = table.rows.size() * sizeof(Row), chunk_bytes = table.chunks.size() * sizeof(Chunk);
  at::Tensor host = at::empty({kHeaderBytes + row_bytes + chunk_bytes},
                              at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  unsigned char* p = host.data_ptr<unsigned char>();
  std::memset(p, 0, kHeaderBytes);
  if (row_bytes) std::memcpy(p + kHeaderBytes, table.rows.data(), row_bytes);
  if (chunk_bytes) std::memcpy(p + kHeaderBytes + row_bytes, table.chunks.data(), chunk_bytes);
  table.device = at::empty({host.numel()}, at::TensorOptions().dtype(at::kByte).device(device));
  table.device.copy_(host, /*non_blocking=*/true);
}

inline bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Enough blocks to fill every SM (2,048 resident threads each), and never more than the chunks;
// at least one, so that a launch with a counter but no chunks still increments it.
inline unsigned int grid_for(const Table& table) {
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t fill = static_cast<int64_t>(sms) * (2048 / kThreads);
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(fill, table.chunks.size())));
}

}  // namespace minimm
