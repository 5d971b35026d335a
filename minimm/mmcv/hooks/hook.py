"""Hook and HOOKS as MMCV 1.x had them: 10 stages, each taking only ``runner``.

Compare ``minimm/hooks/hook.py`` (MMEngine): here a hook reads ``data_batch``/``outputs`` from the
runner, and train and val stages *funnel* into a generic method (overriding ``after_epoch`` acts
after train **and** val epochs). ``HOOKS`` is a registry of its own, so the two worlds' hooks cannot
be mixed. Left out compared with MMCV 1.7: nothing.
"""
import re
from typing import List

from minimm.hooks.hook import is_method_overridden
from minimm.registry import Registry

from ..builder import build_from_cfg

HOOKS = Registry('hook', build_func=build_from_cfg)


def _nothing(self, runner) -> None:
    """What a stage or generic method does unless a subclass overrides it."""


def _funnel(generic: str):
    """A train or val stage that only calls the generic method ``generic`` (MMCV's funnel)."""
    def stage(self, runner) -> None:
        getattr(self, generic)(runner)
    return stage


class Hook:
    stages = ('before_run', 'before_train_epoch', 'before_train_iter', 'after_train_iter',
              'after_train_epoch', 'before_val_epoch', 'before_val_iter', 'after_val_iter',
              'after_val_epoch', 'after_run')

    # Every method a subclass may override, at a glance. The train and val stages the runners
    # call funnel into a generic method: override ``before_epoch`` to act in train and val alike.
    before_run = after_run = _nothing
    before_epoch = after_epoch = before_iter = after_iter = _nothing
    before_train_epoch = before_val_epoch = _funnel('before_epoch')
    after_train_epoch = after_val_epoch = _funnel('after_epoch')
    before_train_iter = before_val_iter = _funnel('before_iter')
    after_train_iter = after_val_iter = _funnel('after_iter')

    # Helpers (MMCV's signatures: they read the counters from the runner; n <= 0 is never).
    def every_n_epochs(self, runner, n: int) -> bool:
        return (runner.epoch + 1) % n == 0 if n > 0 else False

    def every_n_inner_iters(self, runner, n: int) -> bool:
        return (runner.inner_iter + 1) % n == 0 if n > 0 else False

    def every_n_iters(self, runner, n: int) -> bool:
        return (runner.iter + 1) % n == 0 if n > 0 else False

    def end_of_epoch(self, runner) -> bool:
        return runner.inner_iter + 1 == len(runner.data_loader)

    def is_last_epoch(self, runner) -> bool:
        return runner.epoch + 1 == runner.max_epochs

    def is_last_iter(self, runner) -> bool:
        return runner.iter + 1 == runner.max_iters

    def get_triggered_stages(self) -> List[str]:
        """The stages this hook's class overrides, directly or through their generic method, in
        ``Hook.stages`` order (as MMCV 1.7: instance attributes, as ClosureHook's, never count)."""
        # A stage's generic method is its name without 'train_'/'val_' ('before_run': itself).
        return [stage for stage in Hook.stages if is_method_overridden(stage, Hook, self)
                or is_method_overridden(re.sub('train_|val_', '', stage), Hook, self)]
