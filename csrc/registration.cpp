// Op schemas, the EMAPlan class and the input checks, registered with the PyTorch dispatcher.
//
// Python calls these as torch.ops.minimm.<name>; the dispatcher routes each call to the CPU
// kernels (cpu_kernels.cpp) or, when the extension was built with CUDA, to the CUDA kernels
// (cuda_kernels.cu), by the device of the tensor arguments. Only torch/library.h and ATen are
// included (not torch/extension.h), which keeps a cold CPU build to a few seconds.
#include <algorithm>

#include "minimm_ops.h"

namespace minimm {

void check_tensor(const char* op, const at::Tensor& t, size_t i, const at::Device& device) {
  TORCH_CHECK_VALUE(t.defined(), op, ": tensor ", i, " is undefined");
  TORCH_CHECK_VALUE(t.device() == device, op, ": tensor ", i, " is on ", t.device(), " but the call runs on ", device,
                    "; all tensors of one call must share a device");
  TORCH_CHECK_VALUE(!t.is_complex(), op, ": tensor ", i, " is complex, which is not supported");
}

void check_list(const char* op, at::TensorList tensors, const at::Device& device, bool require_contiguous) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(op, tensors[i], i, device);
    TORCH_CHECK_VALUE(!require_contiguous || tensors[i].is_contiguous(), op, ": tensor ", i,
                      " is not contiguous; call .contiguous() first");
  }
}

// Element-wise kernels only need both sides laid out the same way in one dense block: contiguous,
// or e.g. both channels_last.
bool dense_alike(const at::Tensor& d, const at::Tensor& s) {
  return (d.is_contiguous() && s.is_contiguous()) || (d.is_non_overlapping_and_dense() && d.strides() == s.strides());
}

void check_pairs(const char* op, at::TensorList dst, at::TensorList src, const at::Device& device,
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

Staged stage(at::TensorList dst, at::TensorList src) {
  Staged staged;
  staged.dst = dst;
  staged.src = src;
  for (size_t i = 0; i < dst.size(); ++i)
    if (!(src.empty() ? dst[i].is_contiguous() : dense_alike(dst[i], src[i]))) staged.copied.push_back(i);
  if (staged.copied.empty()) return staged;
  staged.own_dst_ = dst.vec();
  staged.own_src_ = src.vec();
  for (size_t i : staged.copied) {
    staged.own_dst_[i] = dst[i].contiguous();
    if (!src.empty()) staged.own_src_[i] = src[i].contiguous();
  }
  staged.dst = staged.own_dst_;
  staged.src = staged.own_src_;
  return staged;
}

void Staged::finish(at::TensorList originals) const {
  for (size_t i : copied) originals[i].copy_(dst[i]);
}

bool PlanBase::stale(c10::DeviceType type) const {
  if (!table || table_type != type) return true;
  for (size_t i = 0; i < watched.size(); ++i)
    if (!(place_of(watched[i]) == seen[i])) return true;
  return false;
}

void PlanBase::remember(c10::DeviceType type) {
  table_type = type;
  seen.clear();
  for (const at::Tensor& t : watched) seen.push_back(place_of(t));
}

EMAPlan::EMAPlan(std::vector<at::Tensor> ema_, std::vector<at::Tensor> src_, std::vector<at::Tensor> mirror_ema_,
                 std::vector<at::Tensor> mirror_src_, int64_t kind, double momentum, double gamma, int64_t interval)
    : ema(std::move(ema_)), src(std::move(src_)), mirror_ema(std::move(mirror_ema_)),
      mirror_src(std::move(mirror_src_)), rule{kind, momentum, gamma, interval, nullptr, nullptr} {
  TORCH_CHECK_VALUE(kind == kEMA || kind == kAnneal || kind == kSWA, "EMAPlan: unknown averaging rule ", kind);
  TORCH_CHECK_VALUE(interval >= 1, "EMAPlan: interval must be >= 1, got ", interval);
  TORCH_CHECK_VALUE(kind != kAnneal || gamma > 0, "EMAPlan: gamma must be > 0, got ", gamma);
  if (!ema.empty()) device = ema[0].device();
  else if (!mirror_ema.empty()) device = mirror_ema[0].device();
  for (const auto* list : {&ema, &src, &mirror_ema, &mirror_src})
    watched.insert(watched.end(), list->begin(), list->end());
  check();
}

void EMAPlan::check() const {
  check_pairs("EMAPlan", ema, src, device, /*require_dense=*/true);
  check_pairs("EMAPlan (mirrored pairs)", mirror_ema, mirror_src, device, /*require_dense=*/true);
}

PackPlan::PackPlan(std::vector<at::Tensor> tensors_) : tensors(std::move(tensors_)) {
  if (!tensors.empty()) device = tensors[0].device();
  check_list("PackPlan", tensors, device, /*require_contiguous=*/true);
  layout = pack_layout(tensors);
  for (size_t g = 0; g < layout.dtypes.size(); ++g)
    flats.push_back(at::zeros({layout.group_numel[g]}, at::TensorOptions().dtype(layout.dtypes[g]).device(device)));
  watched = tensors;
  watched.insert(watched.end(), flats.begin(), flats.end());
}

void PackPlan::check() const {
  check_list("PackPlan", tensors, device, /*require_contiguous=*/true);
  check_flats("PackPlan", flats, pack_layout(tensors), device);
}

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
    TORCH_CHECK_VALUE(flats[g].numel() == layout.group_numel[g], op, ": flat tensor ", g, " has ", flats[g].numel(),
                " elements but its tensors hold ", layout.group_numel[g]);
  }
}

}  // namespace minimm

namespace {

// From a plan method (called from Python) to the dispatcher, which picks the CPU or CUDA kernel by
// the device of the tensor arguments. A method call from Python costs ~2.5 us where passing the
// plan object as an argument through torch.ops costs ~10 us; the dispatcher call here is cheap.
void plan_step(const c10::intrusive_ptr<minimm::EMAPlan>& self, at::Tensor steps) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("minimm::ema_plan_step", "")
          .typed<void(const c10::intrusive_ptr<minimm::EMAPlan>&, at::TensorList, at::TensorList, at::Tensor)>();
  op.call(self, self->ema, self->mirror_ema, steps);
}

void plan_run(const c10::intrusive_ptr<minimm::PackPlan>& self, bool unpack, double scale) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("minimm::pack_plan_run", "")
          .typed<void(const c10::intrusive_ptr<minimm::PackPlan>&, at::TensorList, at::TensorList, bool, double)>();
  if (!self->tensors.empty()) op.call(self, self->flats, self->tensors, unpack, scale);
}

}  // namespace

namespace minimm {

void register_classes() {
  static const bool registered = [] {
    torch::class_<EMAPlan>("minimm", "EMAPlan")
        .def(torch::init<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
                         std::vector<at::Tensor>, int64_t, double, double, int64_t>())
        .def("step", &plan_step);
    torch::class_<PackPlan>("minimm", "PackPlan")
        .def(torch::init<std::vector<at::Tensor>>())
        .def("flats", [](const c10::intrusive_ptr<PackPlan>& self) { return self->flats; })
        .def("pack", [](const c10::intrusive_ptr<PackPlan>& self) {
          plan_run(self, /*unpack=*/false, 1.0);
          return self->flats;
        })
        .def("unpack_", [](const c10::intrusive_ptr<PackPlan>& self, double scale) {
          plan_run(self, /*unpack=*/true, scale);
        });
    return true;
  }();
  (void)registered;
}

}  // namespace minimm

TORCH_LIBRARY(minimm, m) {
  minimm::register_classes();  // the schemas below name the classes
  // Each schema marks what the op writes (Tensor(a!)); the plan ops also take the plan's own
  // tensors, so that what they write is visible in the schema, not only inside the plan object.
  //
  // ema += weight * (src - ema) for floating pairs, copy for the others. The weight is
  // `weight_tensor` (a 0-dim tensor, read where the kernel runs) when given, else `weight`.
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] src, Tensor? weight_tensor, float weight) -> ()");
  // One call of MMEngine's update_parameters for the plan's pairs (`ema`, `mirror_ema` are the
  // plan's destinations), with `steps` (a 0-dim int64 tensor on the plan's device) read and
  // incremented where the kernel runs.
  m.def("ema_plan_step(__torch__.torch.classes.minimm.EMAPlan plan, Tensor(a!)[] ema, Tensor(b!)[] mirror_ema, "
        "Tensor(c!) steps) -> ()");
  // One flat tensor per dtype (first-seen order) holding the tensors, each at a 16-byte boundary.
  m.def("pack(Tensor[] tensors) -> Tensor[]");
  // The inverse of pack, multiplying by `scale` on the way (integers are rounded to nearest).
  m.def("unpack_(Tensor[] flats, Tensor(a!)[] tensors, float scale) -> ()");
  // pack (unpack=False: writes the plan's `flats`) or unpack_ (writes the plan's `tensors`).
  m.def("pack_plan_run(__torch__.torch.classes.minimm.PackPlan plan, Tensor(a!)[] flats, Tensor(b!)[] tensors, "
        "bool unpack, float scale) -> ()");
}
