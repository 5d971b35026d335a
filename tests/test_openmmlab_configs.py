"""`minimm train` on an MMDetection-3.x-style config: the ``_base_/default_runtime.py`` every
MMDetection 3.x config inherits (``default_scope``, ``env_cfg``, ``vis_backends``, ``visualizer``,
``log_processor=dict(type='LogProcessor', ...)``), a schedule in the shape of RTMDet's (warm-up
by iteration, a cosine converted to iterations, ``paramwise_cfg``, ``dynamic_intervals``), and a
small model and dataset in place of the detector. The LR of every parameter group at every
iteration is checked against the schedule's closed form.

The two base files keep MMDetection's text; the changes, each commented, are what minimm or the
small model needs: ``type='Visualizer'`` (MMDetection's ``DetLocalVisualizer`` draws boxes) and
no ``DetVisualizationHook``.
"""
import math
import textwrap

import pytest

from minimm.cli import main
from minimm.hooks import Hook
from minimm.registry import HOOKS

DEFAULT_RUNTIME = '''
default_scope = 'mmdet'

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1),
    sampler_seed=dict(type='DistSamplerSeedHook'))
    # minimm: no visualization=dict(type='DetVisualizationHook')

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(
    type='Visualizer', vis_backends=vis_backends, name='visualizer')  # minimm: not DetLocal...
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=True)

log_level = 'INFO'
load_from = None
resume = False
'''

# RTMDet's schedule (configs/rtmdet/rtmdet_l_8xb32-300e_coco.py), scaled down: 300 epochs -> 4,
# a 1000-iteration warm-up -> 3 iterations.
SCHEDULE = '''
max_epochs = 4
stage2_num_epochs = 1
base_lr = 0.004
interval = 3

train_cfg = dict(
    type='EpochBasedTrainLoop',
    max_epochs=max_epochs,
    val_interval=interval,
    dynamic_intervals=[(max_epochs - stage2_num_epochs, 1)])
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0, bias_decay_mult=0, bias_lr_mult=2.0, bypass_duplicate=True))

param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1.0e-5,
        by_epoch=False,
        begin=0,
        end=3),
    dict(
        # use cosine lr from 2 to 4 epoch
        type='CosineAnnealingLR',
        eta_min=base_lr * 0.05,
        begin=max_epochs // 2,
        end=max_epochs,
        T_max=max_epochs // 2,
        by_epoch=True,
        convert_to_iter_based=True),
]
'''

MAIN = '''
_base_ = ['./_base_/default_runtime.py', './_base_/schedule.py']

model = dict(type='DigitsCNN')
train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    num_batch_per_epoch=4,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='DigitsDataset', split='train'))
val_dataloader = dict(
    batch_size=120,
    num_workers=0,
    num_batch_per_epoch=1,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='DigitsDataset', split='val'))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy')
test_evaluator = val_evaluator
custom_hooks = [dict(type='RecordLRHook')]
randomness = dict(seed=0)
'''

EPOCH_LENGTH = 4


@HOOKS.register_module(force=True)
class RecordLRHook(Hook):
    """Records, per iteration, every parameter group's lr and weight decay (what the optimizer
    step of that iteration uses) and, per validation, the epoch."""
    records = []
    validated = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        RecordLRHook.records.append([(g['lr'], g['weight_decay'])
                                     for g in runner.optim_wrapper.optimizer.param_groups])

    def before_val(self, runner):
        RecordLRHook.validated.append(runner.epoch)


def schedule_lr(i, base_lr):
    """The closed form of the schedule at (0-based) iteration ``i`` for a group whose initial
    lr is ``base_lr``: LinearLR over iterations 0..2 (``end`` is exclusive: the factor reaches 1
    at iteration end - 1), constant, then the cosine of epochs 2..4 converted to iterations 8..16
    (with its absolute eta_min)."""
    warmup_end, begin, t_max, eta_min = 3, 2 * EPOCH_LENGTH, 2 * EPOCH_LENGTH, 0.004 * 0.05
    if i < warmup_end:
        return base_lr * (1.0e-5 + (1 - 1.0e-5) * i / (warmup_end - 1))
    if i < begin:
        return base_lr
    return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * (i - begin) / t_max)) / 2


def test_mmdet_style_runtime_and_schedule(tmp_path):
    (tmp_path / '_base_').mkdir()
    (tmp_path / '_base_' / 'default_runtime.py').write_text(textwrap.dedent(DEFAULT_RUNTIME))
    (tmp_path / '_base_' / 'schedule.py').write_text(textwrap.dedent(SCHEDULE))
    (tmp_path / 'rtmdet_digits.py').write_text(textwrap.dedent(MAIN))
    RecordLRHook.records, RecordLRHook.validated = [], []

    main(['train', str(tmp_path / 'rtmdet_digits.py'), '--work-dir', str(tmp_path / 'work')])

    records = RecordLRHook.records
    assert len(records) == 4 * EPOCH_LENGTH
    # paramwise_cfg, as MMEngine's DefaultOptimWrapperConstructor applies it to DigitsCNN's ten
    # parameters (two convolutions and a linear head, each with a bias; two BatchNorm layers):
    # the 3 non-norm biases at twice the lr and without decay, the 4 BatchNorm weights and
    # biases at the lr without decay, the 3 other weights at the lr and the optimizer's decay.
    base_lrs = [lr / schedule_lr(0, 1.0) for lr, _ in records[0]]
    groups = sorted((round(base, 9), decay) for base, (_, decay) in zip(base_lrs, records[0]))
    assert groups == [(0.004, 0.0)] * 4 + [(0.004, 0.05)] * 3 + [(0.008, 0.0)] * 3
    for i, lrs in enumerate(records):
        for base, (lr, _) in zip(base_lrs, lrs):
            assert lr == pytest.approx(schedule_lr(i, round(base, 9)), rel=1e-9), (i, lr)
    # dynamic_intervals: every 3 epochs until the next epoch reaches 3, then every epoch (without
    # them: after epochs 3 and 4)
    assert RecordLRHook.validated == [2, 3, 4]
