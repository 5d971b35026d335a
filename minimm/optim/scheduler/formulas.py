"""Schedule formulas of the MMEngine-style schedulers (``minimm/optim/scheduler/``): annealing
along a cosine or a line, the period of a restart schedule, the phases of a 1cycle schedule.

The MMCV 1.x updater hooks have their own, with MMCV's names (``minimm/mmcv/hooks/schedule.py``):
the two worlds' formulas give the same numbers, but each world keeps its original's names.
"""
import math
from typing import List, Optional, Sequence, Tuple


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
