// csrc/pack_kernel.cu on the emulated device (see ema_device.cpp).
#include "pack_kernel.cu"

namespace minimm {
namespace {
struct PackPlanRun : torch::CustomClassHolder {};

const auto pack_plan_run_class =
    torch::class_<PackPlanRun>("minimm_emu", "PackPlanRun")
        .def(torch::init<>())
        .def("run", [](const c10::intrusive_ptr<PackPlanRun>&,
                       const c10::intrusive_ptr<PackPlan>& plan, bool unpack, double scale) {
          if (!plan->tensors.empty()) plan->run(unpack, scale, &pack_run_cuda);
        });
}  // namespace
}  // namespace minimm

TORCH_LIBRARY_FRAGMENT(minimm_emu, m) {
  m.def("pack(Tensor[] tensors) -> Tensor[]", &minimm::pack_cuda);
  m.def("unpack_(Tensor[] flats, Tensor(a!)[] tensors, float scale) -> ()", &minimm::unpack_cuda);
}
