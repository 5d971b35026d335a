"""DefaultRunnerConstructor, as MMCV 1.7's: builds ``runner_cfg`` from ``RUNNERS``.

A project registers its own constructor in ``RUNNER_BUILDERS`` to change the runner it builds (add
attributes, wrap methods) and names it with ``runner=dict(..., constructor='MyConstructor')``.
"""
from typing import Optional

from .builder import RUNNER_BUILDERS, RUNNERS


@RUNNER_BUILDERS.register_module()
class DefaultRunnerConstructor:

    def __init__(self, runner_cfg: dict, default_args: Optional[dict] = None):
        if not isinstance(runner_cfg, dict):
            raise TypeError(f'runner_cfg should be a dict, but got {type(runner_cfg)}')
        self.runner_cfg = runner_cfg
        self.default_args = default_args

    def __call__(self):
        return RUNNERS.build(self.runner_cfg, default_args=self.default_args)
