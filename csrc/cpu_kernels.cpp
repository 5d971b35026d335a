// CPU kernels of minimm's ops.
//
// Every op turns its tensors into a table of (destination, source, length) pairs and walks the
// *concatenated* index space with at::parallel_for, so two threads split the work evenly whether
// it is one 100 MB tensor or 2,000 small ones. Inside a segment the loops are plain element loops
// over contiguous memory, which the compiler vectorises (same-dtype copies are memcpy).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "minimm_ops.h"

namespace minimm {
namespace {

// Below this many elements a call runs on one thread: waking the pool costs more than it saves.
constexpr int64_t kGrain = 32768;

struct Pair {
  void* dst;
  const void* src;
  int64_t numel;
  at::ScalarType dst_type, src_type;
};

struct Table {
  std::vector<Pair> pairs;
  std::vector<int64_t> offsets{0};  // prefix sums of numel: pair i covers [offsets[i], offsets[i+1])

  void add(void* dst, const void* src, int64_t numel, at::ScalarType dst_type, at::ScalarType src_type) {
    pairs.push_back({dst, src, numel, dst_type, src_type});
    offsets.push_back(offsets.back() + numel);
  }

  // Calls fn(pair, first, count) for every piece of [0, total) each thread gets.
  template <typename Fn>
  void for_each_segment(const Fn& fn) const {
    at::parallel_for(0, offsets.back(), kGrain, [&](int64_t begin, int64_t end) {
      size_t i = std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1;
      for (; begin < end; ++i) {
        const int64_t stop = std::min(end, offsets[i + 1]);
        if (stop > begin) fn(pairs[i], begin - offsets[i], stop - begin);
        begin = stop;
      }
    });
  }
};

Table make_table(at::TensorList dst, at::TensorList src) {
  Table table;
  table.pairs.reserve(dst.size());
  table.offsets.reserve(dst.size() + 1);
  for (size_t i = 0; i < dst.size(); ++i)
    table.add(dst[i].data_ptr(), src[i].data_ptr(), dst[i].numel(), dst[i].scalar_type(), src[i].scalar_type());
  return table;
}

template <typename E, typename S>
void average_loop(E* ema, const S* src, int64_t n, acc_t<E> weight) {
  using A = acc_t<E>;
  for (int64_t k = 0; k < n; ++k) {
    const A a = static_cast<A>(ema[k]);
    const A d = static_cast<A>(src[k]) - a;
    ema[k] = static_cast<E>(a + weight * d);
  }
}

template <typename E, typename S>
void cast_loop(E* dst, const S* src, int64_t n) {
  for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<E>(static_cast<acc_t<E>>(src[k]));
}

// Calls fn.template operator()<E, S>() with the pair's two floating dtypes.
template <typename Fn>
void dispatch_floating_pair(const Pair& p, const Fn& fn) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.dst_type, "minimm_pair", [&] {
    using E = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.src_type, "minimm_pair", [&] {
      fn(static_cast<E*>(nullptr), static_cast<const scalar_t*>(nullptr));
    });
  });
}

// Copies elements [first, first + n) of a pair, casting between floating dtypes when they differ.
void copy_segment(const Pair& p, int64_t first, int64_t n) {
  if (p.dst_type == p.src_type) {
    const size_t size = at::elementSize(p.dst_type);
    std::memcpy(static_cast<char*>(p.dst) + first * size, static_cast<const char*>(p.src) + first * size, n * size);
    return;
  }
  dispatch_floating_pair(p, [&](auto* e, const auto* s) {
    using E = std::remove_pointer_t<decltype(e)>;
    using S = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
    cast_loop(static_cast<E*>(p.dst) + first, static_cast<const S*>(p.src) + first, n);
  });
}

// Averages floating pairs and copies the others: the whole of one averaging call.
void average_table(const Table& table, double weight) {
  table.for_each_segment([&](const Pair& p, int64_t first, int64_t n) {
    if (!at::isFloatingType(p.dst_type)) return copy_segment(p, first, n);
    dispatch_floating_pair(p, [&](auto* e, const auto* s) {
      using E = std::remove_pointer_t<decltype(e)>;
      using S = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
      average_loop(static_cast<E*>(p.dst) + first, static_cast<const S*>(p.src) + first, n,
                   static_cast<acc_t<E>>(weight));
    });
  });
}

void copy_table(const Table& table) { table.for_each_segment(copy_segment); }

void ema_update_cpu(at::TensorList ema, at::TensorList src, const c10::optional<at::Tensor>& weight_tensor,
                    double weight) {
  if (ema.empty() && src.empty()) return;
  check_pairs("ema_update_", ema, src, at::Device(at::kCPU));
  if (weight_tensor.has_value()) {
    const at::Tensor& w = *weight_tensor;
    TORCH_CHECK(w.numel() == 1 && w.is_floating_point(), "ema_update_: the weight tensor must hold one floating "
                "value, got ", w.scalar_type(), " with ", w.numel(), " elements");
    weight = w.item<double>();
  }
  average_table(make_table(ema, src), weight);
}

void ema_plan_step_cpu(const c10::intrusive_ptr<EMAPlan>& plan, at::Tensor steps) {
  TORCH_CHECK(steps.numel() == 1 && steps.scalar_type() == at::kLong, "ema_plan_step: steps must be a one-element "
              "int64 tensor, got ", steps.scalar_type(), " with ", steps.numel(), " elements");
  const at::Device device(at::kCPU);
  check_pairs("ema_plan_step", plan->ema, plan->src, device);
  check_pairs("ema_plan_step (mirrored)", plan->mirror_ema, plan->mirror_src, device);
  WeightSource rule = plan->rule;
  int64_t* counter = steps.data_ptr<int64_t>();
  rule.steps = counter;
  const int action = step_action(rule);
  if (action == kCopy) copy_table(make_table(plan->ema, plan->src));
  if (action == kAverage) average_table(make_table(plan->ema, plan->src), step_weight(rule));
  copy_table(make_table(plan->mirror_ema, plan->mirror_src));
  *counter += 1;
}

// Pairs each tensor with its slice of the flat tensors; `to_flat` decides the direction.
Table flat_table(at::TensorList flats, at::TensorList tensors, const PackLayout& layout, bool to_flat) {
  Table table;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& flat = flats[layout.group_of[i]];
    char* slice = static_cast<char*>(flat.data_ptr()) + layout.offset_of[i] * flat.element_size();
    void* tensor = tensors[i].data_ptr();
    const at::ScalarType type = tensors[i].scalar_type();
    if (to_flat) table.add(slice, tensor, tensors[i].numel(), type, type);
    else table.add(tensor, slice, tensors[i].numel(), type, type);
  }
  return table;
}

std::vector<at::Tensor> pack_cpu(at::TensorList tensors) {
  check_list("pack", tensors, at::Device(at::kCPU));
  const PackLayout layout = pack_layout(tensors);
  std::vector<at::Tensor> flats;
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::empty({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g])));
  copy_table(flat_table(flats, tensors, layout, /*to_flat=*/true));
  return flats;
}

template <typename T>
void scale_loop(T* dst, const T* src, int64_t n, double scale) {
  if constexpr (std::is_integral_v<T>) {
    // Round to nearest (ties to even): a SUM of integer buffers divided by the world size is
    // never truncated toward zero as MMEngine's true_divide + copy_ does.
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(std::nearbyint(static_cast<double>(src[k]) * scale));
  } else {
    using A = acc_t<T>;
    const A s = static_cast<A>(scale);
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(static_cast<A>(src[k]) * s);
  }
}

void unpack_cpu(at::TensorList flats, at::TensorList tensors, double scale) {
  const at::Device device(at::kCPU);
  check_list("unpack_", tensors, device);
  const PackLayout layout = pack_layout(tensors);
  check_flats("unpack_", flats, layout, device);
  const Table table = flat_table(flats, tensors, layout, /*to_flat=*/false);
  if (scale == 1.0) return copy_table(table);
  for (at::ScalarType type : layout.dtypes)
    TORCH_CHECK(type != at::kBool, "unpack_: bool tensors cannot be scaled (scale=", scale, ")");
  table.for_each_segment([&](const Pair& p, int64_t first, int64_t n) {
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, p.dst_type, "unpack_", [&] {
      scale_loop(static_cast<scalar_t*>(p.dst) + first, static_cast<const scalar_t*>(p.src) + first, n, scale);
    });
  });
}

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_IMPL(minimm, CPU, m) {
  m.impl("ema_update_", &minimm::ema_update_cpu);
  m.impl("ema_plan_step", &minimm::ema_plan_step_cpu);
  m.impl("pack", &minimm::pack_cpu);
  m.impl("unpack_", &minimm::unpack_cpu);
}
