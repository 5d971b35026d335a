"""A toy model, dataset and metric shared by the runner tests (deterministic, tiny, fast), and the
random tensors of the ops tests."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from minimm.evaluator import BaseMetric
from minimm.hooks import Hook
from minimm.model import BaseModel


class ToyDataset(Dataset):
    """``n`` samples of 4 features, label = whether the features sum above 0."""

    metainfo = dict(classes=('neg', 'pos'))

    def __init__(self, n=12, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(inputs=self.x[i], data_samples=self.y[i])


class ToyModel(BaseModel):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)
        self.bn = nn.BatchNorm1d(2)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        logits = self.bn(self.linear(inputs))
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits, data_samples))
        if mode == 'predict':
            return [dict(pred_label=p, gt_label=t) for p, t in zip(logits.argmax(1), data_samples)]
        return logits


class ToyMetric(BaseMetric):
    default_prefix = 'toy'

    def process(self, data_batch, data_samples):
        for sample in data_samples:
            self.results.append(float(sample['pred_label'] == sample['gt_label']))

    def compute_metrics(self, results):
        return dict(acc=100.0 * sum(results) / len(results))


class ScriptedMetric(ToyMetric):
    """Reports a fixed sequence of scores as ``toy/acc``, one per validation, and a constant
    ``toy/loss`` of 1.0 (a second key for ``save_best``)."""

    def __init__(self, scores):
        super().__init__()
        self.scores = list(scores)

    def compute_metrics(self, results):
        return dict(acc=self.scores.pop(0), loss=1.0)


def toy_loader(n=12, batch_size=4, shuffle=False):
    return DataLoader(ToyDataset(n), batch_size=batch_size, shuffle=shuffle)


def toy_loader_cfg(n=12, batch_size=4, shuffle=True):
    return dict(dataset=ToyDataset(n), batch_size=batch_size,
                sampler=dict(type='DefaultSampler', shuffle=shuffle),
                collate_fn=dict(type='default_collate'))


class RecordHook(Hook):
    """Records (stage, epoch, iter, batch_idx) for every stage it sees."""

    priority = 'LOWEST'

    def __init__(self):
        self.calls = []

    def _record(self, stage, runner, batch_idx=None):
        self.calls.append((stage, runner.epoch, runner.iter, batch_idx))


def _make_stage(stage):
    if stage.endswith('_iter'):
        def method(self, runner, batch_idx, data_batch=None, outputs=None):
            self._record(stage, runner, batch_idx)
    elif stage.endswith('checkpoint'):
        def method(self, runner, checkpoint):
            self._record(stage, runner)
    elif stage in ('after_val_epoch', 'after_test_epoch'):
        def method(self, runner, metrics=None):
            self._record(stage, runner)
    else:
        def method(self, runner):
            self._record(stage, runner)
    return method


for _stage in Hook.stages:
    setattr(RecordHook, _stage, _make_stage(_stage))


class WeightRecorder(Hook):
    """The model's parameters after every train iteration (after the optimizer step), as float64
    copies on the CPU: the input of the tests' EMA oracles."""

    priority = 'LOWEST'

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.seen.append([p.detach().to('cpu', torch.float64, copy=True)
                          for p in runner.model.parameters()])


def no_default_hooks():
    """``default_hooks`` that remove all six of MMEngine 0.10's default hooks."""
    return dict.fromkeys(('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
                          'checkpoint'))


def toy_runner(tmp_path, by_epoch=True, max_=2, custom_hooks=(), val=True, **kwargs):
    """A Runner over the toy model: 12 train samples in batches of 4 (3 iterations per epoch),
    8 validation samples (2 iterations), SGD, seed 0; ``kwargs`` go to the Runner."""
    from minimm.runner import Runner
    train_cfg = dict(by_epoch=True, max_epochs=max_, val_interval=1) if by_epoch else \
        dict(by_epoch=False, max_iters=max_, val_interval=3)
    val_kwargs = dict(val_dataloader=toy_loader(8, 4), val_cfg=dict(),
                      val_evaluator=ToyMetric()) if val else {}
    kwargs.setdefault('train_dataloader', toy_loader(12, 4))
    kwargs.setdefault('optim_wrapper', dict(optimizer=dict(type='SGD', lr=0.1)))
    torch.manual_seed(0)  # the same initial weights in every run
    model = kwargs.pop('model', None)
    return Runner(model=ToyModel() if model is None else model, work_dir=str(tmp_path), train_cfg=train_cfg,
                  custom_hooks=list(custom_hooks), randomness=dict(seed=0), **val_kwargs,
                  **kwargs)


def random_tensor(shape, dtype, seed, device='cpu'):
    """A reproducible tensor for the ops tests: standard normal values rounded to ``dtype`` for
    floating dtypes, integers in [-1000, 1000) (wrapped for uint8, nonzero for bool) otherwise."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        values = torch.randn(shape, generator=g, dtype=torch.float64)
    else:
        values = torch.randint(-1000, 1000, shape, generator=g)
    return values.to(device=device, dtype=dtype)
