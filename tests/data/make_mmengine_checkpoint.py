"""How tests/data/mmengine_0.10.7_toy.pth was made: a real MMEngine 0.10.7 run (its Runner, hooks
and checkpoint writer) of the toy model and data of tests/toy.py, one epoch of 3 iterations.

    pip install mmengine==0.10.7   # in a scratch environment with torch
    python tests/data/make_mmengine_checkpoint.py OUT_DIR

The file is MMEngine's own output (credit: OpenMMLab's MMEngine, Apache-2.0); its MessageHub
holds pickled ``HistoryBuffer`` objects, the reason minimm reads it only with trusted=True.
"""
import os.path as osp
import sys

import torch
from mmengine.runner import Runner
from torch.utils.data import DataLoader

# The toy model and data of the tests (minimm's own classes, which MMEngine's Runner trains as
# any module with a train_step); minimm need not be installed, only importable from the checkout.
TESTS = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path[:0] = [TESTS, osp.dirname(TESTS)]
from toy import ToyDataset, ToyModel  # noqa: E402

torch.manual_seed(0)
Runner(model=ToyModel(), work_dir=sys.argv[1],
       train_dataloader=DataLoader(ToyDataset(), batch_size=4),
       train_cfg=dict(by_epoch=True, max_epochs=1),
       optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
       param_scheduler=dict(type='MultiStepLR', milestones=[2], by_epoch=True),
       default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
       randomness=dict(seed=0)).train()
