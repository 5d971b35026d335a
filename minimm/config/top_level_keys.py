"""Top-level config keys that are probably mistakes, and the warning that says so.

A config file is Python, and every name it defines becomes a top-level key: real OpenMMLab
configs carry many that only the file itself uses (``dataset_type``, ``data_root``,
``train_pipeline``, ``backend_args``, ``vis_backends``...). MMEngine's ``Runner.from_cfg`` reads
the keys it knows and ignores the rest, so a misspelt one (``trian_cfg``, ``custom_hook``) has no
effect and nobody is told. Warning about every unknown key would flood real configs, so minimm
warns about two cases only, and keeps MMEngine's behaviour (the key is still ignored):

* a key within a typo of one the runner reads (``difflib`` ratio >= 0.85: ``param_schedulers``
  and ``load_form`` are caught, ``train_dataset`` and ``randomness_cfg`` are not);
* a key that ``--cfg-options`` adds: the file does not use it and the runner does not read it.
"""
import difflib
import warnings
from typing import Iterable, Optional

# What MMEngine 0.10's Runner.from_cfg (and FlexibleRunner's: strategy) and tools/train.py read,
# and minimm's own profile_hooks and verbose.
RUNNER_KEYS = frozenset((
    'model', 'work_dir', 'train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg',
    'val_cfg', 'test_cfg', 'auto_scale_lr', 'optim_wrapper', 'param_scheduler', 'val_evaluator',
    'test_evaluator', 'default_hooks', 'custom_hooks', 'data_preprocessor', 'load_from',
    'resume', 'launcher', 'env_cfg', 'log_processor', 'log_level', 'visualizer',
    'default_scope', 'randomness', 'experiment_name', 'model_wrapper_cfg', 'sync_bn',
    'find_unused_parameters', 'compile', 'runner_type', 'custom_imports', 'profile_hooks',
    'verbose', 'check_hooks', 'strategy'))

# What an MMCV 1.x config gives ``minimm.mmcv.train`` (MMDetection 2.x's train_detector).
MMCV_KEYS = frozenset((
    'model', 'data', 'optimizer', 'optimizer_config', 'lr_config', 'momentum_config',
    'checkpoint_config', 'log_config', 'evaluation', 'custom_hooks', 'runner', 'workflow',
    'resume_from', 'load_from', 'work_dir', 'log_level', 'seed', 'fp16', 'dist_params',
    'custom_imports', 'check_hooks'))


def _close_match(key: str, known: Iterable[str]) -> Optional[str]:
    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
    return matches[0] if matches else None


def warn_unknown_keys(keys: Iterable[str], known: frozenset, added: Iterable[str] = ()) -> None:
    """Warn about each of ``keys`` that looks like a misspelt ``known`` key, and about each
    ``added`` key (new, from ``--cfg-options``) that is neither known nor close to a known one."""
    for key in keys:
        match = None if key in known else _close_match(key, known)
        if match is not None:
            warnings.warn(f'config key {key!r} is not read by the runner and has no effect: did '
                          f'you mean {match!r}?', stacklevel=2)
    for key in added:
        if key not in known and _close_match(key, known) is None:
            warnings.warn(f'--cfg-options sets {key!r}, a top-level key that neither the config '
                          'nor the runner uses: it has no effect', stacklevel=2)
