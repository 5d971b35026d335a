// csrc/pack_kernel.cu on the emulated device, and its list ops as entry points (see
// ema_device.cpp).
#include "pack_kernel.cu"

TORCH_LIBRARY_FRAGMENT(minimm_emu, m) {
  m.def("pack(Tensor[] tensors) -> Tensor[]", &minimm::pack_cuda);
  m.def("unpack_(Tensor[] flats, Tensor(a!)[] tensors, float scale) -> ()", &minimm::unpack_cuda);
}
