"""The agreement check CheckpointHook runs before each save: the tensors every rank should hold
alike, and what to do when they do not (``CheckpointHook(agreement_check=...)``, a minimm
addition; MMEngine has no such check).

Replicated under DDP, so checked: the model's parameters, the parameters of the averaged copies
other hooks keep (EMAHook, PostHocEMAHook) and the optimizer's state. Buffers (BatchNorm's
statistics) are per-rank by nature; they are checked only when a hook that ran before the save,
in the same stage, declares that it writes ``model.buffers`` for every rank alike (its
``dataflow``, ``minimm/dataflow.py``: ``SyncBuffersHook`` in ``after_train_epoch``). A save by
iteration comes before any such hook (SyncBuffersHook syncs before validation), so that
checkpoint holds rank 0's statistics, as in MMEngine.
A sharded tensor (a ``DTensor`` under FSDP) is each rank's own piece and is left out.
The checksums travel in one collective (``minimm/dist/agreement.py``); nothing runs per iteration.
"""
import itertools
from typing import List, Tuple

from torch import Tensor

from ..checkpoint import unwrap_model
from ..dataflow import declared_flows
from ..dist import get_world_size
from ..dist.agreement import disagreements
from ..dist.utils import is_dtensor

AGREEMENT_CHECKS = ('warn', 'error', 'off')


def _named(module, prefix: str, with_buffers: bool) -> List[Tuple[str, Tensor]]:
    named = module.named_parameters()
    if with_buffers:
        named = itertools.chain(named, module.named_buffers())
    return [(prefix + name, tensor) for name, tensor in named]


def averaged_copies(runner) -> list:
    """The averaged models the runner's hooks keep (``ema_model``, ``ema_models``), in hook
    order, so that every rank lists them alike."""
    copies = []
    for hook in getattr(runner, 'hooks', ()):
        if getattr(hook, 'ema_model', None) is not None:
            copies.append(hook.ema_model)
        copies.extend(getattr(hook, 'ema_models', None) or ())
    return copies


def buffers_synced_before(runner, saver, stage: str) -> bool:
    """Whether a hook that runs before ``saver`` in ``stage`` declares writing the model's
    buffers alike on every rank (``model.buffers`` or ``model``, without ``(local)``)."""
    for hook in runner.hooks:
        if hook is saver:
            return False
        writes = (declared_flows(hook) or {}).get(stage, ((), ()))[1]
        if any(word.name in ('model', 'model.buffers') and word.mark != 'local' for word in writes):
            return True
    return False


def replicated_tensors(runner, with_buffers: bool) -> List[Tuple[str, Tensor]]:
    """``(name, tensor)`` for every tensor that should be the same on every rank, in an order
    every rank shares; the buffers too when ``with_buffers``."""
    named = _named(unwrap_model(runner.model), 'model.', with_buffers)
    for index, copy in enumerate(averaged_copies(runner)):
        named += _named(copy.module, f'averaged copy {index} ({type(copy).__name__}).',
                        with_buffers)
    optimizer = getattr(getattr(runner, 'optim_wrapper', None), 'optimizer', None)
    if optimizer is not None:
        for param_id, state in sorted(optimizer.state_dict()['state'].items()):
            named += [(f'optimizer.state.{param_id}.{key}', value)
                      for key, value in sorted(state.items()) if isinstance(value, Tensor)]
    return [(name, t) for name, t in named if not is_dtensor(t)]


def check_agreement(runner, mode: str, saver, stage: str) -> None:
    """Compare the replicated tensors across ranks, before ``saver`` saves in ``stage``; warn
    (``'warn'``) or raise (``'error'``) on every rank when some differ, naming them and the
    ranks."""
    if mode == 'off' or get_world_size() == 1:
        return
    found = disagreements(replicated_tensors(runner, buffers_synced_before(runner, saver, stage)))
    if not found:
        return
    shown = '; '.join(f'{name} on rank(s) {ranks}' for name, ranks in found[:8])
    more = f' and {len(found) - 8} more' if len(found) > 8 else ''
    message = (f'The ranks disagree before saving the checkpoint at iteration {runner.iter}: '
               f'{len(found)} tensor(s) differ from rank 0\'s: {shown}{more}. Rank 0 writes its '
               "own; CheckpointHook(agreement_check='off') turns this check off, 'error' makes "
               'it stop the run.')
    if mode == 'error':
        raise RuntimeError(message)
    runner.logger.warning(message)
