"""Schedule formulas shared by the MMEngine-style schedulers and the MMCV 1.x updater hooks.

Both worlds anneal between two values along a cosine or a line, pick the period of a restart
schedule and walk the phases of a 1cycle schedule; those pieces are written once, here, and
imported by ``minimm/optim/scheduler/`` and ``minimm/mmcv/hooks/*_updater.py`` alike. The closed
forms only MMCV's hooks use (warm-up factor, step decay, cyclic) are at the end, so that every
schedule formula of minimm is in this one file.

What is *not* shared, on purpose: MMEngine's schedulers compute most values in the chainable form
(each step multiplies the group's current value by a factor, so schedulers can be stacked), while
MMCV's hooks compute each value afresh from the base value (closed form: ``base * gamma ** e``).
The two give the same numbers in exact arithmetic but not always the same floats, and each world
is checked against its own original, so Step/Exp/Poly/Cosine keep their own form on each side.

Every function is written with the operation order of both originals, so sharing them changes no
float on either side.
"""
import math
import numbers
from typing import List, Optional, Sequence, Tuple, Union


def annealing_cos(start: float, end: float, factor: float, weight: float = 1.) -> float:
    """Cosine anneal from ``start`` to ``end`` as ``factor`` goes from 0 to 1.

    ``weight`` scales the distance from ``end`` (MMCV's CosineRestart restart weights); with the
    default 1 this is MMEngine's ``(start - end) / 2 * (cos + 1)`` bit for bit, since halving is
    exact in floating point.
    """
    cos_out = math.cos(math.pi * factor) + 1
    return end + 0.5 * weight * (start - end) * cos_out


def annealing_linear(start: float, end: float, factor: float) -> float:
    """Linear anneal from ``start`` to ``end`` as ``factor`` goes from 0 to 1."""
    return start + (end - start) * factor


ANNEAL_FUNCS = {'cos': annealing_cos, 'linear': annealing_linear}


def check_anneal_strategy(anneal_strategy: str) -> None:
    """Fail early on an unknown ``anneal_strategy`` (the text both originals use)."""
    if anneal_strategy not in ANNEAL_FUNCS:
        raise ValueError('anneal_strategy must be one of "cos" or "linear", '
                         f'instead got {anneal_strategy!r}')


def annealing_target(min_value: Optional[float], min_ratio: Optional[float],
                     base_value: float) -> float:
    """The floor of an annealing schedule: ``base_value * min_ratio`` if a ratio is given, else
    ``min_value`` (MMEngine's ``eta_min``/``eta_min_ratio``, MMCV's ``min_lr``/``min_lr_ratio``)."""
    return min_value if min_ratio is None else base_value * min_ratio


def period_index(iteration: int, cumulative_periods: Sequence[int]) -> Optional[int]:
    """Index of the first period whose cumulative end is past ``iteration``; None after the last
    (MMEngine then keeps the value, MMCV raises)."""
    for i, period_end in enumerate(cumulative_periods):
        if iteration < period_end:
            return i
    return None


def one_cycle_phase(step: int, phase_ends: Sequence[float]) -> Tuple[int, float]:
    """``(phase index, fraction of that phase done)`` at ``step`` in a 1cycle schedule.

    Phase ``i`` runs from the previous phase's end (0 for the first) to ``phase_ends[i]``; a step
    past every end belongs to the last phase, as in both originals.
    """
    start = 0
    for i, end in enumerate(phase_ends):
        if step <= end or i == len(phase_ends) - 1:
            return i, (step - start) / (end - start)
        start = end
    raise ValueError('a 1cycle schedule needs at least one phase')


def one_cycle_phase_ends(pct_start: float, total_steps: int, three_phase: bool) -> List[float]:
    """The step at which each 1cycle phase ends: the climb ends at ``pct_start * total_steps - 1``;
    a three-phase cycle comes back down by ``2 * pct_start * total_steps - 2``; the last phase
    ends at ``total_steps - 1``."""
    climb_end = float(pct_start * total_steps) - 1
    if three_phase:
        return [climb_end, float(2 * pct_start * total_steps) - 2, total_steps - 1]
    return [climb_end, total_steps - 1]


def format_param(name: str, optimizer, param: Union[float, Sequence[float], dict]) -> List[float]:
    """One value per parameter group of ``optimizer``: a number is repeated, a list/tuple must have
    one value per group, and a dict maps an optimizer's ``name`` to its value(s) (MMCV's form for
    a dict of optimizers)."""
    n = len(optimizer.param_groups)
    if isinstance(param, numbers.Number):
        return [param] * n
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f'expected {n} values for {name}, got {len(param)}')
        return list(param)
    if name not in param:
        raise KeyError(f'{name} is not found in {param.keys()}')
    return format_param(name, optimizer, param[name])


def warmup_factor(warmup: str, cur_iters: int, warmup_iters: int, ratio: float) -> float:
    """MMCV's warm-up at iteration ``cur_iters`` of ``warmup_iters``: what the lr is multiplied
    (and the momentum divided) by; ``constant``: ``ratio``; ``linear``: from ``ratio`` to 1;
    ``exp``: ``ratio ** (1 - cur/W)``."""
    if warmup == 'constant':
        return ratio
    if warmup == 'linear':
        return 1 - (1 - cur_iters / warmup_iters) * (1 - ratio)
    return ratio ** (1 - cur_iters / warmup_iters)


def step_decay(base: float, progress: int, step: Union[int, Sequence[int]], gamma: float,
               min_value: Optional[float] = None) -> float:
    """MMCV's Step policy: ``base * gamma ** e``, ``e`` = steps passed (one every ``step``, or the
    milestones of a list already reached), floored at ``min_value``."""
    if isinstance(step, int):
        exp = progress // step
    else:
        exp = next((i for i, s in enumerate(step) if progress < s), len(step))
    value = base * gamma**exp
    return value if min_value is None else max(value, min_value)


def cyclic_value(base: float, iteration: int, cycle_len: int, phases: Sequence[Sequence[float]],
                 gamma: float, anneal) -> float:
    """MMCV's cyclic policy: ``phases`` are ``[start_iter, end_iter, start_ratio, end_ratio]``
    within a cycle of ``cycle_len`` iterations; cycle ``n`` is scaled by ``gamma ** n`` towards 1,
    at the end of the phase that starts the cycle and at the start of the others."""
    curr_iter, scale = iteration % cycle_len, gamma**(iteration // cycle_len)
    for start_iter, end_iter, start_ratio, end_ratio in phases:
        if start_iter <= curr_iter < end_iter:
            if start_iter == 0:
                end_ratio = 1 - scale + end_ratio * scale
            else:
                start_ratio = 1 - scale + start_ratio * scale
            return anneal(base * start_ratio, base * end_ratio,
                          (curr_iter - start_iter) / (end_iter - start_iter))
    raise ValueError(f'iteration {iteration} is outside the cyclic schedule {phases}')
