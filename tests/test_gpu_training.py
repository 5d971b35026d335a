"""Training on cuda:0, end to end (run by tests/gpu_check.sh; skipped without a GPU).

* EMAHook, for each averaging type: the fused native plan is what ran (the hook's log line and the
  averaged model's ``backend``), the EMA step never synchronises with the host
  (``torch.cuda.set_sync_debug_mode('error')`` around it), and the EMA weights equal MMEngine's
  recurrence computed here in float64 from the weights recorded after every iteration.
* AmpOptimWrapper in fp16: the GradScaler scale saved in the checkpoint is restored on resume.
* SyncBuffersHook over NCCL with one process: buffers of every layout keep their values.
"""
import glob
import os
from types import SimpleNamespace

import pytest
import torch

from dist_utils import run_distributed
from minimm.hooks import EMAHook, SyncBuffersHook
from minimm.ops import backend_info
from toy import ToyModel, WeightRecorder, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

if not torch.cuda.is_available():
    pytest.skip('no CUDA device: these tests train on cuda:0', allow_module_level=True)
if backend_info()['cuda']['backend'] != 'native':
    pytest.skip(f"no native CUDA kernels: {backend_info()['cuda']['reason']}", allow_module_level=True)


class SyncCheckedEMAHook(EMAHook):
    """EMAHook whose averaging step raises on any host synchronisation."""

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode('error')
        try:
            super().after_train_iter(runner, batch_idx, data_batch, outputs)
        finally:
            torch.cuda.set_sync_debug_mode('default')


# MMEngine's weight of the new value at averaging call `steps` (copy at 0), per type.
WEIGHTS = {
    'ExponentialMovingAverage': (dict(momentum=0.2), lambda steps: 0.2),
    'MomentumAnnealingEMA': (dict(momentum=0.01, gamma=4), lambda steps: max(0.01, 4 / (4 + steps))),
    'StochasticWeightAverage': ({}, lambda steps: 1 / (steps + 1)),
}


@pytest.mark.parametrize('ema_type', list(WEIGHTS))
def test_ema_hook_runs_the_fused_plan_on_cuda_without_host_sync(tmp_path, ema_type):
    kwargs, weight = WEIGHTS[ema_type]
    hook, recorder = SyncCheckedEMAHook(ema_type=ema_type, **kwargs), WeightRecorder()
    runner = toy_runner(tmp_path, max_=2, val=False, custom_hooks=[hook, recorder])
    runner.train()
    assert next(runner.model.parameters()).device == torch.device('cuda', 0)
    assert hook.ema_model.backend == 'native'
    (log_file,) = glob.glob(os.path.join(runner.log_dir, '*.log'))
    with open(log_file) as f:
        assert 'EMA: fused native plan on cuda:0, 4 tensors' in f.read()
    expected = None
    for steps, params in enumerate(recorder.seen):
        if steps == 0:
            expected = params
        else:
            expected = [e + weight(steps) * (p - e) for e, p in zip(expected, params)]
    assert int(hook.ema_model.steps) == len(recorder.seen) == 6
    for got, want in zip(hook.ema_model.module.parameters(), expected):
        torch.testing.assert_close(got.double().cpu(), want, rtol=1e-6, atol=1e-6)
    for got, want in zip(hook.ema_model.module.buffers(), runner.model.buffers()):
        assert torch.equal(got, want)  # mirrored on every call


def _scaler_runner(work_dir, **kwargs):
    return toy_runner(work_dir, max_=2, val=False, **kwargs, optim_wrapper=dict(
        type='AmpOptimWrapper', dtype='float16', optimizer=dict(type='SGD', lr=0.1),
        loss_scale=dict(init_scale=1024.0, growth_interval=1)))


def test_amp_fp16_resume_restores_the_grad_scaler(tmp_path):
    first = _scaler_runner(tmp_path)
    first.train()
    saved = torch.load(tmp_path / 'epoch_2.pth', weights_only=True)['optimizer']['loss_scaler']['scale']
    assert saved == first.optim_wrapper.loss_scaler.get_scale() > 1024.0  # it grew: fp16 steps ran
    resumed = _scaler_runner(tmp_path, resume=True)
    resumed.train()  # loads epoch_2.pth (a fresh scaler would start at 1024); nothing is left to train
    assert resumed.optim_wrapper.loss_scaler.get_scale() == saved


def _nccl_sync(rank):
    model = ToyModel().cuda()
    model.train()
    model(torch.randn(8, 4, device='cuda'))
    model.register_buffer('transposed', torch.arange(6.0, device='cuda').view(2, 3).t())
    before = [b.clone() for b in model.buffers()]
    hook = SyncBuffersHook()
    hook.after_train_epoch(SimpleNamespace(model=model))
    return hook.distributed, [b.cpu() for b in before], [b.cpu() for b in model.buffers()], \
        model.transposed.stride()


def test_sync_buffers_hook_over_nccl_with_one_process(tmp_path):
    ((distributed, before, after, stride),) = run_distributed(_nccl_sync, tmp_path, world_size=1, backend='nccl')
    assert distributed and stride == (1, 3)
    assert all(torch.equal(a, b) for a, b in zip(before, after))  # the mean over one rank
