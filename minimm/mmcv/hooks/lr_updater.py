"""MMCV 1.x's lr updater hooks: ``lr_config=dict(policy='step', step=[8, 11], ...)``.

Each writes ``group['lr']``, a closed form of the starting lr and the progress; a warm-up multiplies
it by a factor rising from ``warmup_ratio`` to 1. Engine and shared policies: ``param_updater.py``;
the lr-only policies implement MMCV's ``get_lr``. Left out compared with MMCV 1.7: nothing.
"""
import numbers

from minimm.optim.scheduler.formulas import (annealing_cos, annealing_linear, format_param,
                                             one_cycle_phase_ends, period_index)

from .hook import HOOKS
from .param_updater import (AnnealingPolicy, CyclicPolicy, OneCyclePolicy, ParamUpdaterHook,
                            StepPolicy)


class LrUpdaterHook(ParamUpdaterHook):
    """Base of the lr hooks; a custom policy overrides ``get_lr(runner, base_lr)`` (as MMCV 1.7)."""

    initial_key, policy_method = 'initial_lr', 'get_lr'
    warmup_types_text = '"constant", "linear" and "exp"'

    def read(self, group: dict) -> float:
        return group['lr']

    def write(self, group: dict, value: float) -> None:
        group['lr'] = value

    def warm(self, value: float, factor: float) -> float:
        return value * factor

    def get_lr(self, runner, base_lr: float) -> float:
        return self.get_value(runner, base_lr)


@HOOKS.register_module()
class FixedLrUpdaterHook(LrUpdaterHook):

    def get_lr(self, runner, base_lr):
        return base_lr


@HOOKS.register_module()
class StepLrUpdaterHook(StepPolicy, LrUpdaterHook):

    def __init__(self, step, gamma: float = 0.1, min_lr=None, **kwargs):
        super().__init__(step, gamma, min_lr, **kwargs)


@HOOKS.register_module()
class ExpLrUpdaterHook(LrUpdaterHook):

    def __init__(self, gamma: float, **kwargs):
        self.gamma = gamma
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        return base_lr * self.gamma**self.progress(runner)[0]


@HOOKS.register_module()
class PolyLrUpdaterHook(LrUpdaterHook):

    def __init__(self, power: float = 1., min_lr: float = 0., **kwargs):
        self.power, self.min_lr = power, min_lr
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        progress, max_progress = self.progress(runner)
        coeff = (1 - progress / max_progress)**self.power
        return (base_lr - self.min_lr) * coeff + self.min_lr


@HOOKS.register_module()
class InvLrUpdaterHook(LrUpdaterHook):

    def __init__(self, gamma: float, power: float = 1., **kwargs):
        self.gamma, self.power = gamma, power
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr):
        return base_lr * (1 + self.gamma * self.progress(runner)[0])**(-self.power)


class _AnnealLrUpdaterHook(AnnealingPolicy, LrUpdaterHook):

    def __init__(self, min_lr=None, min_lr_ratio=None, **kwargs):
        super().__init__(min_lr, min_lr_ratio, **kwargs)


@HOOKS.register_module()
class CosineAnnealingLrUpdaterHook(_AnnealLrUpdaterHook):
    anneal_func = staticmethod(annealing_cos)


@HOOKS.register_module()
class LinearAnnealingLrUpdaterHook(_AnnealLrUpdaterHook):
    anneal_func = staticmethod(annealing_linear)


@HOOKS.register_module()
class FlatCosineAnnealingLrUpdaterHook(_AnnealLrUpdaterHook):
    """Keep the starting lr for ``start_percent`` of the run, then cosine-anneal."""

    def __init__(self, start_percent: float = 0.75, min_lr=None, min_lr_ratio=None, **kwargs):
        if not isinstance(start_percent, float) or not 0 <= start_percent <= 1:
            raise ValueError('expected float between 0 and 1 start_percent, but got '
                             f'{start_percent}')
        self.start_percent = start_percent
        super().__init__(min_lr, min_lr_ratio, **kwargs)

    def get_lr(self, runner, base_lr):
        progress, max_progress = self.progress(runner)
        start = round(max_progress * self.start_percent)  # Python's round: half to even
        if progress < start:
            return base_lr
        return annealing_cos(base_lr, self.target(base_lr),
                             (progress - start) / (max_progress - start))


@HOOKS.register_module()
class CosineRestartLrUpdaterHook(_AnnealLrUpdaterHook):
    """Cosine annealing restarted after each of ``periods``, from ``restart_weights[i] * base``."""

    def __init__(self, periods, restart_weights=[1], min_lr=None, min_lr_ratio=None, **kwargs):
        assert len(periods) == len(restart_weights), \
            'periods and restart_weights should have the same length.'
        self.periods, self.restart_weights = periods, restart_weights
        super().__init__(min_lr, min_lr_ratio, **kwargs)
        self.cumulative_periods = [sum(periods[0:i + 1]) for i in range(len(periods))]

    def get_lr(self, runner, base_lr):
        progress = self.progress(runner)[0]
        idx = period_index(progress, self.cumulative_periods)
        if idx is None:
            raise ValueError(f'Current iteration {progress} exceeds '
                             f'cumulative_periods {self.cumulative_periods}')
        nearest_restart = 0 if idx == 0 else self.cumulative_periods[idx - 1]
        alpha = min((progress - nearest_restart) / self.periods[idx], 1)
        return annealing_cos(base_lr, self.target(base_lr), alpha, self.restart_weights[idx])


@HOOKS.register_module()
class CyclicLrUpdaterHook(CyclicPolicy, LrUpdaterHook):
    """Cyclic lr (Smith, "Cyclical Learning Rates")."""

    def __init__(self, by_epoch: bool = False, target_ratio=(10, 1e-4), cyclic_times: int = 1,
                 step_ratio_up: float = 0.4, anneal_strategy: str = 'cos', gamma: float = 1,
                 **kwargs):
        assert 0 < gamma <= 1, '"gamma" must be in range (0, 1]'
        super().__init__(by_epoch, target_ratio, cyclic_times, step_ratio_up, anneal_strategy,
                         gamma, **kwargs)


@HOOKS.register_module()
class OneCycleLrUpdaterHook(OneCyclePolicy, LrUpdaterHook):
    """From ``max_lr / div_factor`` up to ``max_lr`` over ``pct_start`` of ``total_steps``, then
    down to ``initial / final_div_factor``."""

    def __init__(self, max_lr, total_steps=None, pct_start: float = 0.3,
                 anneal_strategy: str = 'cos', div_factor: float = 25,
                 final_div_factor: float = 1e4, three_phase: bool = False, **kwargs):
        if not isinstance(max_lr, (numbers.Number, list, dict)):
            raise ValueError(f'the type of max_lr must be the one of list or dict, but got '
                             f'{type(max_lr)}')
        if total_steps is not None and not isinstance(total_steps, int):
            raise ValueError(f'the type of total_steps must be int, but got {type(total_steps)}')
        self._max_lr, self.total_steps = max_lr, total_steps
        self.div_factor, self.final_div_factor = div_factor, final_div_factor
        super().__init__(pct_start, anneal_strategy, three_phase, **kwargs)

    def before_run(self, runner):
        # Not the base before_run: the starting lr comes from max_lr, not from the optimizer.
        total_steps = runner.max_iters if self.total_steps is None else self.total_steps
        if total_steps < runner.max_iters:
            raise ValueError('The total steps must be greater than or equal to max iterations '
                             f'{runner.max_iters} of runner, but total steps is {total_steps}.')

        def record(name, optimizer):
            base_lrs = [lr / self.div_factor for lr in format_param(name, optimizer, self._max_lr)]
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group.setdefault('initial_lr', lr)
            return base_lrs
        self.base_values = self.per_optimizer(runner, record)
        self.phase_ends = one_cycle_phase_ends(self.pct_start, total_steps, self.three_phase)
        # Multipliers of the starting lr at each phase's start and end.
        self.phase_mults = [(1, self.div_factor), (self.div_factor, 1 / self.final_div_factor)]
        if self.three_phase:
            self.phase_mults = [(1, self.div_factor), (self.div_factor, 1),
                                (1, 1 / self.final_div_factor)]

    def phase_bounds(self, base_lr, phase):
        start_mult, end_mult = self.phase_mults[phase]
        return base_lr * start_mult, base_lr * end_mult
