"""CheckpointHook: save checkpoints periodically, keep the newest N, and keep the best one.

This hook decides *when* to save and *which files to keep*; ``Runner.save_checkpoint`` decides
what goes into a file. Its state lives in the MessageHub (``last_ckpt``, ``keep_ckpt_ids``,
``best_score``, ``best_ckpt``), which is saved in every checkpoint — that is how a resumed run
still knows which old files to delete and which score to beat.

* Periodic: after every ``interval`` epochs (``by_epoch=True``) or iterations, counted from
  ``save_begin``, and at the end of training when ``save_last``. Files are ``epoch_{N}.pth`` or
  ``iter_{N}.pth`` (``filename_tmpl``) in ``out_dir`` (default: the work dir; when set, the work
  dir's name is appended), and ``work_dir/last_checkpoint`` names the newest one. A sharded
  model's checkpoints are folders of those names (``minimm/sharded_checkpoint.py``).
* ``max_keep_ckpts``: when a new periodic file exceeds the limit, the oldest is deleted, after the
  new one and ``last_checkpoint`` are written (MMEngine deletes first, so a failed save could
  leave no checkpoint at all); a folder of that name is deleted only if it is a sharded
  checkpoint (MMEngine deletes any folder there).
* ``save_best``: after each validation, a metric (``'auto'`` = the first one; a list for several)
  better than the best so far — ``rule`` 'greater' or 'less', inferred from the key's name when
  not given — is saved as ``best_{key}_{epoch_N}.pth`` (no optimizer state), replacing the
  previous best.
  The latest periodic checkpoint is then re-saved so the new best score is recorded in it.
* ``published_keys``: after training, the last and the best checkpoints are re-saved with only
  these top-level keys (e.g. ``['meta', 'state_dict']``, to share a model without optimizer
  state) as ``{name}-{first 8 hex digits of its sha256}.pth``.
* ``agreement_check`` (a minimm addition): on several processes, before each periodic save, the
  tensors every rank should hold alike are compared across ranks in one collective
  (``agreement_check.py``); a mismatch is a warning naming them and the ranks (``'warn'``, the
  default), an error (``'error'``), or not looked for (``'off'``).

Left out compared with MMEngine: file backends; and unknown keyword arguments are rejected when
the hook is built (MMEngine forwards them to ``save_checkpoint``, so a typo only fails at the first
save).
"""
import hashlib
import math
import os
import os.path as osp
import pickle
import shutil
from collections import deque
from typing import Dict, List, Optional, Sequence, Union

from ..dist import is_main_process, master_only
from ..registry import HOOKS
from ..checkpoint import save_checkpoint, write_last_checkpoint
from ..sharded_checkpoint import is_sharded_checkpoint, read_checkpoint
from ..work_dir import own_path
from .agreement_check import AGREEMENT_CHECKS, check_agreement
from .hook import Hook
from .metric_rules import (DEFAULT_GREATER_KEYS, DEFAULT_LESS_KEYS, INIT_VALUE_MAP, RULE_MAP,
                           infer_rule)


def _key_list(keys, name: str, default: Optional[List[str]] = None) -> Optional[List[str]]:
    """``default`` when ``keys`` is None, else ``keys`` (a str or a sequence of distinct str) as
    a list."""
    if keys is None:
        return default
    keys = [keys] if isinstance(keys, str) else keys
    if not (isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys)):
        raise TypeError(f'{name} should be None, a str or a sequence of str, but got {keys!r}')
    if len(set(keys)) != len(keys):
        raise ValueError(f'duplicate keys in {name}: {keys}')
    return list(keys)


def _remove(path: str) -> bool:
    """Delete the checkpoint at ``path``: a file, or a sharded checkpoint's folder (a folder of
    another kind under that name is not ours, and is left alone)."""
    if osp.isfile(path):
        os.remove(path)
        return True
    if is_sharded_checkpoint(path) and not osp.islink(path):
        shutil.rmtree(path)
        return True
    return False


@HOOKS.register_module()
class CheckpointHook(Hook):
    """Save checkpoints; see the module docstring. Arguments and defaults are MMEngine's."""

    priority = 'VERY_LOW'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_train': 'message_hub -> message_hub:last_ckpt message_hub:best_ckpt*',
        'after_train_iter after_train_epoch': 'model ema optimizer message_hub -> '
                                              'file:*.pth(rank0) message_hub:last_ckpt',
        'after_val_epoch': ('metrics:{save_best} model ema message_hub -> file:best_*.pth(rank0) '
                            'message_hub:best_*'),
        'after_train': 'file:*.pth -> file:*-*.pth(rank0)',  # published_keys
    }
    rule_map = RULE_MAP
    init_value_map = INIT_VALUE_MAP
    _default_greater_keys = DEFAULT_GREATER_KEYS
    _default_less_keys = DEFAULT_LESS_KEYS
    checked_in_init = ('interval',)  # 0: the config check asks this constructor (values.py)

    def __init__(self, interval: int = -1, by_epoch: bool = True, save_optimizer: bool = True,
                 save_param_scheduler: bool = True, out_dir: Optional[str] = None,
                 max_keep_ckpts: int = -1, save_last: bool = True,
                 save_best: Union[str, List[str], None] = None,
                 rule: Union[str, List[str], None] = None,
                 greater_keys: Optional[Sequence[str]] = None,
                 less_keys: Optional[Sequence[str]] = None, file_client_args=None,
                 filename_tmpl: Optional[str] = None, backend_args=None, published_keys=None,
                 save_begin: int = 0, agreement_check: str = 'warn'):
        if file_client_args is not None or backend_args is not None:
            raise ValueError('file backends are not supported: checkpoints go to local folders')
        self.published_keys = _key_list(published_keys, 'published_keys')
        if agreement_check not in AGREEMENT_CHECKS:
            raise ValueError(f'CheckpointHook: agreement_check={agreement_check!r} must be one of '
                             f'{AGREEMENT_CHECKS}')
        self.agreement_check = agreement_check
        if interval == 0:  # MMEngine takes it and never saves a periodic checkpoint
            raise ValueError('interval=0: must not be 0 (an interval of 0 would mean never; -1 '
                             'saves no periodic checkpoint)')
        self.interval = interval
        self.by_epoch = by_epoch
        self.save_optimizer = save_optimizer
        self.save_param_scheduler = save_param_scheduler
        self.out_dir = out_dir
        self.max_keep_ckpts = max_keep_ckpts
        self.save_last = save_last
        if save_begin < 0:
            raise ValueError(f'save_begin should not be less than 0, but got {save_begin}')
        self.save_begin = save_begin
        self.filename_tmpl = filename_tmpl or ('epoch_{}.pth' if by_epoch else 'iter_{}.pth')

        self.save_best = _key_list(save_best, 'save_best')
        if self.save_best is not None and 'auto' in self.save_best and len(self.save_best) != 1:
            raise ValueError('"auto" must be the only key in save_best')

        rules = rule if isinstance(rule, (list, tuple)) else [rule]
        if self.save_best is not None and len(rules) not in (1, len(self.save_best)):
            raise ValueError('rule must be one rule or one per save_best key, '
                             f'but got {len(rules)} rules for {len(self.save_best)} keys')
        self.greater_keys = _key_list(greater_keys, 'greater_keys', self._default_greater_keys)
        self.less_keys = _key_list(less_keys, 'less_keys', self._default_less_keys)

        self.is_better_than: Dict[str, callable] = {}
        if self.save_best is not None:
            self._init_rule(rules, self.save_best)
            self.best_ckpt_path_dict: Dict[str, Optional[str]] = {}
        self.last_ckpt: Optional[str] = None

    def _init_rule(self, rules: list, key_indicators: List[str]) -> None:
        """Pick 'greater' or 'less' per key: the given rule, else ``infer_rule`` from its name."""
        if len(rules) == 1:
            rules = rules * len(key_indicators)
        self.rules = []
        for rule, key in zip(rules, key_indicators):
            if rule is not None and rule not in self.rule_map:
                raise KeyError(f'rule must be greater, less or None, but got {rule}.')
            if rule is None and key != 'auto':
                rule = infer_rule(key, self.greater_keys, self.less_keys)
            if rule is not None:
                self.is_better_than[key] = self.rule_map[rule]
            self.rules.append(rule)
        self.key_indicators = key_indicators

    # ------------------------------------------------------------------ stages
    def before_train(self, runner) -> None:
        if self.out_dir is None:
            self.out_dir = runner.work_dir
        if self.out_dir != runner.work_dir:
            self.out_dir = osp.join(self.out_dir, osp.basename(runner.work_dir.rstrip(osp.sep)))
        runner.logger.info(f'Checkpoints will be saved to {self.out_dir}.')

        hub = runner.message_hub
        # Paths a resumed checkpoint recorded may name another folder's files (a copied work
        # dir): this run keeps, and deletes, only the files of those names in its own out_dir.
        for key, value in list(hub.runtime_info.items()):
            if (key == 'last_ckpt' or key.startswith('best_ckpt')) and isinstance(value, str):
                hub.update_info(key, own_path(value, self.out_dir))
        if self.save_best is not None:
            if len(self.key_indicators) == 1:
                self.best_ckpt_path_dict[self.key_indicators[0]] = hub.get_info('best_ckpt')
            else:
                for key in self.key_indicators:
                    self.best_ckpt_path_dict[key] = hub.get_info(f'best_ckpt_{key}')

        if self.max_keep_ckpts > 0:
            keep_ckpt_ids = list(hub.get_info('keep_ckpt_ids', []))
            # A resumed run may keep fewer files than the run that wrote the checkpoint.
            while len(keep_ckpt_ids) > self.max_keep_ckpts:
                step = keep_ckpt_ids.pop(0)
                if is_main_process():
                    _remove(osp.join(self.out_dir, self.filename_tmpl.format(step)))
            self.keep_ckpt_ids: deque = deque(keep_ckpt_ids, self.max_keep_ckpts)

    def after_train_epoch(self, runner) -> None:
        if self.by_epoch and self._due(runner):
            runner.logger.info(f'Saving checkpoint at {runner.epoch + 1} epochs')
            self._save_checkpoint(runner)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not self.by_epoch and self._due(runner):
            runner.logger.info(f'Saving checkpoint at {runner.iter + 1} iterations')
            self._save_checkpoint(runner)

    def _due(self, runner) -> bool:
        """Whether the epoch (``by_epoch``) or iteration ending now gets a checkpoint: each
        ``interval``-th one from ``save_begin`` on, and the last one when ``save_last``."""
        if self.by_epoch:
            every, last = self.every_n_epochs, self.is_last_train_epoch
        else:
            every, last = self.every_n_train_iters, self.is_last_train_iter
        return every(runner, self.interval, self.save_begin) or (self.save_last and last(runner))

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        if not metrics:
            runner.logger.warning('Since `metrics` is an empty dict, the behavior to save the '
                                  'best checkpoint will be skipped in this evaluation.')
            return
        self._save_best_checkpoint(runner, metrics)

    def after_train(self, runner) -> None:
        if self.published_keys is None:
            return
        if self.save_last and self.last_ckpt is not None:
            self._publish_model(runner, self.last_ckpt)
        for best in (self.best_ckpt_path_dict.values() if self.save_best is not None else ()):
            if best is not None:
                self._publish_model(runner, best)

    @master_only
    def _publish_model(self, runner, ckpt_path: str) -> None:
        """Re-save ``ckpt_path`` with only ``published_keys``, named after its content hash (a
        sharded checkpoint is gathered into one file: the published file is whole)."""
        checkpoint = read_checkpoint(ckpt_path)
        removed = [key for key in checkpoint if key not in self.published_keys]
        for key in removed:
            del checkpoint[key]
        if removed:
            runner.logger.info(f'Key {removed} will be removed because they are not found in '
                               'published_keys. If you want to keep them, please set '
                               f'`{removed}` in published_keys')
        sha = hashlib.sha256(pickle.dumps(checkpoint)).hexdigest()
        final_path = f'{osp.splitext(ckpt_path)[0]}-{sha[:8]}.pth'
        save_checkpoint(checkpoint, final_path)
        runner.logger.info(f'The checkpoint ({ckpt_path}) is published to {final_path}.')

    # ------------------------------------------------------------------ saving
    def _save_checkpoint(self, runner) -> None:
        meta = dict(epoch=runner.epoch, iter=runner.iter)
        unit = 'epoch' if self.by_epoch else 'iter'
        meta[unit] += 1  # the epoch (or iteration) ending now counts as done; it names the file
        self._save_checkpoint_with_step(runner, meta[unit], meta)

    def _save_checkpoint_with_step(self, runner, step: int, meta: dict) -> None:
        # The ids to keep are updated first, so the new checkpoint records them; the file that
        # drops out is deleted only after the new one and `last_checkpoint` are on disk, so a
        # failed or killed save never leaves fewer checkpoints than before.
        dropped = None
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids
                                            and self.keep_ckpt_ids[-1] == step):
            if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
                dropped = self.keep_ckpt_ids.popleft()
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))

        filename = self.filename_tmpl.format(step)
        self.last_ckpt = osp.join(self.out_dir, filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        stage = 'after_train_epoch' if self.by_epoch else 'after_train_iter'
        check_agreement(runner, self.agreement_check, self, stage)  # every rank, then rank 0 saves
        runner.save_checkpoint(self.out_dir, filename, save_optimizer=self.save_optimizer,
                               save_param_scheduler=self.save_param_scheduler, meta=meta,
                               by_epoch=self.by_epoch)
        if is_main_process():
            write_last_checkpoint(runner.work_dir, self.last_ckpt)
            if dropped is not None:
                _remove(osp.join(self.out_dir, self.filename_tmpl.format(dropped)))

    def _save_best_checkpoint(self, runner, metrics: Dict[str, float]) -> None:
        if not self.save_best:
            return
        cur_type, cur_time = ('epoch', runner.epoch) if self.by_epoch else ('iter', runner.iter)
        ckpt_filename = self.filename_tmpl.format(cur_time)
        meta = dict(epoch=runner.epoch, iter=runner.iter)
        if 'auto' in self.key_indicators:
            self._init_rule(self.rules, [next(iter(metrics))])
            self.best_ckpt_path_dict = {
                self.key_indicators[0]: self.best_ckpt_path_dict.get('auto')}

        hub = runner.message_hub
        single = len(self.key_indicators) == 1
        best_ckpt_updated = False
        missing = [key for key in self.key_indicators if key not in metrics]
        if missing:
            raise KeyError(f'save_best key(s) {missing} not in the evaluation results; the '
                           f'evaluator produced {list(metrics)}. Set CheckpointHook(save_best=...) '
                           'to one of them.')
        for key, rule in zip(self.key_indicators, self.rules):
            score = metrics[key]
            score_key = 'best_score' if single else f'best_score_{key}'
            ckpt_key = 'best_ckpt' if single else f'best_ckpt_{key}'
            best_score = hub.get_info(score_key, self.init_value_map[rule])
            if score is None or not self.is_better_than[key](score, best_score):
                continue
            if not math.isfinite(score):  # minimm's: an inf is never "best" (MMEngine saves it)
                runner.logger.warning(f'{key} is {score}: not kept as the best checkpoint')
                continue
            best_ckpt_updated = True
            hub.update_info(score_key, score)

            previous = self.best_ckpt_path_dict.get(key)
            best_name = f'best_{key}_{ckpt_filename}'.replace('/', '_')
            self.best_ckpt_path_dict[key] = osp.join(self.out_dir, best_name)
            hub.update_info(ckpt_key, self.best_ckpt_path_dict[key])
            runner.save_checkpoint(self.out_dir, filename=best_name, save_optimizer=False,
                                   save_param_scheduler=False, meta=meta, by_epoch=False)
            runner.logger.info(f'The best checkpoint with {score:0.4f} {key} at {cur_time} '
                               f'{cur_type} is saved to {best_name}.')
            # Deleted only once the new best is on disk (MMEngine deletes it first).
            if (previous and previous != self.best_ckpt_path_dict[key] and is_main_process()
                    and _remove(previous)):
                runner.logger.info(f'The previous best checkpoint {previous} is removed')

        # Re-save the latest periodic checkpoint so that it records the new best score and file;
        # otherwise a run resumed from it would not know the new best file exists.
        if best_ckpt_updated and self.last_ckpt is not None:
            self._save_checkpoint_with_step(runner, cur_time, meta)
