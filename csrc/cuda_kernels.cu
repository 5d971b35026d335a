// CUDA kernels of minimm's ops, built only when the extension is compiled with CUDA.
//
// multi-tensor apply: instead of one kernel per tensor, the host cuts every tensor into chunks of
// kChunk elements and fills a table of tensor pointers plus a block -> (tensor, chunk) map; the
// table travels in the kernel's arguments (no host-to-device copy), and a kernel is launched
// whenever the table's tensor or block slots fill. So 2,000 tensors cost a handful of launches.
// Everything runs on the current stream. The plans cache their launch tables, so a plan step
// is a few launches; the step counter, the copy/average/skip decision and the annealed weight are
// read by the kernels from device memory, so a step never synchronises with the host and can be
// captured in a CUDA graph. Arithmetic uses the __*_rn intrinsics, which nvcc never contracts into
// fused multiply-adds, so results match the PyTorch twins bit for bit.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "minimm_ops.h"

namespace minimm {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kChunk = 65536;  // units (elements, or bytes for byte copies) per block
constexpr int kMaxTensors = 36;    // keeps the table under the classic 4 KB argument limit
constexpr int kMaxBlocks = 320;
constexpr int kVec = 4;            // elements per vectorised load

// How a kernel uses the WeightSource: decide from the step counter, copy unless this call is
// skipped (integer pairs of an averaged model), or always copy (mirrored pairs, packing).
enum Mode : int { kDecide = 0, kCopyUnlessSkipped = 1, kCopyAlways = 2 };

struct ChunkTable {
  void* dst[kMaxTensors];
  const void* src[kMaxTensors];
  int64_t units[kMaxTensors];
  unsigned char tensor_of_block[kMaxBlocks];
  int chunk_of_block[kMaxBlocks];
};

struct BlockWork {
  int tensor;
  int64_t start, n;
};

__device__ inline BlockWork block_work(const ChunkTable& t) {
  const int i = t.tensor_of_block[blockIdx.x];
  const int64_t start = static_cast<int64_t>(t.chunk_of_block[blockIdx.x]) * kChunk;
  const int64_t left = t.units[i] - start;
  return {i, start, left < kChunk ? left : kChunk};
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T x[N];
};

template <typename T>
__device__ inline bool aligned_to(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVec) == 0;
}

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
__global__ void average_kernel(ChunkTable t, WeightSource w, int mode, double) {
  const int action = mode == kCopyAlways ? kCopy : step_action(w);
  if (action == kSkip) return;
  const bool copy = action == kCopy;
  const acc_t<E> weight = copy ? acc_t<E>(0) : static_cast<acc_t<E>>(step_weight(w));
  const BlockWork b = block_work(t);
  E* ema = static_cast<E*>(t.dst[b.tensor]) + b.start;
  const S* src = static_cast<const S*>(t.src[b.tensor]) + b.start;
  int64_t done = 0;
  if (aligned_to<E>(ema) && aligned_to<S>(src)) {
    const int64_t vectors = b.n / kVec;
    for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
      Vec<E, kVec> ev = reinterpret_cast<Vec<E, kVec>*>(ema)[v];
      const Vec<S, kVec> sv = reinterpret_cast<const Vec<S, kVec>*>(src)[v];
#pragma unroll
      for (int j = 0; j < kVec; ++j) ev.x[j] = update(ev.x[j], sv.x[j], weight, copy);
      reinterpret_cast<Vec<E, kVec>*>(ema)[v] = ev;
    }
    done = vectors * kVec;
  }
  for (int64_t k = done + threadIdx.x; k < b.n; k += blockDim.x) ema[k] = update(ema[k], src[k], weight, copy);
}

template <typename U>
__device__ inline void copy_units(char* dst, const char* src, int64_t bytes) {
  const int64_t units = bytes / static_cast<int64_t>(sizeof(U));
  for (int64_t k = threadIdx.x; k < units; k += blockDim.x)
    reinterpret_cast<U*>(dst)[k] = reinterpret_cast<const U*>(src)[k];
  for (int64_t k = units * sizeof(U) + threadIdx.x; k < bytes; k += blockDim.x) dst[k] = src[k];
}

// Same-dtype copies move bytes: 16 at a time when both sides allow it.
__global__ void copy_kernel(ChunkTable t, WeightSource w, int mode, double) {
  if (mode == kCopyUnlessSkipped && step_action(w) == kSkip) return;
  const BlockWork b = block_work(t);
  char* dst = static_cast<char*>(t.dst[b.tensor]) + b.start;
  const char* src = static_cast<const char*>(t.src[b.tensor]) + b.start;
  const uintptr_t both = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  if (both % 16 == 0) copy_units<uint4>(dst, src, b.n);
  else if (both % 4 == 0) copy_units<uint32_t>(dst, src, b.n);
  else copy_units<unsigned char>(dst, src, b.n);
}

template <typename T>
__global__ void scale_kernel(ChunkTable t, WeightSource, int, double scale) {
  const BlockWork b = block_work(t);
  T* dst = static_cast<T*>(t.dst[b.tensor]) + b.start;
  const T* src = static_cast<const T*>(t.src[b.tensor]) + b.start;
  for (int64_t k = threadIdx.x; k < b.n; k += blockDim.x) {
    if constexpr (std::is_integral_v<T>) {
      dst[k] = static_cast<T>(nearbyint(__dmul_rn(static_cast<double>(src[k]), scale)));  // ties to even
    } else {
      using A = acc_t<T>;
      dst[k] = static_cast<T>(mul_rn(static_cast<A>(src[k]), static_cast<A>(scale)));
    }
  }
}

__global__ void increment_kernel(int64_t* steps) { *steps += 1; }

// ---- building and running launch tables --------------------------------------------------

using KernelFn = void (*)(ChunkTable, WeightSource, int, double);

struct Row {
  void* dst;
  const void* src;
  int64_t units;
  KernelFn kernel;
  int mode;
};

struct Launch {
  KernelFn kernel;
  int mode;
  int blocks;
  ChunkTable table;
};

// Rows sharing a kernel and mode go into the same tables, in first-seen order.
std::vector<Launch> build_launches(const std::vector<Row>& rows) {
  std::vector<std::pair<KernelFn, int>> keys;
  for (const Row& r : rows)
    if (std::find(keys.begin(), keys.end(), std::make_pair(r.kernel, r.mode)) == keys.end())
      keys.emplace_back(r.kernel, r.mode);
  std::vector<Launch> launches;
  for (const auto& key : keys) {
    Launch cur{key.first, key.second, 0, {}};
    int tensors = 0;
    auto place = [&](const Row& r) {
      cur.table.dst[tensors] = r.dst;
      cur.table.src[tensors] = r.src;
      cur.table.units[tensors] = r.units;
      return tensors++;
    };
    auto flush = [&] {
      if (cur.blocks > 0) launches.push_back(cur);
      cur.blocks = 0;
      tensors = 0;
    };
    for (const Row& r : rows) {
      if (r.kernel != key.first || r.mode != key.second || r.units == 0) continue;
      if (tensors == kMaxTensors) flush();
      int slot = place(r);
      const int64_t chunks = (r.units + kChunk - 1) / kChunk;
      for (int64_t c = 0; c < chunks; ++c) {
        if (cur.blocks == kMaxBlocks) {
          flush();
          slot = place(r);
        }
        cur.table.tensor_of_block[cur.blocks] = static_cast<unsigned char>(slot);
        cur.table.chunk_of_block[cur.blocks] = static_cast<int>(c);
        ++cur.blocks;
      }
    }
    flush();
  }
  return launches;
}

void run_launches(const std::vector<Launch>& launches, const WeightSource& w, double scale) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  for (const Launch& l : launches) {
    l.kernel<<<l.blocks, kThreads, 0, stream>>>(l.table, w, l.mode, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

KernelFn floating_kernel(at::ScalarType e, at::ScalarType s) {
  KernelFn fn = nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, e, "minimm_pair", [&] {
    using E = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, s, "minimm_pair",
                                    [&] { fn = &average_kernel<E, scalar_t>; });
  });
  return fn;
}

Row byte_row(void* dst, const void* src, const at::Tensor& t, int mode) {
  return {dst, src, t.numel() * static_cast<int64_t>(t.element_size()), &copy_kernel, mode};
}

// Averaged pairs: floating ones decide copy/average/skip from the counter, the others are copied
// unless the call is skipped. Mirrored pairs are always copied.
void add_pairs(std::vector<Row>& rows, at::TensorList dst, at::TensorList src, bool mirrored) {
  for (size_t i = 0; i < dst.size(); ++i) {
    const at::Tensor& d = dst[i];
    const at::Tensor& s = src[i];
    const bool floating = d.is_floating_point();
    if (floating && (!mirrored || d.scalar_type() != s.scalar_type()))
      rows.push_back({d.data_ptr(), s.const_data_ptr(), d.numel(), floating_kernel(d.scalar_type(), s.scalar_type()),
                      mirrored ? kCopyAlways : kDecide});
    else
      rows.push_back(byte_row(d.data_ptr(), s.const_data_ptr(), d, mirrored ? kCopyAlways : kCopyUnlessSkipped));
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
    TORCH_CHECK(type != at::kBool, "unpack_: bool tensors cannot be scaled (scale=", scale, ")");
    KernelFn fn = nullptr;
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "unpack_", [&] { fn = &scale_kernel<scalar_t>; });
    rows.push_back({tensor, slice, tensors[i].numel(), fn, kCopyAlways});
  }
  return rows;
}

WeightSource fixed_weight(double weight, const double* device_weight) {
  return {kFixed, weight, 0.0, 1, nullptr, device_weight};
}

// ---- the ops ----------------------------------------------------------------------------

void ema_update_cuda(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                     double weight) {
  if (ema.empty() && src.empty()) return;
  const at::Device device = (ema.empty() ? src : ema)[0].device();
  check_pairs("ema_update_", ema, src, device);
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor device_weight;  // kept alive until the kernels are queued
  if (weight_tensor.has_value()) {
    const at::Tensor& w = *weight_tensor;
    TORCH_CHECK(w.numel() == 1 && w.is_floating_point(), "ema_update_: the weight tensor must hold one floating "
                "value, got ", w.scalar_type(), " with ", w.numel(), " elements");
    if (w.is_cpu()) weight = w.item<double>();
    else {
      TORCH_CHECK(w.device() == device, "ema_update_: the weight is on ", w.device(), " but the tensors on ", device);
      device_weight = w.to(at::kDouble);
    }
  }
  std::vector<Row> rows;
  add_pairs(rows, ema, src, /*mirrored=*/false);
  run_launches(build_launches(rows),
               fixed_weight(weight, device_weight.defined() ? device_weight.const_data_ptr<double>() : nullptr), 1.0);
}

void ema_plan_step_cuda(const c10::intrusive_ptr<EMAPlan>& plan, at::Tensor steps) {
  TORCH_CHECK(steps.numel() == 1 && steps.scalar_type() == at::kLong, "ema_plan_step: steps must be a one-element "
              "int64 tensor, got ", steps.scalar_type(), " with ", steps.numel(), " elements");
  TORCH_CHECK(plan->watched.empty() || plan->device == steps.device(), "ema_plan_step: the plan's tensors are on ",
              plan->device, " but steps is on ", steps.device());
  const c10::cuda::CUDAGuard guard(steps.device());
  if (plan->stale(c10::DeviceType::CUDA)) {
    plan->check();
    std::vector<Row> rows;
    add_pairs(rows, plan->ema, plan->src, /*mirrored=*/false);
    add_pairs(rows, plan->mirror_ema, plan->mirror_src, /*mirrored=*/true);
    plan->table = std::make_shared<std::vector<Launch>>(build_launches(rows));
    plan->remember(c10::DeviceType::CUDA);
  }
  int64_t* counter = steps.data_ptr<int64_t>();
  WeightSource rule = plan->rule;
  rule.steps = counter;
  run_launches(*static_cast<const std::vector<Launch>*>(plan->table.get()), rule, 1.0);
  increment_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(counter);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::vector<at::Tensor> pack_cuda(at::TensorList tensors) {
  const at::Device device = tensors[0].device();
  check_list("pack", tensors, device);
  const c10::cuda::CUDAGuard guard(device);
  const PackLayout layout = pack_layout(tensors);
  std::vector<at::Tensor> flats;
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::empty({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g]).device(device)));
  run_launches(build_launches(flat_rows(flats, tensors, layout, /*to_flat=*/true, 1.0)), fixed_weight(0, nullptr),
               1.0);
  return flats;
}

void unpack_cuda(at::TensorList flats, at::TensorList tensors, double scale) {
  const at::Device device = (tensors.empty() ? flats : tensors)[0].device();
  check_list("unpack_", tensors, device);
  const PackLayout layout = pack_layout(tensors);
  check_flats("unpack_", flats, layout, device);
  const c10::cuda::CUDAGuard guard(device);
  run_launches(build_launches(flat_rows(flats, tensors, layout, /*to_flat=*/false, scale)), fixed_weight(0, nullptr),
               scale);
}

// A pack plan caches the pack launches and the unpack launches of its last scale.
struct PackLaunches {
  std::vector<Launch> pack, unpack;
  double unpack_scale;
};

void pack_plan_run_cuda(const c10::intrusive_ptr<PackPlan>& plan, at::TensorList flats, bool unpack, double scale) {
  const c10::cuda::CUDAGuard guard(plan->device);
  auto* launches = static_cast<PackLaunches*>(plan->table.get());
  if (plan->stale(c10::DeviceType::CUDA)) {
    plan->check();
    auto fresh = std::make_shared<PackLaunches>();
    fresh->pack = build_launches(flat_rows(flats, plan->tensors, plan->layout, /*to_flat=*/true, 1.0));
    fresh->unpack = build_launches(flat_rows(flats, plan->tensors, plan->layout, /*to_flat=*/false, scale));
    fresh->unpack_scale = scale;
    plan->table = fresh;
    plan->remember(c10::DeviceType::CUDA);
    launches = fresh.get();
  }
  if (!unpack) return run_launches(launches->pack, fixed_weight(0, nullptr), 1.0);
  if (launches->unpack_scale != scale) {
    launches->unpack = build_launches(flat_rows(flats, plan->tensors, plan->layout, /*to_flat=*/false, scale));
    launches->unpack_scale = scale;
  }
  run_launches(launches->unpack, fixed_weight(0, nullptr), scale);
}

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CUDA, m) {
  minimm::register_classes();
  m.impl("ema_update_", &minimm::ema_update_cuda);
  m.impl("ema_plan_step", &minimm::ema_plan_step_cuda);
  m.impl("pack", &minimm::pack_cuda);
  m.impl("unpack_", &minimm::unpack_cuda);
  m.impl("pack_plan_run", &minimm::pack_plan_run_cuda);
}
