"""The arithmetic that MMCV 1.x's lr and momentum updater hooks share, as plain functions: the
annealing curves, the warm-up factor, how far a run has got (one value per param group,
``format_param``, is on the shared floor: ``minimm/param_groups.py``).

MMCV exposes ``annealing_cos``, ``annealing_linear``, ``format_param`` and
``get_position_from_periods`` from ``mmcv.runner.hooks.lr_updater``; ``lr_updater.py`` re-exports
them. The peer tests compare some lr values exactly, so each formula keeps MMCV's order of
floating-point operations.
"""
from math import cos, pi


# ---- curves: from ``start`` at factor 0 to ``end`` at factor 1 ----
def annealing_cos(start, end, factor, weight=1.):
    """Half a cosine wave from ``start`` down (or up) to ``end``. A ``weight`` below 1 starts the
    curve lower: that share of the way from ``end`` to ``start`` (CosineRestart's later periods)."""
    return end + 0.5 * weight * (start - end) * (cos(pi * factor) + 1)


def annealing_linear(start, end, factor):
    """A straight line from ``start`` to ``end``."""
    return start + (end - start) * factor


def anneal_func(strategy):
    """The curve an ``anneal_strategy`` names ('cos' or 'linear'), for the cyclic hooks."""
    if strategy == 'cos':
        return annealing_cos
    if strategy == 'linear':
        return annealing_linear
    raise ValueError(f'anneal_strategy must be one of "cos" or "linear", instead got {strategy}')


def annealing_end(base, minimum, ratio):
    """Where an annealing schedule ends: ``base * ratio`` if a ratio was given, else ``minimum``."""
    return minimum if ratio is None else base * ratio


def check_exactly_one(**options):
    """The annealing policies take a floor either absolute or as a ratio of the base: not both."""
    given = [name for name, value in options.items() if value is not None]
    assert len(given) == 1, f'give exactly one of {" and ".join(options)}, got {given or "none"}'


def check_fraction(name, value):
    """``start_percent`` and ``pct_start`` must be floats in [0, 1] (MMCV refuses an int 1)."""
    if not isinstance(value, float) or not 0 <= value <= 1:
        raise ValueError(f'expected float between 0 and 1 {name}, but got {value}')


# ---- where the run is ----
def progress(runner, by_epoch):
    """(how far the run is, where it ends): in epochs for a per-epoch hook, else in iterations."""
    if by_epoch:
        return runner.epoch, runner.max_epochs
    return runner.iter, runner.max_iters


def check_step(step):
    """A step policy decays every ``step`` epochs/iterations (an int) or at milestones (a list)."""
    if isinstance(step, int):
        assert step > 0, f'"step" must be positive, got {step}'
    elif isinstance(step, list):
        assert all(isinstance(s, int) and s > 0 for s in step), \
            f'"step" milestones must be positive integers, got {step}'
    else:
        raise TypeError(f'"step" must be a list or integer, got {step!r}')


def stepped(base, position, step, gamma, floor):
    """``base`` times ``gamma`` once per decay so far, kept at ``floor`` or above (if not None).
    With milestones, the decays so far are the index of the first milestone not yet reached."""
    if isinstance(step, int):
        decays = position // step
    else:
        decays = next((i for i, milestone in enumerate(step) if position < milestone), len(step))
    value = base * gamma**decays
    return value if floor is None else max(value, floor)


def get_position_from_periods(iteration, cumulative_periods):
    """The period ``iteration`` falls in, given where each period ends: ends [100, 200, 300] put
    iteration 210 in period 2."""
    for index, period_end in enumerate(cumulative_periods):
        if iteration < period_end:
            return index
    raise ValueError(f'Current iteration {iteration} exceeds '
                     f'cumulative_periods {cumulative_periods}')


# ---- warm-up ----
def check_warmup(warmup, warmup_iters, warmup_ratio, valid):
    """Refuse a warm-up MMCV refuses; ``valid`` is how the error lists the allowed kinds."""
    if warmup is None:
        return
    if warmup not in ('constant', 'linear', 'exp'):
        raise ValueError(f'"{warmup}" is not a supported type for warming up, '
                         f'valid types are {valid}')
    assert warmup_iters > 0, f'"warmup_iters" must be a positive integer, got {warmup_iters}'
    assert 0 < warmup_ratio <= 1.0, f'"warmup_ratio" must be in range (0,1], got {warmup_ratio}'


def warmup_factor(warmup, cur_iter, warmup_iters, ratio):
    """How much of its regular size a value has at ``cur_iter`` of the warm-up: ``ratio`` all the
    way ('constant'), or rising from ``ratio`` towards 1 on a line ('linear') or a geometric curve
    ('exp')."""
    if warmup == 'constant':
        return ratio
    still_to_go = 1 - cur_iter / warmup_iters
    if warmup == 'linear':
        return 1 - still_to_go * (1 - ratio)
    return ratio**still_to_go


# ---- one value per param group: a list, or a dict of lists for a dict of optimizers ----
def for_each_group(optimizer, read):
    """``read(group)`` for every param group, shaped like ``optimizer``."""
    if isinstance(optimizer, dict):
        return {name: for_each_group(optim, read) for name, optim in optimizer.items()}
    return [read(group) for group in optimizer.param_groups]


def map_values(values, change):
    """``change(value)`` for every value of a list, or of each list of a dict of lists."""
    if isinstance(values, dict):
        return {name: map_values(group_values, change) for name, group_values in values.items()}
    return [change(value) for value in values]


def zip_groups(optimizer, values):
    """Every param group with its value (``values`` shaped like ``optimizer``)."""
    if isinstance(optimizer, dict):
        return [pair for name, optim in optimizer.items()
                for pair in zip(optim.param_groups, values[name])]
    return list(zip(optimizer.param_groups, values))


def named_optimizers(optimizer):
    """(name, optimizer) pairs: a dict's keys, or a lone optimizer's class name (``'SGD'``), which
    is the key ``format_param`` looks up in a dict of values, as in MMCV."""
    if isinstance(optimizer, dict):
        return list(optimizer.items())
    return [(type(optimizer).__name__, optimizer)]


# ---- the two cyclic families: a run split into phases, each annealing between two ratios ----
def check_target_ratio(target_ratio):
    """``target_ratio`` as a pair (peak, end); a float ``t`` or a 1-tuple ``(t,)`` ends at
    ``t / 1e5``. Lists are refused, as MMCV refuses them."""
    if isinstance(target_ratio, float):
        target_ratio = (target_ratio,)
    if not isinstance(target_ratio, tuple):
        raise ValueError(f'target_ratio should be either float or tuple, got {type(target_ratio)}')
    if len(target_ratio) == 1:
        target_ratio = (target_ratio[0], target_ratio[0] / 1e5)
    assert len(target_ratio) == 2, f'"target_ratio" must be two floats, got {target_ratio}'
    return target_ratio


def cyclic_phases(max_iters, cyclic_times, step_ratio_up, target_ratio):
    """A cycle's length in iterations and its two phases ``[first, end, start ratio, end ratio]``:
    from the base (ratio 1) to ``target_ratio[0]``, then on to ``target_ratio[1]``."""
    length = max_iters // cyclic_times
    turn = int(step_ratio_up * length)
    peak, last = target_ratio
    return length, [[0, turn, 1, peak], [turn, length, peak, last]]


def cyclic_value(base, cur_iter, length, phases, gamma, anneal):
    """A cyclic schedule's value at ``cur_iter``. Cycle ``n`` swings ``gamma**n`` as far from the
    base as the first: the phase end away from the base is pulled back towards ratio 1."""
    cycle, at = divmod(cur_iter, length)
    first, end, start_ratio, end_ratio = next(p for p in phases if p[0] <= at < p[1])
    scale = gamma**cycle
    if first == 0:
        end_ratio = 1 - scale + end_ratio * scale
    else:
        start_ratio = 1 - scale + start_ratio * scale
    return anneal(base * start_ratio, base * end_ratio, (at - first) / (end - first))


def one_cycle_ends(pct_start, total, three_phase):
    """The last iteration of each phase of a one-cycle schedule over ``total`` iterations (floats,
    as MMCV has them): up over ``pct_start`` of the run, (back down as long,) then the rest."""
    up = float(pct_start * total) - 1
    if three_phase:
        return [up, float(2 * pct_start * total) - 2, total - 1]
    return [up, total - 1]


def one_cycle_position(ends, cur_iter):
    """(phase, fraction of it done) at ``cur_iter``: the first phase whose last iteration is not
    behind, else the last one. An up phase of one iteration (``pct_start * total == 1``) divides
    by zero, as in MMCV and torch's OneCycleLR."""
    start = 0
    for index, end in enumerate(ends):
        if cur_iter <= end or index == len(ends) - 1:
            return index, (cur_iter - start) / (end - start)
        start = end
