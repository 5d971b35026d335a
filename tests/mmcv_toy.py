"""A toy MMCV-style model and helpers shared by the tests of ``minimm.mmcv`` (tiny, deterministic)."""
import logging

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from minimm.mmcv import EpochBasedRunner, Hook


class ToyData(Dataset):
    """``n`` samples ``(x, y)`` with x of 3 features; ``evaluate`` reports the mean output."""

    def __init__(self, n=6, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 3, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(x=self.x[i], y=self.y[i])

    def evaluate(self, results, logger=None, **kwargs):
        return dict(score=float(torch.stack(results).mean()) + kwargs.get('offset', 0.0))


class ToyModel(nn.Module):
    """MMCV-style: ``train_step``/``val_step`` return ``dict(loss, log_vars, num_samples)``."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([[0.5, -0.25, 0.1]]))
            self.linear.bias.fill_(0.2)

    def forward(self, x, y=None, return_loss=True):
        out = self.linear(x)
        if not return_loss:
            return list(out.detach())
        return ((out - y) ** 2).mean()

    def train_step(self, data_batch, optimizer, **kwargs):
        loss = self(**data_batch)
        return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data_batch['x']))

    def val_step(self, data_batch, optimizer=None, **kwargs):
        return self.train_step(data_batch, optimizer)


class Recorder(Hook):
    """Records ``stage (mode, epoch, iter, inner_iter)`` for every stage."""

    def __init__(self, generic=False):
        self.trace = []
        stages = Hook.stages + (('before_epoch', 'after_epoch') if generic else ())
        for stage in stages:
            setattr(self, stage, self._recorder(stage))

    def _recorder(self, stage):
        def record(runner):
            self.trace.append(f'{stage} ({runner.mode},{runner.epoch},{runner.iter},{runner.inner_iter})')
        return record


def loader(n=6, batch_size=2, seed=0, shuffle=False):
    return DataLoader(ToyData(n, seed), batch_size=batch_size, shuffle=shuffle)


def make_runner(tmp_path=None, runner_cls=EpochBasedRunner, lr=0.1, momentum=0.9, meta=None, **kwargs):
    torch.manual_seed(0)
    model = ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    return runner_cls(model, optimizer=optimizer, work_dir=None if tmp_path is None else str(tmp_path),
                      logger=logging.getLogger('mmcv-test'), meta=meta, **kwargs)
