// CPU kernels of minimm's ops.
//
// Every op turns its tensors into a table of (destination, source, length, segment function)
// rows and walks the *concatenated* index space with at::parallel_for, so the threads split the
// work evenly whether it is one 100 MB tensor or 2,000 small ones. The segment function is
// resolved from the dtypes when the table is built, so the hot loop does no dtype dispatch; the
// plans keep their table between calls. Inner loops are plain element loops over contiguous
// memory that the compiler vectorises; the fp32/fp64 averaging loops are also compiled for AVX2
// and AVX-512 and picked at load time (GCC/Clang target_clones), because on a model whose
// tensors fit in cache the loop, not memory, is the limit.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "minimm_ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MINIMM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MINIMM_CLONES
#endif

namespace minimm {
namespace {

// Below this many elements a call runs on one thread: waking the pool costs more than it saves.
constexpr int64_t kGrain = 32768;

struct Row;
// Processes elements [first, first + n) of a row; `value` is the weight or the scale.
using SegmentFn = void (*)(const Row&, int64_t first, int64_t n, double value);

struct Row {
  void* dst;
  const void* src;
  int64_t element_size;  // of dst; used by the byte copies
  SegmentFn fn;
};

struct Table {
  std::vector<Row> rows;
  std::vector<int64_t> offsets{0};  // prefix sums of numel: row i covers [offsets[i], offsets[i+1])

  void add(const Row& row, int64_t numel) {
    rows.push_back(row);
    offsets.push_back(offsets.back() + numel);
  }

  // Runs every row's function over the pieces of [0, total) each thread gets.
  void run(double value) const {
    at::parallel_for(0, offsets.back(), kGrain, [&](int64_t begin, int64_t end) {
      size_t i = std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1;
      for (; begin < end; ++i) {
        const int64_t stop = std::min(end, offsets[i + 1]);
        if (stop > begin) rows[i].fn(rows[i], begin - offsets[i], stop - begin, value);
        begin = stop;
      }
    });
  }
};

// ---- the element loops -------------------------------------------------------------------

template <typename E, typename S>
void average_loop(E* ema, const S* src, int64_t n, acc_t<E> weight) {
  using A = acc_t<E>;
  for (int64_t k = 0; k < n; ++k) {
    const A a = static_cast<A>(ema[k]);
    const A d = static_cast<A>(src[k]) - a;
    ema[k] = static_cast<E>(a + weight * d);
  }
}

MINIMM_CLONES void average_f32(float* ema, const float* src, int64_t n, float weight) {
  average_loop(ema, src, n, weight);
}

MINIMM_CLONES void average_f64(double* ema, const double* src, int64_t n, double weight) {
  average_loop(ema, src, n, weight);
}

template <typename E, typename S>
void average_segment(const Row& r, int64_t first, int64_t n, double weight) {
  E* ema = static_cast<E*>(r.dst) + first;
  const S* src = static_cast<const S*>(r.src) + first;
  if constexpr (std::is_same_v<E, float> && std::is_same_v<S, float>) average_f32(ema, src, n, weight);
  else if constexpr (std::is_same_v<E, double> && std::is_same_v<S, double>) average_f64(ema, src, n, weight);
  else average_loop(ema, src, n, static_cast<acc_t<E>>(weight));
}

// A floating copy between dtypes goes through the destination's accumulate type, as the twins do.
template <typename E, typename S>
void cast_segment(const Row& r, int64_t first, int64_t n, double) {
  E* dst = static_cast<E*>(r.dst) + first;
  const S* src = static_cast<const S*>(r.src) + first;
  for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<E>(static_cast<acc_t<E>>(src[k]));
}

void copy_segment(const Row& r, int64_t first, int64_t n, double) {
  const int64_t size = r.element_size;
  std::memcpy(static_cast<char*>(r.dst) + first * size, static_cast<const char*>(r.src) + first * size, n * size);
}

template <typename T>
void scale_segment(const Row& r, int64_t first, int64_t n, double scale) {
  T* dst = static_cast<T*>(r.dst) + first;
  const T* src = static_cast<const T*>(r.src) + first;
  if constexpr (std::is_integral_v<T>) {
    // Round to nearest (ties to even): a SUM of integer buffers times 1/world_size is never
    // truncated toward zero as MMEngine's true_divide + copy_ does.
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(std::nearbyint(static_cast<double>(src[k]) * scale));
  } else {
    using A = acc_t<T>;
    const A s = static_cast<A>(scale);
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(static_cast<A>(src[k]) * s);
  }
}

// ---- choosing a segment function from the dtypes ------------------------------------------

// The function for a floating (E, S) pair: average_segment or cast_segment.
SegmentFn floating_fn(at::ScalarType e, at::ScalarType s, bool average) {
  SegmentFn fn = nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, e, "minimm_pair", [&] {
    using E = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, s, "minimm_pair", [&] {
      fn = average ? &average_segment<E, scalar_t> : &cast_segment<E, scalar_t>;
    });
  });
  return fn;
}

// What one averaging call does to a pair: average floating pairs, copy the others.
SegmentFn average_fn(const at::Tensor& e, const at::Tensor& s) {
  return e.is_floating_point() ? floating_fn(e.scalar_type(), s.scalar_type(), true) : &copy_segment;
}

SegmentFn copy_fn(const at::Tensor& e, const at::Tensor& s) {
  return e.scalar_type() == s.scalar_type() ? &copy_segment : floating_fn(e.scalar_type(), s.scalar_type(), false);
}

SegmentFn scale_fn(at::ScalarType type, double scale) {
  if (scale == 1.0) return &copy_segment;
  TORCH_CHECK_VALUE(type != at::kBool, "unpack_: bool tensors cannot be scaled (scale=", scale, ")");
  SegmentFn fn = nullptr;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "unpack_", [&] { fn = &scale_segment<scalar_t>; });
  return fn;
}

// One row per pair.
template <typename ChooseFn>
Table pair_table(at::TensorList dst, at::TensorList src, ChooseFn choose) {
  Table table;
  table.rows.reserve(dst.size());
  table.offsets.reserve(dst.size() + 1);
  for (size_t i = 0; i < dst.size(); ++i)
    table.add({dst[i].data_ptr(), src[i].const_data_ptr(), dst[i].element_size(), choose(dst[i], src[i])},
              dst[i].numel());
  return table;
}

// Each tensor with its slice of the flat tensors; `to_flat` decides the direction.
Table flat_table(at::TensorList flats, at::TensorList tensors, const PackLayout& layout, bool to_flat,
                 double scale) {
  Table table;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& flat = flats[layout.group_of[i]];
    char* slice = static_cast<char*>(flat.data_ptr()) + layout.offset_of[i] * flat.element_size();
    char* tensor = static_cast<char*>(tensors[i].data_ptr());
    table.add(to_flat ? Row{slice, tensor, tensors[i].element_size(), &copy_segment}
                      : Row{tensor, slice, tensors[i].element_size(), scale_fn(tensors[i].scalar_type(), scale)},
              tensors[i].numel());
  }
  return table;
}

// ---- the ops ----------------------------------------------------------------------------

void ema_update_cpu(at::TensorList ema, at::TensorList src, const std::optional<at::Tensor>& weight_tensor,
                    double weight) {
  if (ema.empty() && src.empty()) return;
  check_pairs("ema_update_", ema, src, at::Device(at::kCPU), /*require_dense=*/false);
  if (weight_tensor.has_value()) {
    const at::Tensor& w = *weight_tensor;
    TORCH_CHECK_VALUE(w.numel() == 1 && w.is_floating_point(), "ema_update_: the weight tensor must hold one "
                      "floating value, got ", w.scalar_type(), " with ", w.numel(), " elements");
    weight = w.item<double>();
  }
  const Staged staged = stage(ema, src);
  pair_table(staged.dst, staged.src, average_fn).run(weight);
  staged.finish(ema);
}

// The three tables of an EMA plan: averaging call, copying call (the first), mirrored pairs.
struct PlanTables {
  Table average, copy, mirror;
};

void ema_plan_step_cpu(const c10::intrusive_ptr<EMAPlan>& plan, at::TensorList, at::TensorList, at::Tensor steps) {
  TORCH_CHECK_VALUE(steps.numel() == 1 && steps.scalar_type() == at::kLong && steps.is_cpu(), "ema_plan_step: "
                    "steps must be a one-element int64 CPU tensor, got ", steps.scalar_type(), " with ",
                    steps.numel(), " elements on ", steps.device());
  TORCH_CHECK_VALUE(plan->watched.empty() || plan->device.is_cpu(), "ema_plan_step: the plan's tensors are on ",
                    plan->device, " but steps is on the CPU");
  if (plan->stale(c10::DeviceType::CPU)) {
    plan->check();
    plan->table = std::make_shared<PlanTables>(PlanTables{pair_table(plan->ema, plan->src, average_fn),
                                                          pair_table(plan->ema, plan->src, copy_fn),
                                                          pair_table(plan->mirror_ema, plan->mirror_src, copy_fn)});
    plan->remember(c10::DeviceType::CPU);
  }
  const auto& tables = *static_cast<const PlanTables*>(plan->table.get());
  WeightSource rule = plan->rule;
  int64_t* counter = steps.data_ptr<int64_t>();
  rule.steps = counter;
  const int action = step_action(rule);
  if (action == kCopy) tables.copy.run(0.0);
  if (action == kAverage) tables.average.run(step_weight(rule));
  tables.mirror.run(0.0);
  *counter += 1;
}

std::vector<at::Tensor> pack_cpu(at::TensorList tensors) {
  check_list("pack", tensors, at::Device(at::kCPU), /*require_contiguous=*/false);
  const Staged staged = stage(tensors, {});
  const PackLayout layout = pack_layout(tensors);
  std::vector<at::Tensor> flats;
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::zeros({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g])));
  flat_table(flats, staged.dst, layout, /*to_flat=*/true, 1.0).run(1.0);
  return flats;
}

void unpack_cpu(at::TensorList flats, at::TensorList tensors, double scale) {
  const at::Device device(at::kCPU);
  check_list("unpack_", tensors, device, /*require_contiguous=*/false);
  const PackLayout layout = pack_layout(tensors);
  check_flats("unpack_", flats, layout, device);
  const Staged staged = stage(tensors, {});
  flat_table(flats, staged.dst, layout, /*to_flat=*/false, scale).run(scale);
  staged.finish(tensors);
}

void pack_plan_run_cpu(const c10::intrusive_ptr<PackPlan>& plan, at::TensorList, at::TensorList, bool unpack,
                       double scale) {
  run_pack_plan<Table>(
      *plan, c10::DeviceType::CPU, unpack, scale,
      [&](bool to_flat, double s) { return flat_table(plan->flats, plan->tensors, plan->layout, to_flat, s); },
      [](const Table& table, double s) { table.run(s); });
}
}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CPU, m) {
  minimm::impl_ops(m, &minimm::ema_update_cpu, &minimm::ema_plan_step_cpu, &minimm::pack_cpu, &minimm::unpack_cpu,
                   &minimm::pack_plan_run_cpu);
}
