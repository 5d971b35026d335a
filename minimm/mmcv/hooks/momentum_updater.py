"""MMCV 1.x's momentum updater hooks: ``momentum_config=dict(policy='cyclic', ...)``.

They schedule ``momentum`` or ``betas[0]`` with ``param_updater.py``'s engine. As in MMCV 1.7, a
warm-up *divides* by the warm-up factor, so momentum can exceed 1. Left out: nothing.
"""
from minimm.optim.scheduler.formulas import (ANNEAL_FUNCS, annealing_cos, annealing_linear,
                                             annealing_target, cyclic_value, format_param,
                                             one_cycle_phase, one_cycle_phase_ends, step_decay)

from .hook import HOOKS
from .param_updater import (CyclicPolicy, ParamUpdaterHook, check_one_cycle, check_one_target,
                            check_step)


class MomentumUpdaterHook(ParamUpdaterHook):
    """Base of the momentum hooks: subclasses implement ``get_momentum(runner, base_momentum)``."""

    initial_key = 'initial_momentum'
    warmup_types_text = '"constant" and "linear"'  # MMCV's text, although "exp" works too

    def __init__(self, by_epoch: bool = True, warmup=None, warmup_iters: int = 0,
                 warmup_ratio: float = 0.9):
        super().__init__(by_epoch, warmup, warmup_iters, warmup_ratio)

    def read(self, group: dict) -> float:
        return group['momentum'] if 'momentum' in group else group['betas'][0]

    def write(self, group: dict, value: float) -> None:
        if 'momentum' in group:
            group['momentum'] = value
        elif 'betas' in group:
            group['betas'] = (value, group['betas'][1])

    def warm(self, value: float, factor: float) -> float:
        return value / factor

    def get_value(self, runner, base: float) -> float:
        return self.get_momentum(runner, base)

    def get_momentum(self, runner, base_momentum: float) -> float:
        raise NotImplementedError


@HOOKS.register_module()
class StepMomentumUpdaterHook(MomentumUpdaterHook):
    """Multiply by ``gamma`` every ``step`` epochs/iters or at each milestone, floored at
    ``min_momentum``."""

    def __init__(self, step, gamma: float = 0.5, min_momentum=None, **kwargs):
        check_step(step)
        self.step, self.gamma, self.min_momentum = step, gamma, min_momentum
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum):
        return step_decay(base_momentum, self.progress(runner)[0], self.step, self.gamma,
                          self.min_momentum)


class _AnnealMomentumUpdaterHook(MomentumUpdaterHook):
    """A momentum annealed towards ``min_momentum`` or ``base * min_momentum_ratio``."""

    def __init__(self, min_momentum=None, min_momentum_ratio=None, **kwargs):
        check_one_target(min_momentum, min_momentum_ratio)
        self.min_momentum, self.min_momentum_ratio = min_momentum, min_momentum_ratio
        super().__init__(**kwargs)

    def target(self, base_momentum: float) -> float:
        return annealing_target(self.min_momentum, self.min_momentum_ratio, base_momentum)


@HOOKS.register_module()
class CosineAnnealingMomentumUpdaterHook(_AnnealMomentumUpdaterHook):

    def get_momentum(self, runner, base_momentum):
        progress, max_progress = self.progress(runner)
        return annealing_cos(base_momentum, self.target(base_momentum), progress / max_progress)


@HOOKS.register_module()
class LinearAnnealingMomentumUpdaterHook(_AnnealMomentumUpdaterHook):

    def get_momentum(self, runner, base_momentum):
        progress, max_progress = self.progress(runner)
        return annealing_linear(base_momentum, self.target(base_momentum),
                                progress / max_progress)


@HOOKS.register_module()
class CyclicMomentumUpdaterHook(CyclicPolicy, MomentumUpdaterHook):
    """Cyclic momentum, usually paired with CyclicLrUpdaterHook: it dips while the lr climbs."""

    def __init__(self, by_epoch: bool = False, target_ratio=(0.85 / 0.95, 1.),
                 cyclic_times: int = 1, step_ratio_up: float = 0.4, anneal_strategy: str = 'cos',
                 gamma: float = 1., **kwargs):
        self.init_cyclic(by_epoch, target_ratio, cyclic_times, step_ratio_up, anneal_strategy,
                         gamma)
        super().__init__(by_epoch, **kwargs)

    def get_momentum(self, runner, base_momentum):
        return cyclic_value(base_momentum, runner.iter, self.max_iter_per_phase, self.phases,
                            self.gamma, self.anneal_func)


@HOOKS.register_module()
class OneCycleMomentumUpdaterHook(MomentumUpdaterHook):
    """1cycle momentum: down to ``base_momentum`` while the lr climbs, back to ``max_momentum``
    while it anneals (over ``runner.max_iters``); both are stored in each param group."""

    def __init__(self, base_momentum=0.85, max_momentum=0.95, pct_start: float = 0.3,
                 anneal_strategy: str = 'cos', three_phase: bool = False, **kwargs):
        check_one_cycle(kwargs, pct_start, anneal_strategy)
        # MMCV accepts floats, lists and dicts only: an int such as 1 is refused.
        for name, value in (('base_momentum', base_momentum), ('max_momentum', max_momentum)):
            if not isinstance(value, (float, list, dict)):
                raise ValueError(f'{name} must be the type among of float,list or dict.')
        self._base_momentum, self._max_momentum = base_momentum, max_momentum
        self.pct_start, self.three_phase = pct_start, three_phase
        self.anneal_func = ANNEAL_FUNCS[anneal_strategy]
        super().__init__(**kwargs)

    def before_run(self, runner):
        # Not the base before_run: the values come from the arguments, not from the optimizer.
        def record(name, optimizer):
            if 'momentum' not in optimizer.defaults and 'betas' not in optimizer.defaults:
                raise ValueError('optimizer must support momentum with option enabled')
            for group, base, top in zip(optimizer.param_groups,
                                        format_param(name, optimizer, self._base_momentum),
                                        format_param(name, optimizer, self._max_momentum)):
                self.write(group, top)
                group['base_momentum'], group['max_momentum'] = base, top
        self.per_optimizer(runner, record)
        self.phase_ends = one_cycle_phase_ends(self.pct_start, runner.max_iters, self.three_phase)
        self.phase_keys = [('max_momentum', 'base_momentum'), ('base_momentum', 'max_momentum')]
        if self.three_phase:
            self.phase_keys.append(('max_momentum', 'max_momentum'))

    def get_regular_values(self, runner):
        # Computed per param group (from the keys stored there), not from a base value.
        return self.per_optimizer(runner, lambda name, optimizer: [
            self.get_momentum(runner, group) for group in optimizer.param_groups])

    def get_momentum(self, runner, param_group):
        idx, pct = one_cycle_phase(runner.iter, self.phase_ends)
        start_key, end_key = self.phase_keys[idx]
        return self.anneal_func(param_group[start_key], param_group[end_key], pct)
