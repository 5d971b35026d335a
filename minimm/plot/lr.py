"""``minimm plot-lr CONFIG``: the learning rate and momentum a config produces, without training.

For an MMEngine-style config (``param_scheduler``, ``optim_wrapper``, ``train_cfg``) it builds the
optimizer on a one-weight stand-in model and the schedulers exactly as the Runner does, then steps
them as ``ParamSchedulerHook`` would: the iteration-based ones after every iteration, the
epoch-based ones after every epoch. The values read before each iteration are the ones that
iteration trains with. Schedulers that need validation metrics (``ReduceOnPlateauLR``) cannot be
previewed and are left out, with a note.

For an MMCV 1.x-style config (``lr_config``, ``momentum_config``, ``optimizer``, ``runner``) it
runs ``minimm.mmcv``'s own runner with the config's updater hooks over a model that does nothing
and batches that are never looked at, and records ``current_lr()``/``current_momentum()`` before
each iteration, after the updaters (priority VERY_HIGH and HIGH) have set them.

The epoch length is the train dataloader's: ``--epoch-length`` gives it, otherwise the dataset in
the config is built to count it. Neither MMEngine nor MMCV has such a command.
"""
import argparse
import logging
import math
import os
from typing import Dict, List, Optional

import torch
from torch.utils.data import DataLoader

from ..cli_args import default_work_dir, positive_int
from . import require_pyplot, save_figure


def _epoch_length(cfg) -> int:
    """Batches per epoch of the config's training data (MMEngine's or MMCV's keys)."""
    if cfg.get('train_dataloader'):
        loader = cfg['train_dataloader']
        dataset, batch, drop_last = loader.get('dataset'), loader.get('batch_size', 1), \
            loader.get('drop_last', False)
    else:
        data = cfg.get('data') or {}
        dataset, batch, drop_last = data.get('train'), data.get('samples_per_gpu', 1), False
    if not isinstance(dataset, dict):
        raise ValueError('the config has no training dataset to count; pass --epoch-length')
    import minimm.dataset  # noqa: F401  (registers the datasets)
    import minimm.mmcv.digits  # noqa: F401  (and the MMCV-style ones)

    from ..registry import DATASETS
    size = len(DATASETS.build(dataset))
    return size // batch if drop_last else math.ceil(size / batch)


def _group_values(optimizer) -> Dict[str, float]:
    group = optimizer.param_groups[0]
    momentum = group['momentum'] if 'momentum' in group else group.get('betas', (None,))[0]
    return dict(lr=group['lr'], momentum=momentum)


def mmengine_schedule(cfg, epoch_length: Optional[int] = None) -> Dict[str, List[float]]:
    """``{'lr': [...], 'momentum': [...]}``: one value per training iteration of the config."""
    import minimm.optim  # noqa: F401  (registers the optimizers and schedulers)

    from ..optim import build_optim_wrapper
    from ..optim.scheduler.builder import build_param_scheduler
    from ..runner.checks import check_config
    check_config(cfg)  # what `minimm train` refuses at start, refused here in its words
    train_cfg = dict(cfg['train_cfg'])
    by_epoch = train_cfg.get('by_epoch', train_cfg.get('type') != 'IterBasedTrainLoop')
    if by_epoch:
        epoch_length = epoch_length or _epoch_length(cfg)
        max_epochs, max_iters = train_cfg['max_epochs'], train_cfg['max_epochs'] * epoch_length
    else:
        max_epochs, max_iters = 1, train_cfg['max_iters']
        epoch_length = epoch_length or max_iters
    wrapper = build_optim_wrapper(torch.nn.Linear(1, 1), cfg['optim_wrapper'])
    configs = cfg.get('param_scheduler') or []
    configs = [configs] if isinstance(configs, dict) else configs
    schedulers = []
    for item in configs:
        item = dict(item)
        item.setdefault('end', max_epochs if item.get('by_epoch', True) else max_iters)
        scheduler = build_param_scheduler(item, wrapper, epoch_length=epoch_length)
        if getattr(scheduler, 'need_val_args', False):
            print(f'{type(scheduler).__name__} needs validation metrics: not previewed')
            continue
        schedulers.append(scheduler)
    values: Dict[str, List[float]] = dict(lr=[], momentum=[])
    for it in range(max_iters):
        for key, value in _group_values(wrapper.optimizer).items():
            values[key].append(value)
        for scheduler in schedulers:
            if not scheduler.by_epoch:
                scheduler.step()
        if by_epoch and (it + 1) % epoch_length == 0:
            for scheduler in schedulers:
                if scheduler.by_epoch:
                    scheduler.step()
    return values


class NoOpModel(torch.nn.Module):
    """An MMCV-style model whose ``train_step`` does nothing: only the schedule runs."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def train_step(self, data_batch, optimizer=None, **kwargs) -> dict:
        return dict(loss=self.weight.sum(), log_vars={}, num_samples=1)


def mmcv_schedule(cfg, epoch_length: Optional[int] = None) -> Dict[str, List[float]]:
    """``{'lr': [...], 'momentum': [...]}`` of an MMCV 1.x config, from ``minimm.mmcv``'s hooks."""
    from ..mmcv import Hook, build_optimizer, build_runner
    runner_cfg = dict(cfg.get('runner') or dict(type='EpochBasedRunner',
                                                 max_epochs=cfg.get('total_epochs')))
    epoch_length = epoch_length or (_epoch_length(cfg) if runner_cfg['type'] != 'IterBasedRunner'
                                    else 1)
    model = NoOpModel()
    optimizer = build_optimizer(model, cfg['optimizer'])  # MMCV's: paramwise_cfg and all
    runner = build_runner(runner_cfg, default_args=dict(
        model=model, optimizer=optimizer, logger=logging.getLogger('minimm.plot.lr')))
    runner.register_lr_hook(cfg['lr_config'])
    runner.register_momentum_hook(cfg.get('momentum_config'))
    values: Dict[str, List[float]] = dict(lr=[], momentum=[])

    class Record(Hook):
        def before_train_iter(self, runner):
            for key, value in _group_values(runner.optimizer).items():
                values[key].append(value)

    runner.register_hook(Record(), priority='LOWEST')
    runner.run([DataLoader(range(epoch_length))], [('train', 1)])
    return values


def config_schedule(cfg, epoch_length: Optional[int] = None) -> Dict[str, List[float]]:
    """The schedule of an MMEngine-style or an MMCV 1.x-style config."""
    if 'param_scheduler' in cfg or 'optim_wrapper' in cfg:
        return mmengine_schedule(cfg, epoch_length)
    if 'lr_config' in cfg:
        return mmcv_schedule(cfg, epoch_length)
    raise ValueError('neither an MMEngine-style config (param_scheduler, optim_wrapper) nor an '
                     'MMCV 1.x one (lr_config)')


def draw_schedule(values: Dict[str, List[float]], out: str, title: str = '') -> str:
    """Two panels, LR and momentum against the iteration; returns ``out``."""
    plt = require_pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    for ax, key in zip(axes, ('lr', 'momentum')):
        series = values[key]
        if any(v is not None for v in series):
            ax.plot(range(len(series)), series, color='tab:blue' if key == 'lr' else 'tab:orange')
        else:
            ax.text(0.5, 0.5, 'this optimizer has no momentum', ha='center',
                    transform=ax.transAxes)
        ax.set(title='learning rate' if key == 'lr' else 'momentum', xlabel='iteration')
    if title:
        fig.suptitle(title, fontsize='small')
    return save_figure(fig, out)


def _default_out(cfg, config_path: str) -> str:
    """``<work_dir>/lr_schedule.png``: beside the run's other files, not in the current folder
    (which is often a source checkout)."""
    work_dir = cfg.get('work_dir') or default_work_dir(config_path)
    os.makedirs(work_dir, exist_ok=True)
    return os.path.join(work_dir, 'lr_schedule.png')


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='minimm plot-lr', description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='a .py config file')
    parser.add_argument('--out', help="the PNG to write (default: lr_schedule.png in the config's "
                                      'work_dir, as `minimm train` would use it)')
    parser.add_argument('--epoch-length', type=positive_int,
                        help='iterations per epoch (default: counted from the train dataset)')
    args = parser.parse_args(argv)
    from ..config import Config
    try:
        cfg = Config.fromfile(args.config)
        values = config_schedule(cfg, args.epoch_length)  # a bad config is named first
        require_pyplot()
        print(draw_schedule(values, args.out or _default_out(cfg, args.config), title=args.config))
    except ImportError as e:
        raise SystemExit(str(e))
