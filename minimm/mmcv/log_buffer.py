"""LogBuffer: the per-iteration value store of MMCV 1.x's runner, and its averaging.

Each step's ``log_vars`` are appended with their sample counts; logger hooks read the weighted
mean of the last ``n`` from ``output``. MMEngine replaced this with ``MessageHub`` +
``HistoryBuffer``; this is the MMCV 1.7 original, complete.
"""
from collections import OrderedDict

import numpy as np


class LogBuffer:
    """Histories of logged values and the averages last computed from them (as MMCV 1.7)."""

    def __init__(self):
        self.val_history = OrderedDict()
        self.n_history = OrderedDict()
        self.output = OrderedDict()
        self.ready = False

    def clear(self) -> None:
        self.val_history.clear()
        self.n_history.clear()
        self.clear_output()

    def clear_output(self) -> None:
        self.output.clear()
        self.ready = False

    def update(self, vars: dict, count: int = 1) -> None:
        """Append each value of ``vars`` with weight ``count`` (first sight fixes a key's order)."""
        assert isinstance(vars, dict)
        for key, var in vars.items():
            if key not in self.val_history:
                self.val_history[key] = []
                self.n_history[key] = []
            self.val_history[key].append(var)
            self.n_history[key].append(count)

    def average(self, n: int = 0) -> None:
        """Set ``output[key]`` to the count-weighted mean of the last ``n`` values (0: all)."""
        assert n >= 0
        for key in self.val_history:
            values = np.array(self.val_history[key][-n:])
            nums = np.array(self.n_history[key][-n:])
            self.output[key] = np.sum(values * nums) / np.sum(nums)
        self.ready = True
