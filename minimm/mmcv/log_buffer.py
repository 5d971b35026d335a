"""LogBuffer: where MMCV 1.x's runner collects the numbers logger hooks print.

Each iteration ``update`` appends its ``log_vars`` (loss, accuracy...) together with how many
samples they were measured on; a logger hook then calls ``average(n)`` and reads the sample-weighted
means of the last ``n`` entries from ``output``. (MMEngine replaced this with ``MessageHub`` and
``HistoryBuffer``.)
"""
from collections import OrderedDict

import numpy as np


class LogBuffer:
    """``val_history[key]`` and ``n_history[key]``: every value logged under ``key`` and its sample
    count, oldest first. ``output``: the averages last computed; ``ready``: whether they are
    fresh (a logger hook prints only then)."""

    def __init__(self):
        self.val_history = OrderedDict()
        self.n_history = OrderedDict()
        self.output = OrderedDict()
        self.ready = False

    def update(self, vars: dict, count: int = 1) -> None:
        """Append every value of ``vars``, each measured on ``count`` samples. The order in which
        keys are first seen is the order in which they will be printed."""
        assert isinstance(vars, dict)
        for key, value in vars.items():
            self.val_history.setdefault(key, []).append(value)
            self.n_history.setdefault(key, []).append(count)

    def average(self, n: int = 0) -> None:
        """``output[key]`` = mean of the last ``n`` values of each key (all of them for ``n=0``),
        weighted by their sample counts; a ``numpy.float64``."""
        assert n >= 0
        for key, values in self.val_history.items():
            # a slice from -0 is the whole list, so n=0 takes everything
            weights = np.array(self.n_history[key][-n:])
            self.output[key] = (np.array(values[-n:]) * weights).sum() / weights.sum()
        self.ready = True

    def clear_output(self) -> None:
        self.output.clear()
        self.ready = False

    def clear(self) -> None:
        """Forget the histories too (a logger hook does so at each epoch's start)."""
        self.val_history.clear()
        self.n_history.clear()
        self.clear_output()
