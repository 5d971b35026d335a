"""MMCV 1.x's cyclic lr updater hooks, ``CyclicLrUpdaterHook`` and ``OneCycleLrUpdaterHook``, as
MMCV 1.7 has them in ``mmcv/runner/hooks/lr_updater.py`` (here in a file of their own, so that
each stays short; ``lr_updater.py`` imports them back). Both change the lr every iteration, in
phases: each phase anneals (cosine or linear) between two multiples of the initial lr.
"""
import numbers
from typing import Callable, List, Optional, Union

from .hook import HOOKS
from .lr_updater import LrUpdaterHook, annealing_cos, annealing_linear, format_param


@HOOKS.register_module()
class CyclicLrUpdaterHook(LrUpdaterHook):
    """Cyclical lr (https://arxiv.org/pdf/1506.01186.pdf), per iteration only, cosine (or linear)
    inside a cycle: each of ``cyclic_times`` cycles climbs from the base lr to ``base_lr *
    target_ratio[0]`` over ``step_ratio_up`` of the cycle, then anneals to ``base_lr *
    target_ratio[1]``; ``gamma`` < 1 shrinks the climb of each new cycle."""

    def __init__(self,
                 by_epoch: bool = False,
                 target_ratio: Union[float, tuple] = (10, 1e-4),
                 cyclic_times: int = 1,
                 step_ratio_up: float = 0.4,
                 anneal_strategy: str = 'cos',
                 gamma: float = 1,
                 **kwargs) -> None:
        if isinstance(target_ratio, float):
            target_ratio = (target_ratio, target_ratio / 1e5)
        elif isinstance(target_ratio, tuple):
            target_ratio = (target_ratio[0], target_ratio[0] / 1e5) \
                if len(target_ratio) == 1 else target_ratio
        else:
            raise ValueError('target_ratio should be either float '
                             f'or tuple, got {type(target_ratio)}')

        assert len(target_ratio) == 2, '"target_ratio" must be list or tuple of two floats'
        assert 0 <= step_ratio_up < 1.0, '"step_ratio_up" must be in range [0,1)'
        assert 0 < gamma <= 1, '"gamma" must be in range (0, 1]'

        self.target_ratio = target_ratio
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.max_iter_per_phase = None
        self.lr_phases: list = []  # init lr_phases
        if anneal_strategy not in ['cos', 'linear']:
            raise ValueError('anneal_strategy must be one of "cos" or '
                             f'"linear", instead got {anneal_strategy}')
        elif anneal_strategy == 'cos':
            self.anneal_func: Callable[[float, float, float], float] = annealing_cos
        elif anneal_strategy == 'linear':
            self.anneal_func = annealing_linear

        assert not by_epoch, 'currently only support "by_epoch" = False'
        super().__init__(by_epoch, **kwargs)

    def before_run(self, runner):
        super().before_run(runner)
        # The cycle's two phases: up, then down.
        self.max_iter_per_phase = runner.max_iters // self.cyclic_times
        iter_up_phase = int(self.step_ratio_up * self.max_iter_per_phase)
        self.lr_phases.append([0, iter_up_phase, 1, self.target_ratio[0]])
        self.lr_phases.append([
            iter_up_phase, self.max_iter_per_phase, self.target_ratio[0], self.target_ratio[1]
        ])

    def get_lr(self, runner, base_lr: float):
        curr_iter = runner.iter % self.max_iter_per_phase
        curr_cycle = runner.iter // self.max_iter_per_phase
        scale = self.gamma**curr_cycle

        for (start_iter, end_iter, start_ratio, end_ratio) in self.lr_phases:
            if start_iter <= curr_iter < end_iter:
                # Scale the gap between the peak and the base lr by gamma**cycle:
                # end_ratio = (base_lr + scale * (max_lr - base_lr)) / base_lr
                if start_iter == 0:
                    end_ratio = 1 - scale + end_ratio * scale
                else:
                    start_ratio = 1 - scale + start_ratio * scale
                progress = curr_iter - start_iter
                return self.anneal_func(base_lr * start_ratio, base_lr * end_ratio,
                                        progress / (end_iter - start_iter))


@HOOKS.register_module()
class OneCycleLrUpdaterHook(LrUpdaterHook):
    """The 1cycle policy (https://arxiv.org/pdf/1708.07120.pdf), per iteration only: from
    ``max_lr / div_factor`` up to ``max_lr`` (a number, a list per param group or a dict per
    optimizer) over ``pct_start`` of ``total_steps`` (default: ``runner.max_iters``), then down to
    ``initial lr / final_div_factor``; ``three_phase`` comes back down to the initial lr first."""

    def __init__(self,
                 max_lr: Union[float, List],
                 total_steps: Optional[int] = None,
                 pct_start: float = 0.3,
                 anneal_strategy: str = 'cos',
                 div_factor: float = 25,
                 final_div_factor: float = 1e4,
                 three_phase: bool = False,
                 **kwargs) -> None:
        if 'by_epoch' not in kwargs:
            kwargs['by_epoch'] = False
        else:
            assert not kwargs['by_epoch'], 'currently only support "by_epoch" = False'
        if not isinstance(max_lr, (numbers.Number, list, dict)):
            raise ValueError('the type of max_lr must be the one of list or '
                             f'dict, but got {type(max_lr)}')
        self._max_lr = max_lr
        if total_steps is not None:
            if not isinstance(total_steps, int):
                raise ValueError('the type of total_steps must be int, but'
                                 f'got {type(total_steps)}')
            self.total_steps = total_steps
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError('expected float between 0 and 1 pct_start, but '
                             f'got {pct_start}')
        self.pct_start = pct_start
        if anneal_strategy not in ['cos', 'linear']:
            raise ValueError('anneal_strategy must be one of "cos" or '
                             f'"linear", instead got {anneal_strategy}')
        elif anneal_strategy == 'cos':
            self.anneal_func: Callable[[float, float, float], float] = annealing_cos
        elif anneal_strategy == 'linear':
            self.anneal_func = annealing_linear
        self.div_factor = div_factor
        self.final_div_factor = final_div_factor
        self.three_phase = three_phase
        self.lr_phases: list = []  # init lr_phases
        super().__init__(**kwargs)

    def before_run(self, runner):
        if hasattr(self, 'total_steps'):
            total_steps = self.total_steps
        else:
            total_steps = runner.max_iters
        if total_steps < runner.max_iters:
            raise ValueError('The total steps must be greater than or equal to max '
                             f'iterations {runner.max_iters} of runner, but total steps '
                             f'is {total_steps}.')

        # Not the base before_run: the starting lr comes from max_lr, not from the optimizer.
        if isinstance(runner.optimizer, dict):
            self.base_lr = {}
            for k, optim in runner.optimizer.items():
                _max_lr = format_param(k, optim, self._max_lr)
                self.base_lr[k] = [lr / self.div_factor for lr in _max_lr]
                for group, lr in zip(optim.param_groups, self.base_lr[k]):
                    group.setdefault('initial_lr', lr)
        else:
            k = type(runner.optimizer).__name__
            _max_lr = format_param(k, runner.optimizer, self._max_lr)
            self.base_lr = [lr / self.div_factor for lr in _max_lr]
            optim_param_groups = runner.optimizer.param_groups
            for group, lr in zip(optim_param_groups, self.base_lr):
                group.setdefault('initial_lr', lr)

        # [last iteration of the phase, start and end lr as multiples of the initial lr]
        if self.three_phase:
            self.lr_phases.append([float(self.pct_start * total_steps) - 1, 1, self.div_factor])
            self.lr_phases.append(
                [float(2 * self.pct_start * total_steps) - 2, self.div_factor, 1])
            self.lr_phases.append([total_steps - 1, 1, 1 / self.final_div_factor])
        else:
            self.lr_phases.append([float(self.pct_start * total_steps) - 1, 1, self.div_factor])
            self.lr_phases.append(
                [total_steps - 1, self.div_factor, 1 / self.final_div_factor])

    def get_lr(self, runner, base_lr: float):
        curr_iter = runner.iter
        start_iter = 0
        for i, (end_iter, start_lr, end_lr) in enumerate(self.lr_phases):
            if curr_iter <= end_iter:
                pct = (curr_iter - start_iter) / (end_iter - start_iter)
                lr = self.anneal_func(base_lr * start_lr, base_lr * end_lr, pct)
                break
            start_iter = end_iter
        return lr
