"""ProgressBar: a one-line text progress bar for a loop, as ``mmengine.utils.ProgressBar``.

    bar = ProgressBar(len(items))
    for item in items:
        ...
        bar.update()

rewrites its line in place (``\\r``): ``[>>>>>     ] 5/10, 2.5 task/s, elapsed: 2s, ETA:     2s``.
With ``task_num=0`` (the number is not known) it shows the count and the speed only.
"""
import sys
import time
from shutil import get_terminal_size


class ProgressBar:
    """``task_num``: how many tasks there are (0: unknown). ``bar_width``: the bar's width in
    characters, narrowed if the terminal is too small. ``start=False``: draw nothing until
    :meth:`start` is called. ``file``: the text stream to write to."""

    def __init__(self, task_num: int = 0, bar_width: int = 50, start: bool = True,
                 file=sys.stdout):
        self.file = file
        self.task_num = task_num
        self.bar_width = bar_width
        self.completed = 0  # tasks done so far
        if start:
            self.start()

    def start(self) -> None:
        """Draw the empty bar and start the clock."""
        if self.task_num > 0:
            self._show(f'[{" " * self.bar_width}] 0/{self.task_num}, elapsed: 0s, ETA:')
        else:
            self._show('completed: 0, elapsed: 0s')
        self.start_time = time.time()

    def _bar(self, fraction, room):
        """The bar itself: as wide as asked, but at most ``room`` and 60 % of the terminal, and
        at least 2 characters; ``>`` for the done part."""
        width = max(2, min(self.bar_width, room, int(self.terminal_width * 0.6)))
        done = int(width * fraction)
        return '>' * done + ' ' * (width - done)

    def update(self, num_tasks: int = 1) -> None:
        """Count ``num_tasks`` more tasks as done and redraw the line."""
        if num_tasks <= 0:
            raise ValueError(f'num_tasks must be positive, but got {num_tasks}')
        self.completed += num_tasks
        seconds = time.time() - self.start_time
        speed = self.completed / seconds if seconds > 0 else float('inf')
        shown_seconds = int(seconds + 0.5)  # rounded to the nearest second
        if self.task_num <= 0:
            self._show(f'completed: {self.completed}, elapsed: {shown_seconds}s, '
                       f'{speed:.1f} tasks/s')
            return
        fraction = self.completed / self.task_num
        remaining = int(seconds * (1 - fraction) / fraction + 0.5)
        after_bar = (f'] {self.completed}/{self.task_num}, {speed:.1f} task/s, '
                     f'elapsed: {shown_seconds}s, ETA: {remaining:5}s')
        room = self.terminal_width - len('\r[') - len(after_bar)
        self._show(f'\r[{self._bar(fraction, room)}{after_bar}')

    @property
    def terminal_width(self) -> int:
        """The terminal's width in characters, read at every redraw (it can be resized)."""
        return get_terminal_size().columns

    def _show(self, text: str) -> None:
        """Write ``text`` at once: the line is redrawn in place, so nothing may wait in a buffer."""
        print(text, end='', file=self.file, flush=True)
