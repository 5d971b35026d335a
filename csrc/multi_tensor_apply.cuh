// Multi-tensor apply, the part every CUDA kernel of minimm shares: a few launches for any number
// of tensors. Included by ema_kernel.cu and pack_kernel.cu only.
//
// The host builds a Table (table.h: one row per tensor, chunks of 16 KB), groups its chunks by
// kind of row (a dtype pair, a byte copy...) and copies it once into device memory: [rows][chunks].
// Each kind present gets one launch of a kernel compiled for that kind alone, passed the table's
// pointer and its segment of chunks: a kernel for one kind needs few registers (<= 64, checked by
// tests/compile_cuda.sh), so that four or more blocks fit on an SM. A model's parameters are
// usually one or two kinds (fp32, or an fp32 EMA of bf16 weights and int64 counters), so one or
// two launches. The grid fills the GPU once (as many blocks as the occupancy API says fit on all
// SMs at once, never more than the segment's chunks), and block b takes chunks b, b + gridDim.x,
// ... of its segment. In a chunk, thread k loads vectors k, k + 256, k + 512, k + 768 of both
// sides before it computes any of them (16 bytes each, of the wider dtype of a pair), then stores
// them. A chunk whose start is not aligned for such vectors on both sides, and the tail of one
// that is, run element by element (elementwise), still four loads of each side in flight.
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "table.h"

// tests/cuda_emu compiles this text as host C++ and defines both: its emulated device instead of
// <<<>>>, and plain host memory to stage tables in.
#ifndef MINIMM_LAUNCH
#define MINIMM_LAUNCH(kernel, grid, threads, stream, ...) \
  kernel<<<grid, threads, 0, stream>>>(__VA_ARGS__)
#endif
#ifndef MINIMM_PINNED_STAGING
#define MINIMM_PINNED_STAGING true
#endif

namespace minimm {

constexpr int kThreads = 256;
constexpr int kVectorsPerThread = 4;
// __launch_bounds__'s second argument: at least 4 blocks of 256 threads per SM, so at most
// 65536 / 1024 = 64 registers per thread.
constexpr int kMinBlocks = 4;
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

__device__ inline const Row* table_rows(const unsigned char* table) { return reinterpret_cast<const Row*>(table); }

__device__ inline const Chunk* table_chunks(const unsigned char* table, int32_t rows) {
  return reinterpret_cast<const Chunk*>(table + rows * static_cast<int64_t>(sizeof(Row)));
}

// Units [from, n) of a chunk (elements, or vectors of them), not one by one: each thread loads
// its U units (from + threadIdx.x + k * kThreads) of both sides before it computes any, then
// stores them, so that U loads of each side are in flight. `op(d, s)` is the new value of one
// unit; the old one is read only when `read_dst`.
template <int U, typename D, typename S, typename Op>
__device__ inline void elementwise(D* __restrict__ dst, const S* __restrict__ src, int from, int n,
                                   bool read_dst, Op op) {
  for (int base = from + threadIdx.x; base < n; base += kThreads * U) {
    D d[U]{};
    S s[U]{};
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int j = base + k * kThreads;
      if (j < n) {
        if (read_dst) d[k] = dst[j];
        s[k] = src[j];
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int j = base + k * kThreads;
      if (j < n) dst[j] = op(d[k], s[k]);
    }
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

inline bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// The list ops refuse a capture before they allocate anything: cudaMalloc during a capture (no
// caching allocator, PYTORCH_NO_CUDA_MEMORY_CACHING=1) would fail the capture instead.
inline void refuse_capture(const char* capture_error) {
  TORCH_CHECK(!stream_is_capturing(c10::cuda::getCurrentCUDAStream()), capture_error);
}

// Host memory to stage a table in: pinned, so that its copy to the GPU does not wait for the
// host. The caching host allocator keeps it until that copy has run.
inline at::Tensor staging_bytes(int64_t n) {
  return at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(MINIMM_PINNED_STAGING));
}

// The grid of a launch of `kernel` over `chunks` chunks: as many blocks as fit on the GPU at
// once (the occupancy API knows the kernel's registers), never more than there are chunks.
template <typename Kernel>
unsigned int grid_for(Kernel kernel, int64_t chunks) {
  int device = 0, sms = 0, per_sm = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const int64_t fit = std::min<int64_t>(int64_t{sms} * per_sm, chunks);
  return static_cast<unsigned int>(std::max<int64_t>(1, fit));
}

// Host side: copy `table` (its chunks grouped into segments already) into device memory, once per
// build, through pinned memory, on the current stream and without waiting for it; and size each
// segment's grid with `grid_of(kind, chunks)` (asked here, not at every launch). Refused while the
// stream is being captured, with `capture_error`: the graph would keep reading the pinned buffer,
// which is reused once the copy has run.
template <typename GridOf>
void upload(Table& table, const at::Device& device, const char* capture_error, GridOf grid_of) {
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
  TORCH_CHECK(!stream_is_capturing(stream), capture_error);
  const int64_t row_bytes = table.rows.size() * sizeof(Row), chunk_bytes = table.chunks.size() * sizeof(Chunk);
  at::Tensor host = staging_bytes(row_bytes + chunk_bytes);
  unsigned char* p = host.data_ptr<unsigned char>();
  if (row_bytes) std::memcpy(p, table.rows.data(), row_bytes);
  if (chunk_bytes) std::memcpy(p + row_bytes, table.chunks.data(), chunk_bytes);
  table.device = at::empty({host.numel()}, at::TensorOptions().dtype(at::kByte).device(device));
  table.device.copy_(host, /*non_blocking=*/true);
  table.streams.clear();  // the caller's use_on() records it on this stream
  // With several targets a chunk is `targets` units of work (ema_kernel.cu).
  for (Segment& segment : table.segments) segment.blocks = grid_of(segment.kind, segment.count * table.targets);
}

// Before a launch that reads `table` on `stream`: the first time it runs on a stream, the device
// table and (a plan's) the memory its rows point into are recorded as in use there, so that a
// rebuild freeing them cannot hand that memory to another stream (the upload's, say) while this
// stream's launch is queued. The table remembers its last kStreamsKept streams only: one that comes
// back after more is recorded again, which costs a lookup (the allocator keeps a set).
constexpr size_t kStreamsKept = 4;
inline void use_on(Table& table, const c10::cuda::CUDAStream& stream) {
  const c10::Stream s = stream.unwrap();
  if (std::find(table.streams.begin(), table.streams.end(), s) != table.streams.end()) return;
  record_on(table.device.storage(), s);
  if (table.storages)
    for (const c10::Storage& storage : *table.storages) record_on(storage, s);
  if (table.streams.size() == kStreamsKept) table.streams.erase(table.streams.begin());
  table.streams.push_back(s);
}

// CUDA graphs: a captured launch replays the table's raw pointers and runs no host code, so the
// memory it points into must live as long as the graph. A captured run hands the graph a user
// object holding references to that memory (the rows' storages, the device table, the counters):
// CUDA destroys it with the graph, however long the plan lives or however often it is rebuilt.
// The destructor may not call CUDA (dropping a storage may record events), so it only queues the
// references; the next plan run lets go of them (release_graph_memory).
struct GraphMemory {
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::vector<c10::Storage>*>& released() {
    static std::vector<std::vector<c10::Storage>*> r;
    return r;
  }
  static void CUDART_CB on_destroy(void* kept) {
    const std::lock_guard<std::mutex> lock(mutex());
    released().push_back(static_cast<std::vector<c10::Storage>*>(kept));
  }
};

inline void release_graph_memory() {
  std::vector<std::vector<c10::Storage>*> done;
  {
    const std::lock_guard<std::mutex> lock(GraphMemory::mutex());
    done.swap(GraphMemory::released());
  }
  for (std::vector<c10::Storage>* kept : done) delete kept;
}

// During a capture on `stream`: the graph being captured keeps `table`'s memory and `extra` alive.
inline void keep_for_graph(cudaStream_t stream, const Table& table, const std::vector<c10::Storage>& extra) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  C10_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id, &graph));
  auto* kept = new std::vector<c10::Storage>(extra);
  kept->push_back(table.device.storage());
  if (table.storages) kept->insert(kept->end(), table.storages->begin(), table.storages->end());
  cudaUserObject_t object;
  C10_CUDA_CHECK(cudaUserObjectCreate(&object, kept, &GraphMemory::on_destroy, 1, cudaUserObjectNoDestructorSync));
  C10_CUDA_CHECK(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
}

}  // namespace minimm
