"""Logging: MessageHub and HistoryBuffer, MMLogger, LogProcessor, Visualizer and its backends."""
from .history_buffer import HistoryBuffer
from .log_processor import LogProcessor
from .logger import MMLogger, print_log
from .message_hub import MessageHub
from .tracking_backends import (ClearMLVisBackend, DVCLiveVisBackend, MLflowVisBackend,
                                NeptuneVisBackend, WandbVisBackend)
from .vis_backend import BaseVisBackend, LocalVisBackend, TensorboardVisBackend, config_pretty_text
from .visualizer import Visualizer

__all__ = ['HistoryBuffer', 'LogProcessor', 'MMLogger', 'print_log', 'MessageHub',
           'BaseVisBackend', 'LocalVisBackend', 'TensorboardVisBackend', 'config_pretty_text',
           'Visualizer', 'WandbVisBackend', 'MLflowVisBackend', 'NeptuneVisBackend',
           'DVCLiveVisBackend', 'ClearMLVisBackend']
