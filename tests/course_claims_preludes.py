"""The code that several claims of tests/test_course_claims.py start with (kept apart, so that the
claims file stays short): MMEngine's names, read as minimm's where a claim runs the same code."""

# A model that is never trained: the Runner needs one to be built.
MODEL = """
class M(BaseModel):
    def forward(self, inputs=None, data_samples=None, mode='tensor'):
        return inputs
"""

# A short training on a one-layer model: 12 iterations an epoch, a metric that counts samples, a
# work dir and an experiment name of its own (MMEngine shares a MessageHub between Runners of one
# name, and the name is the time to the second).
TINY_RUN = """
import tempfile
import uuid
import torch
from torch.utils.data import DataLoader
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner


class Net(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = self.fc(inputs)
        return dict(loss=out.pow(2).mean()) if mode == 'loss' else list(out)


class Count(BaseMetric):
    def process(self, data_batch, data_samples):
        self.results.append(len(data_samples))

    def compute_metrics(self, results):
        return dict(n=sum(results))


DATA = [dict(inputs=torch.ones(2), data_samples=torch.tensor(0)) for _ in range(24)]


def tiny_run(hooks=(), train_cfg=dict(by_epoch=True, max_epochs=2), train=True, **kwargs):
    runner = Runner(model=Net(), work_dir=tempfile.mkdtemp(), experiment_name=uuid.uuid4().hex,
                    train_dataloader=DataLoader(DATA, batch_size=2), train_cfg=train_cfg,
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    custom_hooks=list(hooks), **kwargs)
    if train:
        runner.train()
    return runner
"""
