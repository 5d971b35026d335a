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
                              saved_iters_per_epoch: Optional[int] = None,
                              samples_per_iter: Optional[int] = None,
                              saved_samples_per_iter: Optional[int] = None) -> Optional[str]:
    """One line naming what changes between a checkpoint written by ``saved`` processes and a run
    on ``now``; None when they are the same or the checkpoint does not say (an older one).

    ``samples_per_iter`` is one iteration's samples over all ranks (batch size x world size),
    when known on both sides: a run that scaled its per-rank batch to keep that number is told
    that its steps keep their meaning, not that they changed."""
    if saved is None or saved == now:
        return None
    head = (f'World size changed: the checkpoint was written by {saved} process(es), this run '
            f'has {now}')
    if samples_per_iter is not None and saved_samples_per_iter is not None:
        if samples_per_iter == saved_samples_per_iter:
            return (f'{head}, and an iteration still takes {samples_per_iter} samples over all '
                    'ranks, so schedules and the EMA counter keep their pace. Training goes on.')
        seen = f'{samples_per_iter} samples, where it took {saved_samples_per_iter}'
    else:
        seen = f'{now}/{saved} of the samples it saw before'
    epoch = ''
    if iters_per_epoch is not None:
        was = '' if saved_iters_per_epoch is None else f' (was {saved_iters_per_epoch})'
        epoch = f'an epoch is now {iters_per_epoch} iterations{was}; '
    return (f'{head}, so each iteration sees {seen}: {epoch}iteration-based schedules '
            '(by_epoch=False) and the EMA counter (steps, one per iteration) now move through the '
            'data at that pace. Training goes on.')
