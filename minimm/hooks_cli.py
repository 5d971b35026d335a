"""``minimm hooks CONFIG``: a config's hooks, stage by stage, with what each reads and writes.

The table lists, for every stage, the hooks that implement it in the order they run, with their
priority and their declared dataflow (``reads -> writes``, see ``minimm/dataflow.py``); the
findings follow. The hooks are registered as a run registers them (the Runner's default hooks,
then ``custom_hooks``; or, for an MMCV 1.x config, ``register_training_hooks`` and the eval
hook), without building the model or touching the work dir.

    minimm hooks minimm/configs/digits_ema.py
    minimm hooks CONFIG --stages after_val_epoch --cfg-options custom_hooks.0.priority=LOWEST
    minimm hooks CONFIG --strict

``--strict`` exits with status 1 when there is a warning (information never fails).
"""
import argparse
import sys
from typing import List, Optional, Tuple

from .cli_args import add_cfg_options, help_text, load_config
from .dataflow import check, findings_text, table


def mmengine_hooks(cfg) -> Tuple[list, tuple]:
    """The hooks a Runner built from ``cfg`` registers, in call order, and the stages."""
    from .hooks import Hook
    from .registry import DefaultScope
    from .runner.hook_dispatch import HookDispatchMixin

    class HookList(HookDispatchMixin):  # the Runner's registration, without the Runner
        pass

    hooks = HookList()
    hooks._init_hooks()
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'mmengine')):
        hooks.register_hooks(cfg.get('default_hooks'), cfg.get('custom_hooks'))
    return hooks.hooks, Hook.stages


def mmcv_hooks(cfg) -> Tuple[list, tuple]:
    """The hooks ``minimm train`` registers for an MMCV 1.x config, in call order, and the
    stages (a single-process run: no DistSamplerSeedHook)."""
    from .mmcv import RUNNERS, Hook
    from .mmcv.train import register_cfg_hooks
    runner_cls = RUNNERS.get(cfg.get('runner', {}).get('type', 'EpochBasedRunner'))
    runner = runner_cls.__new__(runner_cls)  # only its hook list: nothing else is built
    runner._hooks = []
    register_cfg_hooks(runner, cfg, distributed=False)
    return runner.hooks, Hook.stages


def report(cfg, only: Optional[List[str]] = None) -> Tuple[str, list]:
    """The table (of the stages ``only`` names, else all) and the findings (of all stages)."""
    from .mmcv.train import is_mmcv_config
    hooks, stages = mmcv_hooks(cfg) if is_mmcv_config(cfg) else mmengine_hooks(cfg)
    for stage in only or ():
        if stage not in stages:
            raise ValueError(f'--stages {stage!r}: no such stage; the stages: {", ".join(stages)}')
    found = check(hooks, stages)
    return f'{table(hooks, only or stages)}\n\n{findings_text(found)}', found


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog='minimm hooks', description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='a .py config file (MMEngine or MMCV 1.x)')
    add_cfg_options(parser)  # as `minimm train` takes them
    parser.add_argument('--stages', nargs='+', metavar='STAGE',
                        help='show only these stages in the table (findings cover all)')
    parser.add_argument('--strict', action='store_true',
                        help='exit with status 1 when there is a warning')
    args = parser.parse_args(argv)
    text, found = report(load_config(args.config, None, args.cfg_options), args.stages)
    print(text)
    if args.strict and any(finding.level == 'warning' for finding in found):
        sys.exit(1)
