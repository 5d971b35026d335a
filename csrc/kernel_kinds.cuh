// One kernel per kind of row, chosen at run time: what ema_kernel.cu and pack_kernel.cu share to
// turn a segment's kind (a number the host computes from a row's dtypes) into the template
// instance compiled for it, for its launch and for its grid. Included by those two files only.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <type_traits>

#include "multi_tensor_apply.cuh"

namespace minimm {

// `call(std::integral_constant<int, K>{})` for the K in 0 .. Kinds - 1 equal to `kind`: the
// compiler unrolls the comparisons, and `call` names the kernel `name<decltype(k)::value>`, a
// constant, as a launch needs. A kind out of range is a bug of the caller's table.
template <int Kinds, int K = 0, typename Call>
auto with_kind(int32_t kind, const Call& call) {
  static_assert(K < Kinds, "a kernel family has one kind at least");
  if constexpr (K + 1 < Kinds) {
    if (kind != K) return with_kind<Kinds, K + 1>(kind, call);
  } else {
    TORCH_CHECK(kind == K, "minimm: no kernel for kind ", kind, " (there are ", Kinds, ")");
  }
  return call(std::integral_constant<int, K>{});
}

// The grid function upload() takes, for a family whose kernel of kind k is `kernel_of(k)` (a
// function pointer: every kind's kernel has the same parameters): grid_for that kernel.
template <int Kinds, typename KernelOf>
auto grids_of(KernelOf kernel_of) {
  return [kernel_of](int32_t kind, int64_t chunks) {
    return with_kind<Kinds>(kind, [&](auto k) { return grid_for(kernel_of(k), chunks); });
  };
}

}  // namespace minimm
