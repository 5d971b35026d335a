"""The runner registries and ``build_runner``.

A config does not build its runner directly: ``build_runner`` hands the config to a *runner
constructor* from ``RUNNER_BUILDERS`` (``DefaultRunnerConstructor`` unless the config says
``constructor='...'``), and the constructor builds the runner from ``RUNNERS``. A project that
needs to adjust every runner it builds registers its own constructor instead of a new runner.
"""
import copy

from minimm.registry import Registry

from .registry import build_from_cfg

RUNNERS = Registry('runner', build_func=build_from_cfg)
RUNNER_BUILDERS = Registry('runner builder', build_func=build_from_cfg)


def build_runner_constructor(cfg: dict):
    return RUNNER_BUILDERS.build(cfg)


def build_runner(cfg: dict, default_args: dict = None):
    """Build the runner ``cfg`` describes (``type='EpochBasedRunner', max_epochs=12``...);
    ``default_args`` (model, optimizer, logger...) fill in what it leaves out. ``cfg`` is copied
    first, so the caller's config keeps its ``constructor`` key."""
    runner_cfg = copy.deepcopy(cfg)
    constructor_name = runner_cfg.pop('constructor', 'DefaultRunnerConstructor')
    constructor = build_runner_constructor(
        dict(type=constructor_name, runner_cfg=runner_cfg, default_args=default_args))
    return constructor()
