"""The engine shared by MMCV 1.x's LrUpdaterHook and MomentumUpdaterHook, and their common policies.

MMCV 1.7 writes the two base classes out twice. They differ in three small things only: the group
key they write (``lr``; ``momentum`` or ``betas[0]``), the starting value they record
(``initial_lr``; ``initial_momentum``) and how a warm-up factor applies (lr *times* the factor,
momentum *divided* by it, so a warmed-up momentum can exceed 1). Here those are three methods and
the schedule itself is written once:

* ``before_run`` records each group's starting value with ``setdefault``, so a resumed optimizer
  keeps the first run's; these are ``base_values``. When ``runner.optimizer`` is a dict of
  optimizers (GANs), every list of values becomes a dict ``name -> list``.
* ``by_epoch=True``: the regular values are computed at each ``before_train_epoch``; a warm-up
  (counted in iterations) scales them until iteration ``warmup_iters`` writes them unscaled.
* ``by_epoch=False``: the regular values are recomputed before every iteration.
* A policy only implements ``get_value(runner, base)`` (``get_lr``/``get_momentum``), reading the
  progress ``(epoch, max_epochs)`` or ``(iter, max_iters)``.

Step, Cyclic and the min-value/ratio target are policies both worlds of updater use, so they are
here too. Left out compared with MMCV 1.7: nothing of the behaviour; MMCV's per-kind names
(``base_lr``/``regular_lr``, ``get_regular_lr``/``get_warmup_lr``...) are the neutral
``base_values``/``regular_values``, ``get_regular_values``/``get_warmup_values``.
"""
from typing import Callable, List, Optional, Sequence, Tuple, Union

from minimm.optim.scheduler.formulas import ANNEAL_FUNCS, check_anneal_strategy

from .hook import Hook

Values = Union[List[float], dict]


def warmup_factor(warmup: str, cur_iters: int, warmup_iters: int, ratio: float) -> float:
    """What a warm-up multiplies the lr by (and divides the momentum by) at ``cur_iters``."""
    if warmup == 'constant':
        return ratio
    if warmup == 'linear':
        return 1 - (1 - cur_iters / warmup_iters) * (1 - ratio)
    return ratio ** (1 - cur_iters / warmup_iters)


class ParamUpdaterHook(Hook):
    """Schedule one hyper-parameter of every param group (base of the LR and momentum hooks)."""

    initial_key = ''  # the group key holding the starting value: 'initial_lr', 'initial_momentum'
    warmup_types_text = ''  # how the ValueError for an unknown warm-up lists the valid ones

    def __init__(self, by_epoch: bool = True, warmup: Optional[str] = None, warmup_iters: int = 0,
                 warmup_ratio: float = 0.1, warmup_by_epoch: bool = False):
        if warmup is not None:
            if warmup not in ('constant', 'linear', 'exp'):
                raise ValueError(f'"{warmup}" is not a supported type for warming up, valid '
                                 f'types are {self.warmup_types_text}')
            assert warmup_iters > 0, '"warmup_iters" must be a positive integer'
            assert 0 < warmup_ratio <= 1.0, '"warmup_ratio" must be in range (0,1]'
        self.by_epoch = by_epoch
        self.warmup = warmup
        self.warmup_iters = warmup_iters
        self.warmup_ratio = warmup_ratio
        self.warmup_by_epoch = warmup_by_epoch
        if warmup_by_epoch:
            # Known in iterations only once the first train epoch shows the loader's length.
            self.warmup_epochs = warmup_iters
            self.warmup_iters = None
        self.base_values: Values = []
        self.regular_values: Values = []

    # The three differences between the lr and momentum hooks.
    def read(self, group: dict) -> float:
        raise NotImplementedError

    def write(self, group: dict, value: float) -> None:
        raise NotImplementedError

    def warm(self, value: float, factor: float) -> float:
        raise NotImplementedError

    def get_value(self, runner, base: float) -> float:
        """The policy: the regular value for a group whose starting value is ``base``."""
        raise NotImplementedError

    def progress(self, runner) -> Tuple[int, int]:
        """``(epoch, max_epochs)`` if ``by_epoch`` else ``(iter, max_iters)``."""
        if self.by_epoch:
            return runner.epoch, runner.max_epochs
        return runner.iter, runner.max_iters

    @staticmethod
    def per_optimizer(runner, fn: Callable):
        """``fn(name, optimizer)`` for each optimizer: a dict ``name -> result`` for a dict of
        optimizers, else the one result (``name`` is then the optimizer's class name, which is
        how MMCV's ``format_param`` looks a single optimizer up)."""
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
        return self.map_values(lambda base: self.get_value(runner, base), self.base_values)

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
        # None here means warmup_by_epoch on a runner without train epochs (IterBasedRunner).
        assert isinstance(self.warmup_iters, int), 'warmup_iters is not known yet'
        if not self.by_epoch:
            self.regular_values = self.get_regular_values(runner)
        if self.warmup is not None and cur_iter < self.warmup_iters:
            self.set_values(runner, self.get_warmup_values(cur_iter))
        elif not self.by_epoch or (self.warmup is not None and cur_iter == self.warmup_iters):
            # by_epoch: the epoch's value is already written, except right after a warm-up.
            self.set_values(runner, self.regular_values)


def check_one_target(min_value, min_ratio) -> None:
    assert (min_value is None) ^ (min_ratio is None), \
        'exactly one of the minimum value and the minimum ratio must be given'


def check_step(step: Union[int, Sequence[int]]) -> None:
    if isinstance(step, list):
        assert all(isinstance(s, int) and s > 0 for s in step), 'steps must be positive ints'
    elif isinstance(step, int):
        assert step > 0, 'step must be a positive int'
    else:
        raise TypeError('"step" must be a list or integer')


def step_value(base: float, progress: int, step: Union[int, Sequence[int]], gamma: float,
               min_value: Optional[float]) -> float:
    """``base * gamma ** e``, ``e`` = steps passed (every ``step``, or milestones reached), floored
    at ``min_value``: MMCV's Step policy for lr and momentum alike."""
    if isinstance(step, int):
        exp = progress // step
    else:
        exp = next((i for i, s in enumerate(step) if progress < s), len(step))
    value = base * gamma**exp
    return value if min_value is None else max(value, min_value)


def check_one_cycle(kwargs: dict, pct_start: float, anneal_strategy: str) -> None:
    """OneCycle hooks run per iteration (``by_epoch`` defaults to, and must be, False)."""
    assert not kwargs.setdefault('by_epoch', False), 'currently only support "by_epoch" = False'
    if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
        raise ValueError(f'Expected float between 0 and 1 pct_start, but got {pct_start}')
    check_anneal_strategy(anneal_strategy)


class CyclicPolicy:
    """MMCV's cyclic schedule (lr and momentum alike): each of ``cyclic_times`` cycles climbs
    from the base value to ``base * target_ratio[0]`` over ``step_ratio_up`` of the cycle, then
    anneals to ``base * target_ratio[1]``; ``gamma`` shrinks the climb of later cycles."""

    def init_cyclic(self, by_epoch: bool, target_ratio, cyclic_times: int, step_ratio_up: float,
                    anneal_strategy: str, gamma: float) -> None:
        if isinstance(target_ratio, float):
            target_ratio = (target_ratio, target_ratio / 1e5)
        elif isinstance(target_ratio, tuple):
            if len(target_ratio) == 1:
                target_ratio = (target_ratio[0], target_ratio[0] / 1e5)
        else:
            raise ValueError(f'target_ratio should be either float or tuple, got '
                             f'{type(target_ratio)}')
        assert len(target_ratio) == 2, '"target_ratio" must be list or tuple of two floats'
        assert 0 <= step_ratio_up < 1.0, '"step_ratio_up" must be in range [0,1)'
        check_anneal_strategy(anneal_strategy)
        assert not by_epoch, 'currently only support "by_epoch" = False'
        self.target_ratio = target_ratio
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.anneal_func = ANNEAL_FUNCS[anneal_strategy]
        self.max_iter_per_phase = None
        self.phases: List[list] = []  # [start_iter, end_iter, start_ratio, end_ratio]

    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.max_iter_per_phase = runner.max_iters // self.cyclic_times
        iter_up_phase = int(self.step_ratio_up * self.max_iter_per_phase)
        self.phases.append([0, iter_up_phase, 1, self.target_ratio[0]])
        self.phases.append([iter_up_phase, self.max_iter_per_phase, self.target_ratio[0],
                            self.target_ratio[1]])

    def cyclic_value(self, runner, base: float) -> float:
        curr_iter = runner.iter % self.max_iter_per_phase
        scale = self.gamma**(runner.iter // self.max_iter_per_phase)
        for start_iter, end_iter, start_ratio, end_ratio in self.phases:
            if start_iter <= curr_iter < end_iter:
                # The cycle's peak is pulled towards 1 (the base value) by the decay ``scale``.
                if start_iter == 0:
                    end_ratio = 1 - scale + end_ratio * scale
                else:
                    start_ratio = 1 - scale + start_ratio * scale
                return self.anneal_func(base * start_ratio, base * end_ratio,
                                        (curr_iter - start_iter) / (end_iter - start_iter))
        raise ValueError(f'iteration {runner.iter} is outside the cyclic schedule')
