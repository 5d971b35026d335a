"""MMCV 1.x's build rule: ``build_from_cfg`` as ``mmcv/utils/registry.py`` has it.

The registry *class* is minimm's (``minimm.registry.Registry``); only the build function differs,
because MMCV 1.7 words its errors differently from MMEngine and re-raises *any* constructor error
with the class name in front (``KeyError('StepLrUpdaterHook: ...')``). Every registry of
``minimm.mmcv`` (``HOOKS``, ``RUNNERS``, ...) builds with it. Left out compared with MMCV: scopes
and parent registries.
"""
import inspect
from typing import Any, Optional

from minimm.registry import Registry


def build_from_cfg(cfg: dict, registry: Registry, default_args: Optional[dict] = None) -> Any:
    """Build ``cfg['type']`` from ``registry`` as MMCV 1.7's ``build_from_cfg`` does (no name
    suggestions, no parent lookup)."""
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg must be a dict, but got {type(cfg)}')
    args = dict(cfg)
    for name, value in (default_args or {}).items():
        args.setdefault(name, value)
    if 'type' not in args:
        raise KeyError(f'`cfg` or `default_args` must contain the key "type", but got {cfg}\n'
                       f'{default_args}')
    obj_type = args.pop('type')
    if isinstance(obj_type, str):
        obj_cls = registry.get(obj_type)
        if obj_cls is None:
            raise KeyError(f'{obj_type} is not in the {registry.name} registry')
    elif inspect.isclass(obj_type) or inspect.isfunction(obj_type):
        obj_cls = obj_type
    else:
        raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')
    try:
        return obj_cls(**args)
    except Exception as e:  # MMCV names the class that failed, keeping the exception's type
        raise type(e)(f'{obj_cls.__name__}: {e}') from e
