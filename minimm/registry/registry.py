"""Registry: map a config's ``type`` string to a class or function, then build it.

The package is laid out as MMEngine's ``mmengine/registry/``: this file holds the ``Registry``
class, ``build_functions.py`` the functions that build from a config (``build_from_cfg``,
``build_runner_from_cfg``), ``root.py`` the root registries the Runner builds through.

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
from typing import Any, Callable, Dict, List, Optional, Union

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
        if build_func is None:
            # Imported here, as MMEngine does: build_functions.py imports this file.
            from .build_functions import build_from_cfg
            build_func = build_from_cfg
        self.build_func = build_func

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

    def build(self, cfg: Any, *args, **kwargs) -> Any:
        """Build an object from ``cfg`` (a dict with ``type``) with ``build_func``; for
        ``build_from_cfg``, ``default_args=`` fills the keys ``cfg`` lacks."""
        return self.build_func(cfg, *args, **kwargs, registry=self)

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
