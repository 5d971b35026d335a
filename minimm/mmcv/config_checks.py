"""An MMCV 1.x config's hook settings, checked before the runner is built (minimm's addition).

MMCV builds its hooks from ``checkpoint_config``, ``log_config``, ``optimizer_config``,
``lr_config``, ``momentum_config``, ``evaluation`` and ``custom_hooks`` one by one as it registers
them, and some mistakes only show after the first epoch: ``checkpoint_config`` passes the keys
it does not know on to ``save_checkpoint`` (a ``max_keep_ckpt`` typo fails at the first save), and
``lr_config=dict(policy='stepp')`` is a bare "not in the registry". ``check_mmcv_config`` checks
every entry's options with ``minimm.values.check_arguments`` (the MMEngine side's checks), the
checkpoint keys, and the policies, with the close names the registry suggests.
"""
import difflib
import inspect

from minimm.dataflow import check_hooks_mode
from minimm.values import check_arguments, problem

from .hooks import HOOKS, EvalHook

# What CheckpointHook passes on to runner.save_checkpoint.
SAVE_CHECKPOINT_KEYS = ('filename_tmpl', 'meta', 'create_symlink')


def _policy_class(entry: dict, suffix: str, where: str) -> type:
    """The updater class ``policy`` names (MMCV's rule: 'step' -> StepLrUpdaterHook)."""
    policy = entry.get('policy')
    if not isinstance(policy, str):
        raise KeyError(f'{where} needs a "policy" (a str, e.g. \'step\'), but got {policy!r}')
    name = (policy.title() if policy == policy.lower() else policy) + suffix
    cls = HOOKS.get(name)
    if cls is None:
        policies = [key[:-len(suffix)] for key in HOOKS.module_dict if key.endswith(suffix)]
        close = difflib.get_close_matches(policy.title(), policies, n=3, cutoff=0.6)
        hint = f' Did you mean {", ".join(map(repr, close))}?' if close else ''
        raise KeyError(f'{where}.policy={policy!r}: {name} is not in the mmcv::hook registry.'
                       f'{hint} The policies: {", ".join(sorted(policies))}')
    return cls


def _check_hook(entry, where: str, default_type=None, cls=None) -> None:
    if not isinstance(entry, dict):
        return
    name = entry.get('type', default_type)
    cls = cls or (HOOKS.get(name) if isinstance(name, str) else name)
    if isinstance(cls, type):
        skip = ('type', 'policy', 'priority')
        check_arguments(cls, {k: v for k, v in entry.items() if k not in skip}, where)


def check_mmcv_config(cfg) -> None:
    """Raise, naming the key, the value and what is allowed, for a hook setting of ``cfg``
    that cannot work."""
    check_hooks_mode(cfg.get('check_hooks', 'warn'))  # minimm's key (minimm/dataflow.py)
    checkpoint = cfg.get('checkpoint_config')
    if isinstance(checkpoint, dict):
        takes = [name for name in inspect.signature(HOOKS.get('CheckpointHook')).parameters
                 if name != 'kwargs']
        unknown = sorted(set(checkpoint) - set(takes) - set(SAVE_CHECKPOINT_KEYS) - {'type'})
        if unknown:
            close = {key: difflib.get_close_matches(key, takes, 1) for key in unknown}
            hint = ''.join(f' (did you mean {close[key][0]!r} for {key!r}?)'
                           for key in unknown if close[key])
            raise KeyError(f'checkpoint_config has unknown keys {unknown}{hint}: CheckpointHook '
                           f'takes {", ".join(takes)} and save_checkpoint\'s '
                           f'{", ".join(SAVE_CHECKPOINT_KEYS)}')
        _check_hook(checkpoint, 'checkpoint_config', 'CheckpointHook')
    log_config = cfg.get('log_config')
    if isinstance(log_config, dict):
        wrong = problem('number', log_config.get('interval', 10))
        if wrong or log_config.get('interval', 10) == 0:
            raise ValueError(f'log_config.interval={log_config["interval"]!r}: '
                             f'{wrong or "must not be 0 (an interval of 0 would mean never)"}')
        for index, hook in enumerate(log_config.get('hooks', [])):
            _check_hook(hook, f'log_config.hooks[{index}]')
    _check_hook(cfg.get('optimizer_config'), 'optimizer_config', 'OptimizerHook')
    for key, suffix in (('lr_config', 'LrUpdaterHook'), ('momentum_config',
                                                         'MomentumUpdaterHook')):
        if isinstance(cfg.get(key), dict):
            _check_hook(cfg[key], key, cls=_policy_class(cfg[key], suffix, key))
    _check_hook(cfg.get('evaluation'), 'evaluation', cls=EvalHook)  # not in the registry
    for index, hook in enumerate(cfg.get('custom_hooks') or []):
        _check_hook(hook, f'custom_hooks[{index}]')
