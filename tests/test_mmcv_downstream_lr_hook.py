"""A downstream lr hook, written as MMDetection 2.x writes its YOLOX one against ``mmcv.runner``
(only the imports changed): it subclasses ``CosineAnnealingLrUpdaterHook``, overrides
``get_warmup_lr`` (a quadratic warm-up from the *base* lr) and ``get_lr`` (cosine, then flat for
the last epochs), and reads ``min_lr_ratio``, ``warmup_iters``, ``warmup_ratio``, ``base_lr`` and
``regular_lr``. Every iteration's lr is checked against the schedule's closed form."""
import math

import pytest

from minimm.mmcv import HOOKS, CosineAnnealingLrUpdaterHook
from minimm.mmcv.hooks.lr_updater import annealing_cos
from mmcv_probe import make_optimizer, record

EPOCHS, BATCHES, BASE = 6, 4, 0.1  # mmcv_probe.record: 6 epochs of 4 batches, SGD(lr=0.1)


@HOOKS.register_module(force=True)
class YOLOXLikeLrUpdaterHook(CosineAnnealingLrUpdaterHook):
    """Quadratic warm-up, cosine annealing, a fixed lr for the last ``num_last_epochs``."""

    def __init__(self, num_last_epochs, **kwargs):
        self.num_last_epochs = num_last_epochs
        self.seen_regular_lr = []  # what the base class computed before each warm-up lr
        super().__init__(**kwargs)

    def get_warmup_lr(self, cur_iters):
        self.seen_regular_lr.append(self.regular_lr)

        def _get_warmup_lr(cur_iters, base_lr):
            k = self.warmup_ratio * pow((cur_iters + 1) / float(self.warmup_iters), 2)
            return [_lr * k for _lr in base_lr]

        if isinstance(self.base_lr, dict):
            return {key: _get_warmup_lr(cur_iters, base_lr)
                    for key, base_lr in self.base_lr.items()}
        return _get_warmup_lr(cur_iters, self.base_lr)

    def get_lr(self, runner, base_lr):
        last_iter = len(runner.data_loader) * self.num_last_epochs
        if self.by_epoch:
            progress, max_progress = runner.epoch, runner.max_epochs
        else:
            progress, max_progress = runner.iter, runner.max_iters
        progress += 1
        if self.min_lr_ratio is not None:
            target_lr = base_lr * self.min_lr_ratio
        else:
            target_lr = self.min_lr
        if progress >= max_progress - last_iter:
            return target_lr
        return annealing_cos(base_lr, target_lr, (progress - self.warmup_iters) /
                             (max_progress - self.warmup_iters - last_iter))


# YOLOX's own lr_config, scaled down: warm-up by epoch (so warmup_iters is only known once the
# first epoch shows the loader's length), lr per iteration.
LR_CONFIG = dict(policy='YOLOXLike', warmup='exp', by_epoch=False, warmup_by_epoch=True,
                 warmup_ratio=1, warmup_iters=2, num_last_epochs=1, min_lr_ratio=0.05)


def closed_form(i, base=BASE):
    """The lr of iteration ``i`` (0-based), written from the schedule's definition."""
    warmup, last, total = 2 * BATCHES, 1 * BATCHES, EPOCHS * BATCHES
    if i < warmup:
        return base * ((i + 1) / warmup) ** 2
    floor, p = base * 0.05, i + 1
    if p >= total - last:
        return floor
    fraction = (p - warmup) / (total - warmup - last)
    return floor + (base - floor) * (1 + math.cos(math.pi * fraction)) / 2


def test_every_iteration_follows_the_downstream_schedule():
    lrs, _ = record(lr_config=dict(LR_CONFIG), max_epochs=EPOCHS, batches=BATCHES)
    assert lrs == pytest.approx([closed_form(i) for i in range(EPOCHS * BATCHES)])


def test_the_subclass_sees_mmcvs_attributes():
    cfg = {key: value for key, value in LR_CONFIG.items() if key != 'policy'}
    hook = HOOKS.build(dict(cfg, type='YOLOXLikeLrUpdaterHook'))
    assert (hook.min_lr_ratio, hook.min_lr, hook.warmup_epochs, hook.warmup_iters) == \
        (0.05, None, 2, None)
    lrs, _ = record(lr_config=hook, max_epochs=EPOCHS, batches=BATCHES)
    assert hook.warmup_iters == 2 * BATCHES  # set from the loader in the first train epoch
    assert hook.base_lr == [BASE]
    # get_warmup_lr ran for each warm-up iteration, after the base class set regular_lr
    assert len(hook.seen_regular_lr) == 2 * BATCHES
    assert hook.seen_regular_lr[0] == [pytest.approx(hook.get_lr(_FakeRunner(0), BASE))]


class _FakeRunner:
    """What get_lr reads, at iteration ``it`` of the toy run."""
    by_epoch_loader = [None] * BATCHES

    def __init__(self, it):
        self.iter, self.epoch, self.max_iters, self.max_epochs = it, 0, EPOCHS * BATCHES, EPOCHS
        self.data_loader = self.by_epoch_loader


def test_a_dict_of_optimizers_warms_up_each_from_its_base_lr():
    (_, a), (_, b) = make_optimizer(lr=0.1), make_optimizer(lr=0.05)
    lrs, _ = record(lr_config=dict(LR_CONFIG), max_epochs=EPOCHS, batches=BATCHES,
                    optimizer=dict(a=a, b=b), all_groups=True)
    assert [lr['a'][0] for lr in lrs] == pytest.approx(
        [closed_form(i, 0.1) for i in range(EPOCHS * BATCHES)])
    assert [lr['b'][0] for lr in lrs] == pytest.approx(
        [closed_form(i, 0.05) for i in range(EPOCHS * BATCHES)])
