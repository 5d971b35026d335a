"""Build functions: how a registry turns a config into an object (MMEngine's
``mmengine/registry/build_functions.py``).

``build_from_cfg`` is what every registry uses unless it is given another ``build_func``. It
builds in the registry that the current default scope selects (``default_scope.py``); a
``_scope_`` key in the config selects another one for this build only. Three registries build
their own way: ``RUNNERS`` through the runner's ``from_cfg``, ``MODELS`` turns a list into an
``nn.Sequential``, and ``PARAM_SCHEDULERS`` converts epochs to iterations on request.
"""
import inspect
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..config import Config
from ..utils.manager import ManagerMixin

if TYPE_CHECKING:  # for the annotations only: registry.py imports this file
    from .registry import Registry

__all__ = ['build_from_cfg', 'build_runner_from_cfg', 'build_model_from_cfg',
           'build_scheduler_from_cfg']


def build_from_cfg(cfg: Any, registry: 'Registry', default_args: Optional[dict] = None) -> Any:
    """Build an object from a config (a ``dict``, ``ConfigDict`` or ``Config``).

    ``cfg['type']`` is a registered name or a callable; the other keys are keyword arguments.
    ``default_args`` fill in keys that ``cfg`` does not set. Neither dict is mutated.
    The object is built inside the scope switch, so the configs it builds in its own
    ``__init__`` resolve in the same scope. A constructor that rejects its arguments is
    re-raised naming the type, so a typo in a config key points back at the config entry.
    """
    args = _merge_args(cfg, registry, default_args)
    with registry.switch_scope_and_registry(args.pop('_scope_', None)) as registry:
        obj_cls = _type_to_callable(args.pop('type'), registry)
        try:
            if inspect.isclass(obj_cls) and issubclass(obj_cls, ManagerMixin):
                # A named global instance (Visualizer, MessageHub...): built as the current
                # instance of its name, as MMEngine does; a new one, as every Runner gets its own.
                return obj_cls.create_instance(**args)
            return obj_cls(**args)
        except TypeError as e:
            name = getattr(obj_cls, '__name__', repr(obj_cls))
            # Only rewrap errors from the call itself (bad keyword), not from inside __init__.
            if _is_signature_error(obj_cls, args):
                raise TypeError(f'{name} (from {registry.name} config {cfg!r}): {e}') from e
            raise


def _merge_args(cfg: Any, registry: 'Registry', default_args: Optional[dict]) -> dict:
    """``cfg`` as a plain dict with ``default_args`` filled in, after checking all three."""
    cfg, default_args = (c.to_dict() if isinstance(c, Config) else c for c in (cfg, default_args))
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg should be a dict, ConfigDict or Config, but got {type(cfg)}')
    # Told by what a registry can do, not by its class: registry.py imports this file.
    if not callable(getattr(registry, 'switch_scope_and_registry', None)):
        raise TypeError(f'registry must be a mmengine.Registry object, but got {type(registry)}')
    if not (default_args is None or isinstance(default_args, dict)):
        raise TypeError('default_args should be a dict, ConfigDict or None, but got '
                        f'{type(default_args)}')
    if 'type' not in cfg and (default_args is None or 'type' not in default_args):
        raise KeyError(f'`cfg` or `default_args` must contain the key "type", but got {cfg}\n'
                       f'{default_args}')
    args = dict(cfg)
    for key, value in (default_args or {}).items():
        args.setdefault(key, value)
    return args


def _type_to_callable(obj_type: Any, registry: 'Registry') -> Callable:
    """What a config's ``type`` names: looked up when a string, used as is when callable."""
    if isinstance(obj_type, str):
        obj_cls = registry.get(obj_type)
        if obj_cls is None:
            raise KeyError(registry.not_found_message(obj_type))
        return obj_cls
    if callable(obj_type):
        return obj_type
    raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')


def _is_signature_error(obj_cls: Callable, args: dict) -> bool:
    try:
        inspect.signature(obj_cls).bind(**args)
    except TypeError:
        return True
    except ValueError:  # builtins without a signature
        return False
    return False


def build_runner_from_cfg(cfg: Any, registry: 'Registry') -> Any:
    """Build a runner from a whole config: ``cfg.runner_type`` (default ``'Runner'``) names the
    runner class, whose ``from_cfg`` builds it from the config."""
    if not isinstance(cfg, (dict, Config)):
        raise TypeError(f'cfg should be a dict, ConfigDict or Config, but got {type(cfg)}')
    runner_type = cfg.get('runner_type', 'Runner')
    if not (isinstance(runner_type, str) or inspect.isclass(runner_type)):
        raise TypeError(f'runner_type must be a str or a class, but got {type(runner_type)}')
    return _type_to_callable(runner_type, registry).from_cfg(cfg)


def build_model_from_cfg(cfg: Any, registry: 'Registry', default_args: Optional[dict] = None):
    """``MODELS``' build function: a list of configs becomes an ``nn.Sequential`` of them."""
    if isinstance(cfg, list):
        import torch.nn as nn
        return nn.Sequential(*[build_from_cfg(one, registry, default_args) for one in cfg])
    return build_from_cfg(cfg, registry, default_args)


def build_scheduler_from_cfg(cfg: Any, registry: 'Registry', default_args: Optional[dict] = None):
    """``PARAM_SCHEDULERS``' build function.

    ``convert_to_iter_based=True`` builds through the class's ``build_iter_from_epoch``, which
    turns a schedule written in epochs into one stepped every iteration; it needs
    ``epoch_length`` (the train dataloader's length), from ``cfg`` or ``default_args``. Without
    it, ``epoch_length`` is dropped and the scheduler is built as any other object.
    """
    args = _merge_args(cfg, registry, default_args)
    epoch_length = args.pop('epoch_length', None)
    if not args.pop('convert_to_iter_based', False):
        return build_from_cfg(args, registry)
    with registry.switch_scope_and_registry(args.pop('_scope_', None)) as registry:
        scheduler_cls = _type_to_callable(args.pop('type'), registry)
        if not hasattr(scheduler_cls, 'build_iter_from_epoch'):
            raise TypeError(f'{scheduler_cls.__name__} does not support convert_to_iter_based')
        return scheduler_cls.build_iter_from_epoch(epoch_length=epoch_length, **args)
