"""MODULE_WRAPPERS: the classes ``is_module_wrapper`` treats as wrappers around a model.

torch's ``DataParallel`` and ``DistributedDataParallel`` (and so their subclasses) are in it from
the start; a project with a wrapper of its own registers it, and every hook and checkpoint
function then looks through it to ``.module``.
"""
from torch.nn.parallel import DataParallel, DistributedDataParallel

from minimm.registry import Registry

from ..registry import build_from_cfg

MODULE_WRAPPERS = Registry('module wrapper', build_func=build_from_cfg)
for _torch_wrapper in (DataParallel, DistributedDataParallel):
    MODULE_WRAPPERS.register_module(module=_torch_wrapper)
