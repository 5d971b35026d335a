// The input checks every op makes, and the staging of list-op inputs that are not laid out as
// one dense block. They turn a mistake into a ValueError naming it instead of memory corruption
// or a race; the PyTorch twins in minimm/ops make the same checks with the same messages.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace minimm {

inline void check_tensor(const char* op, const at::Tensor& t, size_t i, const at::Device& device) {
  TORCH_CHECK_VALUE(t.defined(), op, ": tensor ", i, " is undefined");
  TORCH_CHECK_VALUE(t.device() == device, op, ": tensor ", i, " is on ", t.device(), " but the call runs on ", device,
                    "; all tensors of one call must share a device");
  TORCH_CHECK_VALUE(!t.is_complex(), op, ": tensor ", i, " is complex, which is not supported");
}

// All tensors defined and on `device`; contiguous too with `require_contiguous`.
inline void check_list(const char* op, at::TensorList tensors, const at::Device& device, bool require_contiguous) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(op, tensors[i], i, device);
    TORCH_CHECK_VALUE(!require_contiguous || tensors[i].is_contiguous(), op, ": tensor ", i,
                      " is not contiguous; call .contiguous() first");
  }
}

// Element-wise kernels only need both sides laid out the same way in one dense block: contiguous,
// or e.g. both channels_last.
inline bool dense_alike(const at::Tensor& d, const at::Tensor& s) {
  return (d.is_contiguous() && s.is_contiguous()) || (d.is_non_overlapping_and_dense() && d.strides() == s.strides());
}

// Equal lengths, defined, equal shapes, one device, no complex dtype. A floating pair may mix
// floating dtypes (an fp32 EMA of an fp16 source); any other pair must have equal dtypes (it is
// copied byte for byte). With `require_dense` (plans), both sides must be dense with equal strides.
inline void check_pairs(const char* op, at::TensorList dst, at::TensorList src, const at::Device& device,
                        bool require_dense) {
  TORCH_CHECK_VALUE(dst.size() == src.size(), op, ": got ", dst.size(), " destination tensors but ", src.size(),
                    " source tensors");
  for (size_t i = 0; i < dst.size(); ++i) {
    const at::Tensor& d = dst[i];
    const at::Tensor& s = src[i];
    check_tensor(op, d, i, device);
    check_tensor(op, s, i, device);
    TORCH_CHECK_VALUE(d.sizes() == s.sizes(), op, ": pair ", i, " has shapes ", d.sizes(), " and ", s.sizes());
    TORCH_CHECK_VALUE(!require_dense || dense_alike(d, s), op, ": pair ", i,
                      " is not dense with equal strides (strides ", d.strides(), " and ", s.strides(),
                      "); make both sides contiguous, or give both the same memory format");
    const bool floating = d.is_floating_point() && s.is_floating_point();
    TORCH_CHECK_VALUE(floating || d.scalar_type() == s.scalar_type(), op, ": pair ", i, " has dtypes ",
                      d.scalar_type(), " and ", s.scalar_type(),
                      "; only floating pairs may differ in dtype (non-floating pairs are copied)");
  }
}

// Memory written by one call must not be touched by any other tensor of it: two destinations in
// overlapping bytes (a tensor listed twice, two views of one tensor) would race, and so would a
// destination overlapping another pair's source (one block reads what another writes; it also
// breaks the kernels' __restrict__). A pair whose source is its destination, the same view, is
// allowed (the update leaves it as it is). The memory span of a tensor is [offset, offset +
// sum((size - 1) * stride)] in elements of its storage, scaled to bytes; spans that intersect are
// an error even when the elements interleave (w[:, ::2] and w[:, 1::2]).
struct Span {
  const void* storage;
  int64_t first, last;  // bytes
  size_t index;
  bool written;
  bool operator<(const Span& o) const { return std::tie(storage, first) < std::tie(o.storage, o.first); }
};

inline Span span_of(const at::Tensor& t, size_t index, bool written) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const int64_t size = t.element_size();
  return {t.storage().unsafeGetStorageImpl(), t.storage_offset() * size, (last + 1) * size - 1, index, written};
}

inline bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.is_alias_of(b) && a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
}

inline void check_no_overlap(const char* op, at::TensorList dst, at::TensorList src = {}) {
  std::vector<Span> spans;
  for (size_t i = 0; i < dst.size(); ++i)
    if (dst[i].numel() != 0) spans.push_back(span_of(dst[i], i, true));
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i].numel() != 0 && !(i < dst.size() && same_view(dst[i], src[i]))) spans.push_back(span_of(src[i], i, false));
  std::sort(spans.begin(), spans.end());
  // One sweep in order of first byte: within a storage, the written and the read span reaching
  // furthest so far; a span starting before one of them ends overlaps it.
  const Span *written = nullptr, *read = nullptr;
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    if (k > 0 && spans[k - 1].storage != s.storage) written = read = nullptr;
    if (s.written && written && written->last >= s.first)
      TORCH_CHECK_VALUE(false, op, ": tensors ", std::min(written->index, s.index), " and ",
                        std::max(written->index, s.index), " to be written share memory (the same tensor twice, "
                        "or overlapping views); list each tensor once");
    const Span* other = s.written ? read : written;
    if (other && other->last >= s.first) {
      const Span& w = s.written ? s : *other;
      const Span& r = s.written ? *other : s;
      TORCH_CHECK_VALUE(false, op, ": destination ", w.index, " shares memory with source ", r.index,
                        " (a tensor written by one pair and read by another, or overlapping views); the update "
                        "would read values it is writing");
    }
    const Span*& furthest = s.written ? written : read;
    if (!furthest || s.last > furthest->last) furthest = &s;
  }
}

// A list call's tensors in a layout the kernels walk as one block: pairs (`src` not empty) that
// are not dense with equal strides, or single tensors (`src` empty) that are not contiguous, are
// replaced by contiguous copies; finish() writes the copied destinations back.
struct Staged {
  std::vector<at::Tensor> dst, src;
  std::vector<size_t> copied;  // indices of `dst` that are copies

  void finish(at::TensorList originals) const {
    for (size_t i : copied) originals[i].copy_(dst[i]);
  }
};

inline Staged stage(at::TensorList dst, at::TensorList src) {
  Staged staged{dst.vec(), src.vec(), {}};
  for (size_t i = 0; i < dst.size(); ++i) {
    if (src.empty() ? dst[i].is_contiguous() : dense_alike(dst[i], src[i])) continue;
    staged.copied.push_back(i);
    staged.dst[i] = dst[i].contiguous();
    if (!src.empty()) staged.src[i] = src[i].contiguous();
  }
  return staged;
}

}  // namespace minimm
