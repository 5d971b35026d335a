"""HistoryBuffer: the recent values of one logged scalar, and statistics over them.

Every scalar a run logs (``train/loss``, ``train/lr``, ``val/time``...) lives in a HistoryBuffer in
the MessageHub. The LogProcessor then asks for a statistic: the mean over the last ``window_size``
updates for losses and timings, the ``current`` (latest) value for everything else.

As in MMEngine, ``update(value, count)`` stores the value and the count side by side and
``mean`` is ``sum(values) / sum(counts)`` over the window: pass the *sum* of ``count`` samples as
the value when you want a per-sample mean. Statistics come back as numpy numbers, as in MMEngine
(``np.float64`` is a ``float``, which matters for how the log line formats them).

Different from MMEngine: values are kept in ``deque(maxlen=max_length)``, so ``update`` is O(1)
and a statistic over a window of ``w`` costs O(w) (MMEngine's ``np.append`` copies the whole
history at every update, which grows with the run); the mean of a short window is summed in
Python, in numpy's order (same result); and ``state_dict()`` returns plain lists, so a
checkpoint holding it can be read by ``torch.load(weights_only=True)``; ``HistoryBuffer(**state)``
rebuilds the buffer.

Also different: a one-element tensor is accepted as a value and kept as a tensor (a copy, so a
later in-place change cannot alter it), because reading it (``.item()``) would make the host wait
for the device at every iteration (DESIGN principle 9). The tensors are read when anything asks
for a value — a statistic, ``data``, ``state_dict()``, a copy or a pickle — all pending ones at
once: one ``torch.stack`` and one transfer to the host per device and dtype. Each value read is
the float (or int) its ``.item()`` gives, stored as MMEngine stores it, so every statistic is
MMEngine's to the last bit. A buffer nobody reads reads itself every ``READ_AFTER`` tensors, so
that device memory does not grow with the run.
"""
import warnings
from collections import deque
from itertools import islice
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import torch

READ_AFTER = 4096


def _sum_as_numpy(values: list):
    """``np.array(values).sum()`` for at most 128 numbers, computed in Python.

    numpy adds fewer than 8 floats left to right, and 8 to 128 of them in eight interleaved
    partial sums that it then combines pairwise, before adding the few left over. Adding in the
    same order gives the same float to the last bit, so a logged mean is MMEngine's exactly; and
    it is cheaper than building a numpy array for ten numbers at every log line."""
    if len(values) < 8:
        total = 0
        for value in values:
            total += value
        return total
    partial = values[:8]
    whole = len(values) - len(values) % 8
    for start in range(8, whole, 8):
        for j in range(8):
            partial[j] += values[start + j]
    total = (((partial[0] + partial[1]) + (partial[2] + partial[3]))
             + ((partial[4] + partial[5]) + (partial[6] + partial[7])))
    for value in values[whole:]:
        total += value
    return total


def _kept(value: torch.Tensor) -> torch.Tensor:
    """A one-element tensor, checked now (a bad one fails where it was logged) and copied."""
    if value.numel() != 1:
        raise ValueError(f'a scalar must have exactly one element, got shape {tuple(value.shape)}')
    if value.is_complex():
        raise TypeError(f'log_val must be int or float, got a {value.dtype} tensor')
    value = value.detach()
    return (value.reshape(()) if value.dim() else value).clone()  # 0-dim: they stack as they are


def host_values(items: list) -> list:
    """``items`` with each one-element tensor replaced by its ``.item()``, all read at once: one
    stack per device and dtype (in that dtype, so each number is the one ``.item()`` gives) and
    one ``tolist()``, a single transfer to the host, for each stack."""
    groups: Dict[tuple, list] = {}
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            groups.setdefault((item.device, item.dtype), []).append(i)
    values = list(items)
    for indices in groups.values():
        stacked = torch.stack([items[i] for i in indices])
        for i, value in zip(indices, stacked.tolist()):
            values[i] = value
    return values


class HistoryBuffer:
    """Values and counts of one scalar, at most ``max_length`` of each.

    Args:
        log_history: initial values.
        count_history: initial counts, one per value.
        max_length: how many updates to keep; older ones are dropped.
    """

    _statistics_methods: Dict[str, Callable] = {}

    def __init__(self, log_history: Sequence = (), count_history: Sequence = (),
                 max_length: int = 1000000):
        if len(log_history) != len(count_history):
            raise ValueError(f'log_history and count_history must have the same length, got '
                             f'{len(log_history)} and {len(count_history)}')
        if len(log_history) > max_length:
            warnings.warn(f'The length of history buffer ({len(log_history)}) exceeds max_length '
                          f'({max_length}); the oldest values are dropped.')
        self.max_length = max_length
        # MMEngine keeps the values in a numpy array, which holds only floats once one float is
        # in it (or none at all: np.array([]) is a float array). The same here, so that current(),
        # max() and min() give what MMEngine's do (np.float64(5.0), not np.int64(5)). A tensor
        # counts as the number its .item() gives, which is a float for a floating dtype.
        plain = [value for value in log_history if not isinstance(value, torch.Tensor)]
        floating_tensor = any(isinstance(value, torch.Tensor) and value.is_floating_point()
                              for value in log_history)
        self._floats = floating_tensor or (np.array(plain).dtype.kind == 'f' if plain
                                           else len(log_history) == 0)
        self._log_history = deque(maxlen=max_length)
        self._count_history = deque(count_history, maxlen=max_length)
        # The values not read yet, in order: every update from the first unread tensor on.
        self._pending = deque(maxlen=max_length)
        if len(plain) < len(log_history):
            self._pending.extend(_kept(value) if isinstance(value, torch.Tensor) else value
                                 for value in log_history)
        else:
            self._log_history.extend(map(float, plain) if self._floats else plain)

    @classmethod
    def register_statistics(cls, method: Callable) -> Callable:
        """Decorator: make ``method(buffer, *args)`` callable as ``statistics(name, *args)``."""
        cls._statistics_methods[method.__name__] = method
        return method

    def update(self, log_val, count: int = 1) -> None:
        """Append one value with its count, dropping the oldest beyond ``max_length``. The value
        may be a one-element tensor: it is read later, with the others (see the docstring)."""
        if (type(log_val) is float and type(count) is int and self._floats
                and not self._pending):  # the usual case
            self._log_history.append(log_val)
            self._count_history.append(count)
            return
        if isinstance(log_val, torch.Tensor) and isinstance(count, (int, float)):
            log_val = _kept(log_val)
        elif not isinstance(log_val, (int, float)) or not isinstance(count, (int, float)):
            raise TypeError(f'log_val and count must be int or float, got {type(log_val)} and '
                            f'{type(count)}')
        # Store plain Python numbers (not numpy scalars) so state_dict() stays weights_only-safe.
        self._count_history.append(count.item() if isinstance(count, np.generic) else count)
        if self._pending or isinstance(log_val, torch.Tensor):
            self._pending.append(log_val)
            if len(self._pending) >= READ_AFTER:
                self._read_pending()
        else:
            self._append(log_val)

    def _append(self, value) -> None:
        """Store one value read (a Python or numpy number) as numpy would hold it."""
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, float) and not self._floats:  # numpy would make them all floats now
            self._log_history = deque(map(float, self._log_history), maxlen=self.max_length)
            self._floats = True
        self._log_history.append(float(value) if self._floats else value)

    def _read_pending(self) -> None:
        """Read the pending tensors, all at once, and store every pending value in order."""
        if self._pending:
            pending, self._pending = list(self._pending), deque(maxlen=self.max_length)
            for value in host_values(pending):
                self._append(value)

    def __getstate__(self) -> dict:
        # A copy or a pickle holds numbers, not tensors waiting to be read.
        self._read_pending()
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if '_pending' not in state:  # pickled before values could wait (an older minimm)
            self._pending = deque(maxlen=self.max_length)

    @property
    def data(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(log_history, count_history)`` as numpy arrays."""
        self._read_pending()
        return np.array(self._log_history), np.array(self._count_history)

    def statistics(self, method_name: str, *args, **kwargs):
        """Call a registered statistic by name: ``statistics('mean', 10)``."""
        self._read_pending()  # a statistic registered by a user may read the deques directly
        if method_name not in self._statistics_methods:
            raise KeyError(f'{method_name!r} is not a registered statistic; choose from '
                           f'{sorted(self._statistics_methods)}')
        return self._statistics_methods[method_name](self, *args, **kwargs)

    @staticmethod
    def _last(values: deque, window_size: Optional[int]) -> list:
        """The last ``window_size`` entries of ``values`` (all when None), oldest first."""
        if window_size is None:
            return list(values)
        if not isinstance(window_size, int) or window_size <= 0:
            raise TypeError(f'window_size must be a positive int or None, got {window_size!r}')
        return list(islice(reversed(values), window_size))[::-1]

    def mean(self, window_size: Optional[int] = None):
        """``sum(values) / sum(counts)`` over the last ``window_size`` updates (all when None)."""
        self._read_pending()
        values = self._last(self._log_history, window_size)
        counts = self._last(self._count_history, window_size)
        if len(values) > 128:  # a long window: numpy sums it faster than Python
            return np.array(values).sum() / np.array(counts).sum()
        return np.float64(_sum_as_numpy(values)) / _sum_as_numpy(counts)

    def max(self, window_size: Optional[int] = None):
        """Largest value among the last ``window_size`` updates."""
        self._read_pending()
        return np.array(self._last(self._log_history, window_size)).max()

    def min(self, window_size: Optional[int] = None):
        """Smallest value among the last ``window_size`` updates."""
        self._read_pending()
        return np.array(self._last(self._log_history, window_size)).min()

    def current(self):
        """The latest value."""
        self._read_pending()
        if len(self._log_history) == 0:
            raise ValueError('HistoryBuffer is empty; call update first')
        return np.array(self._log_history[-1])[()]

    def state_dict(self) -> dict:
        """Plain-Python state (lists of numbers), accepted back by ``HistoryBuffer(**state)``."""
        self._read_pending()
        return {'log_history': list(self._log_history),
                'count_history': list(self._count_history),
                'max_length': self.max_length}


# The built-in statistics are also reachable by name, so that LogProcessor's ``custom_cfg`` can say
# ``method_name='max'`` (MMEngine's spelling).
for _name in ('mean', 'max', 'min', 'current'):
    HistoryBuffer.register_statistics(getattr(HistoryBuffer, _name))
