"""MMCV 1.x's momentum updater hooks: ``momentum_config=dict(policy='cyclic', ...)``.

They schedule ``momentum`` or ``betas[0]`` with ``param_updater.py``'s engine and policies; as in
MMCV 1.7 a warm-up *divides* by its factor, so momentum can exceed 1. Left out: nothing.
"""
from minimm.optim.scheduler.formulas import (annealing_cos, annealing_linear, format_param,
                                             one_cycle_phase_ends)

from .hook import HOOKS
from .param_updater import (AnnealingPolicy, CyclicPolicy, OneCyclePolicy, ParamUpdaterHook,
                            StepPolicy)


class MomentumUpdaterHook(ParamUpdaterHook):
    """Base of the momentum hooks; a custom policy overrides ``get_momentum(runner,
    base_momentum)`` (as MMCV 1.7)."""

    initial_key, policy_method = 'initial_momentum', 'get_momentum'
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

    def get_momentum(self, runner, base_momentum: float) -> float:
        return self.get_value(runner, base_momentum)


@HOOKS.register_module()
class StepMomentumUpdaterHook(StepPolicy, MomentumUpdaterHook):

    def __init__(self, step, gamma: float = 0.5, min_momentum=None, **kwargs):
        super().__init__(step, gamma, min_momentum, **kwargs)


class _AnnealMomentumUpdaterHook(AnnealingPolicy, MomentumUpdaterHook):

    def __init__(self, min_momentum=None, min_momentum_ratio=None, **kwargs):
        super().__init__(min_momentum, min_momentum_ratio, **kwargs)


@HOOKS.register_module()
class CosineAnnealingMomentumUpdaterHook(_AnnealMomentumUpdaterHook):
    anneal_func = staticmethod(annealing_cos)


@HOOKS.register_module()
class LinearAnnealingMomentumUpdaterHook(_AnnealMomentumUpdaterHook):
    anneal_func = staticmethod(annealing_linear)


@HOOKS.register_module()
class CyclicMomentumUpdaterHook(CyclicPolicy, MomentumUpdaterHook):
    """Cyclic momentum, usually paired with CyclicLrUpdaterHook: it dips while the lr climbs."""

    def __init__(self, by_epoch: bool = False, target_ratio=(0.85 / 0.95, 1.),
                 cyclic_times: int = 1, step_ratio_up: float = 0.4, anneal_strategy: str = 'cos',
                 gamma: float = 1., **kwargs):
        super().__init__(by_epoch, target_ratio, cyclic_times, step_ratio_up, anneal_strategy,
                         gamma, **kwargs)


@HOOKS.register_module()
class OneCycleMomentumUpdaterHook(OneCyclePolicy, MomentumUpdaterHook):
    """Down to ``base_momentum`` while the lr climbs, back to ``max_momentum`` while it anneals
    (over ``runner.max_iters``); both are stored in each param group."""

    def __init__(self, base_momentum=0.85, max_momentum=0.95, pct_start: float = 0.3,
                 anneal_strategy: str = 'cos', three_phase: bool = False, **kwargs):
        # MMCV accepts floats, lists and dicts only: an int such as 1 is refused.
        for name, value in (('base_momentum', base_momentum), ('max_momentum', max_momentum)):
            if not isinstance(value, (float, list, dict)):
                raise ValueError(f'{name} must be the type among of float,list or dict.')
        self._base_momentum, self._max_momentum = base_momentum, max_momentum
        super().__init__(pct_start, anneal_strategy, three_phase, **kwargs)

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
        return self.get_value(runner, param_group)

    def phase_bounds(self, param_group, phase):
        start_key, end_key = self.phase_keys[phase]
        return param_group[start_key], param_group[end_key]
