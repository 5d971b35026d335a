// CUDA kernels of minimm's ops, built only when the extension is compiled with CUDA.
//
// CI compiles this file (tests/compile_cuda.sh); tests/gpu_check.sh is what runs it on a GPU.
//
// Every kernel is one multi-tensor apply (multi_tensor_apply.cuh): one launch covers up to 160
// tensors, each thread moving one 16-byte vector at a time (8 halves, 4 floats, 2 doubles; for a
// mixed pair, 16 bytes of the wider side), with a scalar path for a tensor's last partial vector
// and for tensors whose start is not 16-byte aligned.
//
// Everything runs on the current stream. The plans cache their launch tables, so a plan step is a
// few launches; the step counter, the copy/average/skip decision and the annealed weight are read
// by the kernels from device memory, so a step never synchronises with the host and can be
// captured in a CUDA graph (see ema_plan_step_cuda for what a replay cannot see). Arithmetic uses
// the __*_rn intrinsics, which nvcc never contracts into fused multiply-adds, so results match
// the PyTorch twins bit for bit.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "minimm_ops.h"
#include "multi_tensor_apply.cuh"

namespace minimm {
namespace {

// How a kernel uses the WeightSource: decide from the step counter, copy unless this call is
// skipped (integer pairs of an averaged model), or always copy (mirrored pairs, packing).
enum Mode : int { kDecide = 0, kCopyUnlessSkipped = 1, kCopyAlways = 2 };

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

template <typename E, typename S>
__global__ void __launch_bounds__(kThreads) average_kernel(LaunchTable t, WeightSource w, int mode, double) {
  constexpr int N = vector_width<E, S>();
  const int action = mode == kCopyAlways ? kCopy : step_action(w);
  if (action == kSkip) return;
  const bool copy = action == kCopy;
  const acc_t<E> weight = copy ? acc_t<E>(0) : static_cast<acc_t<E>>(step_weight(w));
  for_each_vector<N>(t, [&](int i, int64_t first, int64_t n) {
    E* ema = static_cast<E*>(t.dst[i]) + first;
    const S* src = static_cast<const S*>(t.src[i]) + first;
    // `first` is a multiple of N: the vector is aligned whenever the tensors' starts are.
    if (n == N && vector_aligned<E, N>(t.dst[i]) && vector_aligned<S, N>(t.src[i])) {
      Vec<E, N> ev = *reinterpret_cast<const Vec<E, N>*>(ema);
      const Vec<S, N> sv = *reinterpret_cast<const Vec<S, N>*>(src);
#pragma unroll
      for (int j = 0; j < N; ++j) ev.x[j] = update(ev.x[j], sv.x[j], weight, copy);
      *reinterpret_cast<Vec<E, N>*>(ema) = ev;
    } else {
      for (int64_t j = 0; j < n; ++j) ema[j] = update(ema[j], src[j], weight, copy);
    }
  });
}

// Same-dtype copies move bytes, 16 at a time when both sides are 16-byte aligned.
__global__ void __launch_bounds__(kThreads) copy_kernel(LaunchTable t, WeightSource w, int mode, double) {
  if (mode == kCopyUnlessSkipped && step_action(w) == kSkip) return;
  constexpr int N = static_cast<int>(kAlignBytes);
  for_each_vector<N>(t, [&](int i, int64_t first, int64_t n) {
    char* dst = static_cast<char*>(t.dst[i]) + first;
    const char* src = static_cast<const char*>(t.src[i]) + first;
    if (n == N && vector_aligned<char, N>(t.dst[i]) && vector_aligned<char, N>(t.src[i])) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
    }
  });
}

template <typename T>
__device__ inline T scaled(T v, double scale) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(nearbyint(__dmul_rn(static_cast<double>(v), scale)));  // ties to even
  } else {
    using A = acc_t<T>;
    return static_cast<T>(mul_rn(static_cast<A>(v), static_cast<A>(scale)));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) scale_kernel(LaunchTable t, WeightSource, int, double scale) {
  constexpr int N = vector_width<T, T>();
  for_each_vector<N>(t, [&](int i, int64_t first, int64_t n) {
    T* dst = static_cast<T*>(t.dst[i]) + first;
    const T* src = static_cast<const T*>(t.src[i]) + first;
    if (n == N && vector_aligned<T, N>(t.dst[i]) && vector_aligned<T, N>(t.src[i])) {
      Vec<T, N> v = *reinterpret_cast<const Vec<T, N>*>(src);
#pragma unroll
      for (int j = 0; j < N; ++j) v.x[j] = scaled(v.x[j], scale);
      *reinterpret_cast<Vec<T, N>*>(dst) = v;
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = scaled(src[j], scale);
    }
  });
}

__global__ void increment_kernel(int64_t* steps) { *steps += 1; }

// The averaging kernel of a floating (E, S) pair, and its vector width.
std::pair<KernelFn, int> floating_kernel(at::ScalarType e, at::ScalarType s) {
  std::pair<KernelFn, int> chosen{nullptr, 1};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, e, "minimm_pair", [&] {
    using E = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, s, "minimm_pair",
                                    [&] { chosen = {&average_kernel<E, scalar_t>, vector_width<E, scalar_t>()}; });
  });
  return chosen;
}

Row byte_row(void* dst, const void* src, const at::Tensor& t, int mode) {
  return {dst, src, t.numel() * static_cast<int64_t>(t.element_size()), &copy_kernel, mode,
          static_cast<int>(kAlignBytes)};
}

// Averaged pairs: floating ones decide copy/average/skip from the counter, the others are copied
// unless the call is skipped. Mirrored pairs are always copied.
void add_pairs(std::vector<Row>& rows, at::TensorList dst, at::TensorList src, bool mirrored) {
  for (size_t i = 0; i < dst.size(); ++i) {
    const at::Tensor& d = dst[i];
    const at::Tensor& s = src[i];
    if (d.is_floating_point() && (!mirrored || d.scalar_type() != s.scalar_type())) {
      const auto [kernel, width] = floating_kernel(d.scalar_type(), s.scalar_type());
      rows.push_back({d.data_ptr(), s.const_data_ptr(), d.numel(), kernel, mirrored ? kCopyAlways : kDecide, width});
    } else {
      rows.push_back(byte_row(d.data_ptr(), s.const_data_ptr(), d, mirrored ? kCopyAlways : kCopyUnlessSkipped));
    }
  }
}

// Each tensor with its slice of the flat tensors; `to_flat` decides the direction.
std::vector<Row> flat_rows(at::TensorList flats, at::TensorList tensors, const PackLayout& layout, bool to_flat,
                           double scale) {
  std::vector<Row> rows;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& flat = flats[layout.group_of[i]];
    char* slice = static_cast<char*>(flat.data_ptr()) + layout.offset_of[i] * flat.element_size();
    char* tensor = static_cast<char*>(tensors[i].data_ptr());
    if (to_flat || scale == 1.0) {
      rows.push_back(to_flat ? byte_row(slice, tensor, tensors[i], kCopyAlways)
                             : byte_row(tensor, slice, tensors[i], kCopyAlways));
      continue;
    }
    const at::ScalarType type = tensors[i].scalar_type();
    TORCH_CHECK_VALUE(type != at::kBool, "unpack_: bool tensors cannot be scaled (scale=", scale, ")");
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "unpack_", [&] {
      rows.push_back({tensor, slice, tensors[i].numel(), &scale_kernel<scalar_t>, kCopyAlways,
                      vector_width<scalar_t, scalar_t>()});
    });
  }
  return rows;
}

WeightSource fixed_weight(double weight, const double* device_weight) {
  return {kFixed, weight, 0.0, 1, nullptr, device_weight};
}

// The dispatcher sends a call here when any tensor argument is on a GPU; the first one decides the
// device, and a call mixing devices is an error before anything runs on it.
void check_on_gpu(const char* op, const at::Device& device) {
  TORCH_CHECK_VALUE(device.is_cuda(), op, ": tensor 0 is on ", device, " but another tensor argument is on a GPU; "
                    "all tensors of one call must share a device");
}

// ---- the ops ----------------------------------------------------------------------------

void ema_update_cuda(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                     double weight) {
  if (ema.empty() && src.empty()) return;
  const at::Device device = (ema.empty() ? src : ema)[0].device();
  check_on_gpu("ema_update_", device);
  check_pairs("ema_update_", ema, src, device, /*require_dense=*/false);
  at::Tensor device_weight;  // kept alive until the kernels are queued
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
  const Staged staged = stage(ema, src);
  std::vector<Row> rows;
  add_pairs(rows, staged.dst, staged.src, /*mirrored=*/false);
  run_launches(build_launches(rows),
               fixed_weight(weight, device_weight.defined() ? device_weight.const_data_ptr<double>() : nullptr), 1.0);
  staged.finish(ema);
}

// CUDA graphs: a step captured in a graph replays this launch table's raw pointers; a replay runs
// no host code, so it cannot notice a tensor that moved since. The capture keeps the storages it
// wrote alive (a replay never writes freed memory), and the first step outside a graph that finds
// the table stale after a capture raises, so that the graph is captured again.
void ema_plan_step_cuda(const c10::intrusive_ptr<EMAPlan>& plan, at::TensorList, at::TensorList, at::Tensor steps) {
  check_on_gpu("ema_plan_step", steps.device());
  TORCH_CHECK_VALUE(steps.numel() == 1 && steps.scalar_type() == at::kLong, "ema_plan_step: steps must be a "
                    "one-element int64 tensor, got ", steps.scalar_type(), " with ", steps.numel(), " elements");
  TORCH_CHECK_VALUE(plan->watched.empty() || plan->device == steps.device(), "ema_plan_step: the plan's tensors "
                    "are on ", plan->device, " but steps is on ", steps.device());
  const c10::cuda::CUDAGuard guard(steps.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  if (plan->stale(c10::DeviceType::CUDA)) {
    if (plan->captured && !capturing) {
      plan->captured = false;  // raise once; the next step rebuilds the table
      TORCH_CHECK(false, "EMAPlan: a tensor of this plan moved (param.data = ..., .to(), ...) after a step was "
                  "captured in a CUDA graph, and a replay of that graph keeps updating the old memory; capture "
                  "the graph again (this step did nothing)");
    }
    plan->check();
    std::vector<Row> rows;
    add_pairs(rows, plan->ema, plan->src, /*mirrored=*/false);
    add_pairs(rows, plan->mirror_ema, plan->mirror_src, /*mirrored=*/true);
    plan->table = std::make_shared<std::vector<Launch>>(build_launches(rows));
    plan->remember(c10::DeviceType::CUDA);
  }
  if (capturing) {
    plan->captured = true;
    for (const at::Tensor& t : plan->watched) plan->captured_storages.push_back(t.storage());
  }
  int64_t* counter = steps.data_ptr<int64_t>();
  WeightSource rule = plan->rule;
  rule.steps = counter;
  run_launches(*static_cast<const std::vector<Launch>*>(plan->table.get()), rule, 1.0);
  increment_kernel<<<1, 1, 0, stream>>>(counter);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::vector<at::Tensor> pack_cuda(at::TensorList tensors) {
  const at::Device device = tensors[0].device();
  check_on_gpu("pack", device);
  check_list("pack", tensors, device, /*require_contiguous=*/false);
  const c10::cuda::CUDAGuard guard(device);
  const Staged staged = stage(tensors, {});
  const PackLayout layout = pack_layout(tensors);
  std::vector<at::Tensor> flats;
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::zeros({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g]).device(device)));
  run_launches(build_launches(flat_rows(flats, staged.dst, layout, /*to_flat=*/true, 1.0)), fixed_weight(0, nullptr),
               1.0);
  return flats;
}

void unpack_cuda(at::TensorList flats, at::TensorList tensors, double scale) {
  const at::Device device = (tensors.empty() ? flats : tensors)[0].device();
  check_on_gpu("unpack_", device);
  check_list("unpack_", tensors, device, /*require_contiguous=*/false);
  const PackLayout layout = pack_layout(tensors);
  check_flats("unpack_", flats, layout, device);
  const c10::cuda::CUDAGuard guard(device);
  const Staged staged = stage(tensors, {});
  run_launches(build_launches(flat_rows(flats, staged.dst, layout, /*to_flat=*/false, scale)),
               fixed_weight(0, nullptr), scale);
  staged.finish(tensors);
}

void pack_plan_run_cuda(const c10::intrusive_ptr<PackPlan>& plan, at::TensorList, at::TensorList, bool unpack,
                        double scale) {
  const c10::cuda::CUDAGuard guard(plan->device);
  run_pack_plan<std::vector<Launch>>(
      *plan, c10::DeviceType::CUDA, unpack, scale,
      [&](bool to_flat, double s) {
        return build_launches(flat_rows(plan->flats, plan->tensors, plan->layout, to_flat, s));
      },
      [](const std::vector<Launch>& launches, double s) { run_launches(launches, fixed_weight(0, nullptr), s); });
}

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) {
  minimm::impl_ops(m, &minimm::ema_update_cuda, &minimm::ema_plan_step_cuda, &minimm::pack_cuda, &minimm::unpack_cuda,
                   &minimm::pack_plan_run_cuda);
}
