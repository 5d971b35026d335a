"""EvalHook and DistEvalHook: in MMCV 1.x evaluation is a hook, not a loop: ``test_fn(model,
dataloader)``, then ``dataset.evaluate`` into ``runner.log_buffer.output``; ``save_best`` keeps
``best_{key}_epoch_{N}.pth`` and its score in ``runner.meta['hook_msgs']``. Not registered, as in
MMCV; its quirks are kept: a score of 0 never saves; a given ``less_keys`` needs ``greater_keys``;
by-iteration evaluation first makes the logger hooks log. Left out: ``file_client_args``."""
import os
import os.path as osp
import warnings

from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.data import DataLoader

from minimm.dist import broadcast
from minimm.hooks.metric_rules import (DEFAULT_GREATER_KEYS, DEFAULT_LESS_KEYS, INIT_VALUE_MAP,
                                       RULE_MAP, infer_rule)

from ..test import multi_gpu_test, single_gpu_test
from .checkpoint import resolve_out_dir
from .hook import Hook


class EvalHook(Hook):
    # The comparison rules and default key lists are MMEngine's CheckpointHook's (the same values).
    rule_map, init_value_map = RULE_MAP, INIT_VALUE_MAP
    _default_greater_keys, _default_less_keys = DEFAULT_GREATER_KEYS, DEFAULT_LESS_KEYS

    def __init__(self, dataloader, start=None, interval=1, by_epoch=True, save_best=None,
                 rule=None, test_fn=None, greater_keys=None, less_keys=None, out_dir=None,
                 file_client_args=None, **eval_kwargs):
        if not isinstance(dataloader, DataLoader):
            raise TypeError('dataloader must be a pytorch DataLoader, but got '
                            f'{type(dataloader)}')
        if interval <= 0:
            raise ValueError(f'interval must be a positive number, but got {interval}')
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean'
        if start is not None and start < 0:
            raise ValueError(f'The evaluation start epoch {start} is smaller than 0')
        assert save_best is None or isinstance(save_best, str), \
            f'""save_best"" should be a str or None rather than {save_best}'
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')
        self.dataloader, self.interval, self.start = dataloader, interval, start
        self.by_epoch, self.save_best, self.eval_kwargs = by_epoch, save_best, eval_kwargs
        self.out_dir = out_dir
        self.test_fn = test_fn if test_fn is not None else single_gpu_test
        self.initial_flag = True
        if greater_keys is not None:
            if not isinstance(greater_keys, (list, tuple)):
                greater_keys = (greater_keys, )
            assert all(isinstance(k, str) for k in greater_keys)
        if less_keys is not None:
            assert greater_keys is not None  # MMCV 1.7 checks greater_keys here, not less_keys
            less_keys = less_keys if isinstance(less_keys, (list, tuple)) else (less_keys, )
        self.greater_keys = self._default_greater_keys if greater_keys is None else greater_keys
        self.less_keys = self._default_less_keys if less_keys is None else less_keys
        if save_best is not None:
            self.best_ckpt_path = None
            self._init_rule(rule, save_best)

    def _init_rule(self, rule, key_indicator: str) -> None:
        if rule not in self.rule_map and rule is not None:
            raise KeyError(f'rule must be greater, less or None, but got {rule}.')
        if rule is None and key_indicator != 'auto':
            rule = infer_rule(key_indicator, self.greater_keys, self.less_keys)
        self.rule, self.key_indicator = rule, key_indicator
        if rule is not None:
            self.compare_func = self.rule_map[rule]

    def before_run(self, runner) -> None:
        out_dir = resolve_out_dir(self.out_dir, runner.work_dir)
        if out_dir != runner.work_dir:
            runner.logger.info(f'The best checkpoint will be saved to {out_dir} by '
                               'HardDiskBackend')
        self.out_dir = out_dir
        if self.save_best is not None:
            if runner.meta is None:
                warnings.warn('runner.meta is None. Creating an empty one.')
                runner.meta = dict()
            runner.meta.setdefault('hook_msgs', dict())
            self.best_ckpt_path = runner.meta['hook_msgs'].get('best_ckpt', None)

    # The first train iteration (epoch) evaluates once when resuming at or after ``start``.
    def before_train_iter(self, runner) -> None:
        if self.by_epoch or not self.initial_flag:
            return
        if self.start is not None and runner.iter >= self.start:
            self.after_train_iter(runner)
        self.initial_flag = False

    def before_train_epoch(self, runner) -> None:
        if not (self.by_epoch and self.initial_flag):
            return
        if self.start is not None and runner.epoch >= self.start:
            self.after_train_epoch(runner)
        self.initial_flag = False

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch and self._should_evaluate(runner):
            from .logger import LoggerHook  # flush the train averages before the eval results
            for hook in runner.hooks:
                if isinstance(hook, LoggerHook):
                    hook.after_train_iter(runner)
            runner.log_buffer.clear()
            self._do_evaluate(runner)

    def after_train_epoch(self, runner) -> None:
        if self.by_epoch and self._should_evaluate(runner):
            self._do_evaluate(runner)

    def _should_evaluate(self, runner) -> bool:
        current, every_n = ((runner.epoch, self.every_n_epochs) if self.by_epoch
                            else (runner.iter, self.every_n_iters))
        if self.start is None:
            return every_n(runner, self.interval)
        return current + 1 >= self.start and (current + 1 - self.start) % self.interval == 0

    def _do_evaluate(self, runner) -> None:
        results = self.test_fn(runner.model, self.dataloader)
        self._evaluate_and_save(runner, results)

    def _evaluate_and_save(self, runner, results) -> None:
        runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
        key_score = self.evaluate(runner, results)
        if self.save_best and key_score:  # a score of 0 never saves (MMCV 1.7)
            self._save_ckpt(runner, key_score)

    def evaluate(self, runner, results):
        """``dataset.evaluate`` into the log buffer; return the ``save_best`` score (or None)."""
        eval_res = self.dataloader.dataset.evaluate(results, logger=runner.logger,
                                                    **self.eval_kwargs)
        runner.log_buffer.output.update(eval_res)
        runner.log_buffer.ready = True
        if self.save_best is None:
            return None
        if not eval_res:
            warnings.warn('Since `eval_res` is an empty dict, the behavior to save the best '
                          'checkpoint will be skipped in this evaluation.')
            return None
        if self.key_indicator == 'auto':
            self._init_rule(self.rule, next(iter(eval_res)))
        return eval_res[self.key_indicator]

    def _save_ckpt(self, runner, key_score) -> None:
        cur_type, cur_time = ('epoch', runner.epoch + 1) if self.by_epoch \
            else ('iter', runner.iter + 1)
        hook_msgs = runner.meta['hook_msgs']
        best_score = hook_msgs.get('best_score', self.init_value_map[self.rule])
        if not self.compare_func(key_score, best_score):
            return
        hook_msgs['best_score'] = key_score
        if self.best_ckpt_path and osp.isfile(self.best_ckpt_path):
            os.remove(self.best_ckpt_path)
            runner.logger.info(f'The previous best checkpoint {self.best_ckpt_path} was removed')
        name = f'best_{self.key_indicator}_{cur_type}_{cur_time}.pth'
        self.best_ckpt_path = hook_msgs['best_ckpt'] = osp.join(self.out_dir, name)
        runner.save_checkpoint(self.out_dir, filename_tmpl=name, create_symlink=False)
        runner.logger.info(f'Now best checkpoint is saved as {name}.')
        runner.logger.info(f'Best {self.key_indicator} is {key_score:0.4f} at {cur_time} '
                           f'{cur_type}.')


class DistEvalHook(EvalHook):
    """Every rank tests its share (``multi_gpu_test``), rank 0 evaluates and saves; first,
    ``broadcast_bn_buffer`` copies rank 0's BatchNorm statistics to every rank."""

    def __init__(self, dataloader, *args, broadcast_bn_buffer=True, tmpdir=None,
                 gpu_collect=False, test_fn=None, **kwargs):
        super().__init__(dataloader, *args, test_fn=test_fn or multi_gpu_test, **kwargs)
        self.broadcast_bn_buffer = broadcast_bn_buffer
        self.tmpdir, self.gpu_collect = tmpdir, gpu_collect

    def _do_evaluate(self, runner) -> None:
        if self.broadcast_bn_buffer:
            for module in runner.model.modules():
                if isinstance(module, _BatchNorm) and module.track_running_stats:
                    broadcast(module.running_var, 0)
                    broadcast(module.running_mean, 0)
        tmpdir = self.tmpdir or osp.join(runner.work_dir, '.eval_hook')
        results = self.test_fn(runner.model, self.dataloader, tmpdir=tmpdir,
                               gpu_collect=self.gpu_collect)
        if runner.rank == 0:
            print('\n')
            self._evaluate_and_save(runner, results)
