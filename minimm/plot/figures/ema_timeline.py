"""The EMA timeline picture, recorded from a real run of ``EMAHook``.

A small run (digits CNN, 2 epochs of 3 iterations, validation and a checkpoint after each epoch)
carries a recording hook at ``LOWEST`` priority, so it sees every stage after ``EMAHook`` has acted.
At each stage it notes whose weights ``runner.model`` holds, the raw (trained) ones or the EMA
ones, and, at each save, what the checkpoint's ``state_dict`` and ``ema_state_dict`` hold.
"""
from typing import List, NamedTuple

import torch

from ...hooks import EMAHook, Hook


class Event(NamedTuple):
    stage: str
    holder: str          # whose weights runner.model holds: 'raw' or 'EMA'
    note: str = ''


class _Recorder(Hook):
    priority = 'LOWEST'

    def __init__(self):
        self.events: List[Event] = []
        self.raw = None

    def _ema(self, runner):
        return next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model.module

    def _holder(self, runner) -> str:
        weight = runner.model.head.weight
        return 'raw' if self.raw is None or torch.equal(weight, self.raw) else 'EMA'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.raw = runner.model.head.weight.detach().clone()    # training always sees raw weights
        self.events.append(Event(f'train iter {runner.iter + 1}', 'raw', 'EMA updated'))

    def before_save_checkpoint(self, runner, checkpoint):
        ema = self._ema(runner).state_dict()['head.weight']
        in_state = 'EMA' if torch.equal(checkpoint['state_dict']['head.weight'], ema) else 'raw'
        in_ema_state = ('raw' if torch.equal(checkpoint['ema_state_dict']['module.head.weight'],
                                             self.raw) else 'EMA')
        self.events.append(Event(f'save epoch_{runner.epoch + 1}.pth', self._holder(runner),
                                 f'state_dict={in_state}\nema_state_dict={in_ema_state}'))

    def before_val_epoch(self, runner):
        self.events.append(Event('before_val_epoch', self._holder(runner), 'swap'))

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.events.append(Event(f'val iter {batch_idx + 1}', self._holder(runner)))

    def after_val_epoch(self, runner, metrics=None):
        self.events.append(Event('after_val_epoch', self._holder(runner), 'swap back'))


def record_ema_run(work_dir: str) -> List[Event]:
    """Run the small EMA training in ``work_dir``; return the recorded events in order."""
    from torch.utils.data import Subset

    from ...dataset import DigitsDataset
    from ...runner import Runner

    def loader(split, n):
        return dict(batch_size=16, dataset=Subset(DigitsDataset(split), range(n)),
                    sampler=dict(type='DefaultSampler', shuffle=False),
                    collate_fn=dict(type='default_collate'))

    recorder = _Recorder()
    runner = Runner(model=dict(type='DigitsCNN'), work_dir=work_dir,
                    train_dataloader=loader('train', 48), val_dataloader=loader('val', 32),
                    train_cfg=dict(by_epoch=True, max_epochs=2), val_cfg=dict(),
                    val_evaluator=dict(type='Accuracy'),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    custom_hooks=[dict(type='EMAHook', momentum=0.5), recorder],
                    randomness=dict(seed=0), log_level='ERROR')
    runner.train()
    return recorder.events


def draw_ema_timeline(events: List[Event], out: str) -> str:
    from .. import require_pyplot, save_figure
    plt = require_pyplot()
    colours = {'raw': '#4c72b0', 'EMA': '#dd8452'}
    fig, ax = plt.subplots(figsize=(15, 4))
    for x, event in enumerate(events):
        ax.add_patch(plt.Rectangle((x, 0), 0.92, 1, color=colours[event.holder]))
        ax.text(x + 0.46, 1.08, event.stage, rotation=50, fontsize=8, ha='left', va='bottom')
        if event.note:
            low = event.stage.startswith('save')        # its two-line note goes a line lower
            ax.text(x + 0.46, -0.55 if low else -0.12, event.note, fontsize=7.5, ha='center',
                    va='top', weight='bold' if 'swap' in event.note else 'normal')
    for holder, colour in colours.items():
        ax.plot([], [], 's', color=colour, markersize=10,
                label=f'runner.model holds the {holder} weights')
    ax.legend(loc='lower left', ncol=2, fontsize=8, frameon=False)
    ax.set(xlim=(-0.2, len(events) + 0.2), ylim=(-1.9, 2.9))
    ax.axis('off')
    ax.set_title('EMAHook over 2 epochs: EMA weights in the model only during validation; '
                 'each checkpoint stores the EMA weights as state_dict', fontsize=10)
    return save_figure(fig, out)
