"""Resuming an iteration-based run: the sampler is moved past the trained batches, none is loaded.

The oracle is an uninterrupted run with the same seed: it records which dataset indices each
iteration loaded and its loss; a run resumed from its ``iter_k.pth`` must load exactly the indices
of iterations k+1..n (nothing for iterations 1..k) and reproduce the losses.
"""
import pytest
import torch
from torch.utils.data import DataLoader

from minimm.dataset import build_dataloader
from minimm.hooks import Hook
from minimm.runner import Runner
from toy import ToyDataset, ToyModel


class CountingDataset(ToyDataset):
    """ToyDataset that logs every index it is asked for."""

    def __init__(self, n=12):
        super().__init__(n)
        self.loaded = []

    def __getitem__(self, i):
        self.loaded.append(i)
        return super().__getitem__(i)


class IterationLog(Hook):
    """Per iteration: the indices the dataset loaded since the previous one, and the loss."""

    priority = 'LOWEST'

    def __init__(self, dataset):
        self.dataset = dataset
        self.loaded, self.losses = [], []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.loaded.append(self.dataset.loaded[:])
        self.dataset.loaded.clear()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.losses.append(outputs['loss'].item())


def _run(work_dir, loader, max_iters, resume=None):
    torch.manual_seed(0)
    log = IterationLog(loader.dataset)
    runner = Runner(model=ToyModel(), work_dir=str(work_dir), train_dataloader=loader,
                    train_cfg=dict(by_epoch=False, max_iters=max_iters),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=7,
                                                       by_epoch=False)),
                    custom_hooks=[log], randomness=dict(seed=0), resume=resume,
                    log_level='WARNING')
    runner.train()
    return log


def _loader(sampler_type):
    """12 samples in batches of 5: 3 batches an epoch, the last one short (12 = 5 + 5 + 2)."""
    cfg = dict(dataset=CountingDataset(12), batch_size=5,
               sampler=dict(type=sampler_type, shuffle=True),
               collate_fn=dict(type='default_collate'))
    return build_dataloader(cfg, seed=0)


@pytest.mark.parametrize('sampler_type', ['DefaultSampler', 'InfiniteSampler'])
def test_resume_loads_only_the_batches_after_the_checkpoint(tmp_path, sampler_type):
    straight = _run(tmp_path / 'straight', _loader(sampler_type), max_iters=10)
    # iter_7.pth: 7 = 2 epochs of 3 batches + 1, so a DefaultSampler resumes inside epoch 2.
    resumed = _run(tmp_path / 'resumed', _loader(sampler_type), max_iters=10,
                   resume=str(tmp_path / 'straight' / 'iter_7.pth'))
    assert len(resumed.losses) == 3
    # Before iteration 8 nothing was loaded but its own batch: the skipped ones were not read.
    assert resumed.loaded == straight.loaded[7:]
    assert resumed.losses == pytest.approx(straight.losses[7:], abs=0, rel=0)


def test_a_sampler_without_set_start_index_still_resumes_by_loading_the_batches(tmp_path):
    def loader():
        return DataLoader(CountingDataset(12), batch_size=5)  # torch's SequentialSampler

    straight = _run(tmp_path / 'straight', loader(), max_iters=10)
    resumed = _run(tmp_path / 'resumed', loader(), max_iters=10,
                   resume=str(tmp_path / 'straight' / 'iter_7.pth'))
    skipped = [i for batch in straight.loaded[:7] for i in batch]
    # The fallback (MMEngine's way): the 7 skipped batches are loaded before iteration 8's.
    assert resumed.loaded[0] == skipped + straight.loaded[7]
    assert resumed.loaded[1:] == straight.loaded[8:]
    assert resumed.losses == pytest.approx(straight.losses[7:], abs=0, rel=0)
