"""Small helpers of the loops (MMEngine's ``mmengine/runner/utils.py``)."""
from typing import List, Optional, Sequence, Tuple


def calc_dynamic_intervals(
        start_interval: int,
        dynamic_interval_list: Optional[Sequence[Tuple[int, int]]] = None
) -> Tuple[List[int], List[int]]:
    """``(milestones, intervals)`` for ``train_cfg.dynamic_intervals``: ``start_interval`` from
    0, then each ``(milestone, interval)`` pair, sorted by milestone; the loops pick the interval
    of the last milestone at or below the next epoch (or iteration) with ``bisect``."""
    if dynamic_interval_list is None:
        return [0], [start_interval]
    pairs = sorted((tuple(pair) for pair in dynamic_interval_list), key=lambda pair: pair[0])
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f'each dynamic_intervals entry must be (milestone, interval), but '
                             f'got {pair}')
    return [0] + [m for m, _ in pairs], [start_interval] + [i for _, i in pairs]
