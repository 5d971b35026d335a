"""Two tools of MMEngine's ``mmengine/registry/utils.py`` that list what is registered where:
``traverse_registry_tree`` (one tree) and ``count_registered_modules`` (all root registries)."""
import datetime
import json
import os.path as osp
from typing import List, Optional

from .. import __version__
from . import root
from .lookup import walk

__all__ = ['traverse_registry_tree', 'count_registered_modules']


def traverse_registry_tree(registry, verbose: bool = True) -> List[dict]:
    """One entry per registry of ``registry``'s tree, root first, whatever node you pass:
    ``scope``, ``registry`` (its name), ``num_modules`` and ``modules`` (name -> the module that
    defines it)."""
    # Here, and from the module: the logging package imports the registries to register in them.
    from ..logging.logger import print_log
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
