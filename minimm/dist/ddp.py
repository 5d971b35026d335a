"""The one DistributedDataParallel option both worlds' model wrappers set: re-broadcasting buffers.

MMEngine's and MMCV's ``MMDistributedDataParallel`` each pass ``broadcast_buffers`` to torch's DDP.
torch 2.14 renamed that keyword ``forward_sync_buffers`` (the new one also syncs the buffers once at
construction, which is harmless: every rank builds the model from the same seed), so the spelling
is chosen here, once, for the torch that is installed.
"""
import inspect

from torch.nn.parallel import DistributedDataParallel

_NEW_NAME = 'forward_sync_buffers' in inspect.signature(DistributedDataParallel.__init__).parameters


def buffer_broadcast_option(broadcast_buffers: bool) -> dict:
    """``{keyword: broadcast_buffers}`` for ``DistributedDataParallel``, in this torch's name."""
    return {'forward_sync_buffers' if _NEW_NAME else 'broadcast_buffers': broadcast_buffers}
