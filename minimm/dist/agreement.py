"""Do the ranks agree? One checksum per tensor, compared across ranks in one collective.

Under DDP every rank holds its own copy of the weights, the averaged copies and the optimizer's
state, and they should be bit-for-bit the same: gradients are averaged, so each step changes them
alike. A rank that drifts (a hook that changed one rank's model, a buffer nobody synced) goes
unnoticed until the checkpoint, written by rank 0 alone, turns out not to be what the others
trained with. :func:`disagreements` asks, cheaply, where the ranks differ.

Each tensor is reduced to two integers: its bytes read as 32-bit words (bytes for odd sizes)
summed, and summed again weighted by position (so a permutation shows). Integer sums are exact
and do not depend on the order of the additions, so equal tensors give equal checksums on any
thread count or device (overflow wraps, the same way on every rank). :func:`minimm.ops.pack`
makes the checksums one flat tensor and one ``all_gather`` brings every rank's to every rank:
one collective whatever the number of tensors, and every rank comes to the same verdict, so
every rank raises together when the caller makes a mismatch an error.
"""
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from .. import ops
from .collectives import all_gather
from .utils import get_world_size


def checksum(tensor: Tensor) -> Tensor:
    """Two int64 numbers from ``tensor``'s bytes: their sum and their position-weighted sum."""
    data = tensor.detach().contiguous().reshape(-1)
    if data.numel() == 0:
        return torch.zeros(2, dtype=torch.int64, device=data.device)
    raw = data.view(torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    words = words.to(torch.int64)
    position = torch.arange(1, words.numel() + 1, dtype=torch.int64, device=words.device)
    return torch.stack([words.sum(), (words * position).sum()])


def disagreements(named_tensors: Sequence[Tuple[str, Tensor]]) -> List[Tuple[str, List[int]]]:
    """``[(name, ranks whose tensor differs from rank 0's), ...]`` for the tensors that are not the
    same on every rank; ``[]`` when not distributed. Every rank must pass the same names in the
    same order (and gets the same answer)."""
    if get_world_size() == 1 or not named_tensors:
        return []
    (flat, ) = ops.pack([checksum(t).cpu() for _, t in named_tensors])
    per_rank = torch.stack(all_gather(flat)).view(get_world_size(), len(named_tensors), 2)
    differs = (per_rank != per_rank[:1]).any(dim=2)  # [rank, tensor]
    found = []
    for index in differs.any(dim=0).nonzero().flatten().tolist():
        ranks = differs[:, index].nonzero().flatten().tolist()
        found.append((named_tensors[index][0], ranks))
    return found
