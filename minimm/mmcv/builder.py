"""``RUNNERS``, ``RUNNER_BUILDERS`` and ``build_runner``, as MMCV 1.7's ``mmcv/runner/builder.py``.

A runner is built by a *runner constructor* (``DefaultRunnerConstructor`` unless the config names
another with ``constructor=``), so a project can add attributes to a runner it builds from a config.
Left out compared with MMCV 1.7: nothing.
"""
import copy
from typing import Optional

from minimm.registry import Registry

from .registry import build_from_cfg

RUNNERS = Registry('runner', build_func=build_from_cfg)
RUNNER_BUILDERS = Registry('runner builder', build_func=build_from_cfg)


def build_runner_constructor(cfg: dict):
    return RUNNER_BUILDERS.build(cfg)


def build_runner(cfg: dict, default_args: Optional[dict] = None):
    """Build a runner from ``cfg`` (``type='EpochBasedRunner'``...); ``cfg`` is not modified."""
    runner_cfg = copy.deepcopy(cfg)
    constructor_type = runner_cfg.pop('constructor', 'DefaultRunnerConstructor')
    runner_constructor = build_runner_constructor(
        dict(type=constructor_type, runner_cfg=runner_cfg, default_args=default_args))
    runner = runner_constructor()
    return runner
