"""MODULE_WRAPPERS, as MMCV 1.7's ``mmcv/parallel/registry.py``: the classes ``is_module_wrapper``
counts as wrappers (``DataParallel``, ``DistributedDataParallel`` and their subclasses, and any
class a project registers)."""
from torch.nn.parallel import DataParallel, DistributedDataParallel

from minimm.registry import Registry

from ..registry import build_from_cfg

MODULE_WRAPPERS = Registry('module wrapper', build_func=build_from_cfg)
MODULE_WRAPPERS.register_module(module=DataParallel)
MODULE_WRAPPERS.register_module(module=DistributedDataParallel)
