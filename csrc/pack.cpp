// The pack ops: registration, the PackPlan class and the CPU kernels. Like the EMA ops
// (ema.cpp), every call walks a table of rows and chunks, here with at::parallel_for.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include "checks.h"
#include "pack.h"

namespace minimm {

TableRun cuda_pack_run = nullptr;

const char* const kListCaptureError =
    "pack and unpack_ cannot be captured in a CUDA graph: every call copies its table of tensors "
    "to the GPU. Capture the pack() and unpack_() of a PackPlan (minimm.ops.PackPlan) instead, "
    "which uploads its tables once";

PackLayout pack_layout(at::TensorList tensors) {
  PackLayout layout;
  for (const at::Tensor& t : tensors) {
    size_t g = 0;
    while (g < layout.dtypes.size() && layout.dtypes[g] != t.scalar_type()) ++g;
    if (g == layout.dtypes.size()) {
      layout.dtypes.push_back(t.scalar_type());
      layout.group_numel.push_back(0);
    }
    const int64_t start = align_up(layout.group_numel[g], std::max<int64_t>(1, kAlignBytes / t.element_size()));
    layout.group_of.push_back(static_cast<int64_t>(g));
    layout.offset_of.push_back(start);
    layout.group_numel[g] = start + t.numel();
  }
  return layout;
}

void check_flats(const char* op, at::TensorList flats, const PackLayout& layout, const at::Device& device) {
  TORCH_CHECK_VALUE(flats.size() == layout.dtypes.size(), op, ": got ", flats.size(),
                    " flat tensors but the tensors pack into ", layout.dtypes.size(), " (one per dtype)");
  check_list(op, flats, device, /*require_contiguous=*/true);
  for (size_t g = 0; g < flats.size(); ++g) {
    TORCH_CHECK_VALUE(flats[g].scalar_type() == layout.dtypes[g], op, ": flat tensor ", g, " has dtype ",
                      flats[g].scalar_type(), " but its tensors have dtype ", layout.dtypes[g]);
    TORCH_CHECK_VALUE(flats[g].numel() == layout.group_numel[g], op, ": flat tensor ", g, " has ",
                      flats[g].numel(), " elements but its tensors hold ", layout.group_numel[g]);
  }
}

int32_t scale_index(at::ScalarType type) {
  static constexpr std::array<at::ScalarType, kScaleTypes> kTypes = {
      at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kHalf, at::kFloat, at::kDouble, at::kBFloat16};
  for (int32_t i = 0; i < kScaleTypes; ++i)
    if (kTypes[i] == type) return i;
  TORCH_CHECK_VALUE(false, "unpack_: ", type, " tensors cannot be scaled; only uint8, int8, int16, int32, int64, "
                    "float16, float32, float64, bfloat16 can");
}

Table flat_table(at::TensorList flats, at::TensorList tensors, const PackLayout& layout, bool to_flat,
                 bool zero_padding, double scale) {
  Table table;
  std::vector<int64_t> filled(flats.size(), 0);  // per flat tensor: bytes up to the end of the last slice
  auto add = [&](void* dst, const void* src, int64_t numel, int32_t kernel, int64_t elem_bytes) {
    const auto row = static_cast<int32_t>(table.rows.size());
    table.rows.push_back({dst, src, numel, kernel, kCopyAlways});
    add_chunks(table, row, numel, elem_bytes);
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    const int64_t g = layout.group_of[i], size = t.element_size(), bytes = t.numel() * size;
    char* flat = static_cast<char*>(flats[g].data_ptr());
    char* slice = flat + layout.offset_of[i] * size;
    if (zero_padding && slice - flat > filled[g]) add(flat + filled[g], nullptr, slice - flat - filled[g], kZeroBytes, 1);
    filled[g] = slice - flat + bytes;
    if (bytes == 0) continue;
    if (to_flat || scale == 1.0) {
      add(to_flat ? slice : t.data_ptr(), to_flat ? t.const_data_ptr() : slice, bytes, kPackBytes, 1);
    } else {
      TORCH_CHECK_VALUE(t.scalar_type() != at::kBool, "unpack_: bool tensors cannot be scaled (scale=", scale, ")");
      add(t.data_ptr(), slice, t.numel(), kScale0 + scale_index(t.scalar_type()), size);
    }
  }
  return table;
}

namespace {

using SegmentFn = void (*)(const Row&, int64_t first, int64_t n, double scale);

void copy_segment(const Row& r, int64_t first, int64_t n, double) {
  std::memcpy(static_cast<char*>(r.dst) + first, static_cast<const char*>(r.src) + first, n);
}

void zero_segment(const Row& r, int64_t first, int64_t n, double) {
  std::memset(static_cast<char*>(r.dst) + first, 0, n);
}

template <typename T>
void scale_segment(const Row& r, int64_t first, int64_t n, double scale) {
  T* dst = static_cast<T*>(r.dst) + first;
  const T* src = static_cast<const T*>(r.src) + first;
  if constexpr (std::is_integral_v<T>) {
    // Round to nearest (ties to even), clamped (pack.h): a SUM of integer buffers times
    // 1/world_size is never truncated toward zero as MMEngine's true_divide + copy_ does.
    for (int64_t k = 0; k < n; ++k) dst[k] = round_into<T>(static_cast<double>(src[k]) * scale);
  } else {
    using A = acc_t<T>;
    const A s = static_cast<A>(scale);
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(static_cast<A>(src[k]) * s);
  }
}

template <size_t I>
using Scaled = std::tuple_element_t<I, std::tuple<uint8_t, int8_t, int16_t, int32_t, int64_t, at::Half, float, double,
                                                  at::BFloat16>>;

template <size_t... I>
constexpr std::array<SegmentFn, kScale0 + kScaleTypes> cpu_kernels(std::index_sequence<I...>) {
  return {{&copy_segment, &zero_segment, &scale_segment<Scaled<I>>...}};
}
constexpr auto kKernels = cpu_kernels(std::make_index_sequence<kScaleTypes>());

constexpr int64_t kGrain = 131072;  // bytes (elements for scaled rows) below which one thread runs

bool run_cpu(Table& table, const at::Device&, double scale, const char*) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const Chunk& chunk = table.chunks[c];
      const Row& row = table.rows[chunk.row];
      kKernels[row.kernel](row, chunk.first, chunk.n, scale);
    }
  };
  if (table.units < kGrain) run(0, static_cast<int64_t>(table.chunks.size()));
  else at::parallel_for(0, static_cast<int64_t>(table.chunks.size()), 1, run);
  return false;
}

}  // namespace

TableRun table_run_for(const at::Device& device) {
  if (device.is_cpu()) return &run_cpu;
  TORCH_CHECK(device.is_cuda() && cuda_pack_run != nullptr, "pack: this build has no kernels for ", device);
  return cuda_pack_run;
}

PackPlan::PackPlan(std::vector<at::Tensor> tensors_) : tensors(std::move(tensors_)) {
  if (!tensors.empty()) device = tensors[0].device();
  check_list("PackPlan", tensors, device, /*require_contiguous=*/true);
  layout = pack_layout(tensors);
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::zeros({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g]).device(device)));
  for (const at::Tensor& t : tensors) watched.push_back(t.unsafeGetTensorImpl());
  for (const at::Tensor& t : flats) watched.push_back(t.unsafeGetTensorImpl());
  rebuild();
}

TensorPlace flat_place_of(const c10::TensorImpl* impl) {
  const c10::Storage& storage = impl->unsafe_storage();
  return {storage.unsafeGetStorageImpl(), storage.data(), impl->storage_offset(), impl->numel(), impl->dtype(),
          static_cast<uint64_t>(impl->is_contiguous())};
}

void PackPlan::rebuild() {
  check_list("PackPlan", tensors, device, /*require_contiguous=*/true);
  check_flats("PackPlan", flats, pack_layout(tensors), device);
  check_no_overlap("PackPlan", tensors);
  pack_table = flat_table(flats, tensors, layout, /*to_flat=*/true, /*zero_padding=*/false, 1.0);
  unpack_table = flat_table(flats, tensors, layout, /*to_flat=*/false, false, 1.0);
  has_scaled = false;
  seen.clear();
  table_storages.clear();
  for (const c10::TensorImpl* impl : watched) {
    seen.push_back(flat_place_of(impl));
    table_storages.push_back(impl->storage());
  }
  pack_table.storages = unpack_table.storages = &table_storages;
  if (std::exchange(table_captured, false))
    TORCH_WARN("PackPlan: a tensor of this plan moved after a pack or unpack_ was captured in a CUDA graph; a replay "
               "of that graph keeps using the memory it captured, so capture it again");
}

void PackPlan::run(bool unpack, double scale, TableRun run_table) {
  for (size_t i = 0; i < watched.size(); ++i) {
    if (!(flat_place_of(watched[i]) == seen[i])) {
      rebuild();
      break;
    }
  }
  if (unpack && scale != 1.0 && !has_scaled) {
    scaled_table = flat_table(flats, tensors, layout, /*to_flat=*/false, false, scale);
    scaled_table.storages = &table_storages;
    has_scaled = true;
  }
  Table& table = !unpack ? pack_table : scale == 1.0 ? unpack_table : scaled_table;
  if (run_table(table, device, scale,
                "PackPlan: the first pack() or unpack_() (and the first after a tensor moved, or "
                "the first unpack_ with a scale other than 1) copies a table to the GPU and cannot "
                "be captured in a CUDA graph; run it once before capturing"))
    captured = table_captured = true;
}

namespace {

std::vector<at::Tensor> pack_on(at::TensorList tensors, const at::Device& device,
                                TableRun run_table) {
  check_list("pack", tensors, device, /*require_contiguous=*/false);
  const Staged staged = stage(tensors, {});
  const PackLayout layout = pack_layout(tensors);
  std::vector<at::Tensor> flats;
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::empty({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g]).device(device)));
  Table table = flat_table(flats, staged.dst, layout, /*to_flat=*/true, /*zero_padding=*/true, 1.0);
  run_table(table, device, 1.0, kListCaptureError);
  return flats;
}

void unpack_on(at::TensorList flats, at::TensorList tensors, double scale, const at::Device& device,
               TableRun run_table) {
  check_list("unpack_", tensors, device, /*require_contiguous=*/false);
  const PackLayout layout = pack_layout(tensors);
  check_flats("unpack_", flats, layout, device);
  check_no_overlap("unpack_", tensors);
  const Staged staged = stage(tensors, {});
  Table table = flat_table(flats, staged.dst, layout, /*to_flat=*/false, false, scale);
  run_table(table, device, scale, kListCaptureError);
  staged.finish(tensors);
}

}  // namespace

std::vector<at::Tensor> pack_with(at::TensorList tensors, TableRun run_table) {
  if (tensors.empty()) return {};
  return pack_on(tensors, tensors[0].device(), run_table);
}

void unpack_with(at::TensorList flats, at::TensorList tensors, double scale, TableRun run_table) {
  if (tensors.empty() && flats.empty()) return;
  unpack_on(flats, tensors, scale, (tensors.empty() ? flats : tensors)[0].device(), run_table);
}

namespace {

std::vector<at::Tensor> pack_cpu(at::TensorList tensors) { return pack_with(tensors, &run_cpu); }

void unpack_cpu(at::TensorList flats, at::TensorList tensors, double scale) {
  unpack_with(flats, tensors, scale, &run_cpu);
}

const auto pack_plan_class =
    torch::class_<PackPlan>("minimm", "PackPlan")
        .def(torch::init<std::vector<at::Tensor>>())
        .def("flats", [](const c10::intrusive_ptr<PackPlan>& self) { return self->flats; })
        .def("pack", [](const c10::intrusive_ptr<PackPlan>& self) {
          if (!self->tensors.empty()) self->run(/*unpack=*/false, 1.0, table_run_for(self->device));
          return self->flats;
        })
        .def("unpack_", [](const c10::intrusive_ptr<PackPlan>& self, double scale) {
          if (!self->tensors.empty())
            self->run(/*unpack=*/true, scale, table_run_for(self->device));
        })
        .def("captured", [](const c10::intrusive_ptr<PackPlan>& self) {
          return self->captured;
        });

}  // namespace
}  // namespace minimm

TORCH_LIBRARY_FRAGMENT(minimm, m) {
  // One flat tensor per dtype (first-seen order) holding the tensors, each at a 16-byte boundary.
  m.def("pack(Tensor[] tensors) -> Tensor[]");
  // The inverse of pack, multiplying by `scale` on the way (integers are rounded to nearest).
  m.def("unpack_(Tensor[] flats, Tensor(a!)[] tensors, float scale) -> ()");
}

TORCH_LIBRARY_IMPL(minimm, CPU, m) {
  m.impl("pack", &minimm::pack_cpu);
  m.impl("unpack_", &minimm::unpack_cpu);
}
