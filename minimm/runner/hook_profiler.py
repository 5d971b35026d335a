"""HookProfiler: where does the time between training steps go?

Turned on with ``Runner(..., profile_hooks=True)`` (or ``profile_hooks = True`` in a config). The
runner then times every hook call and prints, at the end of the run, one row per (hook, stage) with
the number of calls, the total and the mean time, sorted by total. When it is off, ``call_hook``
takes its untimed path and pays nothing for this feature.

MMEngine has no equivalent; its ``ProfilerHook`` profiles the model with ``torch.profiler``, not the
hooks themselves.
"""
import time
from collections import defaultdict
from typing import Callable, Dict, Tuple


class HookProfiler:
    """Accumulates the wall time of each (hook class, stage) pair."""

    def __init__(self):
        self._stats: Dict[Tuple[str, str], list] = defaultdict(lambda: [0, 0.0])

    def call(self, hook, stage: str, method: Callable, *args, **kwargs) -> None:
        start = time.perf_counter()
        try:
            method(*args, **kwargs)
        finally:
            entry = self._stats[(type(hook).__name__, stage)]
            entry[0] += 1
            entry[1] += time.perf_counter() - start

    def total_seconds(self) -> float:
        return sum(total for _, total in self._stats.values())

    def table(self) -> str:
        """A text table, the most expensive (hook, stage) first."""
        rows = sorted(self._stats.items(), key=lambda kv: kv[1][1], reverse=True)
        lines = [f'{"hook":<28} {"stage":<24} {"calls":>7} {"total ms":>10} {"mean us":>10}']
        for (hook, stage), (calls, total) in rows:
            lines.append(f'{hook:<28} {stage:<24} {calls:>7} {total * 1e3:>10.2f} '
                         f'{total / calls * 1e6:>10.1f}')
        lines.append(f'{"all hooks":<28} {"":<24} {"":>7} {self.total_seconds() * 1e3:>10.2f}')
        return '\n'.join(lines)
