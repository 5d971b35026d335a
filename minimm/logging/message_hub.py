"""MessageHub: the run's shared notice board between hooks, loops and the log processor.

Hooks never call each other. Instead they write into the MessageHub and read from it:
RuntimeInfoHook writes ``epoch``/``iter``/``train/lr``/``train/loss``, IterTimerHook writes
``train/time`` and ``eta``, LogProcessor reads them all to format a log line, CheckpointHook keeps
``best_score`` there so that it survives a resume. Two kinds of entries:

- *scalars* (``update_scalar``): numbers with history, each in a :class:`HistoryBuffer`, so that the
  log can show a windowed mean;
- *runtime info* (``update_info``): any value, overwritten on each update.

A scalar that arrives as a tensor (the loss, ``grad_norm``) is kept as a tensor: the HistoryBuffer
reads it, with the others, only when something asks for a value (a log line, a hook's
``get_scalar(key).current()``, ``state_dict()``), so a training iteration does not wait for the
device (DESIGN principle 9). MMEngine reads it at once (``.item()``); the values are the same.

Each key carries a ``resumed`` flag (fixed at its first update): only resumed keys go into
``state_dict()``, which the runner saves as ``checkpoint['message_hub']``.

Different from MMEngine: ``state_dict()`` holds only weights_only-safe values — each scalar buffer
becomes ``{'log_history': [...], 'count_history': [...], 'max_length': n}`` and runtime info is
converted to plain data (``minimm/plain_data.py``: numpy values become Python numbers and lists),
or left out with a warning when it has no plain form, so that
``torch.load(ckpt, weights_only=True)`` can read the checkpoint.
``load_state_dict`` accepts that form and MMEngine's (HistoryBuffer objects).
Left out: loading from a pickled MessageHub object, and the thread lock.
"""
import copy
import logging
from collections import OrderedDict
from typing import Any, Optional

import numpy as np
import torch

from ..plain_data import to_plain_data
from ..utils.manager import ManagerMixin
from .history_buffer import HistoryBuffer
from .logger import print_log


class MessageHub(ManagerMixin):
    """Scalars with history and runtime info, shared by name (``MessageHub.get_instance(name)``).

    Args:
        name: instance name (the runner uses its experiment name).
        log_scalars: initial ``{key: HistoryBuffer}``.
        runtime_info: initial ``{key: value}``.
        resumed_keys: initial ``{key: resumed_flag}``.
    """

    def __init__(self, name: str, log_scalars: Optional[dict] = None,
                 runtime_info: Optional[dict] = None, resumed_keys: Optional[dict] = None):
        super().__init__(name)
        self._log_scalars = OrderedDict(log_scalars or {})
        self._runtime_info = OrderedDict(runtime_info or {})
        self._resumed_keys = OrderedDict(resumed_keys or {})

    @classmethod
    def get_current_instance(cls) -> 'MessageHub':
        """The latest instance; creates one named ``'minimm'`` when there is none yet."""
        if not cls._instance_dict:
            cls.get_instance('minimm')
        return super().get_current_instance()

    @property
    def log_scalars(self) -> 'OrderedDict[str, HistoryBuffer]':
        return self._log_scalars

    @property
    def runtime_info(self) -> 'OrderedDict[str, Any]':
        return self._runtime_info

    def _set_resumed_keys(self, key: str, resumed: bool) -> None:
        # A key that is checkpointed once must always be checkpointed, or a resume would restore a
        # stale value; so the flag cannot change after the first update.
        if key not in self._resumed_keys:
            self._resumed_keys[key] = resumed
        else:
            assert self._resumed_keys[key] == resumed, \
                f'{key} used to be {self._resumed_keys[key]}, but got {resumed} now. ' \
                'resumed keys cannot be modified repeatedly.'

    @staticmethod
    def _get_valid_value(value) -> Any:
        """A Python number from a number, a one-element numpy array/number or tensor."""
        if isinstance(value, (np.ndarray, np.number, torch.Tensor)):
            if (value.numel() if isinstance(value, torch.Tensor) else value.size) != 1:
                raise ValueError(f'a scalar must have exactly one element, got shape '
                                 f'{tuple(value.shape)}')
            return value.item()
        if isinstance(value, (int, float)):
            return value
        raise TypeError(f'a scalar must be a number, a numpy value or a tensor, got {type(value)}')

    def update_scalar(self, key: str, value, count: int = 1, resumed: bool = True) -> None:
        """Append ``value`` (with ``count``) to the history of scalar ``key``."""
        self._set_resumed_keys(key, resumed)
        # A tensor is kept, to be read later (the HistoryBuffer checks that it is one number).
        checked_value = value if isinstance(value, torch.Tensor) else self._get_valid_value(value)
        if not isinstance(count, int):
            raise TypeError(f'count of {key} must be an int, got {type(count)}')
        if key in self._log_scalars:
            self._log_scalars[key].update(checked_value, count)
        else:
            self._log_scalars[key] = HistoryBuffer([checked_value], [count])

    def update_scalars(self, log_dict: dict, resumed: bool = True) -> None:
        """``update_scalar`` for each item; a value may be ``{'value': v, 'count': n}``."""
        if not isinstance(log_dict, dict):
            raise TypeError(f'log_dict must be a dict, got {type(log_dict)}')
        for key, value in log_dict.items():
            if isinstance(value, dict):
                if 'value' not in value:
                    raise KeyError(f'value must be defined in {value}')
                count = self._get_valid_value(value.get('count', 1))
                value = value['value']
            else:
                count = 1
            self.update_scalar(key, value, count, resumed)

    def update_info(self, key: str, value: Any, resumed: bool = True) -> None:
        """Set runtime info ``key`` to ``value`` (overwriting)."""
        self._set_resumed_keys(key, resumed)
        self._runtime_info[key] = value

    def update_info_dict(self, info_dict: dict, resumed: bool = True) -> None:
        """``update_info`` for each item."""
        if not isinstance(info_dict, dict):
            raise TypeError(f'info_dict must be a dict, got {type(info_dict)}')
        for key, value in info_dict.items():
            self.update_info(key, value, resumed=resumed)

    def pop_info(self, key: str, default: Any = None) -> Any:
        """Remove runtime info ``key`` and return it (``default`` when absent)."""
        return self._runtime_info.pop(key, default)

    def get_scalar(self, key: str) -> HistoryBuffer:
        """The HistoryBuffer of scalar ``key``; KeyError when it was never updated."""
        if key not in self._log_scalars:
            raise KeyError(f'{key} is not found in MessageHub.log_scalars: instance name is: '
                           f'{self.instance_name}')
        return self._log_scalars[key]

    def get_info(self, key: str, default: Any = None) -> Any:
        """Runtime info ``key``, or ``default`` when absent."""
        return self._runtime_info.get(key, default)

    def state_dict(self) -> dict:
        """The resumed keys, as weights_only-safe plain data (see the module docstring)."""
        saved_scalars = OrderedDict()
        saved_info = OrderedDict()
        resumed_keys = OrderedDict(self._resumed_keys)
        for key, buffer in self._log_scalars.items():
            if self._resumed_keys.get(key, False):
                saved_scalars[key] = buffer.state_dict()
        for key, value in self._runtime_info.items():
            if not self._resumed_keys.get(key, False):
                continue
            try:
                saved_info[key] = to_plain_data(value)
            except TypeError:
                print_log(f'runtime info {key!r} of type {type(value).__name__} cannot be loaded '
                          'with torch.load(weights_only=True); it is not saved.',
                          logger='current', level=logging.WARNING)
                del resumed_keys[key]
        return dict(log_scalars=saved_scalars, runtime_info=saved_info, resumed_keys=resumed_keys)

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore scalars, runtime info and resumed flags from ``state_dict()``'s output."""
        if not isinstance(state_dict, dict):
            raise TypeError(f'state_dict must be a dict, got {type(state_dict)}')
        for key in ('log_scalars', 'runtime_info', 'resumed_keys'):
            if key not in state_dict:
                raise KeyError(f'The loaded MessageHub state_dict has no {key!r}; its keys are '
                               f'{sorted(state_dict)}')
        for key, value in state_dict['log_scalars'].items():
            if isinstance(value, HistoryBuffer):
                self._log_scalars[key] = copy.deepcopy(value)
            elif isinstance(value, dict):
                self._log_scalars[key] = HistoryBuffer(**value)
            else:
                print_log(f'{key} in message_hub is not a HistoryBuffer or its state; '
                          'skip resuming it.', logger='current', level=logging.WARNING)
        for key, value in state_dict['runtime_info'].items():
            self._runtime_info[key] = copy.deepcopy(value)
        for key, resumed in state_dict['resumed_keys'].items():
            if key not in self._log_scalars and key not in self._runtime_info:
                print_log(f'resumed key: {key} is not defined in message_hub, '
                          'just skip resuming this key.', logger='current', level=logging.WARNING)
                continue
            if not resumed:
                print_log(f'Although resumed key: {key} is False, {key} will still be loaded '
                          'this time. This key will not be saved by the next calling of '
                          '`MessageHub.state_dict()`', logger='current', level=logging.WARNING)
            self._resumed_keys[key] = resumed
