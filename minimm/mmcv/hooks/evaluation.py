"""EvalHook and DistEvalHook, MMCV 1.7's. In MMCV 1.x evaluation is a hook, not a loop: every
``interval`` epochs (or iterations) it runs ``test_fn(model, dataloader)``, hands the results to
``dataset.evaluate`` and puts the metrics into ``runner.log_buffer.output`` for the logger hooks.
With ``save_best`` it also keeps the best checkpoint so far, ``best_{key}_epoch_{N}.pth`` (or
``_iter_``), with its path and score in ``runner.meta['hook_msgs']``. Not registered, as in MMCV:
a training script builds it itself.

MMCV's quirks are kept: a score of 0 never saves; a ``less_keys`` given as a string needs
``greater_keys`` to be one too; by-iteration evaluation first makes the logger hooks log.
Different: local disk only (no ``file_client_args``); the log line about where the best
checkpoint goes names no file backend; a ``save_best`` that is not among the metrics is named
with the metrics and the close ones (MMCV: a KeyError of the key alone).
"""
import math
import os
import os.path as osp
import warnings
from math import inf
from typing import Callable, List, Optional

from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.data import DataLoader

from minimm.dist import broadcast
from minimm.registry.lookup import did_you_mean
from minimm.work_dir import own_path

from ..test import multi_gpu_test, single_gpu_test
from .checkpoint import out_dir_for
from .hook import Hook
from .logger import LoggerHook


def _key_list(keys, default):
    """``keys`` as a list or tuple of names: None gives ``default``, a string a 1-tuple."""
    if keys is None:
        return default
    if isinstance(keys, str):
        keys = (keys, )
    assert isinstance(keys, (list, tuple)) and all(isinstance(key, str) for key in keys)
    return keys


class EvalHook(Hook):
    """Evaluate every ``interval`` epochs (iterations with ``by_epoch=False``); with ``start``, at
    ``start``, ``start + interval``, ... instead. ``save_best`` names the metric whose best
    checkpoint to keep (``'auto'``: the first one the dataset returns), compared by ``rule``
    (``'greater'``/``'less'``, or guessed from the metric's name: see ``_init_rule``)."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': '',
        'before_train_epoch before_train_iter after_train_epoch after_train_iter':
            'model meta -> log_buffer:* meta:best_score meta:best_ckpt file:best_*.pth(rank0)',
    }

    # Downstream code extends these for its own metrics.
    rule_map = {'greater': lambda x, y: x > y, 'less': lambda x, y: x < y}
    init_value_map = {'greater': -inf, 'less': inf}
    _default_greater_keys = [
        'acc', 'top', 'AR@', 'auc', 'precision', 'mAP', 'mDice', 'mIoU', 'mAcc', 'aAcc'
    ]
    _default_less_keys = ['loss']

    def __init__(self, dataloader: DataLoader, start: Optional[int] = None, interval: int = 1,
                 by_epoch: bool = True, save_best: Optional[str] = None,
                 rule: Optional[str] = None, test_fn: Optional[Callable] = None,
                 greater_keys: Optional[List[str]] = None, less_keys: Optional[List[str]] = None,
                 out_dir: Optional[str] = None, file_client_args: Optional[dict] = None,
                 **eval_kwargs):
        if not isinstance(dataloader, DataLoader):
            raise TypeError(f'dataloader must be a pytorch DataLoader, but got {type(dataloader)}')
        if interval <= 0:
            raise ValueError(f'interval must be a positive number, but got {interval}')
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean'
        if start is not None and start < 0:
            raise ValueError(f'The evaluation start epoch {start} is smaller than 0')
        assert save_best is None or isinstance(save_best, str), \
            f'""save_best"" should be a str or None rather than {type(save_best)}'
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')
        # MMCV's quirk: a single less key is only accepted next to a single greater key.
        if less_keys is not None and not isinstance(less_keys, (list, tuple)):
            assert isinstance(greater_keys, str)

        self.dataloader = dataloader
        self.start = start
        self.interval = interval
        self.by_epoch = by_epoch
        self.save_best = save_best
        self.test_fn = single_gpu_test if test_fn is None else test_fn
        self.greater_keys = _key_list(greater_keys, self._default_greater_keys)
        self.less_keys = _key_list(less_keys, self._default_less_keys)
        self.out_dir = out_dir
        self.file_client_args = file_client_args
        self.eval_kwargs = eval_kwargs
        # True until the first train epoch (iteration) begins: see _resumed_past_start.
        self.initial_flag = True
        if save_best is not None:
            self.best_ckpt_path = None
            self._init_rule(rule, save_best)

    def _init_rule(self, rule: Optional[str], key_indicator: str):
        """Set ``rule``, ``key_indicator`` and ``compare_func``. ``'auto'`` waits for the first
        results, where ``evaluate`` calls this again with the real key."""
        if rule is not None and rule not in self.rule_map:
            raise KeyError(f'rule must be greater, less or None, but got {rule}.')
        if rule is None and key_indicator != 'auto':
            rule = self._guess_rule(key_indicator)
        self.rule = rule
        self.key_indicator = key_indicator
        if rule is not None:
            self.compare_func = self.rule_map[rule]

    def _guess_rule(self, key: str) -> str:
        """'greater' or 'less' from the metric's name, in lower case: a name equal to a known key
        first, then a name that contains one (``'bbox_mAP_50'`` contains ``'map'``)."""
        assert isinstance(key, str)
        name = key.lower()
        greater = [k.lower() for k in self.greater_keys]
        less = [k.lower() for k in self.less_keys]
        for matches in (lambda k: k == name, lambda k: k in name):
            if any(matches(k) for k in greater):
                return 'greater'
            if any(matches(k) for k in less):
                return 'less'
        raise ValueError(f'Cannot infer the rule for key {key}, thus a specific rule must be '
                         'specified.')

    def before_run(self, runner):
        self.out_dir = out_dir_for(self.out_dir, runner.work_dir)
        if self.out_dir != runner.work_dir:
            runner.logger.info(f'The best checkpoint will be saved to {self.out_dir}.')
        if self.save_best is None:
            return
        if runner.meta is None:
            warnings.warn('runner.meta is None. Creating an empty one.')
            runner.meta = dict()
        hook_msgs = runner.meta.setdefault('hook_msgs', dict())
        # A resumed run goes on from the best checkpoint it had; of a copied work dir, from the
        # file of that name in its own folder (MMCV deletes the original's, the recorded path).
        self.best_ckpt_path = own_path(hook_msgs.get('best_ckpt', None), self.out_dir)

    def _resumed_past_start(self, current: int) -> bool:
        """True at most once, on the first call: when training (re)starts at or after
        ``start``, evaluate before training on, so a resumed run gets its evaluation."""
        due = self.initial_flag and self.start is not None and current >= self.start
        self.initial_flag = False
        return due

    def before_train_epoch(self, runner):
        if self.by_epoch and self._resumed_past_start(runner.epoch):
            self.after_train_epoch(runner)

    def before_train_iter(self, runner):
        if not self.by_epoch and self._resumed_past_start(runner.iter):
            self.after_train_iter(runner)

    def after_train_epoch(self, runner):
        if self.by_epoch and self._should_evaluate(runner):
            self._do_evaluate(runner)

    def after_train_iter(self, runner):
        if self.by_epoch or not self._should_evaluate(runner):
            return
        self._flush_train_log(runner)
        self._do_evaluate(runner)

    @staticmethod
    def _flush_train_log(runner):
        """This hook runs before the logger hooks: make them log the train averages now, then
        clear the buffer, so that train and eval numbers do not land in one log line."""
        logger_hooks = [hook for hook in runner._hooks if isinstance(hook, LoggerHook)]
        for logger_hook in logger_hooks:
            logger_hook.after_train_iter(runner)
        runner.log_buffer.clear()

    def _should_evaluate(self, runner):
        done = (runner.epoch if self.by_epoch else runner.iter) + 1  # counting this one
        if self.start is None:
            return done % self.interval == 0
        return done >= self.start and (done - self.start) % self.interval == 0

    def _do_evaluate(self, runner):
        results = self.test_fn(runner.model, self.dataloader)
        self._score_and_save(runner, results)

    def _score_and_save(self, runner, results):
        """Log the metrics of ``results`` and keep the checkpoint if its score is the best."""
        runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
        key_score = self.evaluate(runner, results)
        # MMCV's quirk: a score that is None *or 0* saves nothing.
        if self.save_best and key_score and math.isfinite(key_score):  # minimm: not NaN or inf
            self._save_ckpt(runner, key_score)

    def _save_ckpt(self, runner, key_score):
        hook_msgs = runner.meta['hook_msgs']
        if not self.compare_func(key_score,
                                 hook_msgs.get('best_score', self.init_value_map[self.rule])):
            return
        hook_msgs['best_score'] = key_score
        if self.best_ckpt_path and osp.isfile(self.best_ckpt_path):
            os.remove(self.best_ckpt_path)
            runner.logger.info(f'The previous best checkpoint {self.best_ckpt_path} was removed')
        unit = 'epoch' if self.by_epoch else 'iter'
        number = (runner.epoch if self.by_epoch else runner.iter) + 1
        filename = f'best_{self.key_indicator}_{unit}_{number}.pth'
        self.best_ckpt_path = osp.join(self.out_dir, filename)
        # Recorded before saving, so the new file's meta already names itself as the best.
        hook_msgs['best_ckpt'] = self.best_ckpt_path
        runner.save_checkpoint(self.out_dir, filename_tmpl=filename, create_symlink=False)
        runner.logger.info(f'Now best checkpoint is saved as {filename}.')
        runner.logger.info(f'Best {self.key_indicator} is {key_score:0.4f} at {number} {unit}.')

    def evaluate(self, runner, results):
        """Put ``dataset.evaluate``'s metrics into the log; return the ``save_best`` score."""
        metrics = self.dataloader.dataset.evaluate(results, logger=runner.logger,
                                                   **self.eval_kwargs)
        runner.log_buffer.output.update(metrics)
        runner.log_buffer.ready = True
        if self.save_best is None:
            return None
        if not metrics:  # e.g. a model so poor it detects nothing
            warnings.warn('Since `eval_res` is an empty dict, the behavior to save the best '
                          'checkpoint will be skipped in this evaluation.')
            return None
        if self.key_indicator == 'auto':
            self._init_rule(self.rule, next(iter(metrics)))
        if self.key_indicator not in metrics:  # MMCV: a bare KeyError of the key
            dataset = type(self.dataloader.dataset).__name__
            raise KeyError(f'save_best={self.key_indicator!r} is not a metric of this '
                           f'evaluation: {dataset}.evaluate returned '
                           f'{", ".join(map(repr, metrics))}.'
                           f'{did_you_mean(self.key_indicator, metrics)} Set save_best to one of '
                           "them, or to 'auto' for the first")
        return metrics[self.key_indicator]


class DistEvalHook(EvalHook):
    """Every rank tests its share of the data (``multi_gpu_test``, gathering through ``tmpdir``
    or, with ``gpu_collect``, over the GPUs); rank 0 evaluates and keeps the best checkpoint."""

    def __init__(self, dataloader: DataLoader, start: Optional[int] = None, interval: int = 1,
                 by_epoch: bool = True, save_best: Optional[str] = None,
                 rule: Optional[str] = None, test_fn: Optional[Callable] = None,
                 greater_keys: Optional[List[str]] = None, less_keys: Optional[List[str]] = None,
                 broadcast_bn_buffer: bool = True, tmpdir: Optional[str] = None,
                 gpu_collect: bool = False, out_dir: Optional[str] = None,
                 file_client_args: Optional[dict] = None, **eval_kwargs):
        super().__init__(dataloader, start=start, interval=interval, by_epoch=by_epoch,
                         save_best=save_best, rule=rule,
                         test_fn=multi_gpu_test if test_fn is None else test_fn,
                         greater_keys=greater_keys, less_keys=less_keys, out_dir=out_dir,
                         file_client_args=file_client_args, **eval_kwargs)
        self.broadcast_bn_buffer = broadcast_bn_buffer
        self.tmpdir = tmpdir
        self.gpu_collect = gpu_collect

    def _do_evaluate(self, runner):
        if self.broadcast_bn_buffer:
            # DDP leaves each rank its own BatchNorm statistics: test with rank 0's on all.
            for module in runner.model.modules():
                if isinstance(module, _BatchNorm) and module.track_running_stats:
                    broadcast(module.running_var, 0)
                    broadcast(module.running_mean, 0)
        tmpdir = osp.join(runner.work_dir, '.eval_hook') if self.tmpdir is None else self.tmpdir
        results = self.test_fn(runner.model, self.dataloader, tmpdir=tmpdir,
                               gpu_collect=self.gpu_collect)
        if runner.rank == 0:
            print('\n')
            self._score_and_save(runner, results)
