"""Fake kernels of the native list ops: the output shapes and the input checks, without data.

PyTorch calls a fake kernel instead of the real one for tensors without data: the ``meta``
device, ``FakeTensor`` s under ``torch.compile`` and ``torch.library.opcheck``. Each one runs the
same checks as the PyTorch twins, so a call mixing CPU and ``meta`` tensors fails with the same
ValueError on every backend. They are registered once the native ops are loaded (this module
puts ``register`` in ``loader.when_loaded``; ``ops/__init__.py`` imports it).
The plans (``EMAPlan``, ``PackPlan``) are TorchScript classes whose methods run the kernels
directly, outside the dispatcher; they have no fake kernels.
"""
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from . import loader
from .checks import check_pairs
from .pack import dtype_groups, layout

_registered = False


def _check_one_device(name: str, tensors: Sequence[Tensor]) -> None:
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f'{name}: the tensors are on {sorted(map(str, devices))}; all tensors of '
                         'one call must share a device')


def _ema_update_fake(ema: List[Tensor], src: List[Tensor], weight_tensor: Optional[Tensor],
                     weight: float) -> None:
    check_pairs('ema_update_', ema, src)


def _pack_fake(tensors: List[Tensor]) -> List[Tensor]:
    _check_one_device('pack', tensors)
    return [tensors[g[0]].new_empty(layout([tensors[i] for i in g])[1])
            for g in dtype_groups(tensors).values()]


def _unpack_fake(flats: List[Tensor], tensors: List[Tensor], scale: float) -> None:
    _check_one_device('unpack_', list(flats) + list(tensors))


def register() -> None:
    """Register the fake kernels (once per process)."""
    global _registered
    if _registered:
        return
    torch.library.register_fake('minimm::ema_update_', _ema_update_fake)
    torch.library.register_fake('minimm::pack', _pack_fake)
    torch.library.register_fake('minimm::unpack_', _unpack_fake)
    _registered = True


loader.when_loaded.append(register)
