"""Training from an MMCV 1.x config, the way MMDetection 2.x's ``train_detector`` did.

An MMCV 1.x config describes the run with ``model``, ``data`` (``samples_per_gpu``,
``workers_per_gpu``, ``train``, ``val``), ``optimizer``, ``optimizer_config``, ``lr_config``,
``momentum_config``, ``checkpoint_config``, ``log_config``, ``evaluation``, ``custom_hooks``,
``runner``, ``workflow``, ``resume_from`` and ``load_from``. :func:`train_model` builds the model,
the data loaders and the optimizer (``build_optimizer``: ``optimizer.paramwise_cfg`` and
``optimizer.constructor`` are the constructor's), builds the runner, registers the hooks with
``register_training_hooks`` (plus ``EvalHook``/``DistEvalHook`` at ``'LOW'``), and runs the
workflow. :func:`is_mmcv_config` is how ``minimm train`` tells such a config from an MMEngine one.

Left out compared with MMDetection 2.x: ``auto_scale_lr``, group samplers, ``fp16`` dicts other
than ``fp16=dict(loss_scale=...)``, and per-GPU device placement (one device per process).
"""
import os.path as osp
import time

import torch
from torch.utils.data import DataLoader

from minimm.checkpoint import check_fit, load_checkpoint_file
from minimm.dataset import DefaultSampler
from minimm.dist import get_dist_info, init_dist
from minimm.logging import MMLogger
from minimm.randomness import set_random_seed
from minimm.registry import DATASETS, MODELS
from minimm.work_dir import claim_for_training, lock_work_dir, make_work_dir

from . import digits  # noqa: F401 (registers the MMCV-style digits model and dataset)
from .builder import build_runner
from .checkpoint import load_checkpoint
from .config_checks import check_mmcv_config
from .hooks import DistEvalHook, DistSamplerSeedHook, EMAHook, EvalHook, Fp16OptimizerHook
from .iter_based_runner import IterBasedRunner
from .optimizer import build_optimizer
from .parallel import MMDistributedDataParallel
from .resume_fallback import newest_readable_checkpoint
from .test import single_gpu_test

MMCV_KEYS = ('runner', 'lr_config', 'optimizer_config', 'workflow')


def is_mmcv_config(cfg) -> bool:
    """True for an MMCV 1.x config: it has one of ``runner``, ``lr_config``, ``optimizer_config``
    or ``workflow`` (MMEngine configs use ``train_cfg``/``optim_wrapper``/``param_scheduler``)."""
    return any(key in cfg for key in MMCV_KEYS)


def build_dataloader(dataset, samples_per_gpu: int, workers_per_gpu: int, shuffle: bool,
                     distributed: bool, seed=None) -> DataLoader:
    """One process's loader; distributed runs deal the samples round-robin over the ranks."""
    sampler = DefaultSampler(dataset, shuffle=shuffle, seed=seed) if distributed else None
    return DataLoader(dataset, batch_size=samples_per_gpu, num_workers=workers_per_gpu,
                      sampler=sampler, shuffle=shuffle and not distributed)


def train_model(cfg, distributed: bool = False, validate: bool = True) -> object:
    """Build everything ``cfg`` describes and run its workflow; return the runner."""
    work_dir = make_work_dir(cfg.work_dir, create=get_dist_info()[0] == 0)  # rank 0 writes
    # Taken before the log file is opened, so a second run on this work dir is refused first
    # (the runner takes it too, for its own lifetime).
    release = lock_work_dir(work_dir) if get_dist_info()[0] == 0 else (lambda: None)
    try:
        if not cfg.get('resume_from'):  # a fresh run keeps another run's checkpoints
            claim_for_training(work_dir)
        return _build_and_run(cfg, work_dir, distributed, validate)
    finally:
        release()


def _build_and_run(cfg, work_dir: str, distributed: bool, validate: bool) -> object:
    check_mmcv_config(cfg)  # before anything is built or logged
    timestamp = stamp = time.strftime('%Y%m%d_%H%M%S', time.localtime())
    for number in range(2, 1000):  # a run started in the same second has that log file
        if not osp.exists(osp.join(work_dir, f'{timestamp}.log')):
            break
        timestamp = f'{stamp}_{number}'
    logger = MMLogger.get_instance(f'mmcv_{timestamp}', log_file=osp.join(
        work_dir, f'{timestamp}.log'), log_level=cfg.get('log_level', 'INFO'))
    seed = set_random_seed(cfg.get('seed'))
    model = MODELS.build(cfg.model)
    data = cfg.data
    datasets = [DATASETS.build(data.train)] + ([DATASETS.build(data.val)]
                                               if len(cfg.workflow) == 2 else [])
    loaders = [build_dataloader(ds, data.samples_per_gpu, data.workers_per_gpu, True, distributed,
                                seed) for ds in datasets]
    if distributed:
        model = MMDistributedDataParallel(model.cuda() if torch.cuda.is_available() else model,
                                          device_ids=[torch.cuda.current_device()]
                                          if torch.cuda.is_available() else None)
    elif torch.cuda.is_available():
        model = model.cuda()
    optimizer = build_optimizer(model, cfg.optimizer)
    meta = dict(seed=seed, exp_name=osp.basename(cfg.filename or 'config'))
    runner = build_runner(cfg.runner, default_args=dict(
        model=model, optimizer=optimizer, work_dir=cfg.work_dir, logger=logger, meta=meta))
    runner.timestamp = timestamp  # the .log and .log.json files share one name
    runner.check_hooks = cfg.get('check_hooks', runner.check_hooks)  # minimm's (dataflow.py)
    register_cfg_hooks(runner, cfg, distributed, validate)
    if cfg.get('resume_from'):
        runner.resume(cfg.resume_from, map_location='cpu')
        _warn_if_finished(runner)
        _resume_ema_hooks(runner, cfg.resume_from)
    elif cfg.get('load_from'):
        runner.load_checkpoint(cfg.load_from)
    runner.run(loaders, cfg.workflow)
    return runner


def register_cfg_hooks(runner, cfg, distributed: bool, validate: bool = True) -> None:
    """Register the hooks of an MMCV config on ``runner``, as MMDetection 2.x's train_detector:
    ``register_training_hooks``, then the sampler seed (distributed) and the eval hook (LOW).
    ``minimm hooks CONFIG`` calls it too, so its table is what a run registers."""
    optimizer_config = cfg.get('optimizer_config')
    if cfg.get('fp16') is not None:
        optimizer_config = Fp16OptimizerHook(**(optimizer_config or {}), **cfg.fp16,
                                             distributed=distributed)
    runner.register_training_hooks(cfg.lr_config, optimizer_config, cfg.get('checkpoint_config'),
                                   cfg.get('log_config'), cfg.get('momentum_config'),
                                   custom_hooks_config=cfg.get('custom_hooks'))
    if distributed and not isinstance(runner, IterBasedRunner):
        runner.register_hook(DistSamplerSeedHook())
    data = cfg.data
    if validate and data.get('val') is not None:
        val_loader = build_dataloader(DATASETS.build(data.val), data.get('val_samples_per_gpu', 1),
                                      data.workers_per_gpu, False, distributed)
        eval_cfg = dict(cfg.get('evaluation', {}), by_epoch=not isinstance(runner, IterBasedRunner))
        hook_cls = DistEvalHook if distributed else EvalHook
        runner.register_hook(hook_cls(val_loader, **eval_cfg), priority='LOW')


def _warn_if_finished(runner) -> None:
    """Say when the resumed run has nothing left to train (MMCV ends without a word)."""
    unit = 'iter' if isinstance(runner, IterBasedRunner) else 'epoch'
    done, total = getattr(runner, unit), getattr(runner, f'max_{unit}s')
    if total is not None and done >= total:
        runner.logger.warning(f'The checkpoint is at {unit} {done} and runner.max_{unit}s is '
                              f'{total}: nothing is left to train; raise max_{unit}s to train on.')


def _resume_ema_hooks(runner, checkpoint: str) -> None:
    """Hand the checkpoint to each EMAHook without a ``resume_from`` of its own: the resume
    above dropped its ``ema_*`` buffers (they exist from ``before_run`` on), and the hook resumes
    again once they do, which restores the averages and the trained weights. This is what an
    MMDetection 2.x user does by hand, writing the checkpoint into the hook's ``resume_from``."""
    for hook in runner.hooks:
        if isinstance(hook, EMAHook) and hook.checkpoint is None:
            hook.checkpoint = checkpoint
            runner.logger.info(f'EMAHook (resume_from) loads {checkpoint} again in before_run, '
                               'into the ema_* buffers the load above had no place for')


def train_from_cfg(cfg, launcher: str = 'none', resume=None) -> object:
    """What ``minimm train CONFIG`` does for an MMCV 1.x config. ``resume='auto'`` resumes from
    ``work_dir/latest.pth`` (or the newest readable checkpoint when it cannot be read or is
    gone); a path resumes from that file."""
    if resume == 'auto':
        resume = newest_readable_checkpoint(osp.join(cfg.work_dir, 'latest.pth'))
    if resume is not None:
        cfg['resume_from'] = resume
    if launcher != 'none':
        init_dist(launcher, **cfg.get('dist_params', {}))
    distributed = get_dist_info()[1] > 1 or launcher != 'none'
    return train_model(cfg, distributed=distributed)


def test_from_cfg(cfg, checkpoint: str) -> dict:
    """What ``minimm test CONFIG --checkpoint CKPT`` does for an MMCV 1.x config, as
    MMDetection 2.x's ``tools/test.py`` on one process: the checkpoint's weights, evaluated on
    ``data.test`` (else ``data.val``) with ``single_gpu_test`` and the dataset's ``evaluate``."""
    model = MODELS.build(cfg.model)
    state = load_checkpoint_file(checkpoint, trusted=False)
    check_fit(model, state.get('state_dict', state), checkpoint, [(r'^module\.', '')])
    load_checkpoint(model, checkpoint, map_location='cpu')
    data = cfg.data
    dataset = DATASETS.build(data.get('test', data.val))
    loader = build_dataloader(dataset, data.get('val_samples_per_gpu', 1), data.workers_per_gpu,
                              False, False)
    return dataset.evaluate(single_gpu_test(model, loader))
