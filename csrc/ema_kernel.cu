// The CUDA kernels of the EMA ops: one launch per kind of pair present, whatever the number of
// tensors (multi_tensor_apply.cuh), then for a plan step a one-thread launch that increments the
// counter.
//
// There is one kernel per (EMA dtype, source dtype) pair, 16 of them, and one for byte copies
// (integer pairs, same-dtype mirrored buffers). Each reads the step counter itself (copy on call
// 0, average every interval-th call, skip the others; the annealed or SWA weight from the counter)
// and walks its segment of the table. The increment runs last, on the same stream, so every
// launch of the step has read the counter before it changes: a step never waits for the GPU and
// can be captured in a CUDA graph, and two steps in flight share no completion counter.
// Arithmetic uses the __*_rn intrinsics, which nvcc never contracts into fused multiply-adds, so
// results equal the CPU kernels' bit for bit for finite values (a NaN may come out with another
// payload: the device's half and bfloat16 conversions encode NaN differently from c10's host ones).
//
// tests/cuda_emu runs this text on an emulated device in CI; tests/gpu_check.sh on a GPU.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "checks.h"
#include "ema.h"
#include "kernel_kinds.cuh"
#include "multi_tensor_apply.cuh"

namespace minimm {
namespace {

__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }

// One element: the copy (through the accumulate type) or `ema + w * (src - ema)`, three roundings.
template <typename E, typename S>
__device__ inline E update(E e, S s, acc_t<E> w, bool copy) {
  using A = acc_t<E>;
  const A sv = static_cast<A>(s);
  if (copy) return static_cast<E>(sv);
  const A a = static_cast<A>(e);
  return static_cast<E>(add_rn(a, mul_rn(w, sub_rn(sv, a))));
}

// One chunk of a floating pair: all loads of the thread's vectors, then the math, then the stores;
// the rest (a misaligned chunk, a tail) element by element, four of each side in flight (two for
// double/double).
// A pair of two 16-bit dtypes holds 8 elements per vector and side; four vectors of each in flight
// (64 values to convert) would exceed 64 registers, so such a pair keeps two in flight and takes
// two rounds per chunk.
template <typename E, typename S>
__device__ inline void pair_chunk(const Row& row, const Chunk& chunk, acc_t<E> w, bool copy) {
  constexpr int N = vector_width<E, S>();
  constexpr int V = sizeof(E) == 2 && sizeof(S) == 2 ? kVectorsPerThread / 2 : kVectorsPerThread;
  E* __restrict__ ema = static_cast<E*>(row.dst) + chunk.first;
  const S* __restrict__ src = static_cast<const S*>(row.src) + chunk.first;
  const int n = chunk.n;
  int scalar_from = 0;
  if (vector_aligned<E, N>(ema) && vector_aligned<S, N>(src)) {
    const int vectors = n / N;
    for (int base = threadIdx.x; base < vectors; base += kThreads * V) {
      Vec<E, N> ev[V];
      Vec<S, N> sv[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int v = base + k * kThreads;
        if (v < vectors) {
          if (!copy) ev[k] = reinterpret_cast<const Vec<E, N>*>(ema)[v];
          sv[k] = reinterpret_cast<const Vec<S, N>*>(src)[v];
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int v = base + k * kThreads;
        if (v < vectors) {
#pragma unroll
          for (int j = 0; j < N; ++j) ev[k].x[j] = update(ev[k].x[j], sv[k].x[j], w, copy);
          reinterpret_cast<Vec<E, N>*>(ema)[v] = ev[k];
        }
      }
    }
    scalar_from = vectors * N;
  }
  // Two in flight for double/double: four made that kernel spill (16 bytes, tests/compile_cuda.sh).
  constexpr int U = sizeof(E) == 8 && sizeof(S) == 8 ? 2 : kVectorsPerThread;
  elementwise<U>(ema, src, scalar_from, n, !copy, [=](E e, S s) { return update(e, s, w, copy); });
}

template <int I>
using Float = std::tuple_element_t<I, std::tuple<float, double, at::Half, at::BFloat16>>;

// What a launch needs besides its segment: the table, and per target the rule and the counter
// (null for a list call, whose one rule is kFixed).
struct Launch {
  const unsigned char* table;
  int32_t rows;
  int32_t targets;
  WeightSource rules[kMaxTargets];
  int64_t* steps[kMaxTargets];
};

// Thread 0 decides each target's action and weight from its counter; every thread reads them.
__device__ inline void read_step(const Launch& l, int* action, double* weight) {
  if (threadIdx.x == 0) {
    for (int k = 0; k < l.targets; ++k) {
      const int64_t count = l.steps[k] ? *l.steps[k] : 0;
      action[k] = step_action(l.rules[k], count);
      weight[k] = action[k] == kAverage ? step_weight(l.rules[k], count) : 0.0;
    }
  }
  __syncthreads();
}

// Launch kinds: 4 * e + s for the floating pair (e, s: 0 float, 1 double, 2 half, 3 bfloat16),
// whether averaged or cast, and kBytes for byte rows.
constexpr int32_t kBytes = 16, kKinds = 17;

// The rows of one kind. A floating pair's rows are averaged (Mode kDecide) or cast-copied
// (kCopyAlways); byte rows are integer pairs (copied unless the call skips) or same-dtype mirrored
// pairs (always copied). With several targets, unit u is chunk u / targets for target
// u % targets: the copies of one source chunk go to neighbouring blocks, which run at about the
// same time, so the chunk is read from memory once and from L2 by the others; the loop body
// stays that of one pair (a loop over the targets inside it made the 16-bit pairs spill).
template <int K>
__global__ void __launch_bounds__(kThreads, kMinBlocks) ema_kernel(Launch l, int64_t first, int64_t count) {
  __shared__ int action[kMaxTargets];
  __shared__ double weight[kMaxTargets];
  read_step(l, action, weight);
  const Row* row_of = table_rows(l.table);
  const Chunk* chunk_of = table_chunks(l.table, l.rows) + first;
  for (int64_t u = blockIdx.x; u < count * l.targets; u += gridDim.x) {
    const int k = static_cast<int>(u % l.targets);
    const Chunk chunk = chunk_of[u / l.targets];
    const Row row = row_of[chunk.row + k];
    if constexpr (K == kBytes) {
      if (row.mode == kCopyAlways || action[k] != kSkip)
        copy_bytes(static_cast<char*>(row.dst) + chunk.first, static_cast<const char*>(row.src) + chunk.first,
                   chunk.n);
    } else {
      using E = Float<K / 4>;
      const bool copy = row.mode == kCopyAlways || action[k] == kCopy;
      if (!copy && action[k] == kSkip) continue;
      pair_chunk<E, Float<K % 4>>(row, chunk, copy ? acc_t<E>(0) : static_cast<acc_t<E>>(weight[k]), copy);
    }
  }
}

// After every launch of a step: each target's counter + 1.
__global__ void increment_kernel(Launch l) {
  for (int k = 0; k < l.targets; ++k) *l.steps[k] += 1;
}

inline int32_t kind_of(const Row& row) {
  if (row.kernel == kByteCopy) return kBytes;
  return row.kernel >= kCast0 ? row.kernel - kCast0 : row.kernel - kAverage0;
}

// The EMA kernel of kind k (kernel_kinds.cuh), and its launch over segment `s`.
const auto ema_kernel_of = [](auto k) { return &ema_kernel<decltype(k)::value>; };

void launch_kind(int32_t kind, const Launch& l, const Segment& s, cudaStream_t stream) {
  with_kind<kKinds>(kind, [&](auto k) {
    MINIMM_LAUNCH(ema_kernel<decltype(k)::value>, s.blocks, kThreads, stream, l, s.first, s.count);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void prepare(Table& table, const at::Device& device, const char* capture_error) {
  group_by_kind(table, kKinds, kind_of);
  upload(table, device, capture_error, grids_of<kKinds>(ema_kernel_of));
}

constexpr const char* kListCaptureError =
    "ema_update_ cannot be captured in a CUDA graph: every call copies its table of tensors to "
    "the GPU. Capture the step of an EMAPlan (minimm.ops.EMAPlan) instead, which uploads its "
    "table once";

// `rules` and `steps` hold one entry per target; `steps` null for a list call (no counter).
void launch(const Table& table, const WeightSource* rules, int64_t* const* steps, cudaStream_t stream) {
  Launch l{table.device.const_data_ptr<unsigned char>(), static_cast<int32_t>(table.rows.size()), table.targets,
           {}, {}};
  for (int k = 0; k < table.targets; ++k) {
    l.rules[k] = rules[k];
    l.steps[k] = steps ? steps[k] : nullptr;
  }
  for (const Segment& segment : table.segments) launch_kind(segment.kind, l, segment, stream);
  if (steps) {
    MINIMM_LAUNCH(increment_kernel, 1, 1, stream, l);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

void ema_update_cuda(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                     double weight) {
  if (ema.empty() && src.empty()) return;
  const at::Device device = (ema.empty() ? src : ema)[0].device();
  const c10::cuda::CUDAGuard guard(device);
  refuse_capture(kListCaptureError);
  check_pairs("ema_update_", ema, src, device, /*require_dense=*/false);
  check_no_overlap("ema_update_", ema, src);
  at::Tensor device_weight;  // kept alive until the kernel is queued
  if (weight_tensor.has_value()) {
    const at::Tensor& w = *weight_tensor;
    TORCH_CHECK_VALUE(w.numel() == 1 && w.is_floating_point(), "ema_update_: the weight tensor must hold one "
                      "floating value, got ", w.scalar_type(), " with ", w.numel(), " elements");
    TORCH_CHECK_VALUE(w.is_cpu() || w.device() == device, "ema_update_: the weight is on ", w.device(),
                      " but the tensors on ", device);
    if (w.is_cpu()) weight = w.item<double>();
    else device_weight = w.to(at::kDouble);
  }
  const Staged staged = stage(ema, src);
  Table table;
  add_rows(table, staged.dst, staged.src, /*mirrored=*/false);
  if (table.chunks.empty()) return;
  prepare(table, device, kListCaptureError);
  const WeightSource w{kFixed, weight, 0.0, 1, device_weight.defined() ? device_weight.const_data_ptr<double>() : nullptr};
  launch(table, &w, nullptr, c10::cuda::getCurrentCUDAStream());
  staged.finish(ema);
}

// CUDA graphs: a captured step replays the device table's pointers and runs no host code, so it
// cannot notice a tensor that moved since. The graph keeps what a captured step points into alive
// (keep_for_graph, multi_tensor_apply.cuh): the tensors' storages, the device table and the
// counters; a rebuild after a capture warns that the graph must be captured again (EMAPlan::rebuild).
void plan_step_cuda(EMAPlan& plan, const std::vector<at::Tensor>& steps) {
  release_graph_memory();
  const c10::cuda::CUDAGuard guard(plan.device);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream();
  if (!plan.table.device.defined())
    prepare(plan.table, plan.device, "EMAPlan.step: the first step (and the first after a tensor moved) copies the "
            "plan's table to the GPU and cannot be captured in a CUDA graph; run one step before capturing");
  use_on(plan.table, stream);
  if (stream_is_capturing(stream)) {
    std::vector<c10::Storage> counters;
    for (const at::Tensor& counter : steps) counters.push_back(counter.storage());
    keep_for_graph(stream, plan.table, counters);
    plan.captured = plan.table_captured = true;
  }
  int64_t* counters[kMaxTargets];
  for (size_t k = 0; k < steps.size(); ++k) counters[k] = steps[k].data_ptr<int64_t>();
  launch(plan.table, plan.rules.data(), counters, stream);
}

const bool registered = (cuda_plan_step = &plan_step_cuda, true);

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) { m.impl("ema_update_", &minimm::ema_update_cuda); }
