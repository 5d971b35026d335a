"""PaviLoggerHook: MMCV 1.x's logger for Pavi, SenseTime's internal experiment tracker.

There is no public ``pavi`` package, so the hook works with whatever module of that name is
importable (MMCV's own tests put a mock there). Before the run it builds
``pavi.SummaryWriter(**init_kwargs)`` into ``self.writer``; then

- ``log`` sends ``add_scalars(mode, tags, step)``;
- ``add_ckpt_kwargs`` upload checkpoints (``add_snapshot_file``) after some epochs/iterations,
  ``add_last_ckpt`` uploads ``latest.pth`` after the run;
- ``add_graph_kwargs`` upload the model graph (``add_graph``) before some epochs/iterations.

Different from MMCV 1.7: the graph's input batch is moved to the model's device with ``.to``
(MMCV uses ``mmcv.parallel.scatter``, which also unwraps its ``DataContainer``), the model's
``forward`` is put back even when ``add_graph`` fails, and PyYAML is needed only for
``session_text``.
"""
import json
import os
import os.path as osp
import warnings
from functools import partial
from typing import Dict, Optional

import torch
from torch.nn.parallel import DataParallel, DistributedDataParallel

from minimm.config import Config

from ...dist_utils import master_only
from ...utils import json_set_default
from ..hook import HOOKS
from .base import LoggerHook


def _due(step: int, start: int, every: int) -> bool:
    """Whether ``step`` is ``start``, ``start + every``, ``start + 2 * every``..."""
    return step >= start and (step - start) % every == 0


def _config_as_yaml(config_dict: dict, max_iters: int) -> str:
    # The Pavi SDK sizes its progress bar from a 'max_...iter' entry.
    config_dict = {'max_iter': max_iters, **config_dict}
    # JSON first: it turns ranges, sets and numpy values into plain values YAML can write.
    plain = json.loads(json.dumps(config_dict, default=json_set_default))
    try:
        import yaml
    except ImportError:
        raise ImportError('Please run "pip install pyyaml": PaviLoggerHook writes the config '
                          'as YAML')
    return yaml.dump(plain)


@HOOKS.register_module()
class PaviLoggerHook(LoggerHook):
    """Log metrics, and optionally checkpoints and the model graph, to Pavi.

    Args:
        init_kwargs: ``pavi.SummaryWriter``'s arguments. ``name`` defaults to the work dir's
            last folder, ``model`` to the model's class name, ``session_text`` to the config
            (``runner.meta['config_dict']`` or ``['config_file']``) as YAML.
        add_graph, img_key: deprecated, the ``active`` and ``img_key`` of ``add_graph_kwargs``.
        add_last_ckpt: upload ``latest.pth`` after the run.
        add_graph_kwargs: ``active`` (False), ``start`` (0), ``interval`` (1), ``img_key``
            ('img'), ``opset_version`` (11), ``dummy_forward_kwargs`` ({}).
        add_ckpt_kwargs: ``active`` (False), ``start`` (0), ``interval`` (1).
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {**LoggerHook.dataflow, 'before_train_iter': 'model ->'}  # the graph, uploaded

    def __init__(self, init_kwargs: Optional[Dict] = None, add_graph: Optional[bool] = None,
                 img_key: Optional[str] = None, add_last_ckpt: bool = False, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True,
                 add_graph_kwargs: Optional[Dict] = None, add_ckpt_kwargs: Optional[Dict] = None
                 ) -> None:
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.init_kwargs = init_kwargs
        self.add_last_ckpt = add_last_ckpt

        graph = {'active': False, 'start': 0, 'interval': 1, 'img_key': 'img',
                 'opset_version': 11, 'dummy_forward_kwargs': {}, **(add_graph_kwargs or {})}
        deprecated = (('add_graph', 'active', add_graph), ('img_key', 'img_key', img_key))
        for old, key, value in deprecated:
            if value is not None:  # the old arguments still win over add_graph_kwargs
                warnings.warn(f'"{old}" is deprecated in `PaviLoggerHook`, please use the key '
                              f'"{key}" of add_graph_kwargs instead', DeprecationWarning)
                graph[key] = value
        self.add_graph = graph['active']
        self.add_graph_start, self.add_graph_interval = graph['start'], graph['interval']
        self.img_key = graph['img_key']
        self.opset_version = graph['opset_version']
        self.dummy_forward_kwargs = graph['dummy_forward_kwargs']

        ckpt = {'active': False, 'start': 0, 'interval': 1, **(add_ckpt_kwargs or {})}
        self.add_ckpt = ckpt['active']
        self.add_ckpt_start, self.add_ckpt_interval = ckpt['start'], ckpt['interval']

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        try:
            from pavi import SummaryWriter
        except ImportError:
            raise ImportError('No module named pavi, please contact pavi team or visit '
                              'document for pavi installation instructions.')
        self.run_name = osp.basename(runner.work_dir)  # also the tag of the checkpoints
        kwargs = self.init_kwargs = self.init_kwargs or {}
        kwargs.setdefault('name', self.run_name)
        kwargs.setdefault('model', runner._model_name)
        config_dict = self._config_dict(runner.meta or {})
        if config_dict is not None:
            kwargs.setdefault('session_text', _config_as_yaml(config_dict, runner.max_iters))
        self.writer = SummaryWriter(**kwargs)

    @staticmethod
    def _config_dict(meta: dict) -> Optional[dict]:
        if 'config_dict' in meta:
            config_dict = meta['config_dict']
            assert isinstance(config_dict, dict), \
                f'meta["config_dict"] has to be of a dict, but got {type(config_dict)}'
            return config_dict
        if 'config_file' in meta:
            return dict(Config.fromfile(meta['config_file']))
        return None

    def get_step(self, runner) -> int:
        """The x of a point: the epoch for a by-epoch val record, else the global iteration."""
        by_epoch_val = self.by_epoch and self.get_mode(runner) == 'val'
        return self.get_epoch(runner) if by_epoch_val else self.get_iter(runner)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner, add_mode=False)  # the mode is add_scalars' group
        if tags:
            self.writer.add_scalars(self.get_mode(runner), tags, self.get_step(runner))

    # --- checkpoints ------------------------------------------------------------------------------

    def _add_ckpt(self, runner, ckpt_path: str, step: int) -> None:
        if osp.islink(ckpt_path):  # latest.pth links to the newest checkpoint: upload that one
            ckpt_path = osp.join(runner.work_dir, os.readlink(ckpt_path))
        if osp.isfile(ckpt_path):
            self.writer.add_snapshot_file(tag=self.run_name, snapshot_file_path=ckpt_path,
                                          iteration=step)

    def _upload_ckpt_if_due(self, runner, kind: str, step: int) -> None:
        if self.add_ckpt and _due(step, self.add_ckpt_start, self.add_ckpt_interval):
            self._add_ckpt(runner, osp.join(runner.work_dir, f'{kind}_{step}.pth'), step)

    @master_only
    def after_train_epoch(self, runner) -> None:
        super().after_train_epoch(runner)
        if self.by_epoch:
            self._upload_ckpt_if_due(runner, 'epoch', self.get_epoch(runner))

    @master_only
    def after_train_iter(self, runner) -> None:
        super().after_train_iter(runner)
        if not self.by_epoch:
            self._upload_ckpt_if_due(runner, 'iter', self.get_iter(runner))

    @master_only
    def after_run(self, runner) -> None:
        if self.add_last_ckpt:
            # the counters have moved past the last epoch/iteration: they are its number
            last = runner.epoch if self.by_epoch else runner.iter
            self._add_ckpt(runner, osp.join(runner.work_dir, 'latest.pth'), last)
        self.writer.close()  # flushes, and tells Pavi the task has ended

    # --- the model graph --------------------------------------------------------------------------

    def _add_graph(self, runner, step: int) -> None:
        model = runner.model
        if isinstance(model, (DataParallel, DistributedDataParallel)):
            model = model.module
        # An IterBasedRunner's data_loader is an IterLoader, an endless wrapper that keeps the
        # real DataLoader in `_dataloader`. We recognise it by that attribute instead of
        # importing iter_based_runner: the runners import the hooks, so a hook that imports a
        # runner module closes an import cycle.
        loader = getattr(runner.data_loader, '_dataloader', runner.data_loader)
        batch = next(iter(loader))
        img = batch[self.img_key].to(next(model.parameters()).device)
        own_forward = model.forward
        forward = getattr(model, 'forward_dummy', own_forward)
        if self.dummy_forward_kwargs:
            forward = partial(forward, **self.dummy_forward_kwargs)
        model.forward = forward  # what ONNX tracing (and so add_graph) calls
        try:
            with torch.no_grad():
                self.writer.add_graph(model, img, tag=f'{self.run_name}_{step}',
                                      opset_version=self.opset_version)
        finally:
            model.forward = own_forward

    def _upload_graph_if_due(self, runner, step: int) -> None:
        if self.add_graph and _due(step, self.add_graph_start, self.add_graph_interval):
            self._add_graph(runner, step)

    @master_only
    def before_train_epoch(self, runner) -> None:
        super().before_train_epoch(runner)
        if self.by_epoch:
            self._upload_graph_if_due(runner, self.get_epoch(runner))

    @master_only
    def before_train_iter(self, runner) -> None:
        super().before_train_iter(runner)
        if not self.by_epoch:
            self._upload_graph_if_due(runner, self.get_iter(runner))
