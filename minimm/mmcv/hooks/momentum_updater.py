"""MMCV 1.x's momentum policies: ``momentum_config=dict(policy='CosineAnnealing',
min_momentum_ratio=0.5)`` builds ``CosineAnnealingMomentumUpdaterHook``. Each is one
``get_momentum(runner, base_momentum)``; the base class, ``MomentumUpdaterHook`` in ``updater.py``,
calls it and writes the value to ``momentum`` or, for Adam-like optimizers, ``betas[0]``.

Three of the lr policies, for momentum. The cyclic two are in ``momentum_updater_cyclic.py``;
every name MMCV's ``momentum_updater`` module exposes can be imported from this one.
"""
from .hook import HOOKS
from .schedule import (annealing_cos, annealing_end, annealing_linear, check_exactly_one,
                       check_step, progress, stepped)
from .updater import MomentumUpdaterHook


@HOOKS.register_module()
class StepMomentumUpdaterHook(MomentumUpdaterHook):
    """StepLrUpdaterHook's rule: times ``gamma`` every ``step`` (an int) or at each milestone of
    ``step`` (a list); never below ``min_momentum`` if one is given."""

    def __init__(self, step, gamma=0.5, min_momentum=None, **kwargs):
        check_step(step)
        self.step = step
        self.gamma = gamma
        self.min_momentum = min_momentum
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum):
        p, _ = progress(runner, self.by_epoch)
        return stepped(base_momentum, p, self.step, self.gamma, self.min_momentum)


@HOOKS.register_module()
class CosineAnnealingMomentumUpdaterHook(MomentumUpdaterHook):
    """Half a cosine from the base momentum to ``min_momentum`` (or ``base_momentum *
    min_momentum_ratio``) at the end of the run."""

    def __init__(self, min_momentum=None, min_momentum_ratio=None, **kwargs):
        check_exactly_one(min_momentum=min_momentum, min_momentum_ratio=min_momentum_ratio)
        self.min_momentum, self.min_momentum_ratio = min_momentum, min_momentum_ratio
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum):
        p, end = progress(runner, self.by_epoch)
        target = annealing_end(base_momentum, self.min_momentum, self.min_momentum_ratio)
        return annealing_cos(base_momentum, target, p / end)


@HOOKS.register_module()
class LinearAnnealingMomentumUpdaterHook(MomentumUpdaterHook):
    """As LinearAnnealingLrUpdaterHook: the cosine's arguments and ends, joined by a line."""

    def __init__(self, min_momentum=None, min_momentum_ratio=None, **kwargs):
        check_exactly_one(min_momentum=min_momentum, min_momentum_ratio=min_momentum_ratio)
        self.min_momentum, self.min_momentum_ratio = min_momentum, min_momentum_ratio
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum):
        p, end = progress(runner, self.by_epoch)
        target = annealing_end(base_momentum, self.min_momentum, self.min_momentum_ratio)
        return annealing_linear(base_momentum, target, p / end)


# Imported after this file's policies so that HOOKS lists them first (tutorial 2 prints that
# order). Not a cycle: momentum_updater_cyclic.py imports only updater.py and schedule.py.
from .momentum_updater_cyclic import CyclicMomentumUpdaterHook  # noqa: E402,F401
from .momentum_updater_cyclic import OneCycleMomentumUpdaterHook
