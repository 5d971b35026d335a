"""Checkpointing in the Runner: what a checkpoint holds, and how loading and resuming use it.

``checkpoint.py`` beside this file is MMEngine's public checkpoint API (over the file I/O of
``minimm/checkpoint.py``); the methods here (MMEngine 0.10's
``Runner.load_or_resume``/``load_checkpoint``/``resume``/``save_checkpoint``) decide what goes into
a checkpoint and what is restored from it:

* ``save_checkpoint``: ``meta`` (counters, config, seed, world size, dataset metainfo...),
  ``state_dict``, ``message_hub``, ``optimizer`` and ``param_schedulers``; hooks may change the
  dict in ``before_save_checkpoint``. A sharded model's (DTensor parameters) is a folder that
  every rank writes its shards into (``minimm/sharded_checkpoint.py``, which also reads it back).
* ``load_checkpoint``: weights only (``load_from``: fine-tuning, testing); hooks see the dict in
  ``after_load_checkpoint`` before the weights are applied.
* ``resume``: weights, counters, MessageHub, optimizer and schedulers, so training continues as if
  it had never stopped.

Left out compared with MMEngine: file backends. Added: ``resume`` may be a checkpoint
path; ``resume=True`` falls back to the newest readable checkpoint when the latest one cannot be
read; ``load_from=dict(path=..., trusted=True)`` loads a file that needs arbitrary unpickling.
"""
import contextlib
import os.path as osp
import pickle
import time
from typing import Optional, Tuple

import torch

from .. import __version__
from ..dist import is_main_process
from ..optim import OptimWrapper
from ..plain_data import to_plain_data
from ..randomness import set_random_seed
from ..sharded_checkpoint import (is_sharded, load_sharded_checkpoint, save_full_checkpoint,
                                  save_sharded_checkpoint, saves_whole_files, shard_whole)
from ..checkpoint import (UntrustedCheckpointError, check_fit, numbered_checkpoints,
                          set_aside)
from ..work_dir import checkpoints_in, claim_for_training, own_path
from .loops import EpochBasedTrainLoop
from .world_size import world_size_change_message
from .checkpoint import (DEFAULT_REVISE_KEYS, CheckpointError, _load_checkpoint,
                         _load_checkpoint_to_model, find_latest_checkpoint, get_state_dict,
                         resume_candidates, save_checkpoint, weights_to_cpu)


def parse_load_from(load_from) -> Tuple[Optional[str], bool]:
    """``(path, trusted)`` from ``load_from``: a path, None, or ``dict(path=..., trusted=...)``."""
    if not isinstance(load_from, dict):
        return load_from, False
    unknown = set(load_from) - {'path', 'trusted'}
    if 'path' not in load_from or unknown:
        raise KeyError(f'load_from as a dict takes `path` and optionally `trusted`, but got keys '
                       f'{sorted(load_from)}')
    return load_from['path'], bool(load_from.get('trusted', False))


class CheckpointMixin:
    """The Runner's checkpoint methods."""

    _loading_for: Optional[str] = None  # 'test', 'val' or 'resume' while loading for it

    @contextlib.contextmanager
    def _loading(self, purpose: str):
        """Load checkpoints, inside the block, to ``purpose`` (``check_fit``'s rules for it)."""
        before, self._loading_for = self._loading_for, purpose
        try:
            yield
        finally:
            self._loading_for = before

    def load_or_resume(self) -> None:
        """Resume (``resume=True``) or load weights (``load_from``), once.

        Only a call that loaded something counts (``resume``/``load_checkpoint`` set
        ``_has_loaded``), as in MMEngine: with ``resume=True`` and no checkpoint yet, a later
        ``val()``/``test()`` on the same runner resumes from the checkpoint training just wrote.
        """
        if self._loading_for is None and not self._resume:  # to train from the start
            self._refuse_other_runs_checkpoints()
        if self._has_loaded:
            return
        if self._resume and self._load_from is None:
            self._auto_resume()
        elif self._resume:
            self.resume(self._load_from, trusted=self._trust_checkpoint)
        elif self._load_from is not None:
            self.load_checkpoint(self._load_from, trusted=self._trust_checkpoint)

    def _refuse_other_runs_checkpoints(self) -> None:
        """A fresh run refuses a work dir holding another run's checkpoints (``work_dir.py``).
        Rank 0 looks, so that every rank agrees even when their folders differ."""
        found = checkpoints_in(self.work_dir)
        if self.distributed:
            from ..dist import broadcast_object_list
            shared = [found]
            broadcast_object_list(shared)
            found = shared[0]
        claim_for_training(self.work_dir, found)

    def _auto_resume(self) -> None:
        """``resume=True``: resume from the checkpoint ``last_checkpoint`` names, else from the
        newest readable ``epoch_N``/``iter_N`` file in the work dir (a missing or emptied record
        must not make the run start over and overwrite them); nothing to resume only when there
        is no checkpoint at all."""
        latest = find_latest_checkpoint(self.work_dir)
        if latest is not None and osp.exists(own_path(latest, self.work_dir)):
            latest = own_path(latest, self.work_dir)  # a copied work dir names the original's
        candidates = resume_candidates(latest) if latest else numbered_checkpoints(self.work_dir)
        if not candidates:  # MMEngine logs "Auto resumed from the latest checkpoint None."
            self.logger.info(f'resume=True but {self.work_dir} has no checkpoint yet: nothing '
                             'to resume, training starts from the beginning.')
            return
        if latest is None:
            self.logger.warning(f'{self.work_dir}/last_checkpoint is missing or empty: resuming '
                                'from the newest readable checkpoint in the work dir instead')
        errors = []
        for path in candidates:
            try:
                self.resume(path, trusted=self._trust_checkpoint)
            except UntrustedCheckpointError:
                raise  # readable with --trust-checkpoint: no reason to go back to an older one
            except CheckpointError as e:  # raised by the read, before anything is restored
                errors.append(str(e) + set_aside(path))
                self.logger.warning(f'{errors[-1]}\nTrying the next older checkpoint.')
                continue
            # Said once the checkpoint is loaded, so it names the one actually resumed from.
            if path == latest:
                self.logger.info(f'Auto resumed from the latest checkpoint {path}.')
            else:
                why = f'the latest, {latest}, could not' if latest else 'no record of the latest'
                self.logger.info(f'Auto resumed from {path}, the newest checkpoint that could be '
                                 f'read ({why}).')
            return
        raise CheckpointError('no readable checkpoint to resume from; tried, newest first:\n'
                              + '\n'.join(errors))

    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys=DEFAULT_REVISE_KEYS, trusted: bool = False) -> dict:
        """Load weights only, from a path or URL. ``after_load_checkpoint`` runs before the
        weights are applied, so hooks may rewrite the checkpoint (EMAHook does).
        ``trusted=True`` allows a file that needs arbitrary unpickling."""
        sharded = is_sharded(self.model)
        if sharded and osp.isdir(filename):  # each rank reads its own shards
            checkpoint = load_sharded_checkpoint(filename, self.model, trusted=trusted)
        else:  # "Loads checkpoint by ... backend" goes to stdout (no logger, as in MMEngine)
            checkpoint = _load_checkpoint(filename, map_location, trusted=trusted)
        if 'state_dict' not in checkpoint and checkpoint and all(
                isinstance(value, torch.Tensor) for value in checkpoint.values()):
            checkpoint = dict(state_dict=checkpoint)  # a bare state dict: hooks read the key
        if sharded and not osp.isdir(filename):  # a whole file, for shards
            checkpoint = shard_whole(checkpoint, self.model, filename, revise_keys,
                                     resuming=self._loading_for == 'resume')
        # Loading to train (load_from) may fine-tune: a head of another shape is then skipped,
        # with a warning, as in MMEngine; to test, validate or resume, every weight must fit.
        # Values are checked before the hooks see the file too (EMAHook loads it into its copy),
        # keys only after: a hook may rename them.
        fit = dict(purpose=self._loading_for or 'load', other_shapes=self._loading_for is None)
        check_fit(self.model, checkpoint.get('state_dict', checkpoint), filename, revise_keys,
                  keys=False, **fit)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        check_fit(self.model, checkpoint.get('state_dict', checkpoint), filename, revise_keys,
                  **fit)
        _load_checkpoint_to_model(self.model, checkpoint, strict, self.logger, revise_keys)
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def resume(self, filename: str, resume_optimizer: bool = True,
               resume_param_scheduler: bool = True, map_location='default',
               trusted: bool = False) -> None:
        """Restore weights, counters, MessageHub, optimizer and schedulers from a checkpoint."""
        if map_location == 'default':
            map_location = 'cuda' if torch.cuda.is_available() else 'cpu'
        with self._loading('resume'):
            checkpoint = self.load_checkpoint(filename, map_location=map_location,
                                              trusted=trusted)
        if 'meta' not in checkpoint:
            raise ValueError(f'cannot resume from {filename!r}: it holds weights only (keys: '
                             f'{sorted(checkpoint)[:4]}), not the counters and optimizer state of '
                             'a run; start from its weights with load_from, or test it')
        meta = checkpoint['meta']
        missing = [f'meta.{key}' for key in ('epoch', 'iter') if key not in meta] + \
            ['message_hub'] * ('message_hub' not in checkpoint)
        if missing:
            raise ValueError(f'cannot resume from {filename!r}: it lacks {", ".join(missing)}, '
                             'which a Runner writes into every checkpoint (is it from another '
                             'tool?); start from its weights with load_from, or test it')
        # The loop's counters are read-only properties over these, as in MMEngine.
        self.train_loop._epoch = meta['epoch']
        self.train_loop._iter = meta['iter']
        resumed_seed = meta.get('seed')
        if resumed_seed is not None and resumed_seed != self._randomness_cfg.get('seed'):
            if self._randomness_cfg.get('seed') is not None:
                self.logger.warning(f'The random seed in the checkpoint ({resumed_seed}) differs '
                                    f'from randomness.seed ({self._randomness_cfg["seed"]})')
            self._randomness_cfg['seed'] = resumed_seed
            self.seed = set_random_seed(**self._randomness_cfg)
        # Compared pickled, as MMEngine (`!=` cannot judge tensors), and as plain data, the form
        # in which the metainfo was saved.
        if pickle.dumps(meta.get('dataset_meta')) != pickle.dumps(
                to_plain_data(getattr(self.train_dataloader.dataset, 'metainfo', None))):
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
            # resume() may come before train() built them (as MMEngine's tests call it).
            self.optim_wrapper = self.build_optim_wrapper(self.optim_wrapper)
            self.param_schedulers = self.build_param_scheduler(self.param_schedulers)
            for scheduler, state in zip(self.param_schedulers, checkpoint['param_schedulers']):
                scheduler.load_state_dict(state)
        self._has_loaded = True
        self.logger.info(f'resumed epoch: {self.epoch}, iter: {self.iter}')
        self._say_world_size_change(meta)
        self._warn_if_finished()

    def _say_world_size_change(self, meta: dict) -> None:
        """One warning when the checkpoint was written by another number of processes."""
        per_epoch = saved_per_epoch = None
        if isinstance(self.train_loop, EpochBasedTrainLoop):
            try:
                per_epoch = len(self.train_dataloader)
            except TypeError:  # an iterable dataset: no known length
                pass
            if meta['epoch'] > 0 and meta['iter'] % meta['epoch'] == 0:
                saved_per_epoch = meta['iter'] // meta['epoch']
        message = world_size_change_message(meta.get('world_size'), self.world_size, per_epoch,
                                            saved_per_epoch, self._samples_per_iter(),
                                            meta.get('samples_per_iter'))
        if message is not None:
            self.logger.warning(message)

    def _samples_per_iter(self) -> Optional[int]:
        """One training iteration's samples over all ranks, when the dataloader says its batch
        size (None for a config not built yet, or a batch sampler)."""
        batch_size = getattr(self.train_dataloader, 'batch_size', None)
        return batch_size * self.world_size if isinstance(batch_size, int) else None

    def _warn_if_finished(self) -> None:
        """Say when a resumed run has nothing left to train, or when a scheduler's ``end`` was
        the shorter run's length (the run that wrote the checkpoint: ``max_epochs``/``max_iters``
        in its MessageHub) while training goes on: its value then stays where it ended."""
        loop = self.train_loop
        if isinstance(loop, EpochBasedTrainLoop):
            unit, done, total = 'epoch', loop.epoch, loop.max_epochs
        elif hasattr(loop, 'max_iters'):
            unit, done, total = 'iter', loop.iter, loop.max_iters
        else:  # a loop of one's own: no known length
            return
        if done >= total:
            self.logger.warning(f'The checkpoint is at {unit} {done} and train_cfg.max_{unit}s is '
                                f'{total}: nothing is left to train; raise max_{unit}s to train '
                                'on.')
            return
        schedulers = self.param_schedulers if isinstance(self.param_schedulers, list) else []
        for scheduler in schedulers:  # (an interrupted run resumed: its schedulers go on)
            step = 'epoch' if getattr(scheduler, 'by_epoch', False) else 'iter'
            end = getattr(scheduler, 'end', None)
            if end == self.message_hub.get_info(f'max_{step}s') and end <= getattr(loop, step):
                self.logger.warning(
                    f'{type(scheduler).__name__} ended at {step} {scheduler.end}, where the run '
                    f'that wrote the checkpoint ended (its `end`, restored from the checkpoint), '
                    f'and training goes on to {unit} {total}: its value stays where it ended. To '
                    'schedule over the longer run, start a new run with load_from instead.')
                return

    def save_checkpoint(self, out_dir: str, filename: str, file_client_args=None,
                        save_optimizer: bool = True, save_param_scheduler: bool = True,
                        meta: Optional[dict] = None, by_epoch: bool = True,
                        backend_args=None) -> None:
        """Write ``out_dir/filename`` (rank 0 only; a sharded model's checkpoint is a folder
        that every rank writes its shards into, see ``minimm/sharded_checkpoint.py``). Hooks see
        the dict in ``before_save_checkpoint`` and may change it before it is written."""
        sharded = is_sharded(self.model)
        if not sharded and not is_main_process():
            return
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
                    minimm_version=__version__, world_size=self.world_size,
                    samples_per_iter=self._samples_per_iter())
        dataset_meta = getattr(self.train_dataloader.dataset, 'metainfo', None)
        if dataset_meta is not None:
            meta['dataset_meta'] = dataset_meta
        checkpoint = {
            'meta': meta,
            'state_dict': weights_to_cpu(get_state_dict(self.model)),
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
        self.call_hook('before_save_checkpoint', checkpoint=checkpoint)
        if not sharded:
            save_checkpoint(checkpoint, osp.join(out_dir, filename))
        elif saves_whole_files(self):  # FSDPStrategy(state_dict_cfg='full'): gathered, one file
            save_full_checkpoint(checkpoint, osp.join(out_dir, filename))
        else:
            save_sharded_checkpoint(checkpoint, osp.join(out_dir, filename))
