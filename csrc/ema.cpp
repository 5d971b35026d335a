// The EMA ops: their registration with the PyTorch dispatcher, the EMAPlan class, and the CPU
// kernels.
//
// Python calls the list op as torch.ops.minimm.ema_update_ (the dispatcher picks this file's CPU
// kernel or ema_kernel.cu's CUDA kernel by the tensors' device) and the plan as
// torch.classes.minimm.EMAPlan, whose step() goes straight to the device's kernel: the plan's
// tensor lists never cross the dispatcher, so a step does no per-tensor host work. Only torch/library.h and ATen are included (not
// torch/extension.h), which keeps a cold CPU build to a few seconds.
//
// The CPU kernel runs one at::parallel_for over the table's chunks (table.h), the same chunks a
// GPU block takes, so the threads split the work evenly whether it is one 100 MB tensor or 2,000
// small ones. The fp32/fp64 averaging loops are also compiled for AVX2 and AVX-512 and picked at
// load time (GCC/Clang target_clones), because on tensors that fit in cache the loop, not
// memory, is the limit.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>
#include <cstring>
#include <tuple>
#include <utility>

#include "checks.h"
#include "ema.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MINIMM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MINIMM_CLONES
#endif

namespace minimm {

void (*cuda_plan_step)(EMAPlan& plan, const std::vector<at::Tensor>& steps) = nullptr;

void add_rows(Table& table, at::TensorList dst, at::TensorList src, bool mirrored, int64_t targets) {
  table.targets = static_cast<int32_t>(targets);
  std::vector<Row>& rows = table.rows;
  for (size_t i = 0; i < src.size(); ++i) {
    const at::Tensor& s = src[i];
    const auto first = static_cast<int32_t>(rows.size());
    for (int64_t k = 0; k < targets; ++k) {  // the copies of one source share dtype and shape
      const at::Tensor& d = dst[k * src.size() + i];
      if (d.is_floating_point() && (!mirrored || d.scalar_type() != s.scalar_type())) {
        const int32_t pair = 4 * float_index(d.scalar_type()) + float_index(s.scalar_type());
        rows.push_back({d.data_ptr(), s.const_data_ptr(), d.numel(), (mirrored ? kCast0 : kAverage0) + pair,
                        mirrored ? kCopyAlways : kDecide});
      } else {
        rows.push_back({d.data_ptr(), s.const_data_ptr(), d.numel() * static_cast<int64_t>(d.element_size()),
                        kByteCopy, mirrored ? kCopyAlways : kCopyUnlessSkipped});
      }
    }
    const at::Tensor& d = dst[i];
    const bool bytes = rows[first].kernel == kByteCopy;
    add_chunks(table, first, rows[first].numel, bytes ? 1 : std::max(d.element_size(), s.element_size()));
  }
}

TensorPlace place_of(const c10::TensorImpl* impl) {
  uint64_t layout = static_cast<uint64_t>(impl->dim());
  const c10::IntArrayRef sizes = impl->sizes(), strides = impl->strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    layout = ((layout * 1000003u) ^ static_cast<uint64_t>(sizes[d])) * 1000003u ^ static_cast<uint64_t>(strides[d]);
  const c10::Storage& storage = impl->unsafe_storage();
  return {storage.unsafeGetStorageImpl(), storage.data(), impl->storage_offset(), impl->numel(), impl->dtype(), layout};
}

EMAPlan::EMAPlan(std::vector<at::Tensor> ema_, std::vector<at::Tensor> src_, std::vector<at::Tensor> mirror_ema_,
                 std::vector<at::Tensor> mirror_src_, std::vector<int64_t> kinds, std::vector<double> momenta,
                 std::vector<double> gammas, std::vector<int64_t> intervals)
    : ema(std::move(ema_)), src(std::move(src_)), mirror_ema(std::move(mirror_ema_)),
      mirror_src(std::move(mirror_src_)) {
  const size_t targets = kinds.size();
  TORCH_CHECK_VALUE(targets >= 1 && targets <= kMaxTargets, "EMAPlan: 1 to ", kMaxTargets,
                    " targets per plan, got ", targets);
  TORCH_CHECK_VALUE(momenta.size() == targets && gammas.size() == targets && intervals.size() == targets,
                    "EMAPlan: give one rule, momentum, gamma and interval per target");
  TORCH_CHECK_VALUE(ema.size() == targets * src.size() && mirror_ema.size() == targets * mirror_src.size(),
                    "EMAPlan: got ", ema.size(), " EMA and ", mirror_ema.size(), " mirrored tensors for ",
                    targets, " targets of ", src.size(), " sources and ", mirror_src.size(), " mirrored sources");
  for (size_t k = 0; k < targets; ++k) {
    const int64_t kind = kinds[k], interval = intervals[k];
    const double gamma = gammas[k];
    TORCH_CHECK_VALUE(kind == kEMA || kind == kAnneal || kind == kSWA || kind == kPower,
                      "EMAPlan: unknown averaging rule ", kind);
    TORCH_CHECK_VALUE(interval >= 1, "EMAPlan: interval must be >= 1, got ", interval);
    TORCH_CHECK_VALUE(kind != kAnneal || gamma > 0, "EMAPlan: gamma must be > 0, got ", gamma);
    TORCH_CHECK_VALUE(kind != kPower || gamma > -1, "EMAPlan: rule 'power' needs gamma > -1, got ", gamma);
    rules.push_back({kind, momenta[k], gamma, interval, nullptr});
  }
  if (!ema.empty()) device = ema[0].device();
  else if (!mirror_ema.empty()) device = mirror_ema[0].device();
  for (const auto* list : {&ema, &src, &mirror_ema, &mirror_src})
    for (const at::Tensor& t : *list) watched.push_back(t.unsafeGetTensorImpl());
  rebuild();
}

bool EMAPlan::moved() const {
  for (size_t i = 0; i < watched.size(); ++i)
    if (!(place_of(watched[i]) == seen[i])) return true;
  return false;
}

void EMAPlan::rebuild() {
  const int64_t targets = static_cast<int64_t>(rules.size());
  std::vector<at::Tensor> read, mirror_read;  // each target's sources, for the pair checks
  for (int64_t k = 0; k < targets; ++k) {
    read.insert(read.end(), src.begin(), src.end());
    mirror_read.insert(mirror_read.end(), mirror_src.begin(), mirror_src.end());
  }
  check_pairs("EMAPlan", ema, read, device, /*require_dense=*/true);
  check_pairs("EMAPlan (mirrored pairs)", mirror_ema, mirror_read, device, /*require_dense=*/true);
  const size_t n = src.size(), m = mirror_src.size();
  for (int64_t k = 1; k < targets; ++k)
    for (size_t i = 0; i < n + m; ++i) {
      const at::Tensor& a = i < n ? ema[i] : mirror_ema[i - n];
      const at::Tensor& b = i < n ? ema[k * n + i] : mirror_ema[k * m + i - n];
      TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.strides() == b.strides(),
                        "EMAPlan: tensor ", i, " of target ", k, " differs from target 0 in dtype, shape or "
                        "strides; every target must match target 0");
    }
  std::vector<at::Tensor> written = ema;
  written.insert(written.end(), mirror_ema.begin(), mirror_ema.end());
  read.insert(read.end(), mirror_read.begin(), mirror_read.end());
  check_no_overlap("EMAPlan", written, read);
  table = Table();
  add_rows(table, ema, src, /*mirrored=*/false, targets);
  add_rows(table, mirror_ema, mirror_src, /*mirrored=*/true, targets);
  seen.clear();
  table_storages.clear();
  for (const c10::TensorImpl* impl : watched) {
    seen.push_back(place_of(impl));
    table_storages.push_back(impl->storage());
  }
  table.storages = &table_storages;
  if (std::exchange(table_captured, false))
    TORCH_WARN("EMAPlan: a tensor of this plan moved (param.data = ..., .to(), ...) after a step was captured in a "
               "CUDA graph; a replay of that graph keeps updating the memory it captured, so capture it again");
}

namespace {

// ---- the element loops -------------------------------------------------------------------

template <typename E, typename S>
void average_loop(E* __restrict__ ema, const S* __restrict__ src, int64_t n, acc_t<E> weight) {
  using A = acc_t<E>;
  for (int64_t k = 0; k < n; ++k) {
    const A a = static_cast<A>(ema[k]);
    const A d = static_cast<A>(src[k]) - a;
    ema[k] = static_cast<E>(a + weight * d);
  }
}

MINIMM_CLONES void average_f32(float* __restrict__ ema, const float* __restrict__ src, int64_t n, float weight) {
  average_loop(ema, src, n, weight);
}

MINIMM_CLONES void average_f64(double* __restrict__ ema, const double* __restrict__ src, int64_t n,
                               double weight) {
  average_loop(ema, src, n, weight);
}

using SegmentFn = void (*)(const Row&, int64_t first, int64_t n, double weight);

template <typename E, typename S>
void average_segment(const Row& r, int64_t first, int64_t n, double weight) {
  E* ema = static_cast<E*>(r.dst) + first;
  const S* src = static_cast<const S*>(r.src) + first;
  if constexpr (std::is_same_v<E, float> && std::is_same_v<S, float>) average_f32(ema, src, n, weight);
  else if constexpr (std::is_same_v<E, double> && std::is_same_v<S, double>) average_f64(ema, src, n, weight);
  else average_loop(ema, src, n, static_cast<acc_t<E>>(weight));
}

// A floating copy between dtypes goes through the destination's accumulate type.
template <typename E, typename S>
void cast_segment(const Row& r, int64_t first, int64_t n, double) {
  E* dst = static_cast<E*>(r.dst) + first;
  const S* src = static_cast<const S*>(r.src) + first;
  for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<E>(static_cast<acc_t<E>>(src[k]));
}

void byte_segment(const Row& r, int64_t first, int64_t n, double) {
  std::memcpy(static_cast<char*>(r.dst) + first, static_cast<const char*>(r.src) + first, n);
}

// The CPU loop of each Row.kernel number (ema.h): 16 averaging pairs, 16 casts, the byte copy.
template <size_t I>
using Float = std::tuple_element_t<I, std::tuple<float, double, at::Half, at::BFloat16>>;

template <size_t... P>
constexpr std::array<SegmentFn, 33> cpu_kernels(std::index_sequence<P...>) {
  return {{&average_segment<Float<P / 4>, Float<P % 4>>..., &cast_segment<Float<P / 4>, Float<P % 4>>...,
           &byte_segment}};
}
constexpr std::array<SegmentFn, 33> kKernels = cpu_kernels(std::make_index_sequence<16>());

// Below this many elements a call runs on one thread: waking the pool costs more than it saves.
constexpr int64_t kGrain = 32768;

// One call over the table: each row's mode and its target's action decide what runs (see Mode).
// A chunk of a plan with several targets runs once per target, from the same source chunk while
// it is in cache: the source is read from memory once for all the copies.
void run_table(const Table& table, const int* actions, const double* weights) {
  const std::vector<Row>& rows = table.rows;
  const std::vector<Chunk>& chunks = table.chunks;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const Chunk& chunk = chunks[c];
      for (int32_t k = 0; k < table.targets; ++k) {
        const Row& row = rows[chunk.row + k];
        const int action = actions[k];
        int32_t kernel = row.kernel;
        if (row.mode == kDecide) {
          if (action == kSkip) continue;
          if (action == kCopy) kernel += kCast0 - kAverage0;
        } else if (row.mode == kCopyUnlessSkipped && action == kSkip) {
          continue;
        }
        kKernels[kernel](row, chunk.first, chunk.n, weights[k]);
      }
    }
  };
  if (table.units * table.targets < kGrain) run(0, static_cast<int64_t>(chunks.size()));
  else at::parallel_for(0, static_cast<int64_t>(chunks.size()), 1, run);
}

// ---- the ops ----------------------------------------------------------------------------

void ema_update_cpu(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                    double weight) {
  if (ema.empty() && src.empty()) return;
  check_pairs("ema_update_", ema, src, at::Device(at::kCPU), /*require_dense=*/false);
  check_no_overlap("ema_update_", ema, src);
  if (weight_tensor.has_value()) {
    const at::Tensor& w = *weight_tensor;
    TORCH_CHECK_VALUE(w.numel() == 1 && w.is_floating_point(), "ema_update_: the weight tensor must hold one "
                      "floating value, got ", w.scalar_type(), " with ", w.numel(), " elements");
    weight = w.item<double>();
  }
  const Staged staged = stage(ema, src);
  Table table;
  add_rows(table, staged.dst, staged.src, /*mirrored=*/false);
  const int action = kAverage;
  run_table(table, &action, &weight);
  staged.finish(ema);
}

void cpu_plan_step(EMAPlan& plan, const std::vector<at::Tensor>& steps) {
  int actions[kMaxTargets];
  double weights[kMaxTargets];
  for (size_t k = 0; k < steps.size(); ++k) {
    const int64_t count = *steps[k].data_ptr<int64_t>();
    actions[k] = step_action(plan.rules[k], count);
    weights[k] = actions[k] == kAverage ? step_weight(plan.rules[k], count) : 0.0;
  }
  run_table(plan.table, actions, weights);
  for (const at::Tensor& counter : steps) *counter.data_ptr<int64_t>() += 1;
}

}  // namespace

bool EMAPlan::refresh() {
  if (!moved()) return false;
  rebuild();
  return true;
}

void EMAPlan::step(const std::vector<at::Tensor>& steps) {
  TORCH_CHECK_VALUE(steps.size() == rules.size(), "EMAPlan.step: ", rules.size(), " targets need ", rules.size(),
                    " counters, got ", steps.size());
  for (const at::Tensor& counter : steps)
    TORCH_CHECK_VALUE(counter.numel() == 1 && counter.scalar_type() == at::kLong && counter.device() == device,
                      "EMAPlan.step: steps must be a one-element int64 tensor on ", device, ", got ",
                      counter.scalar_type(), " with ", counter.numel(), " elements on ", counter.device());
  if (device.is_cpu()) {
    cpu_plan_step(*this, steps);
  } else {
    TORCH_CHECK(device.is_cuda() && cuda_plan_step != nullptr, "EMAPlan: this build has no kernels for ", device);
    cuda_plan_step(*this, steps);
  }
}

namespace {
const auto ema_plan_class =
    torch::class_<EMAPlan>("minimm", "EMAPlan")
        .def(torch::init<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
                         std::vector<at::Tensor>, std::vector<int64_t>, std::vector<double>, std::vector<double>,
                         std::vector<int64_t>>())
        .def("step", [](const c10::intrusive_ptr<EMAPlan>& self, at::Tensor steps) { self->step({steps}); })
        .def("step_all",
             [](const c10::intrusive_ptr<EMAPlan>& self, std::vector<at::Tensor> steps) { self->step(steps); })
        .def("refresh", [](const c10::intrusive_ptr<EMAPlan>& self) { return self->refresh(); })
        .def("captured", [](const c10::intrusive_ptr<EMAPlan>& self) {
          return self->captured;
        });
}  // namespace

}  // namespace minimm

TORCH_LIBRARY(minimm, m) {
  // ema += weight * (src - ema) for floating pairs, copy for the others. The weight is
  // `weight_tensor` (a 0-dim tensor, read where the kernel runs) when given, else `weight`.
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] src, Tensor? weight_tensor, float weight) -> ()");
}

TORCH_LIBRARY_IMPL(minimm, CPU, m) { m.impl("ema_update_", &minimm::ema_update_cpu); }
