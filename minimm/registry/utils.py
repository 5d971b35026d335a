"""Helpers of ``registry.py`` that a learner reads second: walking the registry tree, importing
a package's registries or a dotted path, and two tools of MMEngine's
``mmengine/registry/utils.py`` that list what is registered where."""
import datetime
import difflib
import importlib
import inspect
import json
import os.path as osp
from typing import Any, List, Optional

__all__ = ['traverse_registry_tree', 'count_registered_modules', 'import_object']

CUSTOM_IMPORT_HINT = ("If it is a custom module, make sure the file that registers it is imported: "
                      "add `custom_imports = dict(imports=['my_package.my_module'])` to the config, "
                      "or import it before building the runner.")


def walk(registry) -> list:
    """``registry`` and every registry below it, parents before children."""
    return [registry] + [r for child in registry.children.values() for r in walk(child)]


def not_found_message(registry, type_name: str) -> str:
    """MMEngine's "X is not in the scope::name registry" message, with the close matches among
    the names ``registry`` can see and the other scopes where ``type_name`` *is* registered."""
    lineage = registry._lineage()
    known = [key for node in lineage for key in node.module_dict]
    close = difflib.get_close_matches(type_name, known, n=3, cutoff=0.6)
    hint = f' Did you mean {", ".join(repr(c) for c in close)}?' if close else ''
    elsewhere = [node.scope for node in walk(registry._get_root_registry())
                 if type_name in node.module_dict and node not in lineage]
    if elsewhere:
        hint += (f' It is registered in the scope {" and ".join(map(repr, elsewhere))}: '
                 f"write type='{elsewhere[0]}.{type_name}', or build with "
                 f"default_scope='{elsewhere[0]}'.")
    return (f'{type_name} is not in the {registry.scope}::{registry.name} registry. Please check '
            f'whether the value of `{type_name}` is correct or it was registered as '
            f'expected.{hint} {CUSTOM_IMPORT_HINT}')


def import_scope_registry(scope: str) -> bool:
    """Import ``{scope}.registry``, where a package declares its child registries (OpenMMLab's
    convention). True when it imported."""
    if not scope.isidentifier():
        return False
    try:
        importlib.import_module(f'{scope}.registry')
    except ImportError:
        return False
    return True


def import_object(path: str) -> Any:
    """The class, function or module that ``import module; module.Name`` gives for
    ``'module.Name'``, or ``None``.

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
    found = inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
    return obj if found else None


def traverse_registry_tree(registry, verbose: bool = True) -> List[dict]:
    """One entry per registry of ``registry``'s tree, root first, whatever node you pass:
    ``scope``, ``registry`` (its name), ``num_modules`` and ``modules`` (name -> defining module)."""
    from ..logging import print_log  # here: the logging package imports the registries
    result = []
    for node in walk(registry._get_root_registry()):
        modules = {name: getattr(obj, '__module__', None) or repr(obj)
                   for name, obj in node.module_dict.items()}
        result.append(dict(scope=node.scope, registry=node.name, num_modules=len(modules),
                           modules=modules))
        if verbose:
            print_log(f"{len(modules)} modules in {node.scope}'s {node.name!r} registry",
                      logger='current')
    return result


def count_registered_modules(save_path: Optional[str] = None, verbose: bool = True) -> dict:
    """The trees of all root registries, each filled from its ``locations`` first; written to
    ``save_path/modules_statistic_results.json`` when ``save_path`` is given."""
    from .. import __version__
    from . import root
    registries = {}
    for name in root.__all__:
        registry = getattr(root, name)
        registry.import_from_location()
        registries[name] = traverse_registry_tree(registry, verbose)
    result = dict(minimm_version=__version__, scan_date=datetime.datetime.now().isoformat(),
                  registries=registries)
    if save_path is not None:
        with open(osp.join(save_path, 'modules_statistic_results.json'), 'w') as f:
            json.dump(result, f, indent=2)
    return result
