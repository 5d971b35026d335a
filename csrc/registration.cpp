// Op schemas, the EMAPlan class and the input checks, registered with the PyTorch dispatcher.
//
// Python calls these as torch.ops.minimm.<name>; the dispatcher routes each call to the CPU
// kernels (cpu_kernels.cpp) or, when the extension was built with CUDA, to the CUDA kernels
// (cuda_kernels.cu), by the device of the tensor arguments. Only torch/library.h and ATen are
// included (not torch/extension.h), which keeps a cold CPU build to a few seconds.
#include "minimm_ops.h"

namespace minimm {

void check_list(const char* op, at::TensorList tensors, const at::Device& device) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK(t.defined(), op, ": tensor ", i, " is undefined");
    TORCH_CHECK(t.device() == device, op, ": tensor ", i, " is on ", t.device(), " but tensor 0 is on ",
                device, "; all tensors of one call must share a device");
    TORCH_CHECK(t.is_contiguous(), op, ": tensor ", i, " is not contiguous; call .contiguous() first");
    TORCH_CHECK(!t.is_complex(), op, ": tensor ", i, " is complex, which is not supported");
  }
}

void check_pairs(const char* op, at::TensorList dst, at::TensorList src, const at::Device& device) {
  TORCH_CHECK(dst.size() == src.size(), op, ": got ", dst.size(), " destination tensors but ", src.size(),
              " source tensors");
  check_list(op, dst, device);
  check_list(op, src, device);
  for (size_t i = 0; i < dst.size(); ++i) {
    TORCH_CHECK(dst[i].sizes() == src[i].sizes(), op, ": pair ", i, " has shapes ", dst[i].sizes(), " and ",
                src[i].sizes());
    const bool floating = dst[i].is_floating_point() && src[i].is_floating_point();
    TORCH_CHECK(floating || dst[i].scalar_type() == src[i].scalar_type(), op, ": pair ", i, " has dtypes ",
                dst[i].scalar_type(), " and ", src[i].scalar_type(),
                "; only floating pairs may differ in dtype (non-floating pairs are copied)");
  }
}

EMAPlan::EMAPlan(std::vector<at::Tensor> ema_, std::vector<at::Tensor> src_, std::vector<at::Tensor> mirror_ema_,
                 std::vector<at::Tensor> mirror_src_, int64_t kind, double momentum, double gamma, int64_t interval)
    : ema(std::move(ema_)), src(std::move(src_)), mirror_ema(std::move(mirror_ema_)),
      mirror_src(std::move(mirror_src_)), rule{kind, momentum, gamma, interval, nullptr, nullptr} {
  TORCH_CHECK(kind == kEMA || kind == kAnneal || kind == kSWA, "EMAPlan: unknown averaging rule ", kind);
  TORCH_CHECK(interval >= 1, "EMAPlan: interval must be >= 1, got ", interval);
  TORCH_CHECK(kind != kAnneal || gamma > 0, "EMAPlan: gamma must be > 0, got ", gamma);
  const at::Device device = !ema.empty() ? ema[0].device()
                            : !mirror_ema.empty() ? mirror_ema[0].device() : at::Device(at::kCPU);
  check_pairs("EMAPlan", ema, src, device);
  check_pairs("EMAPlan (mirrored)", mirror_ema, mirror_src, device);
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
    layout.group_of.push_back(static_cast<int64_t>(g));
    layout.offset_of.push_back(layout.group_numel[g]);
    layout.group_numel[g] += t.numel();
  }
  return layout;
}

void check_flats(const char* op, at::TensorList flats, const PackLayout& layout, const at::Device& device) {
  TORCH_CHECK(flats.size() == layout.dtypes.size(), op, ": got ", flats.size(),
              " flat tensors but the tensors pack into ", layout.dtypes.size(), " (one per dtype)");
  check_list(op, flats, device);
  for (size_t g = 0; g < flats.size(); ++g) {
    TORCH_CHECK(flats[g].scalar_type() == layout.dtypes[g], op, ": flat tensor ", g, " has dtype ",
                flats[g].scalar_type(), " but its tensors have dtype ", layout.dtypes[g]);
    TORCH_CHECK(flats[g].numel() == layout.group_numel[g], op, ": flat tensor ", g, " has ", flats[g].numel(),
                " elements but its tensors hold ", layout.group_numel[g]);
  }
}

}  // namespace minimm

TORCH_LIBRARY(minimm, m) {
  m.class_<minimm::EMAPlan>("EMAPlan")
      .def(torch::init<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
                       std::vector<at::Tensor>, int64_t, double, double, int64_t>())
      .def("size", &minimm::EMAPlan::size);
  // ema += weight * (src - ema) for floating pairs, copy for the others. The weight is
  // `weight_tensor` (a 0-dim tensor, read where the kernel runs) when given, else `weight`.
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] src, Tensor? weight_tensor, float weight) -> ()");
  // One call of MMEngine's update_parameters for the plan's pairs, with `steps` (a 0-dim int64
  // tensor on the plan's device) read and incremented where the kernel runs.
  m.def("ema_plan_step(__torch__.torch.classes.minimm.EMAPlan plan, Tensor(a!) steps) -> ()");
  // One flat tensor per dtype (first-seen order) holding the tensors back to back.
  m.def("pack(Tensor[] tensors) -> Tensor[]");
  // The inverse of pack, multiplying by `scale` on the way (integers are rounded to nearest).
  m.def("unpack_(Tensor[] flats, Tensor(a!)[] tensors, float scale) -> ()");
}
