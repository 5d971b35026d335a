// csrc/ema_kernel.cu on the emulated device: the file itself, compiled as host C++ against the
// shim, and the entry points the tests call on CPU tensors standing for device memory. They are
// the functions the CUDA dispatch key runs, minus the routing by device. The plan's is a method
// of a class (torch.classes.minimm_emu.EMAPlanStep): like the plans' own methods, and unlike an
// op, it turns the C++ warnings into Python ones.
#include "ema_kernel.cu"

namespace minimm {
namespace {
struct EMAPlanStep : torch::CustomClassHolder {};

const auto ema_plan_step_class =
    torch::class_<EMAPlanStep>("minimm_emu", "EMAPlanStep")
        .def(torch::init<>())
        .def("step", [](const c10::intrusive_ptr<EMAPlanStep>&,
                        const c10::intrusive_ptr<EMAPlan>& plan, const at::Tensor& steps) {
          plan_step_cuda(*plan, steps);
        });
}  // namespace
}  // namespace minimm

TORCH_LIBRARY_FRAGMENT(minimm_emu, m) {
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] src, Tensor? weight_tensor, float weight) -> ()",
        &minimm::ema_update_cuda);
}
