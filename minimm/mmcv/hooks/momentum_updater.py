"""MMCV 1.x's momentum updater hooks, as ``mmcv/runner/hooks/momentum_updater.py``:
``momentum_config=dict(policy='cyclic', target_ratio=(0.85 / 0.95, 1), ...)``.

They schedule each param group's ``momentum``, or ``betas[0]`` for Adam-like optimizers, as the lr
hooks schedule the lr: ``base_momentum`` from ``before_run`` (kept in the group as
``initial_momentum``), ``get_momentum(runner, base_momentum)`` per epoch or iteration into
``regular_momentum``. As in MMCV 1.7 a warm-up *divides* by its factor, so momentum starts above its
regular value (and may exceed 1). ``CyclicMomentumUpdaterHook`` and ``OneCycleMomentumUpdaterHook``
are in ``momentum_updater_cyclic.py`` (importable from here), to keep each file short; otherwise as
MMCV 1.7.
"""
from typing import Dict, List, Optional, Union

from .hook import HOOKS, Hook
from .lr_updater import annealing_cos, annealing_linear


class MomentumUpdaterHook(Hook):
    """The base of the momentum hooks; the arguments are LrUpdaterHook's, without
    ``warmup_by_epoch`` (as in MMCV 1.7)."""

    def __init__(self,
                 by_epoch: bool = True,
                 warmup: Optional[str] = None,
                 warmup_iters: int = 0,
                 warmup_ratio: float = 0.9):
        if warmup is not None:
            if warmup not in ['constant', 'linear', 'exp']:
                # MMCV's message, although 'exp' works too.
                raise ValueError(f'"{warmup}" is not a supported type for warming up, valid'
                                 ' types are "constant" and "linear"')
        if warmup is not None:
            assert warmup_iters > 0, '"warmup_iters" must be a positive integer'
            assert 0 < warmup_ratio <= 1.0, '"warmup_momentum" must be in range (0,1]'

        self.by_epoch = by_epoch
        self.warmup = warmup
        self.warmup_iters = warmup_iters
        self.warmup_ratio = warmup_ratio

        # initial momentum for all param groups
        self.base_momentum: Union[list, dict] = []
        # expected momentum if no warming up is performed
        self.regular_momentum: Union[list, dict] = []

    def _set_momentum(self, runner, momentum_groups):
        if isinstance(runner.optimizer, dict):
            for k, optim in runner.optimizer.items():
                for param_group, mom in zip(optim.param_groups, momentum_groups[k]):
                    if 'momentum' in param_group.keys():
                        param_group['momentum'] = mom
                    elif 'betas' in param_group.keys():
                        param_group['betas'] = (mom, param_group['betas'][1])
        else:
            for param_group, mom in zip(runner.optimizer.param_groups, momentum_groups):
                if 'momentum' in param_group.keys():
                    param_group['momentum'] = mom
                elif 'betas' in param_group.keys():
                    param_group['betas'] = (mom, param_group['betas'][1])

    def get_momentum(self, runner, base_momentum) -> float:
        raise NotImplementedError

    def get_regular_momentum(self, runner) -> Union[list, Dict[str, list]]:
        if isinstance(runner.optimizer, dict):
            assert isinstance(self.base_momentum, dict)
            momentum_groups: Dict[str, List[float]] = {}
            for k in runner.optimizer.keys():
                _momentum_group: List[float] = [
                    self.get_momentum(runner, _base_momentum)
                    for _base_momentum in self.base_momentum[k]
                ]
                momentum_groups.update({k: _momentum_group})
            return momentum_groups
        else:
            assert isinstance(self.base_momentum, list)
            return [
                self.get_momentum(runner, _base_momentum)
                for _base_momentum in self.base_momentum
            ]

    def get_warmup_momentum(self, cur_iters: int) -> Union[List[float], Dict[str, List[float]]]:

        def _get_warmup_momentum(cur_iters, regular_momentum):
            if self.warmup == 'constant':
                warmup_momentum = [_momentum / self.warmup_ratio for _momentum in regular_momentum]
            elif self.warmup == 'linear':
                k = (1 - cur_iters / self.warmup_iters) * (1 - self.warmup_ratio)
                warmup_momentum = [_momentum / (1 - k) for _momentum in regular_momentum]
            elif self.warmup == 'exp':
                k = self.warmup_ratio**(1 - cur_iters / self.warmup_iters)
                warmup_momentum = [_momentum / k for _momentum in regular_momentum]
            else:
                raise ValueError('Expected values of `self.warmup` to be "constant", '
                                 f'"linear", or "exp", got {self.warmup}')
            return warmup_momentum

        if isinstance(self.regular_momentum, dict):
            momentum_groups = {}
            for key, regular_momentum in self.regular_momentum.items():
                momentum_groups[key] = _get_warmup_momentum(cur_iters, regular_momentum)
            return momentum_groups
        else:
            return _get_warmup_momentum(cur_iters, self.regular_momentum)

    def before_run(self, runner):
        # A resumed optimizer's groups already hold 'initial_momentum': the first run's.
        if isinstance(runner.optimizer, dict):
            self.base_momentum = {}
            for k, optim in runner.optimizer.items():
                for group in optim.param_groups:
                    if 'momentum' in group.keys():
                        group.setdefault('initial_momentum', group['momentum'])
                    else:
                        group.setdefault('initial_momentum', group['betas'][0])
                _base_momentum = [group['initial_momentum'] for group in optim.param_groups]
                self.base_momentum.update({k: _base_momentum})
        else:
            for group in runner.optimizer.param_groups:
                if 'momentum' in group.keys():
                    group.setdefault('initial_momentum', group['momentum'])
                else:
                    group.setdefault('initial_momentum', group['betas'][0])
            self.base_momentum = [
                group['initial_momentum'] for group in runner.optimizer.param_groups
            ]

    def before_train_epoch(self, runner):
        if not self.by_epoch:
            return
        self.regular_momentum = self.get_regular_momentum(runner)
        self._set_momentum(runner, self.regular_momentum)

    def before_train_iter(self, runner):
        cur_iter = runner.iter
        if not self.by_epoch:
            self.regular_momentum = self.get_regular_momentum(runner)
            if self.warmup is None or cur_iter >= self.warmup_iters:
                self._set_momentum(runner, self.regular_momentum)
            else:
                warmup_momentum = self.get_warmup_momentum(cur_iter)
                self._set_momentum(runner, warmup_momentum)
        elif self.by_epoch:
            if self.warmup is None or cur_iter > self.warmup_iters:
                return
            elif cur_iter == self.warmup_iters:
                self._set_momentum(runner, self.regular_momentum)
            else:
                warmup_momentum = self.get_warmup_momentum(cur_iter)
                self._set_momentum(runner, warmup_momentum)


@HOOKS.register_module()
class StepMomentumUpdaterHook(MomentumUpdaterHook):
    """Multiply by ``gamma`` every ``step`` epochs/iterations (an int) or at each of the
    ``step`` milestones (a list); never below ``min_momentum`` when it is given."""

    def __init__(self,
                 step: Union[int, List[int]],
                 gamma: float = 0.5,
                 min_momentum: Optional[float] = None,
                 **kwargs):
        if isinstance(step, list):
            assert all(isinstance(s, int) for s in step)
            assert all([s > 0 for s in step])
        elif isinstance(step, int):
            assert step > 0
        else:
            raise TypeError('"step" must be a list or integer')
        self.step = step
        self.gamma = gamma
        self.min_momentum = min_momentum
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum: float) -> float:
        progress = runner.epoch if self.by_epoch else runner.iter

        # calculate exponential term
        if isinstance(self.step, int):
            exp = progress // self.step
        else:
            exp = len(self.step)
            for i, s in enumerate(self.step):
                if progress < s:
                    exp = i
                    break

        momentum = base_momentum * (self.gamma**exp)
        if self.min_momentum is not None:
            # clip to a minimum value
            momentum = max(momentum, self.min_momentum)
        return momentum


@HOOKS.register_module()
class CosineAnnealingMomentumUpdaterHook(MomentumUpdaterHook):
    """Cosine annealing from the base momentum to ``min_momentum``, or to ``base_momentum *
    min_momentum_ratio`` (give exactly one)."""

    def __init__(self,
                 min_momentum: Optional[float] = None,
                 min_momentum_ratio: Optional[float] = None,
                 **kwargs):
        assert (min_momentum is None) ^ (min_momentum_ratio is None)
        self.min_momentum = min_momentum
        self.min_momentum_ratio = min_momentum_ratio
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum: float) -> float:
        if self.by_epoch:
            progress = runner.epoch
            max_progress = runner.max_epochs
        else:
            progress = runner.iter
            max_progress = runner.max_iters
        if self.min_momentum_ratio is not None:
            target_momentum = base_momentum * self.min_momentum_ratio
        else:
            assert self.min_momentum is not None
            target_momentum = self.min_momentum
        return annealing_cos(base_momentum, target_momentum, progress / max_progress)


@HOOKS.register_module()
class LinearAnnealingMomentumUpdaterHook(MomentumUpdaterHook):
    """Linear annealing from the base momentum to ``min_momentum``, or to ``base_momentum *
    min_momentum_ratio`` (give exactly one)."""

    def __init__(self,
                 min_momentum: Optional[float] = None,
                 min_momentum_ratio: Optional[float] = None,
                 **kwargs):
        assert (min_momentum is None) ^ (min_momentum_ratio is None)
        self.min_momentum = min_momentum
        self.min_momentum_ratio = min_momentum_ratio
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum: float) -> float:
        if self.by_epoch:
            progress = runner.epoch
            max_progress = runner.max_epochs
        else:
            progress = runner.iter
            max_progress = runner.max_iters
        if self.min_momentum_ratio is not None:
            target_momentum = base_momentum * self.min_momentum_ratio
        else:
            assert self.min_momentum is not None
            target_momentum = self.min_momentum
        return annealing_linear(base_momentum, target_momentum, progress / max_progress)


# The cyclic policies live beside this file; they are importable from here too, as in MMCV.
# Imported last: they subclass MomentumUpdaterHook.
from .momentum_updater_cyclic import (CyclicMomentumUpdaterHook,  # noqa: E402,F401
                                      OneCycleMomentumUpdaterHook)
