"""Loops: the code that decides *when* each hook stage is called.

A loop owns a dataloader and the counters (``epoch``, ``iter``); the Runner delegates its
``runner.epoch``/``runner.iter``/``max_epochs``/``max_iters`` properties to the train loop.
The call sequence is MMEngine 0.10's, stage for stage:

    EpochBasedTrainLoop: before_train, then per epoch
        before_train_epoch, (before_train_iter, train_step, after_train_iter, iter += 1)*,
        after_train_epoch, epoch += 1, [val_loop.run()]
    and after_train at the end.
    IterBasedTrainLoop: the whole run is one big "epoch"; batch_idx is the global iteration.
    ValLoop / TestLoop: before_val, before_val_epoch, (before_val_iter, val_step, after_val_iter)*,
        evaluate, after_val_epoch(metrics), after_val.

``dynamic_intervals`` (``[(milestone, interval), ...]``) changes ``val_interval`` as training
passes each milestone; ``ValLoop(fp16=True)`` runs the model under autocast. Left out compared
with MMEngine: validation losses, and the 2-second sleep MMEngine's infinite iterator takes
between epochs (a multi-worker deadlock guard).
"""
import bisect
from typing import Dict, List, Optional, Tuple

import torch
from torch.utils.data import DataLoader

from ..dataset.sampler import start_dataloader_at
from ..evaluator import BaseMetric
from ..registry import LOOPS
from ..values import whole_number
from .base_loop import BaseLoop
from .utils import calc_dynamic_intervals


def _describe(outputs) -> str:
    return f'keys {list(outputs)}' if isinstance(outputs, dict) else type(outputs).__name__


class BaseTrainLoop(BaseLoop):
    """What both train loops share: the counters, ``stop_training``, one training iteration and
    the validation decision. Subclasses write ``run``.

    An epoch-based loop is given ``max_epochs`` (``max_iters`` follows from the dataloader's
    length); an iteration-based one ``max_iters``, and the whole run counts as one epoch, as in
    MMEngine. As in MMEngine, the counters live in ``_epoch``/``_iter`` (``_max_epochs``/
    ``_max_iters``) behind read-only properties: the loop advances them, and a resumed run (or a
    hook, or a test) sets the private ones."""

    def __init__(self, runner, dataloader, val_begin: int, val_interval: int,
                 max_epochs: Optional[int] = None, max_iters: Optional[int] = None,
                 dynamic_intervals: Optional[List[Tuple[int, int]]] = None):
        super().__init__(runner, dataloader)
        if len(self.dataloader) == 0:
            raise ValueError('train_dataloader has no batches: its dataset is empty, or smaller '
                             'than batch_size with drop_last=True')
        if max_epochs is not None:
            self._max_epochs = whole_number('max_epochs', max_epochs, 0)
            self._max_iters = self._max_epochs * len(self.dataloader)
        else:
            self._max_iters = whole_number('max_iters', max_iters, 0)
            self._max_epochs = 1
        self._epoch = 0
        self._iter = 0
        self.val_begin = val_begin
        self.val_interval = val_interval
        # Set by EarlyStoppingHook to end training after the current epoch (or iteration).
        self.stop_training = False
        self.dynamic_milestones, self.dynamic_intervals = calc_dynamic_intervals(
            self.val_interval, dynamic_intervals)

    @property
    def max_epochs(self) -> int:
        return self._max_epochs

    @property
    def max_iters(self) -> int:
        return self._max_iters

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def iter(self) -> int:
        return self._iter

    def run_iter(self, idx: int, data_batch) -> None:
        self.runner.call_hook('before_train_iter', batch_idx=idx, data_batch=data_batch)
        # The optimizer step happens inside train_step (through the OptimWrapper).
        outputs = self.runner.model.train_step(data_batch,
                                               optim_wrapper=self.runner.optim_wrapper)
        if not (isinstance(outputs, dict) and 'loss' in outputs):
            raise KeyError("train_step must return a dict with a 'loss' key (the total loss, as "
                           f'BaseModel.train_step does), but got {_describe(outputs)}')
        self.runner.call_hook('after_train_iter', batch_idx=idx, data_batch=data_batch,
                              outputs=outputs)
        self._iter += 1

    def _should_validate(self, done: int, total: int) -> bool:
        """Validate after ``done`` of ``total`` epochs (or iterations) when there is a val loop,
        ``done >= val_begin``, and ``done`` is a multiple of ``val_interval`` or the last one."""
        return (self.runner.val_loop is not None and done >= self.val_begin
                and (done % self.val_interval == 0 or done == total))


@LOOPS.register_module()
class EpochBasedTrainLoop(BaseTrainLoop):
    """Train for ``max_epochs`` epochs; validate after epoch ``e`` when ``e >= val_begin`` and
    ``e % val_interval == 0`` or it is the last epoch."""

    def __init__(self, runner, dataloader, max_epochs: int, val_begin: int = 1,
                 val_interval: int = 1,
                 dynamic_intervals: Optional[List[Tuple[int, int]]] = None):
        super().__init__(runner, dataloader, val_begin, val_interval, max_epochs=max_epochs,
                         dynamic_intervals=dynamic_intervals)

    def run(self) -> torch.nn.Module:
        self.runner.call_hook('before_train')
        while self._epoch < self._max_epochs and not self.stop_training:
            self.run_epoch()
            self._decide_current_val_interval()
            if self._should_validate(self._epoch, self._max_epochs):
                self.runner.val_loop.run()
        self.runner.call_hook('after_train')
        return self.runner.model

    def run_epoch(self) -> None:
        # The stages' order here is the API hooks rely on, so it has MMEngine's shape.
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        for idx, data_batch in enumerate(self.dataloader):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1

    def _decide_current_val_interval(self) -> None:
        """The ``dynamic_intervals`` entry for the next epoch becomes ``val_interval``."""
        step = bisect.bisect(self.dynamic_milestones, self._epoch + 1)
        self.val_interval = self.dynamic_intervals[step - 1]


class _InfiniteDataloaderIterator:
    """Iterate a dataloader forever, moving the sampler to the next epoch at each wrap-around.

    The dataloader's own iterator is made at the first ``next`` (MMEngine makes it at once), so
    that ``skip`` can still move the sampler: a multi-worker loader starts loading as soon as its
    iterator exists."""

    def __init__(self, dataloader: DataLoader):
        self._dataloader = dataloader
        self._iterator = None
        self._epoch = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self._iterator is None:
            self._iterator = iter(self._dataloader)
        try:
            return next(self._iterator)
        except StopIteration:
            self._epoch += 1
            sampler = getattr(self._dataloader, 'sampler', None)
            if hasattr(sampler, 'set_epoch'):
                sampler.set_epoch(self._epoch)
            self._iterator = iter(self._dataloader)
            return next(self._iterator)

    def skip(self, num_batches: int) -> None:
        """Move past the first ``num_batches`` batches, as if they had been drawn: MMEngine draws
        and drops them. Before the first batch is drawn, a sampler that can start part-way is
        moved there instead and nothing is loaded (``start_dataloader_at``, beside the
        samplers)."""
        epoch = None
        if self._iterator is None:
            epoch = start_dataloader_at(self._dataloader, num_batches)
        if epoch is None:
            for _ in range(num_batches):
                next(self)
        else:
            self._epoch = epoch


@LOOPS.register_module()
class IterBasedTrainLoop(BaseTrainLoop):
    """Train for ``max_iters`` iterations; validate when ``iter >= val_begin`` and
    ``iter % val_interval == 0`` or it is the last iteration. The whole run is one epoch, and the
    dataloader is iterated forever. A resumed run first skips the batches already trained on
    (without loading them when the sampler allows: see ``_InfiniteDataloaderIterator.skip``)."""

    def __init__(self, runner, dataloader, max_iters: int, val_begin: int = 1,
                 val_interval: int = 1000,
                 dynamic_intervals: Optional[List[Tuple[int, int]]] = None):
        super().__init__(runner, dataloader, val_begin, val_interval, max_iters=max_iters,
                         dynamic_intervals=dynamic_intervals)
        self.dataloader_iterator = _InfiniteDataloaderIterator(self.dataloader)

    def run(self) -> torch.nn.Module:
        self.runner.call_hook('before_train')
        self.runner.call_hook('before_train_epoch')
        if self._iter > 0:
            # Resumed: skip what was already trained on, so the data order is an unbroken run's.
            self.runner.logger.warning(f'Advance dataloader {self._iter} steps to skip data that '
                                       'has already been trained')
            self.dataloader_iterator.skip(self._iter)
        while self._iter < self._max_iters and not self.stop_training:
            self.runner.model.train()
            self.run_iter(next(self.dataloader_iterator))
            self._decide_current_val_interval()
            if self._should_validate(self._iter, self._max_iters):
                self.runner.val_loop.run()
        self.runner.call_hook('after_train_epoch')
        self.runner.call_hook('after_train')
        return self.runner.model

    def run_iter(self, data_batch) -> None:
        """One iteration; the global iteration is the batch index, as in MMEngine."""
        super().run_iter(self._iter, data_batch)

    def _decide_current_val_interval(self) -> None:
        """The ``dynamic_intervals`` entry for the next iteration becomes ``val_interval``."""
        step = bisect.bisect(self.dynamic_milestones, self._iter + 1)
        self.val_interval = self.dynamic_intervals[step - 1]


class _EvalLoop(BaseLoop):
    """What ValLoop and TestLoop share: the evaluator and one pass over the batches. Each of them
    writes its own ``run`` and ``run_iter``, as MMEngine does, so every stage name is literal."""

    def __init__(self, runner, dataloader, evaluator, fp16: bool = False):
        super().__init__(runner, dataloader)
        # A lone metric is accepted as the one metric of an Evaluator (MMEngine asserts).
        if isinstance(evaluator, BaseMetric):
            evaluator = [evaluator]
        self.evaluator = runner.build_evaluator(evaluator)
        self.fp16 = fp16
        metainfo = getattr(self.dataloader.dataset, 'metainfo', None)
        if metainfo is not None:
            self.evaluator.dataset_meta = metainfo

    def _run_batches(self) -> Dict[str, float]:
        """``run_iter`` on every batch in eval mode, then ``evaluator.evaluate``."""
        self.runner.model.eval()
        for idx, data_batch in enumerate(self.dataloader):
            self.run_iter(idx, data_batch)
        return self.evaluator.evaluate(len(self.dataloader.dataset))

    def _process(self, outputs, data_batch, mode: str) -> None:
        """``evaluator.process``; when the metrics cannot read what the model returned and that
        is not a list (a raw tensor, say), the error names the model and what it should return."""
        try:
            self.evaluator.process(data_samples=outputs, data_batch=data_batch)
        except Exception as error:
            if isinstance(outputs, (list, tuple)):
                raise
            raise TypeError(
                f"{self.runner.model_name}.{mode}_step (forward(mode='predict')) returned a "
                f'{type(outputs).__name__}, which the metrics cannot read ({type(error).__name__}: '
                f'{error}): return a list with one prediction per sample (data samples or '
                'dicts, as the metrics read them)') from error

    def _autocast(self):
        """autocast (float16 on a GPU, bfloat16 on a CPU) when ``fp16``, as MMEngine's loops."""
        device_type = 'cuda' if torch.cuda.is_available() else 'cpu'
        return torch.autocast(device_type=device_type, enabled=self.fp16)


@LOOPS.register_module()
class ValLoop(_EvalLoop):
    """One pass over the validation set, then ``evaluator.evaluate``."""

    def run(self) -> Dict[str, float]:
        self.runner.call_hook('before_val')
        self.runner.call_hook('before_val_epoch')
        metrics = self._run_batches()
        self.runner.call_hook('after_val_epoch', metrics=metrics)
        self.runner.call_hook('after_val')
        return metrics

    @torch.no_grad()
    def run_iter(self, idx: int, data_batch) -> None:
        self.runner.call_hook('before_val_iter', batch_idx=idx, data_batch=data_batch)
        with self._autocast():
            outputs = self.runner.model.val_step(data_batch)
        self._process(outputs, data_batch, 'val')
        self.runner.call_hook('after_val_iter', batch_idx=idx, data_batch=data_batch,
                              outputs=outputs)


@LOOPS.register_module()
class TestLoop(_EvalLoop):
    """One pass over the test set, then ``evaluator.evaluate``."""

    def run(self) -> Dict[str, float]:
        self.runner.call_hook('before_test')
        self.runner.call_hook('before_test_epoch')
        metrics = self._run_batches()
        self.runner.call_hook('after_test_epoch', metrics=metrics)
        self.runner.call_hook('after_test')
        return metrics

    @torch.no_grad()
    def run_iter(self, idx: int, data_batch) -> None:
        self.runner.call_hook('before_test_iter', batch_idx=idx, data_batch=data_batch)
        with self._autocast():
            outputs = self.runner.model.test_step(data_batch)
        self._process(outputs, data_batch, 'test')
        self.runner.call_hook('after_test_iter', batch_idx=idx, data_batch=data_batch,
                              outputs=outputs)
