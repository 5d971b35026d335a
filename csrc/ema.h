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

// Double operations rounded once each, never fused: the intrinsics on a GPU (nvcc contracts a
// plain `a * b + c`), plain operators on the CPU (built with -ffp-contract=off).
#ifdef __CUDA_ARCH__
__device__ inline double rn_add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double rn_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double rn_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double rn_div(double a, double b) { return __ddiv_rn(a, b); }
#else
inline double rn_add(double a, double b) { return a + b; }
inline double rn_sub(double a, double b) { return a - b; }
inline double rn_mul(double a, double b) { return a * b; }
inline double rn_div(double a, double b) { return a / b; }
#endif

// (1 - 1/t)^y for t >= 1 and y > 0, the power rule's beta, from + - * / alone: the same bits on
// the CPU, on a GPU and in Python (minimm/ops/ema.py _power_beta, operation for operation). A
// library pow would not do: CUDA's double pow is documented within 2 ulp, glibc's within 1, so
// the two devices' weights (and fp64 EMAs) could differ in their last bits.
// ln(1 - 1/t) = 2 atanh(s) with s = -1 / (2t - 1), |s| <= 1/3; then exp(u) = 2^k exp(r) with
// |r| <= ln2 / 2 (ln2 in two parts, so that k * kLn2Hi is exact). 20 terms of each series take
// the error below double's rounding (within a few ulp of the exact power, tests/test_ops_power_weight.py).
constexpr int kSeriesTerms = 20;
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
C10_HOST_DEVICE inline double power_beta(double t, double y) {
  if (t <= 1.0) return 0.0;
  const double s = rn_div(-1.0, rn_sub(rn_mul(2.0, t), 1.0)), q = rn_mul(s, s);
  double series = 0.0;  // atanh(s) / s = sum of q^n / (2n + 1)
  for (int n = kSeriesTerms - 1; n >= 0; --n) series = rn_add(rn_div(1.0, 2.0 * n + 1.0), rn_mul(q, series));
  const double u = rn_mul(y, rn_mul(2.0, rn_mul(s, series)));
  if (u < -800.0) return 0.0;  // below the smallest double
  const double k = nearbyint(rn_mul(u, kInvLn2));
  const double r = rn_sub(rn_sub(u, rn_mul(k, kLn2Hi)), rn_mul(k, kLn2Lo));
  double e = 1.0;  // exp(r), Horner: 1 + r (1 + r/2 (1 + r/3 ...))
  for (int n = kSeriesTerms; n >= 1; --n) e = rn_add(1.0, rn_div(rn_mul(r, e), static_cast<double>(n)));
  return ldexp(e, static_cast<int>(k));
}

// The weight of the new value, computed in double as MMEngine computes it in Python (the power
// rule's beta by power_beta, above).
C10_HOST_DEVICE inline double step_weight(const WeightSource& w, int64_t steps) {
  switch (w.kind) {
    case kFixed: return w.weight ? *w.weight : w.momentum;
    case kEMA: return w.momentum;
    case kAnneal: {
      const double annealed = w.gamma / (w.gamma + static_cast<double>(steps));
      return annealed > w.momentum ? annealed : w.momentum;
    }
    case kPower:  // beta_t = (1 - 1/t)^(gamma + 1) at the t-th averaging call; weight 1 - beta_t
      return 1.0 - power_beta(static_cast<double>(steps / w.interval + 1), rn_add(w.gamma, 1.0));
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
  // CUDA graphs: whether a step was ever captured, and one of the table now in use. The graph
  // itself keeps what it replays alive (keep_for_graph, multi_tensor_apply.cuh); a rebuild after
  // a capture of the old table warns that the graph must be captured again.
  bool captured = false, table_captured = false;

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
