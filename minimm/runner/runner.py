"""Runner: builds everything from config, registers the hooks, and runs the loops.

Read this file to learn three things:

1. **Everything can be a config dict.** Each constructor argument is either a built object or a dict
   that the runner builds through a registry (``MODELS``, ``HOOKS``, ``LOOPS``...). Loops, the optim
   wrapper and the parameter schedulers are built lazily, in ``train()``/``val()``/``test()``.
2. **Hooks are ordered by priority.** ``register_hook`` inserts each hook after the last one whose
   priority number is lower or equal, so equal priorities keep registration order, and the default
   hooks (registered first) run before custom hooks of the same priority.
3. **``call_hook`` is the only way hooks run.** The loops call ``runner.call_hook(stage, **kwargs)``;
   the runner calls the hooks that implement that stage, in priority order.

Left out compared with MMEngine: ``auto_scale_lr``, ``default_scope``, model-wrapper configs,
strategies (FSDP/DeepSpeed), ``OptimWrapperDict`` (several optimizers), ``compile`` and
activation checkpointing. Added: ``profile_hooks`` (see ``hook_profiler.py``), and fixes of MMEngine
quirks: priorities are validated when a hook is registered and the caller's hook dict is never
mutated; ``resume`` may be a checkpoint path as well as ``True``.
"""
import copy
import os
import os.path as osp
import pickle
import time
from typing import Callable, Dict, List, Optional, Union

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from .. import __version__
# Importing a package registers its classes by name; the imports below cover hooks, datasets,
# metrics and optimizers, and this one the models (DigitsCNN, the averaged models).
from .. import model as _models  # noqa: F401
from ..config import Config
from ..dataset import build_dataloader
from ..dist import get_dist_info, master_only
from ..evaluator import Evaluator
from ..hooks import Hook
from ..logging import LogProcessor, MessageHub, MMLogger, Visualizer
from ..optim import OptimWrapper, build_optim_wrapper
from ..optim.scheduler import build_param_scheduler
from ..randomness import set_random_seed
from ..registry import HOOKS, LOOPS, MODELS
from .checkpoint import (find_latest_checkpoint, load_checkpoint_file, load_checkpoint_to_model,
                         save_checkpoint, unwrap_model, weights_to_cpu)
from .hook_profiler import HookProfiler
from .loops import BaseLoop, EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop
from .priority import get_priority, priority_name

ConfigType = Union[dict, Config]

DEFAULT_HOOKS = dict(
    runtime_info=dict(type='RuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    logger=dict(type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1),
)


def _all_or_none(names: str, values: list) -> None:
    if not (all(v is None for v in values) or all(v is not None for v in values)):
        given = ', '.join(f'{n}={"set" if v is not None else None}'
                          for n, v in zip(names.split(', '), values))
        raise ValueError(f'{names} should be either all None or not None, but got {given}')


class Runner:
    """Train, validate and test a model with hooks (MMEngine 0.10's ``Runner``, condensed).

    Args mirror MMEngine's. The main ones:
        model: an ``nn.Module`` (usually a ``BaseModel``) or a MODELS config dict.
        work_dir: where checkpoints, logs and the dumped config go.
        train_dataloader / val_dataloader / test_dataloader: ``DataLoader`` objects or dicts with
            ``dataset``, ``sampler``, ``batch_size``, ``collate_fn``... (see ``dataset/builder.py``).
        train_cfg: e.g. ``dict(by_epoch=True, max_epochs=4, val_interval=1)`` or a loop ``type``.
        val_cfg / test_cfg: ``dict()`` for the default ValLoop/TestLoop.
        optim_wrapper: e.g. ``dict(optimizer=dict(type='SGD', lr=0.1))``.
        param_scheduler: a scheduler config dict, or a list of them.
        val_evaluator / test_evaluator: metric config(s), e.g. ``dict(type='Accuracy')``.
        default_hooks: overrides of ``DEFAULT_HOOKS`` by key; ``None`` as a value removes one.
        custom_hooks: a list of hook configs or objects.
        load_from: a checkpoint to load weights from (or to resume from, with ``resume=True``).
        resume: ``True`` to resume from ``load_from`` or else the latest checkpoint in
            ``work_dir``; or a checkpoint path.
        launcher: ``'none'`` or ``'pytorch'`` (under ``torchrun``).
        randomness: ``dict(seed=..., deterministic=False, diff_rank_seed=False)``.
        profile_hooks: time every hook call and print a table at the end of the run.
    """

    def __init__(self, model: Union[nn.Module, dict], work_dir: str,
                 train_dataloader: Union[DataLoader, dict, None] = None,
                 val_dataloader: Union[DataLoader, dict, None] = None,
                 test_dataloader: Union[DataLoader, dict, None] = None,
                 train_cfg: Optional[dict] = None, val_cfg: Optional[dict] = None,
                 test_cfg: Optional[dict] = None,
                 optim_wrapper: Union[OptimWrapper, dict, None] = None,
                 param_scheduler=None, val_evaluator=None, test_evaluator=None,
                 default_hooks: Optional[Dict[str, Union[Hook, dict, None]]] = None,
                 custom_hooks: Optional[List[Union[Hook, dict]]] = None,
                 data_preprocessor: Optional[dict] = None, load_from: Optional[str] = None,
                 resume: Union[bool, str] = False, launcher: str = 'none',
                 env_cfg: Optional[dict] = None, log_processor: Optional[dict] = None,
                 log_level: str = 'INFO', visualizer: Union[Visualizer, dict, None] = None,
                 randomness: Optional[dict] = None, experiment_name: Optional[str] = None,
                 cfg: Optional[ConfigType] = None, profile_hooks: bool = False):
        self._work_dir = osp.abspath(work_dir)
        os.makedirs(self._work_dir, exist_ok=True)
        if cfg is None:
            self.cfg = Config(dict())
        elif isinstance(cfg, Config):
            self.cfg = copy.deepcopy(cfg)
        else:
            self.cfg = Config(copy.deepcopy(cfg))

        _all_or_none('train_dataloader, train_cfg, optim_wrapper',
                     [train_dataloader, train_cfg, optim_wrapper])
        _all_or_none('val_dataloader, val_cfg, val_evaluator',
                     [val_dataloader, val_cfg, val_evaluator])
        _all_or_none('test_dataloader, test_cfg, test_evaluator',
                     [test_dataloader, test_cfg, test_evaluator])
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

        if isinstance(resume, str):  # minimm extension: resume='path/to/ckpt.pth'
            load_from, resume = resume, True
        self._load_from = load_from
        self._resume = bool(resume)
        self._has_loaded = False

        self._launcher = launcher
        self._setup_env(env_cfg or dict(dist_cfg=dict(backend='nccl')))
        self._randomness_cfg = dict(randomness or dict(seed=None))
        self._seed = set_random_seed(**self._randomness_cfg)

        self._timestamp = self._shared_timestamp()
        if experiment_name is not None:
            self._experiment_name = f'{experiment_name}_{self._timestamp}'
        elif self.cfg.filename is not None:
            stem = osp.splitext(osp.basename(self.cfg.filename))[0]
            self._experiment_name = f'{stem}_{self._timestamp}'
        else:
            self._experiment_name = self._timestamp
        self._log_dir = osp.join(self._work_dir, self._timestamp)
        os.makedirs(self._log_dir, exist_ok=True)

        # Fresh instances even if an earlier runner used the same name (MMEngine would share them).
        self.logger = MMLogger.create_instance(self._experiment_name, log_level=log_level,
                                               log_file=osp.join(self._log_dir,
                                                                 f'{self._timestamp}.log'),
                                               file_mode='a')
        self.message_hub = MessageHub.create_instance(self._experiment_name)
        self.visualizer = self._build_visualizer(visualizer)
        self.log_processor = (log_processor if isinstance(log_processor, LogProcessor) else
                              LogProcessor(**(log_processor or {})))

        self.model = self._wrap_model(self._build_model(model, data_preprocessor))

        self._hooks: List[Hook] = []
        self._dispatch: Dict[str, List[Callable]] = {}
        self._hook_profiler = HookProfiler() if profile_hooks else None
        self.register_hooks(default_hooks, custom_hooks)
        self._log_env()
        self.logger.info(f'Hooks will be executed in the following order:\n{self.get_hooks_info()}')
        self._dump_config()

    @classmethod
    def from_cfg(cls, cfg: ConfigType) -> 'Runner':
        """Build a runner from a whole config (what ``minimm train CONFIG`` does)."""
        cfg = copy.deepcopy(cfg)
        if 'model' not in cfg or 'work_dir' not in cfg:
            raise KeyError('a runner config needs at least `model` and `work_dir`')
        keys = ('train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg', 'val_cfg',
                'test_cfg', 'optim_wrapper', 'param_scheduler', 'val_evaluator', 'test_evaluator',
                'default_hooks', 'custom_hooks', 'data_preprocessor', 'load_from', 'env_cfg',
                'log_processor', 'visualizer', 'randomness', 'experiment_name')
        return cls(model=cfg['model'], work_dir=cfg['work_dir'],
                   resume=cfg.get('resume', False), launcher=cfg.get('launcher', 'none'),
                   log_level=cfg.get('log_level', 'INFO'),
                   profile_hooks=cfg.get('profile_hooks', False), cfg=cfg,
                   **{key: cfg.get(key) for key in keys})

    # ------------------------------------------------------------------ properties
    @property
    def work_dir(self) -> str:
        return self._work_dir

    @property
    def log_dir(self) -> str:
        return self._log_dir

    @property
    def timestamp(self) -> str:
        return self._timestamp

    @property
    def experiment_name(self) -> str:
        return self._experiment_name

    @property
    def model_name(self) -> str:
        return type(unwrap_model(self.model)).__name__

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def launcher(self) -> str:
        return self._launcher

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def distributed(self) -> bool:
        return self._distributed

    @property
    def hooks(self) -> List[Hook]:
        """The registered hooks in call order (register new ones with ``register_hook``)."""
        return self._hooks

    def _train_loop_attr(self, name: str) -> int:
        # As MMEngine: 0 without train_cfg; otherwise reading a counter builds the train loop,
        # so max_epochs/max_iters are right even in a hook of a val() or test() run.
        return 0 if self._train_loop is None else getattr(self.train_loop, name)

    @property
    def epoch(self) -> int:
        return self._train_loop_attr('epoch')

    @property
    def iter(self) -> int:
        return self._train_loop_attr('iter')

    @property
    def max_epochs(self) -> int:
        return self._train_loop_attr('max_epochs')

    @property
    def max_iters(self) -> int:
        return self._train_loop_attr('max_iters')

    @property
    def train_loop(self) -> BaseLoop:
        if self._train_loop is None:
            raise RuntimeError('train_loop is not available: the runner has no train_cfg')
        self._train_loop = self.build_train_loop(self._train_loop)
        return self._train_loop

    @property
    def val_loop(self) -> Optional[BaseLoop]:
        if self._val_loop is not None:
            self._val_loop = self._build_eval_loop(self._val_loop, 'val')
        return self._val_loop

    @property
    def test_loop(self) -> Optional[BaseLoop]:
        if self._test_loop is not None:
            self._test_loop = self._build_eval_loop(self._test_loop, 'test')
        return self._test_loop

    @property
    def train_dataloader(self):
        return self.train_loop.dataloader

    @property
    def val_dataloader(self):
        return self.val_loop.dataloader

    @property
    def test_dataloader(self):
        return self.test_loop.dataloader

    @property
    def val_interval(self) -> int:
        return self.train_loop.val_interval

    @property
    def val_begin(self) -> int:
        return self.train_loop.val_begin

    # ------------------------------------------------------------------ building
    def _setup_env(self, env_cfg: dict) -> None:
        if self._launcher not in ('none', 'pytorch'):
            raise ValueError(f"launcher must be 'none' or 'pytorch', but got {self._launcher!r}")
        if self._launcher != 'none':
            from ..dist import init_dist, is_distributed
            if not is_distributed():
                init_dist(self._launcher, **env_cfg.get('dist_cfg', {}))
        self._rank, self._world_size = get_dist_info()
        self._distributed = self._world_size > 1 or self._launcher != 'none'

    def _shared_timestamp(self) -> str:
        """One timestamp for all ranks (rank 0's), so they share log and work-dir names."""
        stamp = torch.tensor(time.time(), dtype=torch.float64)
        if self._distributed:
            from ..dist import broadcast
            broadcast(stamp)
        return time.strftime('%Y%m%d_%H%M%S', time.localtime(stamp.item()))

    def _build_visualizer(self, visualizer) -> Visualizer:
        if isinstance(visualizer, Visualizer):
            return visualizer
        cfg = dict(visualizer or dict(vis_backends=[dict(type='LocalVisBackend')]))
        cfg.pop('type', None)
        cfg.setdefault('name', self._experiment_name)
        cfg.setdefault('save_dir', self._log_dir)
        return Visualizer.create_instance(**cfg)

    def _build_model(self, model, data_preprocessor: Optional[dict]) -> nn.Module:
        if isinstance(model, nn.Module):
            return model
        if not isinstance(model, dict):
            raise TypeError(f'model must be an nn.Module or a config dict, but got {type(model)}')
        model = dict(model)
        if data_preprocessor is not None:
            model.setdefault('data_preprocessor', data_preprocessor)
        return MODELS.build(model)

    def _wrap_model(self, model: nn.Module) -> nn.Module:
        """Move the model to the device; wrap it for DistributedDataParallel when distributed."""
        device = torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device('cpu')
        model = model.to(device)
        if not self._distributed:
            return model
        from ..model.wrappers import MMDistributedDataParallel
        device_ids = [device.index] if device.type == 'cuda' else None
        return MMDistributedDataParallel(module=model, device_ids=device_ids,
                                         broadcast_buffers=False)

    def build_dataloader(self, dataloader, seed: Optional[int] = None,
                         diff_rank_seed: bool = False) -> DataLoader:
        return build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)

    def build_evaluator(self, evaluator) -> Evaluator:
        return evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)

    def build_optim_wrapper(self, optim_wrapper) -> OptimWrapper:
        return build_optim_wrapper(unwrap_model(self.model), optim_wrapper)

    def build_param_scheduler(self, scheduler) -> list:
        """Build a scheduler config (or a list of them) against ``self.optim_wrapper``.

        As MMEngine, a scheduler without ``end`` runs to the end of training (``max_epochs`` or
        ``max_iters`` by its ``by_epoch``), and ``convert_to_iter_based`` uses the train
        dataloader's length as the epoch length.
        """
        if isinstance(scheduler, dict):
            raise TypeError('param_scheduler must be a list of schedulers or configs here')
        built = []
        for item in scheduler:
            if not isinstance(item, dict):
                built.append(item)
                continue
            item = dict(item)
            if isinstance(self._train_loop, BaseLoop):
                item.setdefault('end', self.max_epochs if item.get('by_epoch', True)
                                else self.max_iters)
            built.append(build_param_scheduler(item, self.optim_wrapper,
                                               epoch_length=len(self.train_dataloader)))
        return built

    def build_train_loop(self, loop) -> BaseLoop:
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'train_cfg must be a dict or a loop, but got {type(loop)}')
        cfg = dict(loop)
        if 'type' in cfg and 'by_epoch' in cfg:
            raise RuntimeError('only one of `type` or `by_epoch` can be set in train_cfg')
        if 'type' in cfg:
            return LOOPS.build(cfg, default_args=dict(runner=self,
                                                   dataloader=self._train_dataloader))
        if 'by_epoch' not in cfg:
            raise KeyError('train_cfg needs `by_epoch` (True: max_epochs, False: max_iters) '
                           'or a loop `type`')
        loop_cls = EpochBasedTrainLoop if cfg.pop('by_epoch') else IterBasedTrainLoop
        return loop_cls(runner=self, dataloader=self._train_dataloader, **cfg)

    def _build_eval_loop(self, loop, mode: str) -> BaseLoop:
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'{mode}_cfg must be a dict or a loop, but got {type(loop)}')
        default_args = dict(runner=self, dataloader=getattr(self, f'_{mode}_dataloader'),
                            evaluator=getattr(self, f'_{mode}_evaluator'))
        cfg = dict(loop)
        if 'type' in cfg:
            return LOOPS.build(cfg, default_args=default_args)
        return (ValLoop if mode == 'val' else TestLoop)(**cfg, **default_args)

    # ------------------------------------------------------------------ hooks
    def register_hook(self, hook: Union[Hook, dict],
                      priority: Union[int, str, None] = None) -> None:
        """Insert ``hook`` by priority: after every hook whose priority number is <= its own.

        The priority comes from the ``priority`` argument, else ``hook['priority']`` of a config,
        else the hook's ``priority`` attribute; it is validated now, before the hook is built.
        """
        if not isinstance(hook, (Hook, dict)):
            raise TypeError(f'hook should be an instance of Hook or dict, but got {hook}')
        if isinstance(hook, dict):
            cfg = dict(hook)  # never mutate the caller's dict (MMEngine pops 'priority' from it)
            cfg_priority = cfg.pop('priority', None)
            if priority is None:
                priority = cfg_priority
            if priority is not None:
                get_priority(priority)
            hook_obj = HOOKS.build(cfg)
            if not isinstance(hook_obj, Hook):
                raise TypeError(f'{cfg["type"]} built a {type(hook_obj).__name__}, not a Hook')
        else:
            hook_obj = hook
        if priority is not None:
            hook_obj.priority = priority
        value = get_priority(hook_obj.priority)
        index = 0
        for i in range(len(self._hooks) - 1, -1, -1):
            if value >= get_priority(self._hooks[i].priority):
                index = i + 1
                break
        self._hooks.insert(index, hook_obj)
        self._dispatch.clear()

    def register_default_hooks(self, hooks: Optional[dict] = None) -> None:
        """Register ``DEFAULT_HOOKS`` updated by ``hooks`` (a ``None`` value removes a default)."""
        merged = dict(DEFAULT_HOOKS)
        for name, hook in (hooks or {}).items():
            if hook is not None and not isinstance(hook, (dict, Hook)):
                raise TypeError(f'default_hooks[{name!r}] must be a dict, a Hook or None, '
                                f'but got {type(hook)}')
            merged[name] = hook
        for hook in merged.values():
            if hook is not None:
                self.register_hook(hook)

    def register_custom_hooks(self, hooks: List[Union[Hook, dict]]) -> None:
        for hook in hooks:
            self.register_hook(hook)

    def register_hooks(self, default_hooks=None, custom_hooks=None) -> None:
        self.register_default_hooks(default_hooks)
        if custom_hooks is not None:
            self.register_custom_hooks(custom_hooks)

    def _hooks_for(self, fn_name: str) -> List[Callable]:
        """The bound methods to call for ``fn_name``, computed once per stage.

        For the standard stages only hooks that override the stage (directly or through a funnel
        such as ``_after_iter``) are listed, so a stage no hook uses costs one dict lookup. Any
        other name is dispatched as MMEngine does, to every hook that has such an attribute.
        """
        methods = self._dispatch.get(fn_name)
        if methods is None:
            methods = [(hook, getattr(hook, fn_name)) for hook in self._hooks
                       if (fn_name in hook.get_triggered_stages() or fn_name in vars(hook))
                       or (fn_name not in Hook.stages and hasattr(hook, fn_name))]
            self._dispatch[fn_name] = methods
        return methods

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """Call stage ``fn_name`` on every hook that implements it, in priority order."""
        for hook, method in self._hooks_for(fn_name):
            try:
                if self._hook_profiler is None:
                    method(self, **kwargs)
                else:
                    self._hook_profiler.call(hook, fn_name, method, self, **kwargs)
            except TypeError as e:
                raise TypeError(f'{e} in {hook}') from e

    def get_hooks_info(self) -> str:
        """Per stage, the hooks that run in it: ``(PRIORITY    ) ClassName`` lines."""
        stage_hooks: Dict[str, List[str]] = {stage: [] for stage in Hook.stages}
        for hook in self._hooks:
            line = f'({priority_name(hook.priority):<12}) {type(hook).__name__:<35}'
            for stage in hook.get_triggered_stages():
                stage_hooks[stage].append(line)
        return '\n'.join(f'{stage}:\n' + '\n'.join(lines) + '\n -------------------- '
                         for stage, lines in stage_hooks.items() if lines)

    # ------------------------------------------------------------------ running
    def train(self) -> nn.Module:
        """Build the train loop, optimizer and schedulers, then run ``before_run``, load or
        resume, the train loop (with validation) and ``after_run``."""
        if self._train_loop is None:
            raise RuntimeError('cannot train: the runner has no train_dataloader, train_cfg and '
                               'optim_wrapper')
        self._train_loop = self.build_train_loop(self._train_loop)
        self.optim_wrapper = self.build_optim_wrapper(self.optim_wrapper)
        if self.param_schedulers is not None:
            self.param_schedulers = self.build_param_scheduler(
                self.param_schedulers if isinstance(self.param_schedulers, (list, tuple))
                else [self.param_schedulers])
        if self._val_loop is not None:
            self._val_loop = self._build_eval_loop(self._val_loop, 'val')
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
        return self._evaluate('val')

    def test(self) -> dict:
        """Run testing alone (``before_run``, load weights, the test loop, ``after_run``)."""
        return self._evaluate('test')

    def _init_model_weights(self) -> None:
        """Call the model's ``init_weights`` if it has one (before any checkpoint is loaded)."""
        model = unwrap_model(self.model)
        if hasattr(model, 'init_weights'):
            model.init_weights()
            if self._distributed:
                from ..dist import broadcast
                for tensor in model.state_dict().values():
                    broadcast(tensor)

    def _evaluate(self, mode: str) -> dict:
        loop = getattr(self, f'_{mode}_loop')
        if loop is None:
            raise RuntimeError(f'cannot {mode}: the runner has no {mode}_dataloader, {mode}_cfg '
                               f'and {mode}_evaluator')
        setattr(self, f'_{mode}_loop', self._build_eval_loop(loop, mode))
        self.call_hook('before_run')
        self.load_or_resume()
        metrics = getattr(self, f'_{mode}_loop').run()
        self._after_run()
        return metrics

    def _after_run(self) -> None:
        self.call_hook('after_run')
        if self._hook_profiler is not None:
            self.logger.info(f'Time spent in hooks:\n{self._hook_profiler.table()}')

    # ------------------------------------------------------------------ checkpoints
    def load_or_resume(self) -> None:
        """Resume (``resume=True``) or load weights (``load_from``), once.

        Only a call that loaded something counts (``resume``/``load_checkpoint`` set
        ``_has_loaded``), as in MMEngine: with ``resume=True`` and no checkpoint yet, a later
        ``val()``/``test()`` on the same runner resumes from the checkpoint training just wrote.
        """
        if self._has_loaded:
            return
        resume_from = None
        if self._resume and self._load_from is None:
            resume_from = find_latest_checkpoint(self.work_dir)
            self.logger.info(f'Auto resumed from the latest checkpoint {resume_from}.')
        elif self._resume:
            resume_from = self._load_from
        if resume_from is not None:
            self.resume(resume_from)
        elif self._load_from is not None:
            self.load_checkpoint(self._load_from)

    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys=((r'^module\.', ''), )) -> dict:
        """Load weights only. ``after_load_checkpoint`` runs before the weights are applied, so
        hooks may rewrite the checkpoint (EMAHook does)."""
        checkpoint = load_checkpoint_file(filename, map_location=map_location)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        load_checkpoint_to_model(self.model, checkpoint, strict, revise_keys=revise_keys,
                                 logger=self.logger)
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def resume(self, filename: str, resume_optimizer: bool = True,
               resume_param_scheduler: bool = True, map_location='default') -> None:
        """Restore weights, counters, MessageHub, optimizer and schedulers from a checkpoint."""
        if map_location == 'default':
            map_location = 'cuda' if torch.cuda.is_available() else 'cpu'
        checkpoint = self.load_checkpoint(filename, map_location=map_location)
        meta = checkpoint['meta']
        self.train_loop._epoch = meta['epoch']
        self.train_loop._iter = meta['iter']
        resumed_seed = meta.get('seed')
        if resumed_seed is not None and resumed_seed != self._randomness_cfg.get('seed'):
            if self._randomness_cfg.get('seed') is not None:
                self.logger.warning(f'The random seed in the checkpoint ({resumed_seed}) differs '
                                    f'from randomness.seed ({self._randomness_cfg["seed"]})')
            self._randomness_cfg['seed'] = resumed_seed
            self._seed = set_random_seed(**self._randomness_cfg)
        # Compared pickled, as MMEngine: metainfo may hold arrays, which `!=` cannot judge.
        if pickle.dumps(meta.get('dataset_meta')) != pickle.dumps(
                getattr(self.train_dataloader.dataset, 'metainfo', None)):
            self.logger.warning('The dataset metainfo from the resumed checkpoint is different '
                                'from the current training dataset, please check the '
                                'correctness of the checkpoint or the training dataset.')
        self.message_hub.load_state_dict(checkpoint['message_hub'])
        if 'optimizer' in checkpoint and resume_optimizer:
            self.optim_wrapper = self.build_optim_wrapper(self.optim_wrapper)
            self.optim_wrapper.load_state_dict(checkpoint['optimizer'])
        if resume_param_scheduler and self.param_schedulers is None:
            self.logger.warning('`resume_param_scheduler` is True but there are no parameter '
                                'schedulers, so none are resumed')
        if resume_param_scheduler and 'param_schedulers' in checkpoint \
                and self.param_schedulers is not None:
            for scheduler, state in zip(self.param_schedulers, checkpoint['param_schedulers']):
                scheduler.load_state_dict(state)
        self._has_loaded = True
        self.logger.info(f'resumed epoch: {self.epoch}, iter: {self.iter}')

    @master_only
    def save_checkpoint(self, out_dir: str, filename: str, file_client_args=None,
                        save_optimizer: bool = True, save_param_scheduler: bool = True,
                        meta: Optional[dict] = None, by_epoch: bool = True,
                        backend_args=None) -> None:
        """Write ``out_dir/filename`` (rank 0 only). Hooks see the dict in
        ``before_save_checkpoint`` and may change it before it is written."""
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        meta = dict(meta)
        if by_epoch:
            # Called from after_train_epoch, before the loop increments its epoch counter.
            meta.setdefault('epoch', self.epoch + 1)
            meta.setdefault('iter', self.iter)
        else:
            meta.setdefault('epoch', self.epoch)
            meta.setdefault('iter', self.iter + 1)
        meta.update(cfg=self.cfg.pretty_text, seed=self.seed,
                    experiment_name=self.experiment_name,
                    time=time.strftime('%Y%m%d_%H%M%S', time.localtime()),
                    minimm_version=__version__)
        dataset_meta = getattr(self.train_dataloader.dataset, 'metainfo', None)
        if dataset_meta is not None:
            meta['dataset_meta'] = dataset_meta
        checkpoint = {
            'meta': meta,
            'state_dict': weights_to_cpu(unwrap_model(self.model).state_dict()),
            'message_hub': self.message_hub.state_dict(),
        }
        if save_optimizer:
            if not isinstance(self.optim_wrapper, OptimWrapper):
                raise TypeError('save_optimizer is True but the optim_wrapper is not built')
            checkpoint['optimizer'] = self.optim_wrapper.state_dict()
        if save_param_scheduler and self.param_schedulers is None:
            self.logger.warning('`save_param_scheduler` is True but there are no parameter '
                                'schedulers, so none are saved')
            save_param_scheduler = False
        if save_param_scheduler:
            checkpoint['param_schedulers'] = [s.state_dict() for s in self.param_schedulers]
        # Where the file goes, for hooks that write a companion file (EMAHook's EMA-only copy).
        self._checkpoint_path_being_saved = osp.join(out_dir, filename)
        self.call_hook('before_save_checkpoint', checkpoint=checkpoint)
        save_checkpoint(checkpoint, self._checkpoint_path_being_saved)

    # ------------------------------------------------------------------ logging helpers
    def _log_env(self) -> None:
        from ..ops import backend_info
        self.logger.info(f'minimm {__version__}, torch {torch.__version__}, '
                         f'rank {self.rank}/{self.world_size}, seed {self.seed}')
        self.logger.info(f'native ops: {backend_info()}')
        if self.cfg:
            self.logger.info(f'Config:\n{self.cfg.pretty_text}')

    @master_only
    def _dump_config(self) -> None:
        # Dumped even when empty (a Runner built from arguments), as MMEngine does.
        name = osp.basename(self.cfg.filename) if self.cfg.filename else f'{self.timestamp}.py'
        self.cfg.dump(osp.join(self.work_dir, name))

