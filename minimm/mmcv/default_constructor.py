"""DefaultRunnerConstructor: what ``build_runner`` uses unless a config names another.

It only keeps the config and builds it from ``RUNNERS`` when called. A constructor of your own
(registered in ``RUNNER_BUILDERS``, named by ``runner=dict(..., constructor='Mine')``) has the same
two methods and may change the runner before returning it.
"""
from .builder import RUNNER_BUILDERS, RUNNERS


@RUNNER_BUILDERS.register_module()
class DefaultRunnerConstructor:

    def __init__(self, runner_cfg: dict, default_args: dict = None):
        if not isinstance(runner_cfg, dict):
            raise TypeError(f'runner_cfg should be a dict, but got {type(runner_cfg)}')
        self.runner_cfg, self.default_args = runner_cfg, default_args

    def __call__(self):
        return RUNNERS.build(self.runner_cfg, default_args=self.default_args)
