"""The engine of MMCV 1.x's lr and momentum updater hooks, and the policies both kinds share.

MMCV 1.7 writes the engine and the Step, annealing, Cyclic and OneCycle policies once per kind; here
a hook is a policy (``get_value``) plus a kind (``LrUpdaterHook``...) that reads, writes and warms a
group's value. Starting values are kept with ``setdefault`` (a resumed optimizer keeps the first
run's); ``by_epoch`` values change per train epoch (a warm-up per iteration), others per iteration.
Left out compared with MMCV 1.7: its per-kind attribute names (``base_lr``, ``regular_lr``,
``min_lr``...) are ``base_values``, ``regular_values``, ``min_value``...
"""
from typing import Callable, List, Optional, Tuple, Union

from minimm.optim.scheduler.formulas import (ANNEAL_FUNCS, annealing_target,
                                             check_anneal_strategy, cyclic_value, one_cycle_phase,
                                             step_decay, warmup_factor)

from .hook import Hook

Values = Union[List[float], dict]


class ParamUpdaterHook(Hook):
    initial_key = ''  # the group key of the starting value: 'initial_lr', 'initial_momentum'
    policy_method = ''  # MMCV's name for the policy, which custom hooks override: 'get_lr'...
    warmup_types_text = ''  # how the error for an unknown warm-up lists the valid ones

    def __init__(self, by_epoch: bool = True, warmup: Optional[str] = None, warmup_iters: int = 0,
                 warmup_ratio: float = 0.1, warmup_by_epoch: bool = False):
        if warmup is not None:
            if warmup not in ('constant', 'linear', 'exp'):
                raise ValueError(f'"{warmup}" is not a supported type for warming up, valid '
                                 f'types are {self.warmup_types_text}')
            assert warmup_iters > 0, '"warmup_iters" must be a positive integer'
            assert 0 < warmup_ratio <= 1.0, '"warmup_ratio" must be in range (0,1]'
        self.by_epoch, self.warmup, self.warmup_ratio = by_epoch, warmup, warmup_ratio
        self.warmup_iters, self.warmup_by_epoch = warmup_iters, warmup_by_epoch
        if warmup_by_epoch:  # known in iterations once the first epoch shows the loader length
            self.warmup_epochs, self.warmup_iters = warmup_iters, None
        self.base_values: Values = []
        self.regular_values: Values = []

    def read(self, group: dict) -> float:
        raise NotImplementedError

    def write(self, group: dict, value: float) -> None:
        raise NotImplementedError

    def warm(self, value: float, factor: float) -> float:
        raise NotImplementedError

    def get_value(self, runner, base: float) -> float:
        """A shared policy: the regular value of a group whose starting value is ``base``."""
        raise NotImplementedError

    def progress(self, runner) -> Tuple[int, int]:
        return (runner.epoch, runner.max_epochs) if self.by_epoch else \
            (runner.iter, runner.max_iters)

    @staticmethod
    def per_optimizer(runner, fn: Callable):
        """``fn(name, optimizer)`` for each optimizer of a dict (a dict of results), or for the
        single one, named by its class (how MMCV's ``format_param`` looks it up)."""
        if isinstance(runner.optimizer, dict):
            return {name: fn(name, opt) for name, opt in runner.optimizer.items()}
        return fn(type(runner.optimizer).__name__, runner.optimizer)

    @staticmethod
    def map_values(fn: Callable, values: Values) -> Values:
        if isinstance(values, dict):
            return {name: [fn(v) for v in group_values] for name, group_values in values.items()}
        return [fn(v) for v in values]

    def set_values(self, runner, values: Values) -> None:
        def write_all(name, optimizer):
            own = values[name] if isinstance(runner.optimizer, dict) else values
            for group, value in zip(optimizer.param_groups, own):
                self.write(group, value)
        self.per_optimizer(runner, write_all)

    def get_regular_values(self, runner) -> Values:
        policy = getattr(self, self.policy_method)
        return self.map_values(lambda base: policy(runner, base), self.base_values)

    def get_warmup_values(self, cur_iters: int) -> Values:
        factor = warmup_factor(self.warmup, cur_iters, self.warmup_iters, self.warmup_ratio)
        return self.map_values(lambda value: self.warm(value, factor), self.regular_values)

    def before_run(self, runner) -> None:
        def record(name, optimizer):
            for group in optimizer.param_groups:
                group.setdefault(self.initial_key, self.read(group))
            return [group[self.initial_key] for group in optimizer.param_groups]
        self.base_values = self.per_optimizer(runner, record)

    def before_train_epoch(self, runner) -> None:
        if self.warmup_iters is None:
            self.warmup_iters = self.warmup_epochs * len(runner.data_loader)
        if self.by_epoch:
            self.regular_values = self.get_regular_values(runner)
            self.set_values(runner, self.regular_values)

    def before_train_iter(self, runner) -> None:
        cur_iter = runner.iter
        # None here: warmup_by_epoch on a runner without train epochs (IterBasedRunner).
        assert isinstance(self.warmup_iters, int), 'warmup_iters is not known yet'
        if not self.by_epoch:
            self.regular_values = self.get_regular_values(runner)
        if self.warmup is not None and cur_iter < self.warmup_iters:
            self.set_values(runner, self.get_warmup_values(cur_iter))
        elif not self.by_epoch or (self.warmup is not None and cur_iter == self.warmup_iters):
            # by_epoch: the epoch's value is already written, except right after a warm-up.
            self.set_values(runner, self.regular_values)


class StepPolicy(ParamUpdaterHook):
    """Multiply by ``gamma`` every ``step`` epochs/iters or at each milestone of a list, floored
    at ``min_value``."""

    def __init__(self, step, gamma: float, min_value, **kwargs):
        if isinstance(step, list):
            assert all(isinstance(s, int) and s > 0 for s in step), 'steps must be positive ints'
        elif isinstance(step, int):
            assert step > 0, 'step must be a positive int'
        else:
            raise TypeError('"step" must be a list or integer')
        self.step, self.gamma, self.min_value = step, gamma, min_value
        super().__init__(**kwargs)

    def get_value(self, runner, base: float) -> float:
        return step_decay(base, self.progress(runner)[0], self.step, self.gamma, self.min_value)


class AnnealingPolicy(ParamUpdaterHook):
    """Anneal over the progress to ``min_value`` or ``base * min_ratio`` (exactly one given)."""

    anneal_func: Callable  # set by each hook: annealing_cos or annealing_linear

    def __init__(self, min_value, min_ratio, **kwargs):
        assert (min_value is None) ^ (min_ratio is None), \
            'exactly one of the minimum value and the minimum ratio must be given'
        self.min_value, self.min_ratio = min_value, min_ratio
        super().__init__(**kwargs)

    def target(self, base: float) -> float:
        return annealing_target(self.min_value, self.min_ratio, base)

    def get_value(self, runner, base: float) -> float:
        progress, max_progress = self.progress(runner)
        return self.anneal_func(base, self.target(base), progress / max_progress)


class CyclicPolicy(ParamUpdaterHook):
    """Per iteration only: each of ``cyclic_times`` cycles climbs from the base value to ``base *
    target_ratio[0]`` over ``step_ratio_up`` of the cycle, then anneals to ``base *
    target_ratio[1]``; cycle ``n`` is scaled by ``gamma ** n``."""

    def __init__(self, by_epoch: bool, target_ratio, cyclic_times: int, step_ratio_up: float,
                 anneal_strategy: str, gamma: float, **kwargs):
        if isinstance(target_ratio, float):
            target_ratio = (target_ratio, target_ratio / 1e5)
        elif not isinstance(target_ratio, tuple):
            raise ValueError('target_ratio should be either float or tuple, got '
                             f'{type(target_ratio)}')
        elif len(target_ratio) == 1:
            target_ratio = (target_ratio[0], target_ratio[0] / 1e5)
        assert len(target_ratio) == 2, '"target_ratio" must be list or tuple of two floats'
        assert 0 <= step_ratio_up < 1.0, '"step_ratio_up" must be in range [0,1)'
        check_anneal_strategy(anneal_strategy)
        assert not by_epoch, 'currently only support "by_epoch" = False'
        self.target_ratio, self.cyclic_times = target_ratio, cyclic_times
        self.step_ratio_up, self.gamma = step_ratio_up, gamma
        self.anneal_func = ANNEAL_FUNCS[anneal_strategy]
        self.max_iter_per_phase, self.phases = None, []
        super().__init__(by_epoch, **kwargs)

    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.max_iter_per_phase = runner.max_iters // self.cyclic_times
        iter_up_phase = int(self.step_ratio_up * self.max_iter_per_phase)
        self.phases.append([0, iter_up_phase, 1, self.target_ratio[0]])
        self.phases.append([iter_up_phase, self.max_iter_per_phase, *self.target_ratio])

    def get_value(self, runner, base: float) -> float:
        return cyclic_value(base, runner.iter, self.max_iter_per_phase, self.phases, self.gamma,
                            self.anneal_func)


class OneCyclePolicy(ParamUpdaterHook):
    """Per iteration only (``by_epoch`` defaults to, and must be, False): the kind's ``before_run``
    sets ``phase_ends``; in each phase the value anneals between the kind's ``phase_bounds``."""

    def __init__(self, pct_start: float, anneal_strategy: str, three_phase: bool, **kwargs):
        assert not kwargs.setdefault('by_epoch', False), 'currently only support "by_epoch" = False'
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f'Expected float between 0 and 1 pct_start, but got {pct_start}')
        check_anneal_strategy(anneal_strategy)
        self.pct_start, self.three_phase = pct_start, three_phase
        self.anneal_func = ANNEAL_FUNCS[anneal_strategy]
        super().__init__(**kwargs)

    def phase_bounds(self, base, phase: int) -> Tuple[float, float]:
        raise NotImplementedError

    def get_value(self, runner, base) -> float:
        phase, pct = one_cycle_phase(runner.iter, self.phase_ends)
        return self.anneal_func(*self.phase_bounds(base, phase), pct)
