"""The LR-schedule picture: what a few common ``param_scheduler`` configs produce.

Each curve is computed by ``minimm.plot.lr``, which builds the schedulers from the config and
steps them as ``ParamSchedulerHook`` does; nothing here is a formula typed in by hand.
"""
from typing import Dict

from ..lr import mmengine_schedule

EPOCH_LENGTH = 10
SCHEDULES: Dict[str, list] = {
    'LinearLR warm-up + CosineAnnealingLR': [
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20),
        dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=12)],
    'LinearLR warm-up + MultiStepLR([8, 11])': [
        dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=20),
        dict(type='MultiStepLR', by_epoch=True, milestones=[8, 11], gamma=0.1)],
    'CosineAnnealingLR, convert_to_iter_based': [
        dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=12, eta_min=0.001,
             convert_to_iter_based=True)],
    'OneCycleLR': [
        dict(type='OneCycleLR', eta_max=0.1, total_steps=12 * EPOCH_LENGTH, by_epoch=False)],
}


def schedule_of(param_scheduler: list) -> Dict[str, list]:
    """LR and momentum per iteration for 12 epochs of 10 iterations, SGD(lr=0.1, momentum=0.9)."""
    cfg = dict(train_cfg=dict(by_epoch=True, max_epochs=12),
               optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
               param_scheduler=param_scheduler)
    return mmengine_schedule(cfg, epoch_length=EPOCH_LENGTH)


def draw_schedules(out: str) -> str:
    from .. import require_pyplot, save_figure
    plt = require_pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 5.6), sharex=True)
    for ax, (title, param_scheduler) in zip(axes.flat, SCHEDULES.items()):
        values = schedule_of(param_scheduler)
        ax.plot(values['lr'], color='tab:blue', label='lr')
        ax.set_title(title, fontsize=9)
        for epoch in range(0, 12 * EPOCH_LENGTH + 1, EPOCH_LENGTH):
            ax.axvline(epoch, color='grey', lw=0.3)
        if len(set(values['momentum'])) > 1:
            twin = ax.twinx()
            twin.plot(values['momentum'], color='tab:orange', label='momentum')
            twin.set_ylabel('momentum', color='tab:orange', fontsize=8)
        ax.set_ylabel('lr', color='tab:blue', fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel(f'iteration ({EPOCH_LENGTH} per epoch; grey lines = epochs)')
    return save_figure(fig, out, dpi=72)
