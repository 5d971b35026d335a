"""PendingReads: the logged values a HistoryBuffer has not read from the device yet.

A loss or a gradient norm arrives as a one-element tensor, often on a GPU. Reading it at once
(``.item()``) makes the host wait for the device at every iteration; MMEngine does that. minimm
keeps the tensor instead and reads it when something asks for a value (a log line, a hook's
``get_scalar(key).current()``, a checkpoint), all waiting tensors together: one ``torch.stack``
and one transfer per device and dtype (DESIGN principle 9). Each number read is the one ``.item()``
would have given, so the buffer ends up holding what MMEngine's holds.

This is the whole of that machinery; ``HistoryBuffer`` uses it through ``add`` and ``read``.
"""
from typing import Dict, List

import torch

# A buffer nobody asks reads itself after this many waiting values, so that device memory does
# not grow with the run.
READ_AFTER = 4096


def kept(value: torch.Tensor) -> torch.Tensor:
    """A one-element tensor, checked now (a bad one fails where it was logged) and copied (a
    later in-place change, or the autograd graph, must not reach the logged value)."""
    if value.numel() != 1:
        raise ValueError(f'a scalar must have exactly one element, got shape {tuple(value.shape)}')
    if value.is_complex():
        raise TypeError(f'log_val must be int or float, got a {value.dtype} tensor')
    return value.detach().reshape(()).clone()  # 0-dim, so that tensors of any shape stack


def read_together(items: list) -> list:
    """``items`` with each tensor replaced by its ``.item()``: one stack per device and dtype (in
    that dtype, so each number is the one ``.item()`` gives) and one ``tolist()`` of each."""
    groups: Dict[tuple, List[int]] = {}
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            groups.setdefault((item.device, item.dtype), []).append(i)
    values = list(items)
    for indices in groups.values():
        for i, value in zip(indices, torch.stack([items[i] for i in indices]).tolist()):
            values[i] = value
    return values


class PendingReads:
    """The values logged since the first tensor not read yet, in the order they came.

    Numbers that come after a waiting tensor wait too, so that the buffer stores every value in
    the order it was logged."""

    def __init__(self):
        self._values: list = []

    def __len__(self) -> int:
        return len(self._values)

    def add(self, value) -> bool:
        """Keep ``value`` (a tensor is checked and copied); True when it is time to read."""
        self._values.append(kept(value) if isinstance(value, torch.Tensor) else value)
        return len(self._values) >= READ_AFTER

    def read(self) -> list:
        """Every waiting value as a Python number, oldest first; nothing waits afterwards."""
        values, self._values = read_together(self._values), []
        return values
