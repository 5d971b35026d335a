// The pack ops' shared declarations: where each tensor goes in the flat tensors, the table rows
// that copy it there and back, and the persistent plan (pack.cpp registers it and runs it on the
// CPU; pack_kernel.cu runs it on a GPU).
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ema.h"
#include "table.h"

namespace minimm {

// Where each tensor goes in pack's output: one flat tensor per dtype, in first-seen order, each
// tensor starting at a multiple of kAlignBytes (the padding is zero); minimm/ops/pack.py layout().
struct PackLayout {
  std::vector<at::ScalarType> dtypes;  // one per flat tensor
  std::vector<int64_t> group_numel;    // elements of each flat tensor, padding included
  std::vector<int64_t> group_of;       // per input tensor: which flat tensor
  std::vector<int64_t> offset_of;      // per input tensor: element offset in that flat tensor
};
PackLayout pack_layout(at::TensorList tensors);

// Checks that `flats` match the layout of `tensors` (count, dtype, size, device, contiguity).
void check_flats(const char* op, at::TensorList flats, const PackLayout& layout, const at::Device& device);

// How a table runs on one device: the CPU loop (pack.cpp) or the CUDA kernels (pack_kernel.cu,
// which upload the table on its first run, refused with `capture_error` during a capture).
// Returns whether the run was captured in a CUDA graph.
using TableRun = bool (*)(Table& table, const at::Device& device, double scale,
                          const char* capture_error);
// Set by pack_kernel.cu when the extension is built with CUDA; null in a CPU-only build.
extern TableRun cuda_pack_run;
TableRun table_run_for(const at::Device& device);

// An integer result of a scaled unpack: rounded to nearest (ties to even) and clamped into T's
// range, the same on both devices (a plain cast of an out-of-range double is undefined: x86 gives
// INT_MIN, a GPU saturates); NaN (a scale of inf or NaN times 0) gives 0.
template <typename T>
C10_HOST_DEVICE inline T round_into(double v) {
  const double r = nearbyint(v);
  if (r != r) return 0;
  constexpr T lowest = std::numeric_limits<T>::lowest(), highest = std::numeric_limits<T>::max();
  if (r <= static_cast<double>(lowest)) return lowest;
  if (r >= static_cast<double>(highest)) return highest;
  return static_cast<T>(r);
}

// Row.kernel of a pack table: kPackBytes copies bytes, kZeroBytes zeroes them (src is null),
// kScale0 + scale_index(dtype) multiplies by the call's scale (integers rounded to nearest).
constexpr int32_t kPackBytes = 0, kZeroBytes = 1, kScale0 = 2, kScaleTypes = 9;
int32_t scale_index(at::ScalarType type);  // 0 .. kScaleTypes - 1, in the order of pack.cpp's kernels

// Each tensor with its slice of the flat tensors: into them (`to_flat`, with rows zeroing the
// padding when `zero_padding`) or out of them multiplied by `scale`.
Table flat_table(at::TensorList flats, at::TensorList tensors, const PackLayout& layout, bool to_flat,
                 bool zero_padding, double scale);

// The persistent pack plan: the tensors and their own flat buffers (one per dtype, zeroed once),
// reused by every pack/unpack, which is what a repeated all-reduce of the same buffers wants.
// Three tables: pack, unpack (byte copies) and, built at the first unpack with a scale other than
// 1, scaled unpack (the scale is a kernel argument, so a new scale rebuilds nothing). Each run
// looks at where every tensor and flat buffer is (storage, offset, numel, dtype, contiguity: the
// cheap part of EMAPlan's check, all that a byte range depends on) and rebuilds when one moved.
// CUDA graphs: as EMAPlan, a captured run is kept alive by its graph.
struct PackPlan : torch::CustomClassHolder {
  std::vector<at::Tensor> tensors, flats;
  PackLayout layout;
  at::Device device{at::kCPU};
  std::vector<const c10::TensorImpl*> watched;
  std::vector<TensorPlace> seen;
  Table pack_table, unpack_table, scaled_table;
  bool has_scaled = false;
  std::vector<c10::Storage> table_storages;
  bool captured = false, table_captured = false;  // as EMAPlan's

  explicit PackPlan(std::vector<at::Tensor> tensors);
  void rebuild();
  void run(bool unpack, double scale, TableRun run_table);
};

// The cheap place of a contiguous tensor (PackPlan): TensorPlace with `layout` its contiguity.
TensorPlace flat_place_of(const c10::TensorImpl* impl);

// The list ops on the device whose tables `run_table` runs (the CPU's, or the CUDA kernels for
// the CUDA dispatch key: pack_kernel.cu). A call mixing devices is an error (check_list) before
// anything runs.
std::vector<at::Tensor> pack_with(at::TensorList tensors, TableRun run_table);
void unpack_with(at::TensorList flats, at::TensorList tensors, double scale, TableRun run_table);
// What the list ops say when a CUDA graph capture is on.
extern const char* const kListCaptureError;

}  // namespace minimm
