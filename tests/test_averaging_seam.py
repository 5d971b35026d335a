"""The averaging seam (minimm/ops/averaging.py): the averaged models hand the fast path one record,
only when a plan is built or rebuilt; the fast path runs from a record alone; PostHocEMAHook goes
through the model layer. And a plan follows memory re-allocated under the same tensors (FSDP frees
a parameter's storage with ``resize_(0)`` and allocates it again: the same tensor and storage
objects, another address)."""
import ast
import inspect

import pytest
import torch
from torch import nn

from minimm.model import AveragingGroup, ExponentialMovingAverage, PowerFunctionEMA
from minimm.hooks import posthoc_ema_hook
from minimm.model.host_count import HostCount
from minimm.ops import AveragingRecord, EMAPlan, EMATarget, FusedAveraging

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def reallocate(tensor: torch.Tensor, values: torch.Tensor) -> list:
    """Free ``tensor``'s memory and allocate it again elsewhere, under the same storage object,
    then fill it with ``values``; returns the blockers, which must stay alive. Blockers take the
    freed block until the allocator hands the storage another address (which one it reuses
    depends on the allocator, so this asks again rather than assume)."""
    storage = tensor.untyped_storage()
    nbytes = storage.nbytes()
    before = tensor.data_ptr()
    blockers = []
    for _ in range(16):
        storage.resize_(0)
        blockers.append(torch.full((tensor.numel(), ), 7.0, dtype=tensor.dtype))
        storage.resize_(nbytes)
        if tensor.data_ptr() != before:
            break
    assert tensor.data_ptr() != before, 'the allocator kept handing back the same block'
    with torch.no_grad():
        tensor.copy_(values)
    return blockers


@pytest.mark.parametrize('backend', ['ref', 'native'])
def test_a_refreshed_plan_follows_a_storage_allocated_again(request, backend):
    if backend == 'native':
        request.getfixturevalue('native')  # skipped where there are no native kernels
    ema, src = torch.zeros(64), torch.ones(64)
    plan = EMAPlan([ema], [src], rule='ema', momentum=0.5, backend=backend)
    steps = torch.zeros((), dtype=torch.long)
    plan.step(steps, 0)  # copies: ema == 1
    blockers = reallocate(src, torch.full((64, ), 3.0))
    assert plan.refresh() == (backend == 'native')  # the native table moved; the fallback reads as is
    plan.step(steps, 1)
    assert torch.equal(ema, torch.full((64, ), 2.0))  # 1 + 0.5 * (3 - 1)
    assert all(torch.equal(blocker, torch.full((64, ), 7.0)) for blocker in blockers)


def test_the_record_is_asked_for_only_to_build_or_rebuild_a_plan(monkeypatch):
    asked = []
    record = ExponentialMovingAverage._plan_record
    monkeypatch.setattr(ExponentialMovingAverage, '_plan_record',
                        lambda self, model: asked.append(1) or record(self, model))
    model = nn.Sequential(nn.Linear(4, 64), nn.BatchNorm1d(64))
    averaged = ExponentialMovingAverage(model, momentum=0.25)
    for _ in range(5):
        averaged.update_parameters(model)
    assert len(asked) == 1
    averaged.double()  # a conversion: the plan is rebuilt from a new record
    averaged.float()
    averaged.update_parameters(model)
    assert len(asked) == 2
    # FSDP's way: the parameter's memory freed and allocated again, then the parameter
    # registered again (which is what FSDP does after it gathered the weights).
    weight = model[0].weight
    reallocate(weight, torch.full_like(weight, 3.0))
    model[0].weight = weight
    before = averaged.module[0].weight.detach().clone()
    averaged.update_parameters(model)
    assert len(asked) == 3
    # the new memory was read (the kernels and lerp_ round differently: a few ulps apart)
    torch.testing.assert_close(averaged.module[0].weight.detach(), before + 0.25 * (3.0 - before))


def test_a_group_updates_like_its_models_one_by_one_and_follows_their_conversions():
    torch.manual_seed(0)
    model = nn.Linear(8, 16)
    alone = [PowerFunctionEMA(model, sigma_rel=s) for s in (0.05, 0.1, 0.2)]
    grouped = [PowerFunctionEMA(model, sigma_rel=s) for s in (0.05, 0.1, 0.2)]
    group = AveragingGroup(grouped)
    assert '3 averaged copies in one pass' in group.describe(model)
    for step in range(6):
        with torch.no_grad():
            model.weight.add_(torch.randn_like(model.weight))
        for ema in alone:
            ema.update_parameters(model)
        group.update_parameters(model)
        if step == 2:  # a model of the group converted: the group's plan follows it
            for ema in alone + grouped:
                ema.double().float()
    for a, b in zip(alone, grouped):
        assert torch.equal(a.module.weight, b.module.weight) and int(a.steps) == int(b.steps) == 6
    with pytest.raises(ValueError, match='AveragingGroup: 1 to 8 averaged models, got 9'):
        AveragingGroup([PowerFunctionEMA(model, gamma=g) for g in range(9)])


def test_the_fast_path_runs_from_a_record_alone():
    """No averaged model at all: plain tensors, a counter and its host copy in a record."""
    model = nn.Linear(3, 2)
    copy = [torch.zeros_like(p) for p in model.parameters()]
    steps = torch.zeros((), dtype=torch.long)
    record = AveragingRecord('Plain', list(model.parameters()), [],
                             [EMATarget(copy, rule='ema', momentum=0.25)], [steps],
                             [HostCount(steps, 0)])
    fused = FusedAveraging()
    for _ in range(2):
        assert fused.step(model, lambda m: record)
    assert int(steps) == 2
    for c, p in zip(copy, model.parameters()):
        assert torch.equal(c, p.detach())  # copied, then averaged with itself
    loop = AveragingRecord('Custom', loop_reason='Custom overrides avg_func')
    assert fused.step(model, lambda m: loop)  # the record is asked for only to build a plan
    fused.forget('Plain')
    assert not fused.step(model, lambda m: loop) and fused.backend == 'loop'


def test_posthoc_ema_hook_imports_nothing_from_ops():
    tree = ast.parse(inspect.getsource(posthoc_ema_hook))
    imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imported and not [m for m in imported if m and m.split('.')[-1] == 'ops'
                             or (m or '').startswith('minimm.ops')]
