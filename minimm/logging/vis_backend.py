"""Visualisation backends: where logged scalars and the config end up (JSON lines, TensorBoard).

MMEngine replaced MMCV's logger *hooks* (TextLoggerHook, TensorboardLoggerHook...) by *backends*
owned by the Visualizer: LoggerHook hands one dict of scalars to ``runner.visualizer.add_scalars``,
and every backend writes it its own way. A backend creates its folder or writer lazily, on the first
write (``force_init_env``), so building one costs nothing and non-writing ranks never touch disk.
``BaseVisBackend`` holds what MMEngine writes out again in every backend: ``experiment``, a
``close`` that skips a backend that never started, and ``add_scalars`` as one ``add_scalar`` each.

``LocalVisBackend`` appends one JSON object per call, ``{"loss": 0.12, ..., "step": 10}``, to
``save_dir/scalars.json`` and, when ``file_path`` is given, also to ``save_dir/file_path`` (the
``{timestamp}.json`` log). The Visualizer passes ``save_dir = log_dir/vis_data``.
``TensorboardVisBackend`` needs the optional ``tensorboard`` package and says so on first use. The
experiment-tracking services (W&B, MLflow, Neptune, DVCLive, ClearML) are in tracking_backends.py.

Left out compared with MMEngine: images, graphs, histograms, and the Aim backend.
"""
import functools
import importlib
import json
import os
import os.path as osp
import warnings
from typing import IO, Any, Callable, Dict, Optional

import numpy as np
import torch

from ..plain_data import to_plain_data
from ..registry import VISBACKENDS


def force_init_env(method: Callable) -> Callable:
    """Decorator: make sure ``self._init_env()`` ran once before ``method``."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self._env_initialized:
            self._init_env()
            self._env_initialized = True
        return method(self, *args, **kwargs)

    return wrapper


def import_optional(module: str, backend: str, pip_name: Optional[str] = None) -> Any:
    """Import an optional package a backend needs, or say which ``pip install`` brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f'{backend} needs the {module} package: run '
                          f'"pip install {pip_name or module}"') from e


def check_no_step_key(scalar_dict: dict) -> None:
    """Refuse a ``step`` key among the scalars: the step of a write is its ``step`` argument."""
    if 'step' in scalar_dict:
        raise KeyError('Please set step through the step argument, not in scalar_dict')


def config_pretty_text(config: Any) -> str:
    """The text of a config: a Config's ``pretty_text``, ``key = value`` lines for a dict, or ''
    for None (a runner built without a config)."""
    if config is None:
        return ''
    if hasattr(config, 'pretty_text'):
        return config.pretty_text
    if isinstance(config, dict):
        return ''.join(f'{key} = {value!r}\n' for key, value in config.items())
    raise TypeError(f'config must be a Config or a dict, got {type(config)}')


class BaseVisBackend:
    """A place to write scalars and the config to: what every backend shares.

    Writing methods are no-ops here. The shared parts are the lazy start (``_init_env``, run once
    by ``force_init_env``), ``experiment`` (what ``_init_env`` stored in ``_experiment``), a
    ``close`` that releases only a backend that started (``_close``), and an ``add_scalars`` that
    makes one ``add_scalar`` call per value.

    Args:
        save_dir: folder the backend writes into.
    """

    def __init__(self, save_dir: str):
        self._save_dir = save_dir
        self._env_initialized = False
        # What the backend writes through (a SummaryWriter, the wandb module...): _init_env sets it.
        self._experiment: Any = self

    @property
    @force_init_env
    def experiment(self) -> Any:
        """The underlying writer or service object (LocalVisBackend: itself), to reach what the
        backend does not wrap."""
        return self._experiment

    def _init_env(self) -> None:
        """Create folders/writers; called once, before the first write."""

    def add_config(self, config: Any, **kwargs) -> None:
        """Record the run's config."""

    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        """Record one scalar at ``step``."""

    @force_init_env
    def add_scalars(self, scalar_dict: dict, step: int = 0, file_path: Optional[str] = None,
                    **kwargs) -> None:
        """Record several scalars at ``step``, one ``add_scalar`` each."""
        check_no_step_key(scalar_dict)
        for key, value in scalar_dict.items():
            self.add_scalar(key, value, step)

    def close(self) -> None:
        """Flush and release files/writers; a backend that never started has nothing to release."""
        if self._env_initialized:
            self._close()

    def _close(self) -> None:
        """Release what ``_init_env`` and the writes opened."""


@VISBACKENDS.register_module()
class LocalVisBackend(BaseVisBackend):
    """Write scalars as JSON lines and the config as a ``.py`` file under ``save_dir``.

    Args:
        save_dir: folder for all files.
        img_save_dir: sub-folder name for images (kept for MMEngine config compatibility).
        config_save_file: config file name; must end in ``.py``.
        scalar_save_file: scalar file name; must end in ``.json``.
    """

    def __init__(self, save_dir: str, img_save_dir: str = 'vis_image',
                 config_save_file: str = 'config.py', scalar_save_file: str = 'scalars.json'):
        if not config_save_file.endswith('.py'):
            raise ValueError(f'config_save_file must end with .py, got {config_save_file!r}')
        if not scalar_save_file.endswith('.json'):
            raise ValueError(f'scalar_save_file must end with .json, got {scalar_save_file!r}')
        if save_dir is None:
            raise ValueError('LocalVisBackend needs a save_dir')
        super().__init__(save_dir)
        self._img_save_dir = osp.join(save_dir, img_save_dir)
        self._config_save_file = osp.join(save_dir, config_save_file)
        self._scalar_save_file = osp.join(save_dir, scalar_save_file)
        self._files: Dict[str, IO[str]] = {}

    def _init_env(self) -> None:
        os.makedirs(self._save_dir, exist_ok=True)

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        if hasattr(config, 'dump'):
            config.dump(self._config_save_file)
        else:
            with open(self._config_save_file, 'w') as f:
                f.write(config_pretty_text(config))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        if isinstance(value, torch.Tensor):
            value = value.item()
        self._dump({name: value, 'step': step}, self._scalar_save_file)

    @force_init_env
    def add_scalars(self, scalar_dict: dict, step: int = 0, file_path: Optional[str] = None,
                    **kwargs) -> None:
        """Append ``{**scalar_dict, 'step': step}`` (a ``step`` key in the dict wins) as a line."""
        if not isinstance(scalar_dict, dict):
            raise TypeError(f'scalar_dict must be a dict, got {type(scalar_dict)}')
        line = dict(scalar_dict)
        line.setdefault('step', step)
        file_paths = [self._scalar_save_file]
        if file_path is not None:
            if not file_path.endswith('.json'):
                raise ValueError(f'file_path must end with .json, got {file_path!r}')
            extra_file = osp.join(self._save_dir, file_path)
            if extra_file == self._scalar_save_file:
                raise ValueError(f'file_path {file_path!r} is the scalar_save_file itself; '
                                 'every line would be written twice')
            file_paths.insert(0, extra_file)
        self._dump(line, *file_paths)

    def _dump(self, value_dict: dict, *file_paths: str) -> None:
        """Append ``value_dict`` as one JSON line to each file (converted once for all)."""
        text = json.dumps(to_plain_data(value_dict, 'scalars', for_json=True)) + '\n'
        for file_path in file_paths:
            # Files stay open between lines (reopening costs more than the write: MMEngine
            # reopens each time) and are flushed after every line, so a crash loses nothing.
            f = self._files.get(file_path)
            if f is None:
                f = self._files[file_path] = open(file_path, 'a')
            f.write(text)
            f.flush()

    def _close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


@VISBACKENDS.register_module()
class TensorboardVisBackend(BaseVisBackend):
    """Write scalars and the config text to TensorBoard event files in ``save_dir``.

    ``tensorboard`` is an optional dependency: it is imported on the first write, and its absence is
    reported then with the command that installs it.
    """

    def _init_env(self) -> None:
        import_optional('tensorboard', 'TensorboardVisBackend')
        from torch.utils.tensorboard import SummaryWriter
        os.makedirs(self._save_dir, exist_ok=True)
        self._experiment = SummaryWriter(self._save_dir)

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        self._experiment.add_text('config', config_pretty_text(config))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        if isinstance(value, (int, float, torch.Tensor, np.ndarray, np.number)):
            self._experiment.add_scalar(name, value, step)
        else:
            warnings.warn(f'Got {type(value)}, but numpy array, torch tensor, int or float are '
                          f'expected. Skip it: {name}')

    def _close(self) -> None:
        self._experiment.close()
