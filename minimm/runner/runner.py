"""Runner: builds everything from config, registers the hooks, and runs the loops.

Read this file to learn how MMEngine 0.10's ``Runner`` is put together:

1. **Everything can be a config dict.** Each constructor argument is either a built object or a dict
   that the runner builds through a registry (``MODELS``, ``HOOKS``, ``LOOPS``...). Loops, the optim
   wrapper and the parameter schedulers are built lazily, in ``train()``/``val()``/``test()``.
2. **A run is a sequence of hook stages.** ``train()`` is ``before_run``, load or resume, the train
   loop (which calls the val loop) and ``after_run``; ``val()`` and ``test()`` are the same with one
   evaluation loop.

The Runner's other ideas each have their own file, mixed into the class here:

* ``hook_dispatch.py``: the default hooks, ``register_hook`` (ordering by priority), ``call_hook``;
* ``builders.py``: ``build_*`` (model, dataloaders, loops, optim wrapper, schedulers);
* ``resume.py``: ``save_checkpoint``, ``load_checkpoint``, ``resume``, ``load_or_resume``;
* ``loops.py``: when each stage is called.

``default_scope`` is MMEngine's: it names the package whose child registries every build looks
in first (``registry/default_scope.py``).

Left out compared with MMEngine: ``OptimWrapperDict`` (several optimizers) and ``compile``.
FSDP is ``model_wrapper_cfg=dict(type='MMFullyShardedDataParallel')`` here, or
``FlexibleRunner``'s strategies (``flexible_runner.py``). Different: most attributes that MMEngine
exposes as read-only properties without computing anything (``work_dir``, ``seed``, ``rank``...)
are plain attributes here; ``experiment_name`` and ``log_dir`` keep MMEngine's
``_experiment_name``/``_log_dir`` behind them, because code outside the Runner uses those.
"""
import contextlib
import copy
import logging
import os
import os.path as osp
import time
from typing import Dict, List, Optional, Union

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from .. import __version__
from .. import model as _models  # noqa: F401  (importing it registers DigitsCNN, the EMAs...)
from ..checkpoint import unwrap_model
from ..config import Config
from ..config.top_level_keys import RUNNER_KEYS, warn_unknown_keys
from ..console_details import DETAIL
from ..dist import get_dist_info, master_only
from ..hooks import Hook
from ..logging import Visualizer
from ..optim import OptimWrapper
from ..randomness import set_random_seed
from ..registry import RUNNERS, DefaultScope
from ..work_dir import first_free, hold_work_dir, make_work_dir
from .base_loop import BaseLoop
from .builders import BuildMixin
from .checks import check_options, check_registered_hooks
from .hook_dispatch import HookDispatchMixin
from .resume import CheckpointMixin, parse_load_from

ConfigType = Union[dict, Config]


@RUNNERS.register_module()
class Runner(HookDispatchMixin, BuildMixin, CheckpointMixin):
    """Train, validate and test a model with hooks (MMEngine 0.10's ``Runner``, condensed).

    Args mirror MMEngine's. The main ones:
        model: an ``nn.Module`` (usually a ``BaseModel``) or a MODELS config dict.
        work_dir: where checkpoints, logs and the dumped config go.
        train_dataloader / val_dataloader / test_dataloader: ``DataLoader`` objects or dicts with
            ``dataset``, ``sampler``, ``batch_size``, ``collate_fn``... (``dataset/builder.py``).
        train_cfg: e.g. ``dict(by_epoch=True, max_epochs=4, val_interval=1)`` or a loop ``type``.
        val_cfg / test_cfg: ``dict()`` for the default ValLoop/TestLoop.
        optim_wrapper: e.g. ``dict(optimizer=dict(type='SGD', lr=0.1))``.
        param_scheduler: a scheduler config dict, or a list of them.
        val_evaluator / test_evaluator: metric config(s), e.g. ``dict(type='Accuracy')``.
        default_hooks: overrides of ``DEFAULT_HOOKS`` by key; ``None`` as a value removes one.
        custom_hooks: a list of hook configs or objects.
        load_from: a checkpoint to load weights from (or to resume from, with ``resume=True``);
            ``dict(path=..., trusted=True)`` for a file that needs arbitrary unpickling (only
            for trusted files: unpickling can run code).
        resume: ``True`` to resume from ``load_from`` or else the latest checkpoint in
            ``work_dir``; or a checkpoint path.
        launcher: ``'none'``, ``'pytorch'`` (torchrun), ``'slurm'`` (srun) or ``'mpi'``.
        log_processor / visualizer: LOG_PROCESSORS / VISUALIZERS configs (``type`` optional).
        default_scope: the package whose registries builds use first (``'mmdet'``...).
        auto_scale_lr: ``dict(enable=True, base_batch_size=16)`` scales the lr (``scale_lr``).
        randomness: ``dict(seed=..., deterministic=False, diff_rank_seed=False)``.
        profile_hooks: time every hook call and print a table at the end of the run.
        verbose: print the config dump and the hook table (always in the log file) on the console.
        check_hooks: 'warn', 'error' or 'off' on a hook-order bug (minimm's; ``dataflow.py``).
    """

    def __init__(self, model: Union[nn.Module, dict], work_dir: str,
                 train_dataloader: Union[DataLoader, dict, None] = None,
                 val_dataloader: Union[DataLoader, dict, None] = None,
                 test_dataloader: Union[DataLoader, dict, None] = None,
                 train_cfg: Optional[dict] = None, val_cfg: Optional[dict] = None,
                 test_cfg: Optional[dict] = None, auto_scale_lr: Optional[dict] = None,
                 optim_wrapper: Union[OptimWrapper, dict, None] = None,
                 param_scheduler=None, val_evaluator=None, test_evaluator=None,
                 default_hooks: Optional[Dict[str, Union[Hook, dict, None]]] = None,
                 custom_hooks: Optional[List[Union[Hook, dict]]] = None,
                 data_preprocessor: Optional[dict] = None,
                 load_from: Union[str, dict, None] = None,
                 resume: Union[bool, str] = False, launcher: str = 'none',
                 env_cfg: Optional[dict] = None, log_processor: Optional[dict] = None,
                 log_level: str = 'INFO', visualizer: Union[Visualizer, dict, None] = None,
                 default_scope: Optional[str] = 'mmengine', randomness: Optional[dict] = None,
                 experiment_name: Optional[str] = None, cfg: Optional[ConfigType] = None,
                 profile_hooks: bool = False, verbose: bool = False, check_hooks: str = 'warn'):
        # Several processes: made by rank 0 alone, below.
        self.work_dir = make_work_dir(work_dir, create=launcher == 'none')
        self._details = None if verbose else DETAIL   # how the long startup lines are logged
        self.cfg = (copy.deepcopy(cfg) if isinstance(cfg, Config)
                    else Config(copy.deepcopy(cfg or {})))   # a copy: the caller's stays as it was

        check_options(train_dataloader, val_dataloader, test_dataloader, train_cfg, val_cfg,
                      test_cfg, optim_wrapper, param_scheduler, val_evaluator, test_evaluator,
                      default_hooks, custom_hooks, load_from, check_hooks)  # before any build
        self.auto_scale_lr = auto_scale_lr
        # Built lazily by train()/val()/test(); until then these hold the configs.
        self._train_dataloader = train_dataloader
        self._train_loop = train_cfg
        self.optim_wrapper = optim_wrapper
        self.param_schedulers = param_scheduler
        self._val_dataloader = val_dataloader
        self._val_loop = val_cfg
        self._val_evaluator = val_evaluator
        self._test_dataloader = test_dataloader
        self._test_loop = test_cfg
        self._test_evaluator = test_evaluator

        self.launcher = launcher
        self.setup_env(env_cfg or dict(dist_cfg=dict(backend='nccl')))
        self._randomness_cfg = dict(randomness or dict(seed=None))
        self.seed = set_random_seed(**self._randomness_cfg)
        self.deterministic = bool(self._randomness_cfg.get('deterministic', False))

        if self.rank == 0:  # the one writer makes it and locks it for this run (work_dir.py)
            self._work_dir_lock = hold_work_dir(self, make_work_dir(self.work_dir))
        self.timestamp = stamp = self._shared_timestamp()
        if not self.distributed:  # a run started in the same second has its own logs (_2...)
            self.timestamp = first_free(stamp, lambda t: osp.exists(osp.join(self.work_dir, t)))
        self._log_dir = osp.join(self.work_dir, self.timestamp)
        if self.rank == 0:
            os.makedirs(self._log_dir, exist_ok=True)
        if experiment_name is not None:
            self._experiment_name = f'{experiment_name}_{self.timestamp}'
        elif self.cfg.filename is not None:
            stem = osp.splitext(osp.basename(self.cfg.filename))[0]
            self._experiment_name = f'{stem}_{self.timestamp}'
        else:
            self._experiment_name = self.timestamp
        # From here on every build looks in this package's registries first.
        self.default_scope = None if default_scope is None else DefaultScope.create_instance(
            self._experiment_name, scope_name=default_scope)

        self.log_processor = self.build_log_processor(log_processor or dict())
        self.logger = self.build_logger(log_level=log_level)
        self.message_hub = self.build_message_hub()
        self.visualizer = self.build_visualizer(visualizer)

        if isinstance(resume, str):  # minimm extension: resume='path/to/ckpt.pth'
            load_from, resume = resume, True
        self._load_from, self._trust_checkpoint = parse_load_from(load_from)
        # Whether this run resumes training (EMAHook reads it to decide how to load EMA weights).
        self._resume = bool(resume)
        self._has_loaded = False

        if isinstance(model, dict) and data_preprocessor is not None:
            model = dict(model)
            model.setdefault('data_preprocessor', data_preprocessor)
        self.model = self.wrap_model(self.cfg.get('model_wrapper_cfg'), self.build_model(model))

        self._init_hooks(profile_hooks)
        self.register_hooks(default_hooks, custom_hooks)
        check_registered_hooks(self.hooks, train_cfg, param_scheduler, default_hooks, custom_hooks,
                               val_cfg, check_hooks, self.logger)
        self._log_env()
        self.logger.info(f'Hooks will be executed in the following order:\n{self.get_hooks_info()}',
                         extra=self._details)
        self._dump_config()

    @classmethod
    def from_cfg(cls, cfg: ConfigType) -> 'Runner':
        """Build a runner from a whole config (what ``minimm train CONFIG`` does)."""
        cfg = copy.deepcopy(cfg)
        if 'model' not in cfg or 'work_dir' not in cfg:
            raise KeyError('a runner config needs at least `model` and `work_dir`')
        warn_unknown_keys(cfg, RUNNER_KEYS)
        keys = ('train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg', 'val_cfg',
                'test_cfg', 'auto_scale_lr', 'optim_wrapper', 'param_scheduler', 'val_evaluator',
                'test_evaluator', 'default_hooks', 'custom_hooks', 'data_preprocessor',
                'load_from', 'env_cfg', 'log_processor', 'visualizer', 'experiment_name')
        # minimm's own keys, passed only when set: a Runner subclass written for MMEngine builds.
        extra = {key: cfg[key] for key in ('profile_hooks', 'verbose', 'check_hooks') if key in cfg}
        return cls(model=cfg['model'], work_dir=cfg['work_dir'],
                   resume=cfg.get('resume', False), launcher=cfg.get('launcher', 'none'),
                   log_level=cfg.get('log_level', 'INFO'),
                   default_scope=cfg.get('default_scope', 'mmengine'),
                   randomness=cfg.get('randomness', dict(seed=None)), cfg=cfg,
                   **{key: cfg.get(key) for key in keys}, **extra)

    # ------------------------------------------------------------------ computed attributes
    @property
    def model_name(self) -> str:
        """The class name of the model inside any DDP or MMEngine wrapper."""
        return type(unwrap_model(self.model)).__name__

    # MMEngine's read-only properties over private attributes that code reaches for by name.
    @property
    def experiment_name(self) -> str:
        return self._experiment_name

    @property
    def log_dir(self) -> str:
        """``work_dir/timestamp``: the run's log file, its dumped config and ``vis_data``."""
        return self._log_dir

    # As MMEngine: 0 without train_cfg; otherwise reading a counter builds the train loop,
    # so max_epochs/max_iters are right even in a hook of a val() or test() run.
    @property
    def epoch(self) -> int:
        return 0 if self._train_loop is None else self.train_loop.epoch

    @property
    def iter(self) -> int:
        return 0 if self._train_loop is None else self.train_loop.iter

    @property
    def max_epochs(self) -> int:
        return 0 if self._train_loop is None else self.train_loop.max_epochs

    @property
    def max_iters(self) -> int:
        return 0 if self._train_loop is None else self.train_loop.max_iters

    @property
    def train_loop(self) -> BaseLoop:
        if isinstance(self._train_loop, BaseLoop):  # built: hooks read runner.iter every iteration
            return self._train_loop
        if self._train_loop is None:
            raise RuntimeError('train_loop is not available: the runner has no train_cfg')
        self._train_loop = self.build_train_loop(self._train_loop)
        return self._train_loop

    @property
    def val_loop(self) -> Optional[BaseLoop]:
        if self._val_loop is not None:
            self._val_loop = self.build_val_loop(self._val_loop)
        return self._val_loop

    @property
    def test_loop(self) -> Optional[BaseLoop]:
        if self._test_loop is not None:
            self._test_loop = self.build_test_loop(self._test_loop)
        return self._test_loop

    # MMEngine's shortcuts to a loop's attribute (reading builds the loop): API that hooks read.
    @property
    def train_dataloader(self):
        """The train loop's DataLoader."""
        return self.train_loop.dataloader

    @property
    def val_dataloader(self):
        """The val loop's DataLoader."""
        return self.val_loop.dataloader

    @property
    def test_dataloader(self):
        """The test loop's DataLoader."""
        return self.test_loop.dataloader

    @property
    def val_interval(self):
        """Epochs (or iterations) between validations; ``dynamic_intervals`` may change it."""
        return self.train_loop.val_interval

    @property
    def val_begin(self):
        return self.train_loop.val_begin

    # ------------------------------------------------------------------ environment
    def setup_env(self, env_cfg: dict) -> None:
        """Start the process group for a launcher other than 'none'; ``env_cfg.cudnn_benchmark``.
        (``env_cfg.mp_cfg`` is accepted and not applied: see "Left out" in
        tutorials/engineering.md.)"""
        if self.launcher not in ('none', 'pytorch', 'slurm', 'mpi'):
            raise ValueError(f'launcher={self.launcher!r}: must be none, pytorch, slurm or mpi')
        if env_cfg.get('cudnn_benchmark'):
            torch.backends.cudnn.benchmark = True
        if self.launcher != 'none':
            from ..dist import init_dist, is_distributed
            if not is_distributed():
                init_dist(self.launcher, **env_cfg.get('dist_cfg', {}))
        self.rank, self.world_size = get_dist_info()
        self.distributed = self.world_size > 1 or self.launcher != 'none'

    def _shared_timestamp(self) -> str:
        """One timestamp for all ranks (rank 0's), so they share log and work-dir names."""
        stamp = torch.tensor(time.time(), dtype=torch.float64)
        if self.distributed:
            from ..dist import broadcast
            broadcast(stamp)
        return time.strftime('%Y%m%d_%H%M%S', time.localtime(stamp.item()))

    # ------------------------------------------------------------------ running
    def train(self) -> nn.Module:
        """Build the train loop, optimizer and schedulers, then run ``before_run``, load or
        resume, the train loop (with validation) and ``after_run``."""
        if self._train_loop is None:
            raise RuntimeError('`self._train_loop` should not be None when calling train '
                               'method: the runner has no train_dataloader, train_cfg and '
                               'optim_wrapper')
        with self._closing_on_failure():
            self._train_loop = self.build_train_loop(self._train_loop)
            self.optim_wrapper = self.build_optim_wrapper(self.optim_wrapper)
            self.scale_lr(self.optim_wrapper, self.auto_scale_lr)
            if self.param_schedulers is not None:
                self.param_schedulers = self.build_param_scheduler(self.param_schedulers)
            if self._val_loop is not None:
                self._val_loop = self.build_val_loop(self._val_loop)
            self.call_hook('before_run')
            self._init_model_weights()
            self.load_or_resume()
            self.optim_wrapper.initialize_count_status(self.model, self._train_loop.iter,
                                                       self._train_loop.max_iters)
            model = self._train_loop.run()
            self._after_run()
        return model

    def val(self) -> dict:
        """Run validation alone (``before_run``, load weights, the val loop, ``after_run``)."""
        return self._evaluate('val', self._val_loop)

    def test(self) -> dict:
        """Run testing alone (``before_run``, load weights, the test loop, ``after_run``)."""
        return self._evaluate('test', self._test_loop)

    def _init_model_weights(self) -> None:
        """Call the model's ``init_weights`` if it has one (before any checkpoint is loaded)."""
        model = unwrap_model(self.model)
        if hasattr(model, 'init_weights'):
            model.init_weights()
            if self.distributed:  # rank 0's weights everywhere (a shard stays each rank's own)
                from ..model.fully_sharded import broadcast_whole_tensors
                broadcast_whole_tensors(model.state_dict().values())

    def _evaluate(self, mode: str, loop: Union[BaseLoop, dict, None]) -> dict:
        if loop is None:
            raise RuntimeError(f'`self._{mode}_loop` should not be None when calling {mode} '
                               f'method: the runner has no {mode}_dataloader, {mode}_cfg and '
                               f'{mode}_evaluator')
        with self._closing_on_failure():
            loop = self.val_loop if mode == 'val' else self.test_loop  # built on first read
            self.call_hook('before_run')
            with self._loading(mode):  # a checkpoint to evaluate must fit the model whole
                self.load_or_resume()
            metrics = loop.run()
            self._after_run()
        return metrics

    @contextlib.contextmanager
    def _closing_on_failure(self):
        """Close the log file and the visualizer's backends when a run fails (a run that succeeds
        keeps the log file open, as MMEngine). With ``profile_hooks``, count the device reads."""
        try:
            with self._hook_profiler or contextlib.nullcontext():
                yield
        except BaseException:
            self.visualizer.close()
            for handler in self.logger.handlers:
                if isinstance(handler, logging.FileHandler):
                    handler.close()
            raise

    def _after_run(self) -> None:
        self.call_hook('after_run')
        if self._hook_profiler is not None:
            self.logger.info(f'Time spent in hooks:\n{self._hook_profiler.table()}')

    # ------------------------------------------------------------------ logging helpers
    def _log_env(self) -> None:
        from ..ops import backend_words
        self.logger.info(f'minimm {__version__}, torch {torch.__version__}, '
                         f'rank {self.rank}/{self.world_size}, seed {self.seed}')
        self.logger.info(f'native ops: {backend_words()}')
        if self.cfg:
            self.logger.info(f'Config:\n{self.cfg.pretty_text}', extra=self._details)

    @master_only
    def _dump_config(self) -> None:
        # Dumped even when empty (a Runner built from arguments), as MMEngine does.
        name = osp.basename(self.cfg.filename) if self.cfg.filename else f'{self.timestamp}.py'
        self.cfg.dump(osp.join(self.work_dir, name))

