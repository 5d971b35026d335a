"""MMLogger and print_log: one named logger per run, printing on rank 0 and writing the text log.

The runner creates ``MMLogger.get_instance(experiment_name, log_file=...)`` with the log file
``work_dir/{timestamp}/{timestamp}.log``; the LoggerHook and everything else then log through
``runner.logger`` or ``MMLogger.get_current_instance()``.

As in MMEngine, the logger is created directly (not through ``logging.getLogger``), so it has no
parent: nothing propagates to the root logger and other libraries' logging setup cannot double
its lines. The console handler prints at ``log_level`` on rank 0 and only errors on other ranks;
the file handler is opened on rank 0. Both use MMEngine's line shape
``'%(asctime)s - %(name)s - %(levelname)s - %(message)s'``.

Left out compared with MMEngine: colours, the per-rank log files of ``distributed=True``, the
duplicate-warning filter and ``file_handler_cfg``.
"""
import logging
import os
import sys
from typing import Optional, Union

from ..console_details import not_a_hidden_detail
from ..dist.utils import get_rank, is_distributed
from ..utils.manager import ManagerMixin

LOG_FORMAT = '%(asctime)s - %(name)s - %(levelname)s - %(message)s'

def _rank() -> int:
    # The logger may be built before init_process_group (e.g. by a launcher script); the
    # launcher's RANK variable then already says which process this is.
    return get_rank() if is_distributed() else int(os.environ.get('RANK', 0))


class MMLogger(logging.Logger, ManagerMixin):
    """A ``logging.Logger`` with named global instances.

    Args:
        name: instance name for ``get_instance``.
        logger_name: the name printed in each line; defaults to ``'minimm'``.
        log_file: text log path, written on rank 0 only; its folder is created.
        log_level: level of the console and file handlers.
        file_mode: ``'w'`` to truncate the log file, ``'a'`` to append.
    """

    def __init__(self, name: str, logger_name: Optional[str] = None,
                 log_file: Optional[str] = None, log_level: Union[int, str] = 'INFO',
                 file_mode: str = 'w'):
        logging.Logger.__init__(self, logger_name or 'minimm')
        ManagerMixin.__init__(self, name)
        if isinstance(log_level, str):
            log_level = logging.getLevelName(log_level.upper())
        if not isinstance(log_level, int):
            raise ValueError(f'unknown log_level {log_level!r}')
        if file_mode not in ('w', 'a'):
            raise ValueError(f"file_mode must be 'w' or 'a', got {file_mode!r}")
        rank = _rank()

        console = logging.StreamHandler(stream=sys.stdout)
        console.setFormatter(logging.Formatter(LOG_FORMAT, datefmt='%m/%d %H:%M:%S'))
        console.setLevel(log_level if rank == 0 else logging.ERROR)
        console.addFilter(not_a_hidden_detail)
        self.addHandler(console)

        if log_file is not None and rank == 0:
            os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
            file_handler = logging.FileHandler(log_file, mode=file_mode)
            file_handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt='%Y/%m/%d %H:%M:%S'))
            file_handler.setLevel(log_level)
            self.addHandler(file_handler)
        self.log_file = log_file

    def isEnabledFor(self, level: int) -> bool:
        # The logger's own level stays NOTSET (as in MMEngine: log_level is the handlers'), so
        # logging.Logger would build a record, with a walk up the stack for its caller, for every
        # message, only for the handlers to drop it. Answer False when no handler would take it;
        # with logger filters or no handler at all (the lastResort one) ask logging as usual.
        if self.filters or not self.handlers or (self.propagate and self.parent is not None):
            return super().isEnabledFor(level)
        return super().isEnabledFor(level) and any(level >= h.level for h in self.handlers)

    @classmethod
    def get_current_instance(cls) -> 'MMLogger':
        """The latest instance; creates one named ``'minimm'`` when there is none yet."""
        if not cls._instance_dict:
            cls.get_instance('minimm')
        return super().get_current_instance()


def print_log(msg, logger: Union[logging.Logger, str, None] = None,
              level: int = logging.INFO) -> None:
    """Log ``msg`` through ``logger``.

    ``logger`` may be None (plain ``print``), a ``logging.Logger``, ``'silent'`` (drop it),
    ``'current'`` (``MMLogger.get_current_instance()``) or the name of an existing MMLogger.
    """
    if logger is None:
        print(msg)
    elif isinstance(logger, logging.Logger):
        logger.log(level, msg)
    elif logger == 'silent':
        pass
    elif logger == 'current':
        MMLogger.get_current_instance().log(level, msg)
    elif isinstance(logger, str):
        if not MMLogger.check_instance_created(logger):
            raise ValueError(f'MMLogger: {logger} has not been created!')
        MMLogger.get_instance(logger).log(level, msg)
    else:
        raise TypeError('logger should be either a logging.Logger object, str, "silent", '
                        f'"current" or None, but got {type(logger)}')
