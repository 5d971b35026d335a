// Multi-tensor apply, the part every CUDA kernel of minimm shares: the launch table that travels
// in a kernel's arguments, the walk of a block over its units (for_each_vector), and the host
// side that cuts lists of tensors into launches. Included by cuda_kernels.cu only.
//
// The host lays the tensors of a launch back to back in an index space of "units" (elements;
// bytes for byte copies), each tensor starting at a multiple of the kernel's vector width N (16
// bytes of the wider dtype of a pair, kAlignBytes), and passes their pointers and end offsets in
// the kernel's arguments: a LaunchTable filling the classic 4 KB of kernel-argument space, so no
// host-to-device copy. Block b takes units [b, b + 1) * kBlockVectors * N whatever tensors they
// belong to, and thread k of it vectors k, k + kThreads, ...: no thread idles while its block has
// work, however small the tensors. ResNet-50's 161 tensors fit one launch; 2,000 tensors take 13.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "minimm_ops.h"

namespace minimm {

constexpr int kThreads = 256;
constexpr int kVectorsPerThread = 4;
constexpr int64_t kBlockVectors = kThreads * kVectorsPerThread;  // a block's share, in vectors
constexpr int kMaxTensors = 160;

// Tensor i covers units [align_up(end[i - 1], width), end[i]) of the launch (end[-1] = 0); the
// ends strictly increase (empty tensors get no entry).
struct LaunchTable {
  void* dst[kMaxTensors];
  const void* src[kMaxTensors];
  int64_t end[kMaxTensors];
  int count;
};
// Kernel arguments: the table, the WeightSource, the mode and the scale, within 4 KB.
static_assert(sizeof(LaunchTable) + sizeof(WeightSource) + sizeof(int) + sizeof(double) + 16 <= 4096,
              "the launch table must fit the 4 KB kernel-argument space");

// Units per vector: 16 bytes of the wider side of a pair.
template <typename E, typename S>
C10_HOST_DEVICE constexpr int vector_width() {
  return static_cast<int>(kAlignBytes / (sizeof(E) > sizeof(S) ? sizeof(E) : sizeof(S)));
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T x[N];
};

template <typename T, int N>
__device__ inline bool vector_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

__device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The first tensor whose range ends after unit u (binary search over the ends).
__device__ inline int tensor_at(const LaunchTable& t, int64_t u) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (t.end[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// Calls fn(tensor, first, n) for each vector of this block's units: the n (<= N, fewer only at a
// tensor's end) units of tensor `tensor` starting at `first`, a multiple of N. Thread k takes
// vectors k, k + kThreads, ... of the block, so no thread idles while the block has work.
template <int N, typename Fn>
__device__ inline void for_each_vector(const LaunchTable& t, Fn fn) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kBlockVectors * N;
  const int64_t last = min64(first + kBlockVectors * N, t.end[t.count - 1]);
  int i = tensor_at(t, first);
  for (int64_t u = first + static_cast<int64_t>(threadIdx.x) * N; u < last; u += static_cast<int64_t>(kThreads) * N) {
    while (t.end[i] <= u) ++i;  // stops: u < last <= end[count - 1]
    const int64_t begin = i == 0 ? 0 : align_up(t.end[i - 1], N);
    if (u < begin) continue;  // padding between tensor i - 1 and tensor i
    fn(i, u - begin, min64(N, t.end[i] - u));
  }
}

// A kernel: the launch table, the weight source, a mode, a scale (each kernel uses what it needs).
using KernelFn = void (*)(LaunchTable, WeightSource, int, double);

struct Row {
  void* dst;
  const void* src;
  int64_t units;
  KernelFn kernel;
  int mode;
  int width;  // the kernel's vector width in units
};

struct Launch {
  KernelFn kernel;
  int mode;
  int64_t blocks;
  LaunchTable table;
};

// Rows sharing a kernel and mode go into the same tables, in first-seen order.
inline std::vector<Launch> build_launches(const std::vector<Row>& rows) {
  std::vector<std::pair<KernelFn, int>> keys;
  for (const Row& r : rows)
    if (std::find(keys.begin(), keys.end(), std::make_pair(r.kernel, r.mode)) == keys.end())
      keys.emplace_back(r.kernel, r.mode);
  std::vector<Launch> launches;
  for (const auto& key : keys) {
    Launch cur{key.first, key.second, 0, {}};
    cur.table.count = 0;
    int64_t end = 0, block_units = 1;
    auto flush = [&] {
      if (cur.table.count > 0) {
        cur.blocks = (end + block_units - 1) / block_units;
        launches.push_back(cur);
      }
      cur.table.count = 0;
      end = 0;
    };
    for (const Row& r : rows) {
      if (r.kernel != key.first || r.mode != key.second || r.units == 0) continue;
      if (cur.table.count == kMaxTensors) flush();
      const int c = cur.table.count++;
      end = align_up(end, r.width) + r.units;
      cur.table.dst[c] = r.dst;
      cur.table.src[c] = r.src;
      cur.table.end[c] = end;
      block_units = kBlockVectors * r.width;
    }
    flush();
  }
  return launches;
}

inline void run_launches(const std::vector<Launch>& launches, const WeightSource& w, double scale) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  for (const Launch& l : launches) {
    TORCH_CHECK(l.blocks <= 0x7fffffff, "minimm: a launch of ", l.blocks, " blocks is too large");
    l.kernel<<<static_cast<unsigned int>(l.blocks), kThreads, 0, stream>>>(l.table, w, l.mode, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace minimm
