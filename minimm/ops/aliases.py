"""Two names for one tensor: finding them, so that every tensor is updated once.

A weight shared by two modules (tied embeddings, ``b.weight = a.weight``) is listed twice by
``state_dict()``. An update run once per *name* then runs twice on the same memory: an EMA step
moves the average two steps (from 0 towards 1 with momentum 0.5: 0.75 instead of 0.5), and a
per-tensor all-reduce sums twice. minimm's averaged models, ``EMAPlan``, ``PackPlan`` and
``all_reduce_params`` keep the first name of each tensor and drop the others. MMEngine does not:
its averaged models update a tied weight once per name.

"The same tensor" means the same storage, offset, shape, strides and dtype: a view that covers
only part of another (``w[0]`` and ``w``) is a different tensor and is kept.
"""
from typing import Hashable, List, Sequence

from torch import Tensor


def alias_key(t: Tensor) -> Hashable:
    """What two names of the same tensor share (the storage's identity, not its address, so that
    tensors without memory, on the ``meta`` device, are told apart too)."""
    return t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype


def first_names(tensors: Sequence[Tensor]) -> List[int]:
    """Indices of ``tensors`` that are not an earlier entry under another name, in order."""
    seen, keep = set(), []
    for i, t in enumerate(tensors):
        key = alias_key(t)
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return keep


def distinct(tensors: Sequence[Tensor]) -> List[Tensor]:
    """``tensors`` with every later name of an earlier tensor left out."""
    return [tensors[i] for i in first_names(tensors)]
