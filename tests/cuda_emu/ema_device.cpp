// csrc/ema_kernel.cu on the emulated device: the file itself, compiled as host C++ against the
// shim, and its list op as an entry point the tests call on CPU tensors standing for device
// memory (torch.ops.minimm_emu.ema_update_): the function the CUDA dispatch key runs, minus the
// routing by device. The plan's step is reached through the hook the file sets (emulator.cpp).
#include "ema_kernel.cu"

TORCH_LIBRARY_FRAGMENT(minimm_emu, m) {
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] src, Tensor? weight_tensor, float weight) -> ()",
        &minimm::ema_update_cuda);
}
