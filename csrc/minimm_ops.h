// Shared declarations of minimm's native ops: the averaging rules, the persistent plans (EMA and
// pack) and the input checks. Included by the op registration, the CPU and the CUDA kernels.
//
// The numbers are defined by the PyTorch twins in minimm/ops (ema_update_ref, pack_ref, ...):
// every floating update is computed in the "accumulate" type (double for a double EMA, float for
// everything else) as three separately rounded operations
//     d = src - ema;   p = weight * d;   ema = ema + p
// and rounded once to the EMA's dtype. No fused multiply-add is allowed to contract them (the
// CPU sources are compiled with -ffp-contract=off, the CUDA kernels use the __*_rn intrinsics),
// so the kernels agree bit for bit with the twins on every machine. Unpacking with a scale
// multiplies in the same accumulate type; integers are rounded to nearest (ties to even).
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace minimm {

// How the weight of the new value is chosen; the values match minimm/ops/ema.py RULES.
enum RuleKind : int64_t { kFixed = 0, kEMA = 1, kAnneal = 2, kSWA = 3 };

// Every tensor starts at a multiple of kAlignBytes in a pack's flat tensor (and, in the CUDA
// kernels, in a launch's index space), so that each slice is aligned for a 16-byte vector load.
constexpr int64_t kAlignBytes = 16;
C10_HOST_DEVICE inline int64_t align_up(int64_t n, int64_t quantum) { return (n + quantum - 1) / quantum * quantum; }

// What one call of MMEngine's update_parameters does, decided from the step counter *before*
// it is incremented: the first call copies, then every `interval`-th call averages.
enum StepAction : int { kCopy = 0, kAverage = 1, kSkip = 2 };

// Everything a kernel needs to find its weight. Plain data, so it can be a CUDA kernel argument
// and the step counter can be read on the device (no host synchronisation).
struct WeightSource {
  int64_t kind;             // RuleKind
  double momentum;          // kFixed: the weight itself; kEMA / kAnneal: the momentum
  double gamma;             // kAnneal only
  int64_t interval;         // kEMA, kAnneal, kSWA
  const int64_t* steps;     // the step counter (plan steps); null for kFixed
  const double* weight;     // kFixed with a weight tensor on the device; else null
};

C10_HOST_DEVICE inline int step_action(const WeightSource& w) {
  if (w.kind == kFixed) return kAverage;
  const int64_t steps = *w.steps;
  if (steps == 0) return kCopy;
  return steps % w.interval == 0 ? kAverage : kSkip;
}

// The weight of the new value, computed in double exactly as MMEngine computes it in Python.
C10_HOST_DEVICE inline double step_weight(const WeightSource& w) {
  switch (w.kind) {
    case kFixed: return w.weight ? *w.weight : w.momentum;
    case kEMA: return w.momentum;
    case kAnneal: {
      const double annealed = w.gamma / (w.gamma + static_cast<double>(*w.steps));
      return annealed > w.momentum ? annealed : w.momentum;
    }
    default:  // kSWA: the running arithmetic mean over the averaging calls
      return 1.0 / static_cast<double>(*w.steps / w.interval + 1);
  }
}

// Accumulate type: double for a double EMA, float otherwise (half/bfloat16 EMAs are updated in
// float and rounded once).
template <typename E> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename E> using acc_t = typename AccOf<E>::type;

// Where a tensor's data lives, read from its TensorImpl alone (Tensor::data_ptr() would also
// load the StorageImpl: one more cache miss per tensor, which dominated a plan step on a model
// with thousands of small tensors). Re-pointing a tensor (`param.data = x`, `.to()`, `set_`) or
// resizing it changes one of these fields; a storage resized underneath its tensors
// (`untyped_storage().resize_()`, as FSDP does) is not seen, and plans do not support it.
struct TensorPlace {
  const void* storage;
  int64_t offset, numel;
  bool operator==(const TensorPlace& o) const {
    return storage == o.storage && offset == o.offset && numel == o.numel;
  }
};

inline TensorPlace place_of(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return {impl->unsafe_storage().unsafeGetStorageImpl(), impl->storage_offset(), impl->numel()};
}

// What both persistent plans share. A plan holds its tensors (never raw pointers alone), so
// memory it points into stays alive. The kernels keep their table (pointers, sizes, chunk map)
// in `table` and rebuild it, re-running all input checks, when stale(): before every call, on
// both CPU and CUDA (one scan of `watched`, the only staleness check).
struct PlanBase : torch::CustomClassHolder {
  std::vector<at::Tensor> watched;   // every tensor the table points into
  std::vector<TensorPlace> seen;     // where they were when the table was built (stale/remember)
  std::shared_ptr<void> table;       // the kernel file's table type (CPU or CUDA) ...
  c10::DeviceType table_type{};      // ... and which of the two it is
  at::Device device{at::kCPU};
  // CUDA graphs: a captured step replays the table's raw pointers. The storages of a captured
  // table are kept here, so a replay never writes freed memory, and `captured` makes the next
  // step outside the graph after a tensor moved raise once (the graph must be captured again).
  std::vector<c10::Storage> captured_storages;
  bool captured = false;

  bool stale(c10::DeviceType type) const;  // no table for `type`, or a watched tensor moved
  void remember(c10::DeviceType type);     // call after (re)building `table` for `type`
};

// The persistent EMA plan: the (ema, src) pairs to average and the (ema, src) pairs to mirror on
// every call, so that a step converts no Python lists.
struct EMAPlan : PlanBase {
  std::vector<at::Tensor> ema, src, mirror_ema, mirror_src;
  WeightSource rule;

  EMAPlan(std::vector<at::Tensor> ema, std::vector<at::Tensor> src, std::vector<at::Tensor> mirror_ema,
          std::vector<at::Tensor> mirror_src, int64_t kind, double momentum, double gamma, int64_t interval);
  void check() const;  // all input checks (at construction and whenever the table is rebuilt)
};

// Where each tensor goes in pack's output: one flat tensor per dtype, in first-seen order, each
// tensor starting at a multiple of kAlignBytes (the padding is zero); minimm/ops/pack.py layout().
struct PackLayout {
  std::vector<at::ScalarType> dtypes;  // one per flat tensor
  std::vector<int64_t> group_numel;    // elements of each flat tensor, padding included
  std::vector<int64_t> group_of;       // per input tensor: which flat tensor
  std::vector<int64_t> offset_of;      // per input tensor: element offset in that flat tensor
};
PackLayout pack_layout(at::TensorList tensors);

// The persistent pack plan: the tensors and their own flat buffers (one per dtype), reused by
// every pack/unpack, which is what a repeated all-reduce of the same buffers wants.
struct PackPlan : PlanBase {
  std::vector<at::Tensor> tensors, flats;
  PackLayout layout;

  explicit PackPlan(std::vector<at::Tensor> tensors);
  void check() const;
};

// pack_plan_run as both kernel files do it: the plan's table caches the pack work and the unpack
// work at the scale of the last call (`Work`: the file's CPU table or CUDA launches, made by
// `build(to_flat, scale)`). A stale plan is checked again and both are rebuilt; a new scale
// rebuilds the unpack work only. Then `run(work, scale)`.
template <typename Work, typename Build, typename Run>
void run_pack_plan(PackPlan& plan, c10::DeviceType type, bool unpack, double scale, Build build, Run run) {
  struct Cache {
    Work pack, unpack;
    double unpack_scale;
  };
  if (plan.stale(type)) {
    plan.check();
    plan.table = std::make_shared<Cache>(Cache{build(true, 1.0), build(false, scale), scale});
    plan.remember(type);
  }
  auto& cache = *static_cast<Cache*>(plan.table.get());
  if (!unpack) return run(cache.pack, 1.0);
  if (cache.unpack_scale != scale) {
    cache.unpack = build(false, scale);
    cache.unpack_scale = scale;
  }
  run(cache.unpack, scale);
}

// Registers the EMAPlan and PackPlan classes, once. Called first by the TORCH_LIBRARY block and
// by every TORCH_LIBRARY_IMPL block (impl_ops): kernels taking a plan need the class registered,
// and C++ leaves the order of the files' static initialisers open.
void register_classes();

// A kernel file's TORCH_LIBRARY_IMPL block: the classes first (see above), then one kernel for
// each op that registration.cpp declares, so no file can leave an op out.
template <typename EmaUpdate, typename EmaPlanStep, typename Pack, typename Unpack, typename PackPlanRun>
void impl_ops(torch::Library& m, EmaUpdate ema_update, EmaPlanStep ema_plan_step, Pack pack, Unpack unpack,
              PackPlanRun pack_plan_run) {
  register_classes();
  m.impl("ema_update_", ema_update);
  m.impl("ema_plan_step", ema_plan_step);
  m.impl("pack", pack);
  m.impl("unpack_", unpack);
  m.impl("pack_plan_run", pack_plan_run);
}

// Checks shared by every kernel, run on every list call and whenever a plan's table is (re)built;
// they turn a mistake into a ValueError naming it instead of memory corruption: equal lengths,
// defined, equal shapes, one device, no complex dtype. A floating pair may mix floating dtypes
// (an fp32 EMA of an fp16 source); any other pair must have equal dtypes (it is copied byte for
// byte). With `require_dense` (plans), both sides must be dense with equal strides (contiguous,
// or e.g. both channels_last); list calls stage other pairs instead (see stage()).
void check_pairs(const char* op, at::TensorList dst, at::TensorList src, const at::Device& device,
                 bool require_dense);
// All tensors defined and on `device`; contiguous too with `require_contiguous`.
void check_list(const char* op, at::TensorList tensors, const at::Device& device, bool require_contiguous);

// Checks that `flats` match the layout of `tensors` (count, dtype, size, device, contiguity).
void check_flats(const char* op, at::TensorList flats, const PackLayout& layout, const at::Device& device);

// A list call's tensors in a layout the kernels walk as one block: pairs (`src` not empty) that
// are not dense with equal strides, or single tensors (`src` empty) that are not contiguous, are
// replaced by contiguous copies; finish() writes the copied destinations back. Without such
// tensors, `dst` and `src` are the caller's lists, and nothing is copied.
struct Staged {
  at::TensorList dst, src;     // what the kernels use
  std::vector<size_t> copied;  // indices of `dst` that are copies
  void finish(at::TensorList originals) const;

  Staged() = default;
  Staged(Staged&&) = default;  // moving keeps the lists' buffers, so `dst`/`src` stay valid
  Staged(const Staged&) = delete;

 private:
  friend Staged stage(at::TensorList dst, at::TensorList src);
  std::vector<at::Tensor> own_dst_, own_src_;  // the lists with the copies, when there are any
};
Staged stage(at::TensorList dst, at::TensorList src);

}  // namespace minimm
