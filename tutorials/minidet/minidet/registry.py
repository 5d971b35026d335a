"""minidet's registries: children of minimm's root registries, as every OpenMMLab package's
``registry.py`` declares them (``from mmengine.registry import HOOKS as MMENGINE_HOOKS`` there).

Their scope is inferred from this module's package: ``'minidet'``. ``locations`` name the modules
whose import registers the classes, so a config with ``default_scope = 'minidet'`` needs no
``custom_imports``: the first lookup imports them.
"""
from minimm.registry import HOOKS as MMENGINE_HOOKS
from minimm.registry import MODELS as MMENGINE_MODELS
from minimm.registry import Registry

HOOKS = Registry('hook', parent=MMENGINE_HOOKS, locations=['minidet.engine.hooks'])
MODELS = Registry('model', parent=MMENGINE_MODELS, locations=['minidet.models'])
