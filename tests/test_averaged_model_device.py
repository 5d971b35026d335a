"""An averaged model plans its update on the device its averaged copy is on, with or without
``ema_dtype`` (the ``meta`` device stands in for a GPU), and keeps a plan a CUDA graph captured."""
import pytest
import torch
from torch import nn

from minimm.model import ExponentialMovingAverage
from minimm.ops import EMAPlan

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


@pytest.mark.parametrize('ema_dtype', [None, 'float32'])
def test_a_model_off_the_cpu_gets_the_plan_not_the_loop(ema_dtype):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model.to(device='meta', dtype=torch.bfloat16)
    averaged = ExponentialMovingAverage(model, momentum=0.1, ema_dtype=ema_dtype)
    assert averaged.steps.device.type == 'meta'
    assert averaged.describe(model).startswith('PyTorch plan (torch._foreach_*) on meta, 4 tensors')
    assert averaged.backend == 'ref'
    want = torch.float32 if ema_dtype else torch.bfloat16
    assert [t.dtype for t in averaged._fused.plan.ema] == [want] * 4


def test_a_captured_plan_is_kept_when_replaced_and_a_warning_says_to_capture_again(monkeypatch):
    model = nn.Linear(3, 4)
    averaged = ExponentialMovingAverage(model, momentum=0.1)
    averaged.update_parameters(model)
    captured = averaged._fused.plan
    monkeypatch.setattr(EMAPlan, 'captured', property(lambda plan: plan is captured))
    with pytest.warns(UserWarning, match='captured in a CUDA graph.*capture it again'):
        averaged.double()
    assert averaged._fused._captured_plan is captured  # with the memory the graph replays
    averaged.update_parameters(model)
    assert averaged._fused.plan is not captured and averaged._fused._captured_plan is captured
