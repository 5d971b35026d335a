"""What changes when a run is resumed on another number of processes (a minimm addition; MMEngine
resumes silently).

Each checkpoint records the world size that wrote it (``meta['world_size']``). Resumed on another,
training goes on, but a step no longer means the same: every iteration takes one batch per rank,
so with half the ranks an epoch has about twice the iterations, and whatever counts iterations
moves at another pace through the data: schedules with ``by_epoch=False``, ``interval``\\ s of
hooks that count iterations, and the EMA's ``steps`` counter (one averaging step per iteration).
:func:`world_size_change_message` says so in one line; the Runner logs it when it resumes, and any
other resume path (a sharded checkpoint's, say) can call it with what it knows.
"""
from typing import Optional


def world_size_change_message(saved: Optional[int], now: int,
                              iters_per_epoch: Optional[int] = None,
                              saved_iters_per_epoch: Optional[int] = None) -> Optional[str]:
    """One line naming what changes between a checkpoint written by ``saved`` processes and a run
    on ``now``; None when they are the same or the checkpoint does not say (an older one)."""
    if saved is None or saved == now:
        return None
    epoch = ''
    if iters_per_epoch is not None:
        was = '' if saved_iters_per_epoch is None else f' (was {saved_iters_per_epoch})'
        epoch = f'an epoch is now {iters_per_epoch} iterations{was}; '
    return (f'World size changed: the checkpoint was written by {saved} process(es), this run has '
            f'{now}, so each iteration sees {now}/{saved} of the samples it saw before: '
            f'{epoch}iteration-based schedules (by_epoch=False) and the EMA counter (steps, one '
            'per iteration) now move through the data at that pace. Training goes on.')
