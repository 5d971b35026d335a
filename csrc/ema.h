// The EMA ops' shared declarations: the averaging rules, the kernel numbering of the table's
// rows, and the persistent plan (ema.cpp registers it and runs it on the CPU; ema_kernel.cu runs
// it on a GPU).
//
// The numbers: every floating update is computed in the "accumulate" type (double for a double
// EMA, float otherwise) as three separately rounded operations
//     d = src - ema;   p = weight * d;   ema = ema + p
// and rounded once to the EMA's dtype. No fused multiply-add contracts them (the CPU sources are
// compiled with -ffp-contract=off, the CUDA kernels use the __*_rn intrinsics), so the kernels
// give the same bits on every machine for finite values (a NaN's payload may differ: a GPU's
// half/bfloat16 conversions encode it otherwise than c10's host ones). The PyTorch fallback
// (minimm/ops/ema.py) is MMEngine's lerp_, which may fuse; minimm/ops/ema.py states and tests
// how far the two may differ.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "table.h"

namespace minimm {

// How the weight of the new value is chosen; the values match minimm/ops/ema.py RULES.
enum RuleKind : int64_t { kFixed = 0, kEMA = 1, kAnneal = 2, kSWA = 3, kPower = 4 };

// A plan may average one source into up to this many copies (each with its own rule and counter)
// in one pass; minimm/ops/ema.py MAX_TARGETS.
constexpr int kMaxTargets = 8;

// What one call of MMEngine's update_parameters does, decided from the step counter *before*
// it is incremented: the first call copies, then every `interval`-th call averages.
enum StepAction : int { kCopy = 0, kAverage = 1, kSkip = 2 };

// Everything a kernel needs to find its weight: plain data, a CUDA kernel argument.
struct WeightSource {
  int64_t kind;         // RuleKind
  double momentum;      // kFixed: the weight itself; kEMA / kAnneal: the momentum
  double gamma;         // kAnneal: the horizon; kPower: the exponent
  int64_t interval;     // kEMA, kAnneal, kSWA
  const double* weight; // kFixed with a weight tensor on the device; else null
};

C10_HOST_DEVICE inline int step_action(const WeightSource& w, int64_t steps) {
  if (w.kind == kFixed) return kAverage;
  if (steps == 0) return kCopy;
  return steps % w.interval == 0 ? kAverage : kSkip;
}

// The weight of the new value, computed in double exactly as MMEngine computes it in Python.
C10_HOST_DEVICE inline double step_weight(const WeightSource& w, int64_t steps) {
  switch (w.kind) {
    case kFixed: return w.weight ? *w.weight : w.momentum;
    case kEMA: return w.momentum;
    case kAnneal: {
      const double annealed = w.gamma / (w.gamma + static_cast<double>(steps));
      return annealed > w.momentum ? annealed : w.momentum;
    }
    case kPower: {  // beta_t = (1 - 1/t)^(gamma + 1) at the t-th averaging call; weight 1 - beta_t
      const double t = static_cast<double>(steps / w.interval + 1);
      return 1.0 - ::pow(1.0 - 1.0 / t, w.gamma + 1.0);
    }
    default:  // kSWA: the running arithmetic mean over the averaging calls
      return 1.0 / static_cast<double>(steps / w.interval + 1);
  }
}

// Accumulate type: double for a double EMA, float otherwise.
template <typename E> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename E> using acc_t = typename AccOf<E>::type;

// Row.kernel of the EMA table: kAverage0 + 4 * e + s averages a floating pair, kCast0 + 4 * e + s
// copies one into the other's dtype (e, s: 0 float, 1 double, 2 half, 3 bfloat16), kByteCopy
// copies bytes (integer pairs, same-dtype mirrors; the row's numel is then in bytes).
constexpr int32_t kAverage0 = 0, kCast0 = 16, kByteCopy = 32;

inline int32_t float_index(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return 0;
    case at::kDouble: return 1;
    case at::kHalf: return 2;
    case at::kBFloat16: return 3;
    default: TORCH_CHECK_VALUE(false, "EMA: unsupported floating dtype ", t);
  }
}

// The rows and chunks of averaged pairs (floating ones decide copy/average/skip from the counter,
// the others are copied unless the call is skipped) and mirrored pairs (always copied). With
// `targets` K > 1, `dst` holds K lists of src.size() tensors one after the other (target-major):
// source i gets K consecutive rows, one per target, and its chunks name the first (table.h).
void add_rows(Table& table, at::TensorList dst, at::TensorList src, bool mirrored, int64_t targets = 1);

// Where a tensor's data lives and how it is laid out, read from its TensorImpl alone. Re-pointing
// a tensor (`param.data = x`, `.to()`, `set_`, a dtype view) or resizing it changes one of these
// fields, and so does a storage resized underneath its tensors (FSDP frees a parameter's memory with
// `storage.resize_(0)` and allocates it again later: the same storage, another address).
struct TensorPlace {
  const void* storage;
  const void* data;  // the storage's memory itself
  int64_t offset, numel;
  caffe2::TypeMeta dtype;
  uint64_t layout;  // a hash of the sizes and strides
  bool operator==(const TensorPlace& o) const {
    return storage == o.storage && data == o.data && offset == o.offset && numel == o.numel && dtype == o.dtype &&
           layout == o.layout;
  }
};
TensorPlace place_of(const c10::TensorImpl* impl);

// The persistent EMA plan: the (ema, src) pairs to average and the pairs to mirror on every call,
// with the table built from them. A step runs the table as it is: no per-tensor work at all.
// refresh() compares where each tensor is with where it was when the table was built and, if one
// moved, checks the pairs again and rebuilds the table; the caller decides when (the averaged
// models do on the signals they watch, see minimm/model/averaged_model.py), because a scan of
// every TensorImpl costs more than the rest of a step on thousands of small tensors.
struct EMAPlan : torch::CustomClassHolder {
  // ema and mirror_ema hold one list per target, target-major (see add_rows).
  std::vector<at::Tensor> ema, src, mirror_ema, mirror_src;
  std::vector<WeightSource> rules;  // one per target
  at::Device device{at::kCPU};
  std::vector<const c10::TensorImpl*> watched;  // all of the above (the vectors keep them alive)
  std::vector<TensorPlace> seen;                // their places when the table was built
  Table table;  // built from the tensors; uploaded to the GPU once per build
  // What the table points into, kept alive until the next build: a step after `param.data = x`
  // (before refresh()) writes memory nobody else reads, never freed memory.
  std::vector<c10::Storage> table_storages;
  // CUDA graphs: what captured steps point into, so that a replay never writes freed memory.
  CapturedMemory captured;

  EMAPlan(std::vector<at::Tensor> ema, std::vector<at::Tensor> src, std::vector<at::Tensor> mirror_ema,
          std::vector<at::Tensor> mirror_src, std::vector<int64_t> kinds, std::vector<double> momenta,
          std::vector<double> gammas, std::vector<int64_t> intervals);
  bool moved() const;
  void rebuild();  // all input checks, then the rows and chunks
  bool refresh();  // rebuild() if moved(); returns whether it did
  void step(const std::vector<at::Tensor>& steps);  // one counter per target
};

// Set by ema_kernel.cu when the extension is built with CUDA; null in a CPU-only build.
extern void (*cuda_plan_step)(EMAPlan& plan, const std::vector<at::Tensor>& steps);

}  // namespace minimm
