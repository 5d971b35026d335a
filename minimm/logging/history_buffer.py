"""HistoryBuffer: the recent values of one logged scalar, and statistics over them.

Every scalar a run logs (``train/loss``, ``train/lr``, ``val/time``...) lives in a HistoryBuffer in
the MessageHub. The LogProcessor then asks for a statistic: the mean over the last ``window_size``
updates for losses and timings, the ``current`` (latest) value for everything else.

As in MMEngine, ``update(value, count)`` stores the value and the count side by side and
``mean`` is ``sum(values) / sum(counts)`` over the window: pass the *sum* of ``count`` samples as
the value when you want a per-sample mean. Statistics come back as numpy numbers computed by numpy
on the array MMEngine would hold (same dtype, same values), so each one is MMEngine's to the last
bit (``np.float64`` is a ``float``, which matters for how the log line formats it).

Different from MMEngine:

- values are kept in ``deque(maxlen=max_length)``, so ``update`` is O(1) and a statistic over a
  window of ``w`` costs O(w) (MMEngine's ``np.append`` copies the whole history at every update,
  which grows with the run); the buffer remembers the dtype MMEngine's array would have;
- ``state_dict()`` returns plain lists, so a checkpoint holding it can be read by
  ``torch.load(weights_only=True)``; ``HistoryBuffer(**state)`` rebuilds the buffer;
- a one-element tensor is accepted as a value and read from the device only when a value is asked
  for, together with the others (``pending_reads.py``; DESIGN principle 9).
"""
import warnings
from collections import deque
from itertools import islice
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from .pending_reads import PendingReads


def _last(values: deque, window_size: Optional[int]) -> list:
    """The last ``window_size`` entries of ``values`` (all when None), oldest first."""
    if window_size is None:
        return list(values)
    if not isinstance(window_size, int) or window_size <= 0:
        raise TypeError(f'window_size must be a positive int or None, got {window_size!r}')
    return list(islice(reversed(values), window_size))[::-1]


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
        self._values = deque(maxlen=max_length)
        self._count_history = deque(count_history, maxlen=max_length)
        self._pending = PendingReads()
        # The dtype of MMEngine's np.array(log_history): float64 for no values, else what numpy
        # makes of them, which _store works out value by value from the lowest kind, bool.
        self._dtype = np.dtype(bool) if len(log_history) else np.dtype(np.float64)
        for value in log_history:
            self._add(value)

    @classmethod
    def register_statistics(cls, method: Callable) -> Callable:
        """Decorator: make ``method(buffer, *args)`` callable as ``statistics(name, *args)``."""
        cls._statistics_methods[method.__name__] = method
        return method

    def update(self, log_val, count: int = 1) -> None:
        """Append one value with its count, dropping the oldest beyond ``max_length``. The value
        may be a one-element tensor: it is read later, with the others."""
        if (not isinstance(log_val, (int, float, torch.Tensor))
                or not isinstance(count, (int, float))):
            raise TypeError(f'log_val and count must be int or float, got {type(log_val)} and '
                            f'{type(count)}')
        self._add(log_val)
        self._count_history.append(count)

    def _add(self, value) -> None:
        # A tensor waits to be read, and so does every value after it, to keep the order.
        if self._pending or isinstance(value, torch.Tensor):
            if self._pending.add(value):
                self._read_pending()
        else:
            self._store(value)

    def _store(self, value) -> None:
        """Append a number, and follow the dtype MMEngine's ``np.append`` would give its array.
        numpy only ever promotes (bool, then int, then float), so a float buffer has no work."""
        if self._dtype.kind != 'f':
            self._dtype = np.promote_types(self._dtype, np.asarray(value).dtype)
        self._values.append(value)

    def _read_pending(self) -> None:
        for value in self._pending.read():
            self._store(value)

    @property
    def _log_history(self) -> deque:
        """The values (MMEngine's attribute name), any waiting tensors read first: every reader,
        the statistics below and a user's registered ones alike, sees all that was logged."""
        if self._pending:
            self._read_pending()
        return self._values

    def _array(self, window_size: Optional[int]) -> np.ndarray:
        """The last ``window_size`` values as MMEngine's array slice: same dtype, same numbers."""
        return np.array(_last(self._log_history, window_size), dtype=self._dtype)

    @property
    def data(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(log_history, count_history)`` as numpy arrays."""
        return self._array(None), np.array(self._count_history)

    def statistics(self, method_name: str, *args, **kwargs):
        """Call a registered statistic by name: ``statistics('mean', 10)``."""
        if method_name not in self._statistics_methods:
            raise KeyError(f'{method_name!r} is not a registered statistic; choose from '
                           f'{sorted(self._statistics_methods)}')
        return self._statistics_methods[method_name](self, *args, **kwargs)

    def mean(self, window_size: Optional[int] = None):
        """``sum(values) / sum(counts)`` over the last ``window_size`` updates (all when None)."""
        # numpy sums, on MMEngine's array, so the float is MMEngine's: numpy adds 8 or more
        # numbers pairwise, which a Python sum() would not reproduce to the last bit.
        counts = np.array(_last(self._count_history, window_size))
        return self._array(window_size).sum() / counts.sum()

    def max(self, window_size: Optional[int] = None):
        """Largest value among the last ``window_size`` updates."""
        return self._array(window_size).max()

    def min(self, window_size: Optional[int] = None):
        """Smallest value among the last ``window_size`` updates."""
        return self._array(window_size).min()

    def current(self):
        """The latest value."""
        if len(self._log_history) == 0:
            raise ValueError('HistoryBuffer is empty; call update first')
        return self._dtype.type(self._log_history[-1])

    def state_dict(self) -> dict:
        """Plain-Python state (lists of numbers), accepted back by ``HistoryBuffer(**state)``."""
        log_history, count_history = self.data
        return {'log_history': log_history.tolist(), 'count_history': count_history.tolist(),
                'max_length': self.max_length}

    def __getstate__(self) -> dict:
        self._read_pending()  # a copy or a pickle holds numbers, not tensors waiting to be read
        return self.__dict__.copy()


# The built-in statistics are also reachable by name, so that LogProcessor's ``custom_cfg`` can say
# ``method_name='max'`` (MMEngine's spelling).
for _name in ('mean', 'max', 'min', 'current'):
    HistoryBuffer.register_statistics(getattr(HistoryBuffer, _name))
