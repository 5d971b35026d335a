"""MMCV 1.x's lr policies: ``lr_config=dict(policy='step', step=[8, 11], warmup='linear',
warmup_iters=500)`` builds ``StepLrUpdaterHook`` (``register_lr_hook`` turns the policy into the
class name). Each policy is one ``get_lr(runner, base_lr)``; the base class, ``LrUpdaterHook`` in
``updater.py``, calls it at the right time and handles the warm-up. Read that file first.

Below, ``p`` is how far the run has got and ``P`` where it ends: epochs for ``by_epoch=True``,
iterations otherwise. The two cyclic policies are in ``lr_updater_cyclic.py``. Every name MMCV's
``lr_updater`` module exposes can be imported from this one.
"""
from itertools import accumulate

# format_param is not used here: it is imported for code that imports it from MMCV's lr_updater.
from minimm.param_groups import format_param  # noqa: F401

from .hook import HOOKS
from .schedule import (annealing_cos, annealing_end, annealing_linear,  # noqa: F401
                       check_exactly_one, check_fraction, check_step, get_position_from_periods,
                       progress, stepped)
from .updater import LrUpdaterHook


@HOOKS.register_module()
class FixedLrUpdaterHook(LrUpdaterHook):
    """The lr stays where it started: a warm-up on its own."""

    def get_lr(self, runner, base_lr):
        return base_lr


@HOOKS.register_module()
class StepLrUpdaterHook(LrUpdaterHook):
    """Times ``gamma`` every ``step`` (an int), or at each milestone of ``step`` (a list); never
    below ``min_lr`` if one is given."""

    def __init__(self, step, gamma=0.1, min_lr=None, **kwargs):
        check_step(step)
        self.step = step
        self.gamma = gamma
        self.min_lr = min_lr
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, _ = progress(runner, self.by_epoch)
        return stepped(base_lr, p, self.step, self.gamma, self.min_lr)


@HOOKS.register_module()
class ExpLrUpdaterHook(LrUpdaterHook):
    """``base_lr * gamma**p``: times ``gamma`` at every epoch (or iteration)."""

    def __init__(self, gamma, **kwargs):
        self.gamma = gamma
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, _ = progress(runner, self.by_epoch)
        return base_lr * self.gamma**p


@HOOKS.register_module()
class PolyLrUpdaterHook(LrUpdaterHook):
    """From the base lr down to ``min_lr`` at the end, along ``(1 - p/P)**power``."""

    def __init__(self, power=1., min_lr=0., **kwargs):
        self.power = power
        self.min_lr = min_lr
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, end = progress(runner, self.by_epoch)
        return (base_lr - self.min_lr) * (1 - p / end)**self.power + self.min_lr


@HOOKS.register_module()
class InvLrUpdaterHook(LrUpdaterHook):
    """``base_lr * (1 + gamma * p)**-power``: fast at first, then ever slower."""

    def __init__(self, gamma, power=1., **kwargs):
        self.gamma = gamma
        self.power = power
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, _ = progress(runner, self.by_epoch)
        return base_lr * (1 + self.gamma * p)**(-self.power)


@HOOKS.register_module()
class CosineAnnealingLrUpdaterHook(LrUpdaterHook):
    """Half a cosine from the base lr to ``min_lr`` (or to ``base_lr * min_lr_ratio``) at ``P``.
    mmdet's YOLOX hook subclasses this one and reads ``min_lr_ratio``."""

    def __init__(self, min_lr=None, min_lr_ratio=None, **kwargs):
        check_exactly_one(min_lr=min_lr, min_lr_ratio=min_lr_ratio)
        self.min_lr, self.min_lr_ratio = min_lr, min_lr_ratio  # one of them is None
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, end = progress(runner, self.by_epoch)
        target = annealing_end(base_lr, self.min_lr, self.min_lr_ratio)
        return annealing_cos(base_lr, target, p / end)


@HOOKS.register_module()
class FlatCosineAnnealingLrUpdaterHook(LrUpdaterHook):
    """fastai's flat-cos: the base lr for the first ``start_percent`` of the run, then the cosine
    of CosineAnnealing over the rest. The flat part ends at ``round(P * start_percent)``, with
    Python's rounding (2.5 rounds to 2)."""

    def __init__(self, start_percent=0.75, min_lr=None, min_lr_ratio=None, **kwargs):
        check_exactly_one(min_lr=min_lr, min_lr_ratio=min_lr_ratio)
        check_fraction('start_percent', start_percent)
        self.start_percent = start_percent
        self.min_lr, self.min_lr_ratio = min_lr, min_lr_ratio  # one of them is None
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, end = progress(runner, self.by_epoch)
        flat_until = round(end * self.start_percent)
        if p < flat_until:
            return base_lr
        target = annealing_end(base_lr, self.min_lr, self.min_lr_ratio)
        return annealing_cos(base_lr, target, (p - flat_until) / (end - flat_until))


@HOOKS.register_module()
class CosineRestartLrUpdaterHook(LrUpdaterHook):
    """A cosine over each of ``periods`` (lengths in epochs or iterations), restarting at the end
    of each; period ``i`` restarts ``restart_weights[i]`` of the way up from the floor."""

    def __init__(self, periods, restart_weights=[1], min_lr=None, min_lr_ratio=None, **kwargs):
        check_exactly_one(min_lr=min_lr, min_lr_ratio=min_lr_ratio)
        assert len(periods) == len(restart_weights), \
            'periods and restart_weights should have the same length.'
        self.periods = periods
        self.restart_weights = restart_weights
        self.min_lr, self.min_lr_ratio = min_lr, min_lr_ratio  # one of them is None
        super().__init__(**kwargs)
        self.cumulative_periods = list(accumulate(periods))  # where each period ends

    def get_lr(self, runner, base_lr):
        p, _ = progress(runner, self.by_epoch)
        index = get_position_from_periods(p, self.cumulative_periods)
        restart = self.cumulative_periods[index - 1] if index > 0 else 0
        fraction = min((p - restart) / self.periods[index], 1)
        target = annealing_end(base_lr, self.min_lr, self.min_lr_ratio)
        return annealing_cos(base_lr, target, fraction, self.restart_weights[index])


@HOOKS.register_module()
class LinearAnnealingLrUpdaterHook(LrUpdaterHook):
    """CosineAnnealing's two ends and arguments, joined by a straight line."""

    def __init__(self, min_lr=None, min_lr_ratio=None, **kwargs):
        check_exactly_one(min_lr=min_lr, min_lr_ratio=min_lr_ratio)
        self.min_lr, self.min_lr_ratio = min_lr, min_lr_ratio
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        p, end = progress(runner, self.by_epoch)
        target = annealing_end(base_lr, self.min_lr, self.min_lr_ratio)
        return annealing_linear(base_lr, target, p / end)


# Imported after this file's policies so that HOOKS lists them first (tutorial 2 prints that
# order). Not a cycle: lr_updater_cyclic.py imports only updater.py and schedule.py.
from .lr_updater_cyclic import CyclicLrUpdaterHook, OneCycleLrUpdaterHook  # noqa: E402,F401
