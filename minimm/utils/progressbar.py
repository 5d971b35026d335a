"""ProgressBar: a text progress bar for loops over a known number of tasks, as MMEngine 0.10's.

``bar = ProgressBar(len(items)); for item in items: ...; bar.update()`` prints, on one line that
is rewritten in place, ``[>>>>>      ] 5/10, 2.5 task/s, elapsed: 2s, ETA:     2s``. With
``task_num=0`` (unknown) it prints the count and the speed only.
"""
import sys
import time
from shutil import get_terminal_size


class ProgressBar:
    """A progress bar that counts completed tasks.

    Args:
        task_num: how many tasks there are (0: unknown).
        bar_width: the bar's width in characters; capped to fit the terminal.
        start: print the empty bar now (else call :meth:`start`).
        file: where to write (a text stream).
    """

    def __init__(self, task_num: int = 0, bar_width: int = 50, start: bool = True,
                 file=sys.stdout):
        self.task_num = task_num
        self.bar_width = bar_width
        self.completed = 0
        self.file = file
        if start:
            self.start()

    @property
    def terminal_width(self) -> int:
        width, _ = get_terminal_size()
        return width

    def start(self) -> None:
        if self.task_num > 0:
            self.file.write(f'[{" " * self.bar_width}] 0/{self.task_num}, elapsed: 0s, ETA:')
        else:
            self.file.write('completed: 0, elapsed: 0s')
        self.file.flush()
        self.start_time = time.time()

    def update(self, num_tasks: int = 1) -> None:
        """Count ``num_tasks`` more completed tasks and redraw the line."""
        if num_tasks <= 0:
            raise ValueError(f'num_tasks must be positive, but got {num_tasks}')
        self.completed += num_tasks
        elapsed = time.time() - self.start_time
        fps = self.completed / elapsed if elapsed > 0 else float('inf')
        if self.task_num > 0:
            percentage = self.completed / float(self.task_num)
            eta = int(elapsed * (1 - percentage) / percentage + 0.5)
            msg = f'\r[{{}}] {self.completed}/{self.task_num}, {fps:.1f} task/s, ' \
                  f'elapsed: {int(elapsed + 0.5)}s, ETA: {eta:5}s'
            bar_width = min(self.bar_width, int(self.terminal_width - len(msg)) + 2,
                            int(self.terminal_width * 0.6))
            bar_width = max(2, bar_width)
            mark_width = int(bar_width * percentage)
            bar_chars = '>' * mark_width + ' ' * (bar_width - mark_width)
            self.file.write(msg.format(bar_chars))
        else:
            self.file.write(f'completed: {self.completed}, elapsed: {int(elapsed + 0.5)}s, '
                            f'{fps:.1f} tasks/s')
        self.file.flush()
