"""Do the ranks agree? One checksum per tensor, compared across ranks in one collective.

Under DDP every rank holds its own copy of the weights, the averaged copies and the optimizer's
state, and they should be bit-for-bit the same: gradients are averaged, so each step changes them
alike. A rank that drifts (a hook that changed one rank's model, a buffer nobody synced) goes
unnoticed until the checkpoint, written by rank 0 alone, turns out not to be what the others
trained with. :func:`disagreements` asks, cheaply, where the ranks differ.

Each tensor is reduced to two integers: its bytes read as 32-bit words (bytes for odd sizes)
summed, and the sums of its rows of 64 words summed weighted by the row's position (so moved
rows show). Integer sums are exact
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
    """Two int64 numbers from ``tensor``'s bytes: the sum of its words, and the sum of its rows of
    64 words weighted by the row's position."""
    data = tensor.detach().contiguous().reshape(-1)
    raw = data.view(torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    # Summing into int64 as it reads (dtype=): no int64 copy of the tensor; the rows keep the
    # weighted sum to one small tensor (a per-word position would cost 5x more: 3.1 s against
    # 0.56 s for 25 M float32 values on one CPU thread).
    whole = words.numel() - words.numel() % 64
    rows = words[:whole].view(-1, 64).sum(dim=1, dtype=torch.int64)
    position = torch.arange(1, rows.numel() + 1, dtype=torch.int64, device=rows.device)
    return torch.stack([words.sum(dtype=torch.int64), (rows * position).sum()])


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
