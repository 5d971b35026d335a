"""How tests/data/mmengine_0.10.7_toy.pth was made: a real MMEngine 0.10.7 run (not minimm) of
the toy model of tests/toy.py, one epoch of 3 iterations, saved by MMEngine's CheckpointHook.

    pip install mmengine==0.10.7   # in a scratch environment with torch
    python tests/data/make_mmengine_checkpoint.py OUT_DIR

The file is MMEngine's own output (credit: OpenMMLab's MMEngine, Apache-2.0); its MessageHub
holds pickled ``HistoryBuffer`` objects, the reason minimm reads it only with trusted=True.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import DataLoader, Dataset


class ToyDataset(Dataset):  # tests/toy.py's, as MMEngine reads it
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
        return logits


torch.manual_seed(0)
Runner(model=ToyModel(), work_dir=sys.argv[1],
       train_dataloader=DataLoader(ToyDataset(), batch_size=4),
       train_cfg=dict(by_epoch=True, max_epochs=1),
       optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
       param_scheduler=dict(type='MultiStepLR', milestones=[2], by_epoch=True),
       default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
       randomness=dict(seed=0)).train()
