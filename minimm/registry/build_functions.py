"""Build functions: how a registry turns a config into an object (MMEngine's
``mmengine/registry/build_functions.py``, without scopes).

``build_from_cfg`` is what every registry uses unless it is given another ``build_func``;
``build_runner_from_cfg`` is the one of ``RUNNERS``: a runner is built by its ``from_cfg``.
"""
import inspect
from typing import Any, Callable, Optional

from .registry import Registry

__all__ = ['build_from_cfg', 'build_runner_from_cfg']


def build_from_cfg(cfg: Any, registry: Registry, default_args: Optional[dict] = None) -> Any:
    """Build an object from a config (a ``dict``, ``ConfigDict`` or ``Config``).

    ``cfg['type']`` is a registered name or a callable; the other keys are keyword arguments.
    ``default_args`` fill in keys that ``cfg`` does not set. Neither dict is mutated.
    A constructor that rejects its arguments is re-raised naming the type, so a typo in a config
    key points back at the config entry that holds it.
    """
    from ..config import Config  # here: the config package imports the registry
    if isinstance(cfg, Config):
        cfg = cfg.to_dict()
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg should be a dict, ConfigDict or Config, but got {type(cfg)}')
    if 'type' not in cfg and (default_args is None or 'type' not in default_args):
        raise KeyError(f'`cfg` or `default_args` must contain the key "type", but got {cfg}\n'
                       f'{default_args}')
    args = dict(cfg)
    for key, value in (default_args or {}).items():
        args.setdefault(key, value)
    obj_type = args.pop('type')
    if isinstance(obj_type, str):
        obj_cls = registry.get(obj_type)
        if obj_cls is None:
            raise KeyError(registry.not_found_message(obj_type))
    elif callable(obj_type):
        obj_cls = obj_type
    else:
        raise TypeError(f'type must be a str or a callable, but got {type(obj_type)}')
    from ..logging.manager import ManagerMixin  # here: logging imports the registries
    try:
        if inspect.isclass(obj_cls) and issubclass(obj_cls, ManagerMixin):
            # A named global instance (Visualizer, MessageHub...): built as the current
            # instance of its name, as MMEngine does; a new one, as every Runner gets its own.
            return obj_cls.create_instance(**args)
        return obj_cls(**args)
    except TypeError as e:
        name = getattr(obj_cls, '__name__', repr(obj_cls))
        # Only rewrap errors from the call itself (bad keyword), not from deep inside __init__.
        if _is_signature_error(obj_cls, args):
            raise TypeError(f'{name} (from {registry.name} config {cfg!r}): {e}') from e
        raise


def _is_signature_error(obj_cls: Callable, args: dict) -> bool:
    try:
        inspect.signature(obj_cls).bind(**args)
    except TypeError:
        return True
    except ValueError:  # builtins without a signature
        return False
    return False


def build_runner_from_cfg(cfg: Any, registry: Registry) -> Any:
    """Build a runner from a whole config: ``cfg.runner_type`` (default ``'Runner'``) names the
    runner class, whose ``from_cfg`` builds it from the config."""
    from ..config import Config
    if not isinstance(cfg, (dict, Config)):
        raise TypeError(f'cfg should be a dict, ConfigDict or Config, but got {type(cfg)}')
    runner_type = cfg.get('runner_type', 'Runner')
    if isinstance(runner_type, str):
        runner_cls = registry.get(runner_type)
        if runner_cls is None:
            raise KeyError(registry.not_found_message(runner_type))
    elif inspect.isclass(runner_type):
        runner_cls = runner_type
    else:
        raise TypeError(f'runner_type must be a str or a class, but got {type(runner_type)}')
    return runner_cls.from_cfg(cfg)
