"""An MMCV 1.x config's settings, checked before the runner is built (minimm's addition).

MMCV builds its runner, optimizer and hooks from ``runner``, ``optimizer``, ``optimizer_config``,
``lr_config``, ``momentum_config``, ``checkpoint_config``, ``log_config``, ``evaluation`` and
``custom_hooks`` one by one, and runs ``workflow``; many mistakes only show inside the first
iteration or after the first epoch: ``optimizer.lr='0.1'`` as a comparison of a str with a float,
``runner.max_epochs='2'`` and ``optimizer_config.grad_clip.max_norm='x'`` once training has begun,
a ``checkpoint_config`` key it does not know at the first save, ``workflow=[('trian', 1)]`` when
the phase starts. ``check_mmcv_config`` checks them all first, each error one line naming the key,
the value and what is allowed: every option with ``minimm.values`` (the MMEngine side's checks),
the counters and the workflow, the checkpoint keys, and every ``type`` and ``policy`` name, with
the close names of its registry.
"""
import copy
import difflib
import inspect

from minimm.dataflow import check_hooks_mode
from minimm.registry.lookup import did_you_mean
from minimm.values import check_arguments, problem, whole_number

from .builder import RUNNERS
from .hooks import HOOKS, EvalHook
from .optimizer import OPTIMIZERS
from .registry import not_found_message

# What CheckpointHook passes on to runner.save_checkpoint.
SAVE_CHECKPOINT_KEYS = ('filename_tmpl', 'meta', 'create_symlink')
# The keys of ``optimizer`` that build_optimizer takes for itself, not the optimizer class.
OPTIMIZER_BUILD_KEYS = ('type', 'constructor', 'paramwise_cfg')


def _class_of(entry: dict, registry, where: str, default_type=None):
    """The class ``entry['type']`` names in ``registry`` (the type itself when it is a class);
    a KeyError naming ``where`` and the close names for a name nobody registered."""
    name = entry.get('type', default_type)
    if not isinstance(name, str):
        return name
    cls = registry.get(name)
    if cls is None:
        raise KeyError(f'{where}.type={name!r}: {not_found_message(name, registry)}')
    return cls


def _policy_class(entry: dict, suffix: str, where: str) -> type:
    """The updater class ``policy`` names (MMCV's rule: 'step' -> StepLrUpdaterHook)."""
    policy = entry.get('policy')
    if not isinstance(policy, str):
        raise KeyError(f'{where} needs a "policy" (a str, e.g. \'step\'), but got {policy!r}')
    name = (policy.title() if policy == policy.lower() else policy) + suffix
    cls = HOOKS.get(name)
    if cls is None:
        policies = [key[:-len(suffix)] for key in HOOKS.module_dict if key.endswith(suffix)]
        raise KeyError(f'{where}.policy={policy!r}: {name} is not in the mmcv::hook registry.'
                       f'{did_you_mean(policy, policies)} The policies: '
                       f'{", ".join(sorted(policies))}')
    return cls


def _check_hook(entry, where: str, default_type=None, cls=None) -> None:
    if not isinstance(entry, dict):
        return
    cls = cls or _class_of(entry, HOOKS, where, default_type)
    if isinstance(cls, type):
        skip = ('type', 'policy', 'priority')
        check_arguments(cls, {k: v for k, v in entry.items() if k not in skip}, where)


def _check_updater(entry: dict, where: str, suffix: str) -> None:
    """An lr or momentum schedule: its options, then the hook's own checks (the steps, the
    warm-up...) on a throwaway copy, so that what they refuse is named with the config key
    (minimm's updaters only: building one does nothing else)."""
    cls = _policy_class(entry, suffix, where)
    _check_hook(entry, where, cls=cls)
    if not cls.__module__.startswith('minimm.'):
        return
    options = {k: v for k, v in copy.deepcopy(entry).items() if k not in ('type', 'policy',
                                                                          'priority')}
    try:
        cls(**options)
    except (AssertionError, KeyError, TypeError, ValueError) as error:
        raise type(error)(f'{where} ({cls.__name__}): {error}') from error


def _check_checkpoint_config(checkpoint: dict) -> None:
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


def _check_optimizer(optimizer: dict, optimizer_config) -> None:
    """The optimizer's own options (of torch's optimizers and minimm's: a project's optimizer
    checks its own) and the gradient clipping of ``optimizer_config``."""
    cls = _class_of(optimizer, OPTIMIZERS, 'optimizer')
    if isinstance(cls, type) and cls.__module__.startswith(('torch.', 'minimm.')):
        check_arguments(cls, {k: v for k, v in optimizer.items()
                              if k not in OPTIMIZER_BUILD_KEYS}, 'optimizer')
    clip = optimizer_config.get('grad_clip') if isinstance(optimizer_config, dict) else None
    if clip is not None and not isinstance(clip, dict):
        raise TypeError(f'optimizer_config.grad_clip={clip!r}: must be None or a dict of '
                        "clip_grad_norm_'s arguments, e.g. dict(max_norm=35, norm_type=2)")
    if clip is not None and problem('number', clip.get('max_norm')):
        raise ValueError(f'optimizer_config.grad_clip.max_norm={clip.get("max_norm")!r}: '
                         f'{problem("number", clip.get("max_norm"))}')


def _check_runner(runner: dict, workflow) -> None:
    """The runner's type and length, and the workflow it runs: ``(phase, count)`` tuples, each
    phase a method of the runner (``'train'``, ``'val'``) and each count >= 1 (a count of 0 never
    finishes a round of the workflow). The train path builds data.train's loader for the first
    entry and data.val's for a second, so there are one or two of them."""
    cls = _class_of(runner, RUNNERS, 'runner')
    for key in ('max_epochs', 'max_iters'):
        if runner.get(key) is not None:
            whole_number(f'runner.{key}', runner[key], 0)
    shape = ("a list of one or two (phase, count) tuples, e.g. [('train', 1)] or "
             "[('train', 1), ('val', 1)]")
    if not isinstance(workflow, list) or len(workflow) not in (1, 2):
        raise ValueError(f'workflow={workflow!r}: must be {shape}')
    for index, flow in enumerate(workflow):
        if not (isinstance(flow, tuple) and len(flow) == 2):
            raise ValueError(f'workflow[{index}]={flow!r}: must be a (phase, count) tuple; '
                             f'the workflow is {shape}')
        phase, count = flow
        if not (isinstance(phase, str) and callable(getattr(cls, phase, None))):
            phases = [name for name in ('train', 'val') if hasattr(cls, name)]
            raise ValueError(f'workflow[{index}] phase {phase!r}: must be the name of a method '
                             f'of {getattr(cls, "__name__", cls)}: '
                             f'{" or ".join(map(repr, phases))}.'
                             f'{did_you_mean(str(phase), phases)}')
        whole_number(f'workflow[{index}] count', count, 1)


def _check_evaluation(evaluation: dict) -> None:
    _check_hook(evaluation, 'evaluation', cls=EvalHook)  # not in the registry
    rule, save_best = evaluation.get('rule'), evaluation.get('save_best')
    if rule not in EvalHook.rule_map and rule is not None:
        raise KeyError(f'evaluation.rule={rule!r}: must be None (from the metric\'s name) or one '
                       f'of {", ".join(map(repr, EvalHook.rule_map))}')
    if save_best is not None and not isinstance(save_best, str):
        raise TypeError(f'evaluation.save_best={save_best!r}: must be None, \'auto\' (the first '
                        'metric) or the name of a metric')


def check_mmcv_config(cfg) -> None:
    """Raise, naming the key, the value and what is allowed, for a setting of ``cfg`` that
    cannot work."""
    if 'check_hooks' in cfg:  # minimm's key (minimm/dataflow.py)
        check_hooks_mode(cfg['check_hooks'])
    if isinstance(cfg.get('runner'), dict):
        _check_runner(cfg['runner'], cfg.get('workflow'))
    if isinstance(cfg.get('optimizer'), dict):
        _check_optimizer(cfg['optimizer'], cfg.get('optimizer_config'))
    if isinstance(cfg.get('checkpoint_config'), dict):
        _check_checkpoint_config(cfg['checkpoint_config'])
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
            _check_updater(cfg[key], key, suffix)
    if isinstance(cfg.get('evaluation'), dict):
        _check_evaluation(cfg['evaluation'])
    for index, hook in enumerate(cfg.get('custom_hooks') or []):
        _check_hook(hook, f'custom_hooks[{index}]')
