"""MMCV 1.x's two cyclic lr policies. Both work per iteration only and split the run into
phases, each annealing (cosine or linear) from one multiple of the base lr to another:

    CyclicLrUpdaterHook    ``cyclic_times`` cycles, each up to a peak and back down
    OneCycleLrUpdaterHook  one cycle, from ``max_lr / div_factor`` up to ``max_lr``, then far below

MMCV defines them in its ``lr_updater`` module, and ``lr_updater.py`` imports them from here.
"""
import numbers

from minimm.param_groups import format_param

from .hook import HOOKS
from .schedule import (anneal_func, check_fraction, check_target_ratio, cyclic_phases, cyclic_value,
                       one_cycle_ends, one_cycle_position)
from .updater import LrUpdaterHook


@HOOKS.register_module()
class CyclicLrUpdaterHook(LrUpdaterHook):
    """Cyclical lr (https://arxiv.org/abs/1506.01186): each cycle climbs from the base lr to
    ``base_lr * target_ratio[0]`` over ``step_ratio_up`` of it, then falls to ``base_lr *
    target_ratio[1]``; with ``gamma`` < 1 each cycle climbs less high than the one before."""

    def __init__(self, by_epoch=False, target_ratio=(10, 1e-4), cyclic_times=1,
                 step_ratio_up=0.4, anneal_strategy='cos', gamma=1, **kwargs):
        self.target_ratio = check_target_ratio(target_ratio)
        assert 0 <= step_ratio_up < 1.0, f'"step_ratio_up" must be in [0, 1), got {step_ratio_up}'
        assert 0 < gamma <= 1, f'"gamma" must be in (0, 1], got {gamma}'
        self.anneal_func = anneal_func(anneal_strategy)
        assert not by_epoch, 'CyclicLrUpdaterHook works per iteration only'
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.max_iter_per_phase = None  # MMCV's name for the length of one cycle
        self.lr_phases = []
        super().__init__(by_epoch=by_epoch, **kwargs)

    def before_run(self, runner):
        super().before_run(runner)
        self.max_iter_per_phase, self.lr_phases = cyclic_phases(
            runner.max_iters, self.cyclic_times, self.step_ratio_up, self.target_ratio)

    def get_lr(self, runner, base_lr):
        return cyclic_value(base_lr, runner.iter, self.max_iter_per_phase, self.lr_phases,
                            self.gamma, self.anneal_func)


@HOOKS.register_module()
class OneCycleLrUpdaterHook(LrUpdaterHook):
    """The 1cycle policy (https://arxiv.org/abs/1708.07120), over ``total_steps`` iterations
    (``runner.max_iters`` by default): from ``max_lr / div_factor`` up to ``max_lr`` during
    ``pct_start`` of them, then down to ``max_lr / div_factor / final_div_factor``. With
    ``three_phase`` it first comes back to where it started, taking as long as the climb.
    ``max_lr`` is a number, a list (one per param group) or a dict of those per optimizer."""

    def __init__(self, max_lr, total_steps=None, pct_start=0.3, anneal_strategy='cos',
                 div_factor=25, final_div_factor=1e4, three_phase=False, **kwargs):
        kwargs.setdefault('by_epoch', False)
        assert not kwargs['by_epoch'], 'OneCycleLrUpdaterHook works per iteration only'
        if not isinstance(max_lr, (numbers.Number, list, dict)):
            raise ValueError('the type of max_lr must be the one of list or dict, '
                             f'but got {type(max_lr)}')
        if total_steps is not None and not isinstance(total_steps, int):
            raise ValueError(f'the type of total_steps must be int, but got {type(total_steps)}')
        check_fraction('pct_start', pct_start)
        self.anneal_func = anneal_func(anneal_strategy)
        self._max_lr = max_lr
        self.total_steps = total_steps
        self.pct_start = pct_start
        self.div_factor, self.final_div_factor = div_factor, final_div_factor
        self.three_phase = three_phase
        self.lr_phases = []
        super().__init__(**kwargs)

    def before_run(self, runner):
        # Not the base class's before_run: the starting lr is max_lr / div_factor, whatever lr
        # the optimizer was built with.
        total = runner.max_iters if self.total_steps is None else self.total_steps
        if total < runner.max_iters:
            raise ValueError('The total steps must be greater than or equal to max iterations '
                             f'{runner.max_iters} of runner, but total steps is {total}.')
        if isinstance(runner.optimizer, dict):
            self.base_lr = {name: self._first_lrs(name, optim)
                            for name, optim in runner.optimizer.items()}
        else:  # format_param looks a lone optimizer up by its class name, as MMCV does
            self.base_lr = self._first_lrs(type(runner.optimizer).__name__, runner.optimizer)
        # [last iteration of the phase, lr at its start, lr at its end], as multiples of base_lr
        if self.three_phase:
            multiples = [(1, self.div_factor), (self.div_factor, 1),
                         (1, 1 / self.final_div_factor)]
        else:
            multiples = [(1, self.div_factor), (self.div_factor, 1 / self.final_div_factor)]
        ends = one_cycle_ends(self.pct_start, total, self.three_phase)
        self.lr_phases = [[end, *pair] for end, pair in zip(ends, multiples)]

    def _first_lrs(self, name, optim):
        """Each group's starting lr; kept as 'initial_lr' unless a resumed group has one."""
        first = [lr / self.div_factor for lr in format_param(name, optim, self._max_lr)]
        for group, lr in zip(optim.param_groups, first):
            group.setdefault('initial_lr', lr)
        return first

    def get_lr(self, runner, base_lr):
        phase, fraction = one_cycle_position([end for end, _, _ in self.lr_phases], runner.iter)
        _, start, end = self.lr_phases[phase]
        return self.anneal_func(base_lr * start, base_lr * end, fraction)
