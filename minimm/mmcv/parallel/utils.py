"""``is_module_wrapper``, as MMCV 1.7's ``mmcv/parallel/utils.py``: hooks and checkpoint code call
it to reach the model inside a wrapper (``model.module``). Left out: child registries (minimm's
registries have no parents or children)."""
from torch import nn

from .registry import MODULE_WRAPPERS


def is_module_wrapper(module: nn.Module) -> bool:
    """Whether ``module`` is an instance of a class registered in ``MODULE_WRAPPERS``."""
    module_wrappers = tuple(MODULE_WRAPPERS.module_dict.values())
    return isinstance(module, module_wrappers)
