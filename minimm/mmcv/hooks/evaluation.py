"""EvalHook and DistEvalHook, as MMCV 1.7's ``mmcv/runner/hooks/evaluation.py``: in MMCV 1.x
evaluation is a hook, not a loop: ``test_fn(model, dataloader)``, then ``dataset.evaluate`` into
``runner.log_buffer.output``; ``save_best`` keeps ``best_{key}_epoch_{N}.pth`` and its score in
``runner.meta['hook_msgs']``. Not registered, as in MMCV.

MMCV's quirks are kept: a score of 0 never saves; a ``less_keys`` given as a string needs
``greater_keys`` to be one too; by-iteration evaluation first makes the logger hooks log. Left out:
``file_client_args`` (local disk only).
"""
import os
import os.path as osp
import warnings
from math import inf
from typing import Callable, List, Optional

from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.data import DataLoader

from minimm.dist import broadcast

from ..test import multi_gpu_test, single_gpu_test
from .hook import Hook
from .logger import LoggerHook


def _is_seq_of_str(seq) -> bool:
    return isinstance(seq, (list, tuple)) and all(isinstance(item, str) for item in seq)


class EvalHook(Hook):
    """Evaluate every ``interval`` epochs (iterations, with ``by_epoch=False``), from ``start`` on
    when it is given; ``save_best`` names the metric whose best checkpoint to keep ('auto': the
    first one), compared by ``rule`` ('greater', 'less', or inferred from the key names)."""

    # Downstream repos override these for their own metric names.
    rule_map = {'greater': lambda x, y: x > y, 'less': lambda x, y: x < y}
    init_value_map = {'greater': -inf, 'less': inf}
    _default_greater_keys = [
        'acc', 'top', 'AR@', 'auc', 'precision', 'mAP', 'mDice', 'mIoU', 'mAcc', 'aAcc'
    ]
    _default_less_keys = ['loss']

    def __init__(self,
                 dataloader: DataLoader,
                 start: Optional[int] = None,
                 interval: int = 1,
                 by_epoch: bool = True,
                 save_best: Optional[str] = None,
                 rule: Optional[str] = None,
                 test_fn: Optional[Callable] = None,
                 greater_keys: Optional[List[str]] = None,
                 less_keys: Optional[List[str]] = None,
                 out_dir: Optional[str] = None,
                 file_client_args: Optional[dict] = None,
                 **eval_kwargs):
        if not isinstance(dataloader, DataLoader):
            raise TypeError(f'dataloader must be a pytorch DataLoader, '
                            f'but got {type(dataloader)}')
        if interval <= 0:
            raise ValueError(f'interval must be a positive number, but got {interval}')
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean'
        if start is not None and start < 0:
            raise ValueError(f'The evaluation start epoch {start} is smaller than 0')
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')

        self.dataloader = dataloader
        self.interval = interval
        self.start = start
        self.by_epoch = by_epoch

        assert isinstance(save_best, str) or save_best is None, \
            f'""save_best"" should be a str or None rather than {type(save_best)}'
        self.save_best = save_best
        self.eval_kwargs = eval_kwargs
        self.initial_flag = True

        if test_fn is None:
            self.test_fn = single_gpu_test
        else:
            self.test_fn = test_fn

        if greater_keys is None:
            self.greater_keys = self._default_greater_keys
        else:
            if not isinstance(greater_keys, (list, tuple)):
                assert isinstance(greater_keys, str)
                greater_keys = (greater_keys, )
            assert _is_seq_of_str(greater_keys)
            self.greater_keys = greater_keys

        if less_keys is None:
            self.less_keys = self._default_less_keys
        else:
            if not isinstance(less_keys, (list, tuple)):
                assert isinstance(greater_keys, str)  # MMCV checks greater_keys here
                less_keys = (less_keys, )
            assert _is_seq_of_str(less_keys)
            self.less_keys = less_keys

        if self.save_best is not None:
            self.best_ckpt_path = None
            self._init_rule(rule, self.save_best)

        self.out_dir = out_dir
        self.file_client_args = file_client_args

    def _init_rule(self, rule: Optional[str], key_indicator: str):
        """Set ``rule``, ``key_indicator`` and ``compare_func``. Without a rule, a key is
        'greater' or 'less' if it is (or, failing that, contains) one of the greater or less
        keys, compared in lower case ('mAP_50' -> greater); 'auto' waits for the first
        results."""
        if rule not in self.rule_map and rule is not None:
            raise KeyError(f'rule must be greater, less or None, but got {rule}.')

        if rule is None:
            if key_indicator != 'auto':
                assert isinstance(key_indicator, str)
                key_indicator_lc = key_indicator.lower()
                greater_keys = [key.lower() for key in self.greater_keys]
                less_keys = [key.lower() for key in self.less_keys]

                if key_indicator_lc in greater_keys:
                    rule = 'greater'
                elif key_indicator_lc in less_keys:
                    rule = 'less'
                elif any(key in key_indicator_lc for key in greater_keys):
                    rule = 'greater'
                elif any(key in key_indicator_lc for key in less_keys):
                    rule = 'less'
                else:
                    raise ValueError(f'Cannot infer the rule for key {key_indicator}, thus a '
                                     'specific rule must be specified.')
        self.rule = rule
        self.key_indicator = key_indicator
        if self.rule is not None:
            self.compare_func = self.rule_map[self.rule]

    def before_run(self, runner):
        if not self.out_dir:
            self.out_dir = runner.work_dir

        # Another folder than the work dir gets a subfolder named after the work dir.
        if self.out_dir != runner.work_dir:
            basename = osp.basename(runner.work_dir.rstrip(osp.sep))
            self.out_dir = osp.join(self.out_dir, basename)
            runner.logger.info(f'The best checkpoint will be saved to {self.out_dir} by '
                               'HardDiskBackend')

        if self.save_best is not None:
            if runner.meta is None:
                warnings.warn('runner.meta is None. Creating an empty one.')
                runner.meta = dict()
            runner.meta.setdefault('hook_msgs', dict())
            self.best_ckpt_path = runner.meta['hook_msgs'].get('best_ckpt', None)

    def before_train_iter(self, runner):
        """Evaluate once before the first train iteration when resuming at or after ``start``."""
        if self.by_epoch or not self.initial_flag:
            return
        if self.start is not None and runner.iter >= self.start:
            self.after_train_iter(runner)
        self.initial_flag = False

    def before_train_epoch(self, runner):
        """Evaluate once before the first train epoch when resuming at or after ``start``."""
        if not (self.by_epoch and self.initial_flag):
            return
        if self.start is not None and runner.epoch >= self.start:
            self.after_train_epoch(runner)
        self.initial_flag = False

    def after_train_iter(self, runner):
        """Called after every training iter to evaluate the results."""
        if not self.by_epoch and self._should_evaluate(runner):
            # This hook runs before the logger hooks: let them log (and clear) the train
            # averages first, so train and eval results do not mix in one log line.
            for hook in runner._hooks:
                if isinstance(hook, LoggerHook):
                    hook.after_train_iter(runner)
            runner.log_buffer.clear()

            self._do_evaluate(runner)

    def after_train_epoch(self, runner):
        """Called after every training epoch to evaluate the results."""
        if self.by_epoch and self._should_evaluate(runner):
            self._do_evaluate(runner)

    def _do_evaluate(self, runner):
        """perform evaluation and save ckpt."""
        results = self.test_fn(runner.model, self.dataloader)
        runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
        key_score = self.evaluate(runner, results)
        # the key_score may be `None` (or 0): then no best checkpoint is saved
        if self.save_best and key_score:
            self._save_ckpt(runner, key_score)

    def _should_evaluate(self, runner):
        """Every ``interval`` epochs/iterations; from ``start`` on (at ``start``, ``start +
        interval``...) when it is given."""
        if self.by_epoch:
            current = runner.epoch
            check_time = self.every_n_epochs
        else:
            current = runner.iter
            check_time = self.every_n_iters

        if self.start is None:
            if not check_time(runner, self.interval):
                return False
        elif (current + 1) < self.start:
            return False
        else:
            if (current + 1 - self.start) % self.interval:
                return False
        return True

    def _save_ckpt(self, runner, key_score):
        """Save the best checkpoint (removing the previous best), if ``key_score`` beats it."""
        if self.by_epoch:
            current = f'epoch_{runner.epoch + 1}'
            cur_type, cur_time = 'epoch', runner.epoch + 1
        else:
            current = f'iter_{runner.iter + 1}'
            cur_type, cur_time = 'iter', runner.iter + 1

        best_score = runner.meta['hook_msgs'].get('best_score', self.init_value_map[self.rule])
        if self.compare_func(key_score, best_score):
            best_score = key_score
            runner.meta['hook_msgs']['best_score'] = best_score

            if self.best_ckpt_path and osp.isfile(self.best_ckpt_path):
                os.remove(self.best_ckpt_path)
                runner.logger.info(f'The previous best checkpoint {self.best_ckpt_path} was '
                                   'removed')

            best_ckpt_name = f'best_{self.key_indicator}_{current}.pth'
            self.best_ckpt_path = osp.join(self.out_dir, best_ckpt_name)
            runner.meta['hook_msgs']['best_ckpt'] = self.best_ckpt_path

            runner.save_checkpoint(self.out_dir, filename_tmpl=best_ckpt_name,
                                   create_symlink=False)
            runner.logger.info(f'Now best checkpoint is saved as {best_ckpt_name}.')
            runner.logger.info(f'Best {self.key_indicator} is {best_score:0.4f} '
                               f'at {cur_time} {cur_type}.')

    def evaluate(self, runner, results):
        """``dataset.evaluate`` into the log buffer; return the ``save_best`` score (or None)."""
        eval_res = self.dataloader.dataset.evaluate(results, logger=runner.logger,
                                                    **self.eval_kwargs)

        for name, val in eval_res.items():
            runner.log_buffer.output[name] = val
        runner.log_buffer.ready = True

        if self.save_best is not None:
            # A poor model may give no results at all.
            if not eval_res:
                warnings.warn('Since `eval_res` is an empty dict, the behavior to save the best '
                              'checkpoint will be skipped in this evaluation.')
                return None

            if self.key_indicator == 'auto':
                # infer from eval_results
                self._init_rule(self.rule, list(eval_res.keys())[0])
            return eval_res[self.key_indicator]

        return None


class DistEvalHook(EvalHook):
    """Every rank tests its share (``multi_gpu_test``), rank 0 evaluates and saves; first,
    ``broadcast_bn_buffer`` copies rank 0's BatchNorm statistics to every rank (DDP does not
    synchronise them). ``tmpdir``/``gpu_collect`` are passed to ``test_fn``."""

    def __init__(self,
                 dataloader: DataLoader,
                 start: Optional[int] = None,
                 interval: int = 1,
                 by_epoch: bool = True,
                 save_best: Optional[str] = None,
                 rule: Optional[str] = None,
                 test_fn: Optional[Callable] = None,
                 greater_keys: Optional[List[str]] = None,
                 less_keys: Optional[List[str]] = None,
                 broadcast_bn_buffer: bool = True,
                 tmpdir: Optional[str] = None,
                 gpu_collect: bool = False,
                 out_dir: Optional[str] = None,
                 file_client_args: Optional[dict] = None,
                 **eval_kwargs):
        if test_fn is None:
            test_fn = multi_gpu_test

        super().__init__(dataloader, start=start, interval=interval, by_epoch=by_epoch,
                         save_best=save_best, rule=rule, test_fn=test_fn,
                         greater_keys=greater_keys, less_keys=less_keys, out_dir=out_dir,
                         file_client_args=file_client_args, **eval_kwargs)

        self.broadcast_bn_buffer = broadcast_bn_buffer
        self.tmpdir = tmpdir
        self.gpu_collect = gpu_collect

    def _do_evaluate(self, runner):
        """perform evaluation and save ckpt."""
        if self.broadcast_bn_buffer:
            model = runner.model
            for name, module in model.named_modules():
                if isinstance(module, _BatchNorm) and module.track_running_stats:
                    broadcast(module.running_var, 0)
                    broadcast(module.running_mean, 0)

        tmpdir = self.tmpdir
        if tmpdir is None:
            tmpdir = osp.join(runner.work_dir, '.eval_hook')

        results = self.test_fn(runner.model, self.dataloader, tmpdir=tmpdir,
                               gpu_collect=self.gpu_collect)
        if runner.rank == 0:
            print('\n')
            runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
            key_score = self.evaluate(runner, results)
            if self.save_best and key_score:
                self._save_ckpt(runner, key_score)
