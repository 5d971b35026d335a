// The CUDA kernel of the EMA ops: one launch per call, whatever the number of tensors.
//
// CI compiles this file (tests/compile_cuda.sh); tests/gpu_check.sh is what runs it on a GPU.
//
// One kernel does all of a plan step: it reads the step counter (copy on call 0, average every
// interval-th call, skip the others; the annealed or SWA weight from the counter), walks the
// table's chunks (multi_tensor_apply.cuh) switching on each row's kernel number, averaging
// floating pairs, copying integer pairs and mirrored buffers, and the last block to finish
// increments the counter. So a step is one launch, never waits for the GPU, and can be captured
// in a CUDA graph. Arithmetic uses the __*_rn intrinsics, which nvcc never contracts into fused
// multiply-adds, so results equal the CPU kernels' bit for bit.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "checks.h"
#include "ema.h"
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

// One chunk of a floating pair: all loads of the thread's vectors, then the math, then the stores.
template <typename E, typename S>
__device__ inline void pair_chunk(const Row& row, const Chunk& chunk, acc_t<E> w, bool copy) {
  constexpr int N = vector_width<E, S>();
  E* __restrict__ ema = static_cast<E*>(row.dst) + chunk.first;
  const S* __restrict__ src = static_cast<const S*>(row.src) + chunk.first;
  const int n = chunk.n;
  int scalar_from = 0;
  if (vector_aligned<E, N>(ema) && vector_aligned<S, N>(src)) {
    const int vectors = n / N;
    for (int base = threadIdx.x; base < vectors; base += kThreads * kVectorsPerThread) {
      Vec<E, N> ev[kVectorsPerThread];
      Vec<S, N> sv[kVectorsPerThread];
#pragma unroll
      for (int k = 0; k < kVectorsPerThread; ++k) {
        const int v = base + k * kThreads;
        if (v < vectors) {
          if (!copy) ev[k] = reinterpret_cast<const Vec<E, N>*>(ema)[v];
          sv[k] = reinterpret_cast<const Vec<S, N>*>(src)[v];
        }
      }
#pragma unroll
      for (int k = 0; k < kVectorsPerThread; ++k) {
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
  for (int j = scalar_from + threadIdx.x; j < n; j += kThreads) ema[j] = update(ema[j], src[j], w, copy);
}

template <int I>
using Float = std::tuple_element_t<I, std::tuple<float, double, at::Half, at::BFloat16>>;

// Row.kernel numbers (ema.h): 0-15 average, 16-31 cast, 32 byte copy; `action` is the call's.
template <int K = 0>
__device__ inline void run_chunk(int kernel, const Row& row, const Chunk& chunk, int action, double weight) {
  if constexpr (K <= kByteCopy) {
    if (kernel != K) return run_chunk<K + 1>(kernel, row, chunk, action, weight);
    if constexpr (K == kByteCopy) {
      if (row.mode == kCopyAlways || action != kSkip)
        copy_bytes(static_cast<char*>(row.dst) + chunk.first, static_cast<const char*>(row.src) + chunk.first,
                   chunk.n);
    } else {
      using E = Float<(K % 16) / 4>;
      using S = Float<K % 4>;
      const bool copy = K >= kCast0 || action == kCopy;
      if (K < kCast0 && action == kSkip) return;
      pair_chunk<E, S>(row, chunk, copy ? acc_t<E>(0) : static_cast<acc_t<E>>(weight), copy);
    }
  }
}

// `steps` null: a list call (the rule is kFixed, nothing to count).
__global__ void __launch_bounds__(kThreads)
    ema_kernel(unsigned char* __restrict__ table, int32_t rows, int64_t chunks, WeightSource w, int64_t* steps) {
  __shared__ int action;
  __shared__ double weight;
  if (threadIdx.x == 0) {
    const int64_t count = steps ? *steps : 0;
    action = step_action(w, count);
    weight = action == kAverage ? step_weight(w, count) : 0.0;
  }
  __syncthreads();
  const Row* row_of = table_rows(table);
  const Chunk* chunk_of = table_chunks(table, rows);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const Chunk chunk = chunk_of[c];
    const Row row = row_of[chunk.row];
    // Mirrored floating pairs of different dtypes carry a cast kernel and are always copied.
    run_chunk(row.kernel, row, chunk, row.mode == kCopyAlways ? kCopy : action, weight);
  }
  if (steps) last_block_increments(table, steps);
}

void launch(Table& table, const WeightSource& w, int64_t* steps, cudaStream_t stream) {
  ema_kernel<<<grid_for(table), kThreads, 0, stream>>>(table.device.data_ptr<unsigned char>(),
                                                       static_cast<int32_t>(table.rows.size()),
                                                       static_cast<int64_t>(table.chunks.size()), w, steps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void ema_update_cuda(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                     double weight) {
  if (ema.empty() && src.empty()) return;
  const at::Device device = (ema.empty() ? src : ema)[0].device();
  check_pairs("ema_update_", ema, src, device, /*require_dense=*/false);
  check_no_overlap("ema_update_", ema);
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
  const c10::cuda::CUDAGuard guard(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const Staged staged = stage(ema, src);
  Table table;
  add_rows(table, staged.dst, staged.src, /*mirrored=*/false);
  upload(table, device, stream_is_capturing(stream), "ema_update_");
  const WeightSource w{kFixed, weight, 0.0, 1, device_weight.defined() ? device_weight.const_data_ptr<double>() : nullptr};
  launch(table, w, nullptr, stream);
  staged.finish(ema);
}

// CUDA graphs: a captured step replays the device table's pointers and runs no host code, so it
// cannot notice a tensor that moved since. The first capture of a table keeps every storage it
// points into alive in the plan (once per table, not per capture), and the counter's; a rebuild
// after a capture warns that the graph must be captured again (EMAPlan::rebuild).
void plan_step_cuda(EMAPlan& plan, const at::Tensor& steps) {
  const c10::cuda::CUDAGuard guard(plan.device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const bool capturing = stream_is_capturing(stream);
  if (!plan.table.device.defined()) upload(plan.table, plan.device, capturing, "EMAPlan.step");
  if (capturing) {
    if (!plan.table_captured) {
      plan.captured_storages.insert(plan.captured_storages.end(), plan.table_storages.begin(),
                                    plan.table_storages.end());
      plan.captured_storages.push_back(plan.table.device.storage());
      plan.table_captured = true;
    }
    plan.keep_alive(steps.storage());
  }
  launch(plan.table, plan.rule, steps.data_ptr<int64_t>(), stream);
}

const bool registered = (cuda_plan_step = &plan_step_cuda, true);

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) { m.impl("ema_update_", &minimm::ema_update_cuda); }
