"""Two tools that walk the registry tree (MMEngine's ``mmengine/registry/utils.py``): what is
registered where, for a learner or for a package's docs."""
import datetime
import json
import os.path as osp
from typing import List, Optional

from .registry import Registry, _walk

__all__ = ['traverse_registry_tree', 'count_registered_modules']


def traverse_registry_tree(registry: Registry, verbose: bool = True) -> List[dict]:
    """One entry per registry of ``registry``'s tree, root first, whatever node you pass:
    ``scope``, ``registry`` (its name), ``num_modules`` and ``modules`` (name -> defining module)."""
    from ..logging import print_log  # here: the logging package imports the registries
    result = []
    for node in _walk(registry._get_root_registry()):
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
