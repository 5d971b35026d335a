"""HookProfiler: where does the time between training steps go, and who makes the host wait?

Turned on with ``Runner(..., profile_hooks=True)`` (or ``profile_hooks = True`` in a config, or
``minimm train --profile-hooks``). The runner then times every hook call and counts the device
reads it makes (``.item()``, ``float(t)``, ``if t:``... see ``device_reads.py``), and logs, at the
end of the run, one row per (hook, stage) with the number of calls, the total and the mean time
and the reads, sorted by total time; then the reads of the model (inside ``train_step``, which
holds the optimizer step) and of the loop itself, and who made each read. A nested stage (a
checkpoint hook's ``before_save_checkpoint`` inside ``after_train_epoch``) counts in both rows.
When it is off, ``call_hook`` takes its untimed path and pays nothing for this feature; when it is
on, the reads are counted with a dispatch mode on the CPU, which slows every tensor op a little.

MMEngine has no equivalent; its ``ProfilerHook`` profiles the model with ``torch.profiler``, not the
hooks themselves.
"""
import time
from collections import defaultdict
from typing import Callable, Dict, Optional, Tuple

from .device_reads import DeviceReads


class HookProfiler:
    """Accumulates the calls, wall time and device reads of each (hook class, stage) pair. The
    runner enters it (``with profiler:``) around each run: the reads are counted inside."""

    def __init__(self):
        self._stats: Dict[Tuple[str, str], list] = defaultdict(lambda: [0, 0.0, 0])
        self.reads: Optional[DeviceReads] = None

    def __enter__(self) -> 'HookProfiler':
        if self.reads is None:
            self.reads = DeviceReads()  # its mode is chosen when entered: where the model is
        self.reads.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        return self.reads.__exit__(*exc)

    def call(self, hook, stage: str, method: Callable, *args, **kwargs) -> None:
        owner, reads = (type(hook).__name__, stage), self.reads
        if reads is not None:
            outer, reads.owner, reads_before = reads.owner, owner, reads.total
        start = time.perf_counter()
        try:
            method(*args, **kwargs)
        finally:
            entry = self._stats[owner]
            entry[0] += 1
            entry[1] += time.perf_counter() - start
            if reads is not None:
                entry[2] += reads.total - reads_before
                reads.owner = outer

    def total_seconds(self) -> float:
        return sum(total for _, total, _ in self._stats.values())

    def table(self) -> str:
        """A text table, the most expensive (hook, stage) first, then who read the device."""
        rows = sorted(self._stats.items(), key=lambda kv: kv[1][1], reverse=True)
        lines = [f'{"hook":<28} {"stage":<24} {"calls":>7} {"total ms":>10} {"mean us":>10} '
                 f'{"reads":>6}']
        for (hook, stage), (calls, total, reads) in rows:
            lines.append(f'{hook:<28} {stage:<24} {calls:>7} {total * 1e3:>10.2f} '
                         f'{total / calls * 1e6:>10.1f} {reads:>6}')
        hook_reads = sum(reads for _, _, reads in self._stats.values())
        lines.append(f'{"all hooks":<28} {"":<24} {"":>7} {self.total_seconds() * 1e3:>10.2f} '
                     f'{"":>10} {hook_reads:>6}')
        if self.reads is None:
            return '\n'.join(lines)
        owners = self.reads.by_owner
        model = sum(n for owner, n in owners.items() if owner[0] == 'model')
        loop = sum(n for owner, n in owners.items() if owner[0] == 'loop')
        lines.append(f'{"model":<28} {"train/val/test_step":<24} {"":>7} {"":>10} {"":>10} '
                     f'{model:>6}')
        lines.append(f'{"loop":<28} {"outside hooks and model":<24} {"":>7} {"":>10} {"":>10} '
                     f'{loop:>6}')
        lines.append(f'Device reads, counted with {self.reads.describe()}; who read:')
        for ((kind, name), where), n in self.reads.where.most_common():
            who = f'{kind}.{name}' if kind not in ('model', 'loop') else f'{kind} ({name})'
            lines.append(f'  {n:>6}  {who}, in {where}')
        if not self.reads.where:
            lines.append('       0  nobody')
        return '\n'.join(lines)
