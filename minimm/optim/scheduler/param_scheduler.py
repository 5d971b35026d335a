"""_ParamScheduler: the base of every learning-rate and momentum schedule.

A parameter scheduler changes one hyper-parameter (``param_name``: ``'lr'``, ``'momentum'``) in
every ``param_group`` of an optimizer, once per ``step()``. ParamSchedulerHook calls ``step()``
after each training iteration (``by_epoch=False``) or epoch (``by_epoch=True``).

Three ideas to take away:

* **Windows.** Each ``step()`` advances a global counter ``_global_step``; the scheduler acts only
  while ``begin <= _global_step < end``, and inside the window ``last_step`` counts its own steps
  from 0. So ``LinearLR(begin=0, end=5)`` followed by ``CosineAnnealingLR(begin=5, end=100)``
  hand over at step 5.
* **Chainable form.** ``_get_value()`` computes the new value from the group's *current* value
  (e.g. "multiply by gamma"), not from the initial one, so two schedulers active at the same time
  compose (their factors multiply) instead of overwriting each other. Each class documents the
  closed form the recursion reproduces when it runs alone.
* **Construction is step 0.** ``__init__`` records ``initial_{param_name}`` in every group (only if
  no earlier scheduler did) and calls ``step()`` once, so a warm-up's first value is in place
  before the first iteration.

``build_iter_from_epoch`` turns a config written in epochs into an iteration-based scheduler
(``convert_to_iter_based=True``): begin/end and the arguments listed in ``_epoch_args`` are
multiplied by the epoch length, so the value changes smoothly every iteration.

Left out compared with MMEngine: the wrapping of ``optimizer.step`` that warns when
``scheduler.step()`` runs before ``optimizer.step()``; ``verbose`` prints with ``print``.
"""
from typing import List, Optional, Sequence, Union

from torch.optim import Optimizer

from ..optim_wrapper import OptimWrapper

INF = int(1e9)

OptimizerType = Union[OptimWrapper, Optimizer]


class _ParamScheduler:
    """Base class: subclasses implement ``_get_value()`` (the chainable form).

    Args:
        optimizer: an OptimWrapper or a torch Optimizer.
        param_name: the ``param_group`` key to schedule, e.g. ``'lr'``.
        begin: first global step at which the scheduler acts.
        end: global step at which it stops (exclusive).
        last_step: the index of the last step, to resume without a state dict; -1 = fresh.
        by_epoch: whether ``step()`` is called per epoch (True) or per iteration (False).
        verbose: print every new value.
    """

    # Arguments counted in epochs that build_iter_from_epoch multiplies by the epoch length
    # (besides begin/end). A list argument (milestones, periods) is multiplied element-wise.
    _epoch_args: Sequence[str] = ()

    def __init__(self, optimizer: OptimizerType, param_name: str, begin: int = 0,
                 end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        self._attach(optimizer, param_name, begin, end, last_step, by_epoch)
        self.base_values = [group[f'initial_{param_name}'] for group in optimizer.param_groups]
        # Attributes are set in MMEngine's order, so state_dict() lists its keys in that order.
        self.last_step = last_step
        self._global_step = -1
        self.verbose = verbose
        self.step()

    def _attach(self, optimizer: OptimizerType, param_name: str, begin: int, end: int,
                last_step: int, by_epoch: bool) -> None:
        """Validate the arguments and record ``initial_{param_name}`` in every group (the caller
        sets ``last_step``)."""
        if not isinstance(optimizer, (Optimizer, OptimWrapper)):
            raise TypeError('optimizer should be an Optimizer or an OptimWrapper, but got '
                            f'{type(optimizer).__name__}')
        if end <= begin:
            raise ValueError(f'end should be larger than begin, but got begin={begin}, end={end}')
        if not isinstance(last_step, int) or last_step < -1:
            raise ValueError(f'last_step should be an int >= -1, but got {last_step!r}')
        self.optimizer = optimizer
        self.param_name = param_name
        self.begin = begin
        self.end = end
        self.by_epoch = by_epoch
        for i, group in enumerate(optimizer.param_groups):
            if param_name not in group:
                raise KeyError(f'param_groups[{i}] has no {param_name!r} to schedule '
                               f'(keys: {sorted(k for k in group if k != "params")})')
            if last_step == -1:
                # The first scheduler on a group records the starting value; later (chained)
                # schedulers share it, so every one of them sees the configured base value.
                group.setdefault(f'initial_{param_name}', group[param_name])
            elif f'initial_{param_name}' not in group:
                raise KeyError(f"param 'initial_{param_name}' is not specified in "
                               f'param_groups[{i}] when resuming an optimizer')

    @classmethod
    def build_iter_from_epoch(cls, *args, begin: Union[int, float] = 0,
                              end: Union[int, float] = INF, by_epoch: bool = True,
                              epoch_length: Optional[int] = None, **kwargs):
        """Build an iteration-based instance from a config whose steps are epochs."""
        if not by_epoch:
            raise ValueError(f'{cls.__name__}: only epoch-based configs (by_epoch=True) can be '
                             'converted to iteration-based (convert_to_iter_based=True)')
        if not isinstance(epoch_length, int) or epoch_length <= 0:
            raise ValueError(f'{cls.__name__}: epoch_length must be a positive integer to '
                             f'convert epochs to iterations, but got {epoch_length!r}')
        for name in cls._epoch_args:
            value = kwargs.get(name)
            if isinstance(value, (list, tuple)):
                kwargs[name] = [v * epoch_length for v in value]
            elif value is not None:
                kwargs[name] = value * epoch_length
        begin = int(begin * epoch_length)
        if end != INF:
            end = int(end * epoch_length)
        return cls(*args, begin=begin, end=end, by_epoch=False, **kwargs)

    def step(self) -> None:
        """Advance one step; inside ``[begin, end)`` write ``_get_value()`` into the groups."""
        self._global_step += 1
        groups = self.optimizer.param_groups
        if self.begin <= self._global_step < self.end:
            self.last_step += 1
            for i, (group, value) in enumerate(zip(groups, self._get_value())):
                group[self.param_name] = value
                self.print_value(self.verbose, i, value)
        self._last_value = [group[self.param_name] for group in groups]

    def _get_value(self) -> List[float]:
        """The new value of every group, computed from the current ones (chainable form)."""
        raise NotImplementedError

    def _current_values(self) -> List[float]:
        """The groups' current values: what a step that changes nothing returns."""
        return [group[self.param_name] for group in self.optimizer.param_groups]

    def _scaled_values(self, factor: float) -> List[float]:
        """The groups' current values times ``factor``: one step of a multiplicative schedule."""
        return [value * factor for value in self._current_values()]

    def get_last_value(self) -> List[float]:
        """The values after the latest ``step()``."""
        return self._last_value

    def print_value(self, is_verbose: bool, group: int, value: float) -> None:
        if is_verbose:
            print(f'Adjusting parameter value of group {group} to {value:.4e}.')

    def state_dict(self) -> dict:
        """Every attribute except the optimizer (whose state is saved separately)."""
        return {key: value for key, value in self.__dict__.items() if key != 'optimizer'}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
