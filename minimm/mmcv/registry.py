"""``build_from_cfg``: how MMCV 1.x turns a config dict into an object.

The registry *class* is minimm's (``minimm.registry.Registry``); every registry of
``minimm.mmcv`` (``HOOKS``, ``RUNNERS``, ``OPTIMIZERS``...) is made with this function as its
``build_func``, because MMCV 1.7 builds a little differently from MMEngine: it looks the name up
in that registry alone, and when the constructor fails it re-raises the same kind of error with the
class name in front (``KeyError('StepLrUpdaterHook: ...')``), so a bad config names the hook it
broke.
Different from MMCV: a name that is not in the registry gets the close names that are
(``EMAHok is not in the hook registry. Did you mean 'EMAHook'?``), after MMCV's message.
Left out compared with MMCV: scopes and parent registries.
"""
import inspect

from minimm.registry.lookup import did_you_mean


def not_found_message(type_name: str, registry) -> str:
    """MMCV's "X is not in the NAME registry", then the close names this registry holds (MMCV
    looks in the registry itself only, so only its own names are offered). With none close,
    MMCV's words exactly."""
    hint = did_you_mean(type_name, registry.module_dict)
    return f'{type_name} is not in the {registry.name} registry' + (f'.{hint}' if hint else '')


def _class_to_build(obj_type, registry):
    """The class (or function) that ``type`` names: looked up by name, or given directly."""
    if isinstance(obj_type, str):
        found = registry.get(obj_type)
        if found is None:
            raise KeyError(not_found_message(obj_type, registry))
        return found
    if inspect.isclass(obj_type) or inspect.isfunction(obj_type):
        return obj_type
    raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')


def build_from_cfg(cfg: dict, registry, default_args: dict = None):
    """Build ``cfg['type']`` with the rest of ``cfg`` as keyword arguments; ``default_args`` fill
    in what ``cfg`` does not say. ``cfg`` itself is not changed."""
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg must be a dict, but got {type(cfg)}')
    kwargs = {**(default_args or {}), **cfg}
    if 'type' not in kwargs:
        raise KeyError('`cfg` or `default_args` must contain the key "type", '
                       f'but got {cfg}\n{default_args}')
    target = _class_to_build(kwargs.pop('type'), registry)
    try:
        return target(**kwargs)
    except Exception as error:
        # Same exception type, so callers catching it still do; the message gains the class.
        raise type(error)(f'{target.__name__}: {error}') from error
