"""Visualizer: fan scalars and the config out to every visualisation backend, on rank 0 only.

The runner builds one Visualizer per run (``Visualizer.get_instance(experiment_name,
vis_backends=[dict(type='LocalVisBackend')], save_dir=log_dir)``); LoggerHook then calls
``runner.visualizer.add_scalars(tag, step=..., file_path='{timestamp}.json')``. Backends are built
with ``save_dir = save_dir/vis_data``, which is why MMEngine's JSON logs live in
``work_dir/{timestamp}/vis_data/``. Writes happen on rank 0 only (``master_only``), so a
distributed run produces one set of files.

Left out compared with MMEngine: all drawing (images, boxes, masks, matplotlib), the ``image``
argument and ``fig_*_cfg``; ``VISUALIZERS`` registry (build it directly or with ``get_instance``).
"""
import copy
import os.path as osp
import warnings
from typing import Any, Dict, List, Optional, Union

from ..dist.utils import master_only
from ..registry import VISBACKENDS, VISUALIZERS
from ..utils.manager import ManagerMixin
from .vis_backend import BaseVisBackend


@VISUALIZERS.register_module()
class Visualizer(ManagerMixin):
    """Hold named backends and forward writes to all of them.

    Args:
        name: instance name for ``get_instance``.
        vis_backends: backend configs (dicts with ``type``, optional ``name``) or instances.
        save_dir: the run's log folder; backends write under ``save_dir/vis_data``. Without it no
            backend is built (MMEngine warns and does the same).
    """

    def __init__(self, name: str = 'visualizer',
                 vis_backends: Optional[List[Union[dict, BaseVisBackend]]] = None,
                 save_dir: Optional[str] = None):
        super().__init__(name)
        self.dataset_meta: Optional[dict] = None
        self._vis_backends: Dict[str, BaseVisBackend] = {}
        if save_dir is None:
            if vis_backends:
                warnings.warn('`Visualizer` backend is not initialized because save_dir is None.')
            return
        if vis_backends is None:
            return
        if isinstance(vis_backends, (dict, BaseVisBackend)):
            vis_backends = [vis_backends]
        if not vis_backends:
            raise ValueError('vis_backends is an empty list; pass None for no backend')
        save_dir = osp.join(save_dir, 'vis_data')
        for backend in vis_backends:
            backend_name, backend = self._build_backend(backend, save_dir)
            if backend_name in self._vis_backends:
                raise RuntimeError(f'Two vis backends are both named {backend_name!r}; give each a '
                                   'distinct `name` field.')
            self._vis_backends[backend_name] = backend

    @staticmethod
    def _build_backend(backend: Union[dict, BaseVisBackend], save_dir: str):
        """``(name, instance)`` from a config dict (not mutated) or an instance."""
        if isinstance(backend, BaseVisBackend):
            return type(backend).__name__, backend
        if not isinstance(backend, dict):
            raise TypeError(f'a vis backend must be a dict or a BaseVisBackend, got '
                            f'{type(backend)}')
        cfg = copy.deepcopy(backend)
        name = cfg.pop('name', cfg.get('type'))
        name = name if isinstance(name, str) else getattr(name, '__name__', str(name))
        cfg.setdefault('save_dir', save_dir)
        return name, VISBACKENDS.build(cfg)

    def get_backend(self, name: str) -> Optional[BaseVisBackend]:
        """The backend called ``name`` (its type name unless a ``name`` was given), or None."""
        return self._vis_backends.get(name)

    @master_only
    def add_config(self, config: Any, **kwargs) -> None:
        for backend in self._vis_backends.values():
            backend.add_config(config, **kwargs)

    @master_only
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        for backend in self._vis_backends.values():
            backend.add_scalar(name, value, step, **kwargs)

    @master_only
    def add_scalars(self, scalar_dict: dict, step: int = 0, file_path: Optional[str] = None,
                    **kwargs) -> None:
        for backend in self._vis_backends.values():
            backend.add_scalars(scalar_dict, step, file_path, **kwargs)

    def close(self) -> None:
        for backend in self._vis_backends.values():
            backend.close()
