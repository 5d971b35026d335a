"""Registry: map a config's ``type`` string to a class or function, then build it.

This file teaches the one idea every OpenMMLab config relies on: a config is plain data
(``dict(type='StepLR', step_size=2)``), and a *registry* turns the ``type`` name into the callable
that builds the object. Classes join a registry with a decorator::

    @HOOKS.register_module()
    class MyHook(Hook):
        ...

Registration happens when the module holding the decorator is *imported*; a name that is "not in
the registry" almost always means that import never ran (see ``custom_imports`` in
``config/config.py``).

Left out compared with MMEngine: scopes (``mmdet::``), parent/child registries, lazy
``locations``, ``DefaultScope`` and the rich-table ``__repr__``. Kept: aliases, ``force``, any
callable or importable dotted path (``'torch.optim.SGD'``) as ``type``, ``default_args`` merged
without touching the caller's dict, and an error message that says what to do.
"""
import difflib
import importlib
import inspect
from typing import Any, Callable, Dict, List, Optional, Union

__all__ = [
    'Registry', 'build_from_cfg', 'HOOKS', 'MODELS', 'MODEL_WRAPPERS', 'DATASETS',
    'DATA_SAMPLERS', 'OPTIMIZERS', 'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS',
    'PARAM_SCHEDULERS', 'METRICS', 'LOOPS',
    'VISBACKENDS', 'FUNCTIONS', 'import_object'
]

CUSTOM_IMPORT_HINT = ("If it is a custom module, make sure the file that registers it is imported: "
                      "add `custom_imports = dict(imports=['my_package.my_module'])` to the config, "
                      "or import it before building the runner.")


class Registry:
    """A name -> callable table with a ``build`` method.

    Args:
        name: what the registry holds (``'hook'``, ``'model'``...), used in messages.
        build_func: how to build from a config; defaults to :func:`build_from_cfg`.
    """

    def __init__(self, name: str, build_func: Optional[Callable] = None):
        self.name = name
        self._module_dict: Dict[str, Callable] = {}
        self.build_func = build_func or build_from_cfg

    def __len__(self) -> int:
        return len(self._module_dict)

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __repr__(self) -> str:
        return f'Registry(name={self.name}, items={sorted(self._module_dict)})'

    @property
    def module_dict(self) -> Dict[str, Callable]:
        return self._module_dict

    def get(self, key: str) -> Optional[Callable]:
        """Return the callable registered as ``key``, or ``None``.

        As MMEngine 0.10's ``Registry.get``, a dotted path that is not registered
        (``'torch.optim.SGD'``) is imported as a last resort.
        """
        obj = self._module_dict.get(key)
        if obj is None and isinstance(key, str) and '.' in key:
            obj = import_object(key)
        return obj

    def build(self, cfg: Any, default_args: Optional[dict] = None) -> Any:
        """Build an object from ``cfg`` (a dict with ``type``), filling gaps from ``default_args``."""
        return self.build_func(cfg, registry=self, default_args=default_args)

    def _register_module(self, module: Callable, module_name: Union[str, List[str], None],
                         force: bool) -> None:
        if not callable(module):
            raise TypeError(f'module must be a class or a function, but got {type(module)}')
        names = module_name if module_name is not None else module.__name__
        names = [names] if isinstance(names, str) else list(names)
        # Check every alias before adding any, so that a refused call registers nothing.
        for i, name in enumerate(names):
            if not force and name in self._module_dict:
                existing = self._module_dict[name]
                raise KeyError(f'{name} is already registered in {self.name} at '
                               f'{getattr(existing, "__module__", "?")}; '
                               'pass force=True to replace it')
            if name in names[:i]:
                raise KeyError(f'{name} is listed twice in {names}')
        for name in names:
            self._module_dict[name] = module

    def register_module(self, name: Union[str, List[str], None] = None, force: bool = False,
                        module: Optional[Callable] = None):
        """Register a callable, as a decorator or a direct call.

        ``name`` may be a string or a list of aliases; by default the callable's ``__name__``.
        A duplicate name raises ``KeyError`` unless ``force=True``.
        """
        if not isinstance(force, bool):
            raise TypeError(f'force must be a boolean, but got {type(force)}')
        if not (name is None or isinstance(name, str)
                or (isinstance(name, (list, tuple)) and all(isinstance(n, str) for n in name))):
            raise TypeError(f'name must be None, a str or a list of str, but got {type(name)}')
        def _register(obj):
            self._register_module(obj, name, force)
            return obj

        return _register if module is None else _register(module)

    def not_found_message(self, type_name: str) -> str:
        close = difflib.get_close_matches(type_name, list(self._module_dict), n=3, cutoff=0.6)
        hint = f' Did you mean {", ".join(repr(c) for c in close)}?' if close else ''
        return f'{type_name!r} is not in the {self.name} registry.{hint} {CUSTOM_IMPORT_HINT}'


def import_object(path: str) -> Optional[Callable]:
    """The callable that ``import module; module.Name`` gives for ``'module.Name'``, or ``None``.

    MMEngine 0.10's ``get_object_from_string`` in small: how a config names a class nobody
    registered, and how ``Config.dump`` writes a class found in a config.
    """
    module_name, _, name = path.rpartition('.')
    if not all(part.isidentifier() for part in path.split('.')) or not module_name:
        return None
    try:
        obj = getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        return None
    return obj if callable(obj) else None


def build_from_cfg(cfg: Any, registry: Registry, default_args: Optional[dict] = None) -> Any:
    """Build an object from a config dict.

    ``cfg['type']`` is a registered name or a callable; the other keys are keyword arguments.
    ``default_args`` fill in keys that ``cfg`` does not set. Neither dict is mutated.
    A constructor that rejects its arguments is re-raised naming the type, so a typo in a config
    key points back at the config entry that holds it.
    """
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg must be a dict, but got {type(cfg)}')
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
    try:
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


# The root registries, named as MMEngine's ``mmengine.registry.root``.
HOOKS = Registry('hook')
MODELS = Registry('model')
MODEL_WRAPPERS = Registry('model_wrapper')
DATASETS = Registry('dataset')
DATA_SAMPLERS = Registry('data sampler')
OPTIMIZERS = Registry('optimizer')
OPTIM_WRAPPERS = Registry('optim wrapper')
OPTIM_WRAPPER_CONSTRUCTORS = Registry('optimizer wrapper constructor')
PARAM_SCHEDULERS = Registry('parameter scheduler')
METRICS = Registry('metric')
LOOPS = Registry('loop')
VISBACKENDS = Registry('vis_backend')
FUNCTIONS = Registry('function')


def _register_torch_optimizers() -> None:
    """Pre-fill OPTIMIZERS with every optimizer class in ``torch.optim`` (as MMEngine does)."""
    import torch

    for name in dir(torch.optim):
        obj = getattr(torch.optim, name)
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer) \
                and obj is not torch.optim.Optimizer:
            OPTIMIZERS.register_module(name=name, module=obj)


_register_torch_optimizers()
