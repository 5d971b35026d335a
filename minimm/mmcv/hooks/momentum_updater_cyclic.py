"""MMCV 1.x's two cyclic momentum policies, the partners of the cyclic lr ones: momentum falls
while the lr climbs, and climbs back while the lr falls. Both work per iteration only.

MMCV defines them in its ``momentum_updater`` module, and ``momentum_updater.py`` imports them
from here.
"""
from minimm.param_groups import format_param

from .hook import HOOKS
from .schedule import (anneal_func, check_fraction, check_target_ratio, cyclic_phases, cyclic_value,
                       for_each_group, named_optimizers, one_cycle_ends, one_cycle_position)
from .updater import MomentumUpdaterHook


@HOOKS.register_module()
class CyclicMomentumUpdaterHook(MomentumUpdaterHook):
    """CyclicLrUpdaterHook's cycles on the momentum: by default down to 0.85/0.95 of the base
    while the lr climbs, then back. Unlike the lr hook, ``gamma`` is not range-checked (MMCV)."""

    def __init__(self, by_epoch=False, target_ratio=(0.85 / 0.95, 1.), cyclic_times=1,
                 step_ratio_up=0.4, anneal_strategy='cos', gamma=1., **kwargs):
        self.target_ratio = check_target_ratio(target_ratio)
        assert 0 <= step_ratio_up < 1.0, f'"step_ratio_up" must be in [0, 1), got {step_ratio_up}'
        self.anneal_func = anneal_func(anneal_strategy)
        assert not by_epoch, 'CyclicMomentumUpdaterHook works per iteration only'
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.max_iter_per_phase = None  # MMCV's name for the length of one cycle
        self.momentum_phases = []
        super().__init__(by_epoch=by_epoch, **kwargs)

    def before_run(self, runner):
        super().before_run(runner)
        self.max_iter_per_phase, self.momentum_phases = cyclic_phases(
            runner.max_iters, self.cyclic_times, self.step_ratio_up, self.target_ratio)

    def get_momentum(self, runner, base_momentum):
        return cyclic_value(base_momentum, runner.iter, self.max_iter_per_phase,
                            self.momentum_phases, self.gamma, self.anneal_func)


@HOOKS.register_module()
class OneCycleMomentumUpdaterHook(MomentumUpdaterHook):
    """OneCycleLrUpdaterHook's partner over ``runner.max_iters``: from ``max_momentum`` down to
    ``base_momentum`` while the lr climbs, back up while it falls (with ``three_phase``: back up,
    then flat). Each bound is a float, a list (one per group) or a dict of those per optimizer;
    both are stored in every param group (``group['base_momentum']``, ``group['max_momentum']``),
    and each group's momentum is computed from its own."""

    def __init__(self, base_momentum=0.85, max_momentum=0.95, pct_start=0.3,
                 anneal_strategy='cos', three_phase=False, **kwargs):
        kwargs.setdefault('by_epoch', False)
        assert not kwargs['by_epoch'], 'OneCycleMomentumUpdaterHook works per iteration only'
        # MMCV refuses ints here (momentum=1 is an error), though format_param takes any number.
        for name, bound in (('base_momentum', base_momentum), ('max_momentum', max_momentum)):
            if not isinstance(bound, (float, list, dict)):
                raise ValueError(f'{name} must be the type among of float,list or dict.')
        check_fraction('pct_start', pct_start)
        self.anneal_func = anneal_func(anneal_strategy)
        self._base_momentum = base_momentum
        self._max_momentum = max_momentum
        self.pct_start = pct_start
        self.three_phase = three_phase
        self.momentum_phases = []
        super().__init__(**kwargs)

    def before_run(self, runner):
        # Not the base class's before_run: the bounds come from the arguments, not the optimizer.
        for name, optim in named_optimizers(runner.optimizer):
            self._store_bounds(name, optim)
        # Each phase names the group keys it anneals from and to.
        if self.three_phase:
            pairs = [('max_momentum', 'base_momentum'), ('base_momentum', 'max_momentum'),
                     ('max_momentum', 'max_momentum')]
        else:
            pairs = [('max_momentum', 'base_momentum'), ('base_momentum', 'max_momentum')]
        ends = one_cycle_ends(self.pct_start, runner.max_iters, self.three_phase)
        self.momentum_phases = [dict(end_iter=end, start_momentum=first, end_momentum=last)
                                for end, (first, last) in zip(ends, pairs)]

    def _store_bounds(self, name, optim):
        """Write both bounds into each group of ``optim`` and start it at ``max_momentum``."""
        if 'momentum' not in optim.defaults and 'betas' not in optim.defaults:
            raise ValueError('optimizer must support momentum with option enabled '
                             f'({type(optim).__name__} has neither "momentum" nor "betas")')
        self.use_beta1 = 'betas' in optim.defaults
        lows = format_param(name, optim, self._base_momentum)
        highs = format_param(name, optim, self._max_momentum)
        for group, low, high in zip(optim.param_groups, lows, highs):
            group['base_momentum'] = low
            group['max_momentum'] = high
            if self.use_beta1:
                group['betas'] = (high, group['betas'][1])
            else:
                group['momentum'] = high

    def get_momentum(self, runner, param_group):
        """Unlike the other policies, computed from a param group: its stored bounds."""
        ends = [phase['end_iter'] for phase in self.momentum_phases]
        index, fraction = one_cycle_position(ends, runner.iter)
        phase = self.momentum_phases[index]
        return self.anneal_func(param_group[phase['start_momentum']],
                                param_group[phase['end_momentum']], fraction)

    def get_regular_momentum(self, runner):
        return for_each_group(runner.optimizer, lambda group: self.get_momentum(runner, group))
