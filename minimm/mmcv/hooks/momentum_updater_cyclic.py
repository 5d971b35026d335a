"""MMCV 1.x's cyclic momentum updater hooks, ``CyclicMomentumUpdaterHook`` and
``OneCycleMomentumUpdaterHook``, as MMCV 1.7 has them in ``mmcv/runner/hooks/momentum_updater.py``
(here in a file of their own, so that each stays short; ``momentum_updater.py`` imports them back).
Each is the partner of its lr hook: momentum dips while the lr climbs.
"""
from typing import Callable, Dict, List, Tuple, Union

from .hook import HOOKS
from .lr_updater import annealing_cos, annealing_linear, format_param
from .momentum_updater import MomentumUpdaterHook


@HOOKS.register_module()
class CyclicMomentumUpdaterHook(MomentumUpdaterHook):
    """Cyclical momentum (https://arxiv.org/pdf/1708.07120.pdf), per iteration only: in each of
    ``cyclic_times`` cycles, from the base momentum to ``base * target_ratio[0]`` over
    ``step_ratio_up`` of the cycle, then to ``base * target_ratio[1]``; ``gamma`` < 1 shrinks the
    swing of each new cycle."""

    def __init__(self,
                 by_epoch: bool = False,
                 target_ratio: Tuple[float, float] = (0.85 / 0.95, 1.),
                 cyclic_times: int = 1,
                 step_ratio_up: float = 0.4,
                 anneal_strategy: str = 'cos',
                 gamma: float = 1.,
                 **kwargs):
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

        self.target_ratio = target_ratio
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.momentum_phases: List[list] = []  # init momentum_phases

        self.anneal_func: Callable[[float, float, float], float]
        if anneal_strategy not in ['cos', 'linear']:
            raise ValueError('anneal_strategy must be one of "cos" or '
                             f'"linear", instead got {anneal_strategy}')
        elif anneal_strategy == 'cos':
            self.anneal_func = annealing_cos
        elif anneal_strategy == 'linear':
            self.anneal_func = annealing_linear
        assert not by_epoch, 'currently only support "by_epoch" = False'
        super().__init__(by_epoch, **kwargs)

    def before_run(self, runner):
        super().before_run(runner)
        # The cycle's two phases: up, then down.
        max_iter_per_phase = runner.max_iters // self.cyclic_times
        iter_up_phase = int(self.step_ratio_up * max_iter_per_phase)
        self.max_iter_per_phase = max_iter_per_phase
        self.momentum_phases.append([0, iter_up_phase, 1, self.target_ratio[0]])
        self.momentum_phases.append(
            [iter_up_phase, max_iter_per_phase, self.target_ratio[0], self.target_ratio[1]])

    def get_momentum(self, runner, base_momentum: float) -> float:
        curr_iter = runner.iter % self.max_iter_per_phase
        curr_cycle = runner.iter // self.max_iter_per_phase
        scale = self.gamma**curr_cycle
        for (start_iter, end_iter, start_ratio, end_ratio) in self.momentum_phases:
            if start_iter <= curr_iter < end_iter:
                # Scale the gap between the extreme and the base momentum by gamma**cycle:
                # end_ratio = (base_momentum + scale * (max_momentum - base_momentum))
                #             / base_momentum
                if start_iter == 0:
                    end_ratio = 1 - scale + end_ratio * scale
                else:
                    start_ratio = 1 - scale + start_ratio * scale
                progress = curr_iter - start_iter
                return self.anneal_func(base_momentum * start_ratio,
                                        base_momentum * end_ratio,
                                        progress / (end_iter - start_iter))
        raise RuntimeError('The method should return in the for-loop and '
                           'should not be executed until this')


@HOOKS.register_module()
class OneCycleMomentumUpdaterHook(MomentumUpdaterHook):
    """The partner of OneCycleLrUpdaterHook, per iteration only (over ``runner.max_iters``): from
    ``max_momentum`` down to ``base_momentum`` while the lr climbs, back up while it anneals
    (``three_phase``: then stays at ``max_momentum``). Each is a float, a list per param group or a
    dict per optimizer, and is stored in each param group (``group['base_momentum']``...)."""

    def __init__(self,
                 base_momentum: Union[float, list, dict] = 0.85,
                 max_momentum: Union[float, list, dict] = 0.95,
                 pct_start: float = 0.3,
                 anneal_strategy: str = 'cos',
                 three_phase: bool = False,
                 **kwargs):
        if 'by_epoch' not in kwargs:
            kwargs['by_epoch'] = False
        else:
            assert not kwargs['by_epoch'], 'currently only support "by_epoch" = False'
        # Floats, lists and dicts only, as MMCV: an int such as 1 is refused.
        if not isinstance(base_momentum, (float, list, dict)):
            raise ValueError('base_momentum must be the type among of float,'
                             'list or dict.')
        self._base_momentum = base_momentum
        if not isinstance(max_momentum, (float, list, dict)):
            raise ValueError('max_momentum must be the type among of float,'
                             'list or dict.')
        self._max_momentum = max_momentum
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError('Expected float between 0 and 1 pct_start, but '
                             f'got {pct_start}')
        self.pct_start = pct_start
        self.anneal_func: Callable[[float, float, float], float]
        if anneal_strategy not in ['cos', 'linear']:
            raise ValueError('anneal_strategy must by one of "cos" or '
                             f'"linear", instead got {anneal_strategy}')
        elif anneal_strategy == 'cos':
            self.anneal_func = annealing_cos
        elif anneal_strategy == 'linear':
            self.anneal_func = annealing_linear
        self.three_phase = three_phase
        self.momentum_phases: List[dict] = []  # init momentum_phases
        super().__init__(**kwargs)

    def before_run(self, runner):
        # Not the base before_run: the values come from the arguments, not from the optimizer.
        if isinstance(runner.optimizer, dict):
            for k, optim in runner.optimizer.items():
                self._init_param_groups(k, optim)
        else:
            optim = runner.optimizer
            self._init_param_groups(type(optim).__name__, optim)

        if self.three_phase:
            self.momentum_phases.append({
                'end_iter': float(self.pct_start * runner.max_iters) - 1,
                'start_momentum': 'max_momentum',
                'end_momentum': 'base_momentum'
            })
            self.momentum_phases.append({
                'end_iter': float(2 * self.pct_start * runner.max_iters) - 2,
                'start_momentum': 'base_momentum',
                'end_momentum': 'max_momentum'
            })
            self.momentum_phases.append({
                'end_iter': runner.max_iters - 1,
                'start_momentum': 'max_momentum',
                'end_momentum': 'max_momentum'
            })
        else:
            self.momentum_phases.append({
                'end_iter': float(self.pct_start * runner.max_iters) - 1,
                'start_momentum': 'max_momentum',
                'end_momentum': 'base_momentum'
            })
            self.momentum_phases.append({
                'end_iter': runner.max_iters - 1,
                'start_momentum': 'base_momentum',
                'end_momentum': 'max_momentum'
            })

    def _init_param_groups(self, name, optim):
        """Start ``optim`` at ``max_momentum`` and store both bounds in each of its groups (MMCV
        writes this out once per branch of ``before_run``)."""
        if 'momentum' not in optim.defaults and 'betas' not in optim.defaults:
            raise ValueError('optimizer must support momentum with option enabled')
        self.use_beta1 = 'betas' in optim.defaults
        _base_momentum = format_param(name, optim, self._base_momentum)
        _max_momentum = format_param(name, optim, self._max_momentum)
        for group, b_momentum, m_momentum in zip(optim.param_groups, _base_momentum,
                                                 _max_momentum):
            if self.use_beta1:
                _, beta2 = group['betas']
                group['betas'] = (m_momentum, beta2)
            else:
                group['momentum'] = m_momentum
            group['base_momentum'] = b_momentum
            group['max_momentum'] = m_momentum

    def get_momentum(self, runner, param_group: Dict[str, float]) -> float:
        """Unlike the other hooks, computed from a param group (its stored bounds)."""
        curr_iter = runner.iter
        start_iter = 0
        momentum = 0.
        for i, phase in enumerate(self.momentum_phases):
            end_iter = phase['end_iter']
            if curr_iter <= end_iter or i == len(self.momentum_phases) - 1:
                pct = (curr_iter - start_iter) / (end_iter - start_iter)
                momentum = self.anneal_func(param_group[phase['start_momentum']],
                                            param_group[phase['end_momentum']], pct)
                break
            start_iter = end_iter
        return momentum

    def get_regular_momentum(self, runner):
        if isinstance(runner.optimizer, dict):
            momentum_groups = {}
            for k, optim in runner.optimizer.items():
                _momentum_group = [
                    self.get_momentum(runner, param_group) for param_group in optim.param_groups
                ]
                momentum_groups.update({k: _momentum_group})
            return momentum_groups
        else:
            momentum_groups = []
            for param_group in runner.optimizer.param_groups:
                momentum_groups.append(self.get_momentum(runner, param_group))
            return momentum_groups
