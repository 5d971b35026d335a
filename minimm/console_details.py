"""What the console shows of a run's start: both worlds' runners log their long startup lines
(the config dump, the hook table) as details, which the console prints only on request.

On the lowest floor, beside the checkpoint files: the MMCV runner and MMEngine's Runner both log
with it, and neither world's logging package is needed to say what a detail is.
"""
import logging

# A line logged with ``extra=DETAIL`` (the config dump, the hook table: long, and read when
# something needs looking into) goes to the log file always, and to the console only while
# ``show_details(True)``. MMEngine logs both at INFO, so its console opens every run with them
# (53 lines for the demo) before the first training line; minimm keeps the console for the
# training and prints them on request: ``--verbose`` on the command line, ``Runner(...,
# verbose=True)``, or ``show_details(True)`` (the classic MMCV runner too).
DETAIL = {'minimm_detail': True}
_console_shows_details = [False]


def show_details(show: bool) -> bool:
    """Whether the console prints the lines logged with ``extra=DETAIL``; returns the setting it
    replaces (to put back)."""
    before = _console_shows_details[0]
    _console_shows_details[0] = show
    return before


def not_a_hidden_detail(record: logging.LogRecord) -> bool:
    return _console_shows_details[0] or not getattr(record, 'minimm_detail', False)
