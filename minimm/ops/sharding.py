"""The DTensor sharding rule of ``ema_update_``: a call on sharded tensors updates each rank's
shards.

A model sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``) holds its parameters as
DTensors: each rank keeps a slice (its *shard*) of every tensor, described by a placement per
mesh dimension (``Shard(0)``: split along dim 0; ``Replicate()``: a full copy). An op called on
DTensors asks DTensor how the inputs may be laid out; an op without an answer fails with
"does not have a sharding strategy registered". The EMA update is pointwise and works in place,
so the answer is simple: any layout works as long as each source is laid out as its EMA tensor
(which, being updated in place, keeps its own). DTensor then brings a source laid out otherwise
to the EMA's layout (a replicated source is sliced locally: no gather) and runs the kernels on
the local shards. A weight tensor, one number, is replicated.

The rule is registered with torch's ``register_sharding`` once the native ops are loaded (this
module puts ``register`` in ``loader.when_loaded``, as :mod:`minimm.ops.fake` does) and DTensor
is in use: importing DTensor's package costs about a second, which a run without DTensors should
not pay. A process that imports it after the ops were loaded gets the rule at its first
:func:`~minimm.ops.ema_update_` call (a direct ``torch.ops.minimm.ema_update_`` call on DTensors
then needs one ``register()`` first).
"""
import sys

from . import loader

_registered = False


def _rule(ema, src, weight_tensor, weight):
    """The acceptable layouts, one mesh dimension at a time: no outputs, then one placement per
    input tensor (the EMA tensors, the sources, the weight tensor when there is one)."""
    from torch.distributed.tensor import Replicate
    tail = [] if weight_tensor is None else [Replicate()]
    layouts = []
    for dim in range(len(ema[0].placements) if ema else 0):
        own = [e.placements[dim] for e in ema]
        layouts.append(([], own + own + tail))
    layouts.append(([], [Replicate()] * (2 * len(ema)) + tail))  # everything replicated
    return layouts


def register() -> None:
    """Register the rule, once per process, when DTensor's package is loaded (no DTensor
    exists before); called once the native ops are loaded."""
    global _registered
    if _registered or 'torch.distributed.tensor' not in sys.modules:
        return
    import torch
    from torch.distributed.tensor.experimental import register_sharding
    register_sharding(torch.ops.minimm.ema_update_.default)(_rule)
    _registered = True


loader.when_loaded.append(register)
