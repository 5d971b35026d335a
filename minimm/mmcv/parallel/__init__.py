"""``mmcv.parallel`` 1.7's wrappers: ``MMDataParallel``, ``MMDistributedDataParallel``,
``MODULE_WRAPPERS`` and ``is_module_wrapper`` (what downstream hooks import to unwrap a model).
Left out compared with MMCV 1.7: ``DataContainer``, ``collate``, ``scatter``/``scatter_kwargs``."""
from .data_parallel import MMDataParallel
from .distributed import MMDistributedDataParallel
from .registry import MODULE_WRAPPERS
from .utils import is_module_wrapper

__all__ = ['MMDataParallel', 'MMDistributedDataParallel', 'MODULE_WRAPPERS', 'is_module_wrapper']
