"""minimm.mmcv's fp16_utils as MMCV 1.7 documents them: which arguments the decorators cast, when
they act, LossScaler's schedule in closed form, and the norm-layer patch."""
import numpy as np
import pytest
import torch
from torch import nn

from minimm.mmcv import LossScaler, auto_fp16, cast_tensor_type, force_fp32, wrap_fp16_model
from minimm.mmcv.fp16_utils import patch_forward_method, patch_norm_fp32


def test_cast_tensor_type_casts_only_the_source_type_recursively():
    inputs = dict(a=torch.ones(1), b=[torch.ones(1, dtype=torch.int32), (torch.ones(1), 'x')],
                  c=np.ones(1, dtype=np.float32), d=nn.Linear(1, 1))
    out = cast_tensor_type(inputs, torch.float32, torch.half)
    assert out['a'].dtype == torch.half and out['b'][0].dtype == torch.int32
    assert isinstance(out['b'][1], tuple) and out['b'][1][0].dtype == torch.half
    assert out['b'][1][1] == 'x' and out['c'] is inputs['c'] and out['d'] is inputs['d']
    assert out['d'].weight.dtype == torch.float32  # modules are left alone


class Head(nn.Module):
    """Reports the dtypes its decorated methods receive."""

    def __init__(self):
        super().__init__()
        self.fp16_enabled = False
        self.norm = nn.GroupNorm(1, 2)

    @auto_fp16(apply_to=('x', 'y'))
    def forward(self, x, y=None, z=None):
        return x, y, z

    @auto_fp16(out_fp32=True)
    def forward32(self, x):
        return dict(x=x)

    @force_fp32(apply_to=('pred', ))
    def loss(self, pred, target):
        return pred, target, torch.is_autocast_enabled('cuda')


def dtypes(outputs):
    return [t.dtype for t in outputs]


def test_the_decorators_do_nothing_until_wrap_fp16_model_enables_them():
    head, f32, f16 = Head(), torch.ones(2), torch.ones(2, dtype=torch.half)
    assert dtypes(head(f32, y=f32, z=f32)) == [torch.float32] * 3
    assert dtypes(head.loss(f16, f16)[:2]) == [torch.half] * 2
    wrap_fp16_model(nn.Sequential(head))
    assert head.fp16_enabled
    # auto_fp16: the float32 arguments named in apply_to, positional or keyword, become half
    assert dtypes(head(f32, y=f32, z=f32)) == [torch.half, torch.half, torch.float32]
    assert dtypes(head(f32, f32)[:2]) == [torch.half, torch.half]
    assert head.forward32(f32)['x'].dtype == torch.float32  # out_fp32 casts the output back
    # force_fp32: the named half arguments become float32, with autocast off
    with torch.autocast('cuda', enabled=torch.cuda.is_available()):  # on a GPU: switched off
        pred, target, autocast_on = head.loss(f16, f16)
    assert pred.dtype == torch.float32 and target is f16 and not autocast_on
    assert dtypes(head.loss(f16, target=f16)[:2]) == [torch.float32, torch.half]


def test_extra_positional_arguments_pass_through_uncast():
    class Varargs(nn.Module):
        fp16_enabled = True

        @auto_fp16()
        def forward(self, x, *rest):
            return x, rest

    x, rest = Varargs()(torch.ones(1), torch.ones(1), 'tag')
    # x is a named parameter: cast; the *args have no name to be chosen by: passed as given
    # (MMCV drops them)
    assert x.dtype == torch.half and rest[0].dtype == torch.float32 and rest[1] == 'tag'


def test_the_decorators_only_decorate_module_methods():
    class NotAModule:
        fp16_enabled = True

        @auto_fp16()
        def forward(self, x):
            return x

        @force_fp32()
        def loss(self, x):
            return x

    with pytest.raises(TypeError, match='@auto_fp16 can only be used'):
        NotAModule().forward(torch.ones(1))
    with pytest.raises(TypeError, match='@force_fp32 can only be used'):
        NotAModule().loss(torch.ones(1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='autocast is CUDA autocast (GPU check)')
def test_auto_fp16_runs_under_cuda_autocast():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fp16_enabled = True
            self.linear = nn.Linear(2, 2)

        @auto_fp16(apply_to=())
        def forward(self, x):
            return self.linear(x)

    assert Net().cuda()(torch.ones(1, 2).cuda()).dtype == torch.half


def test_loss_scaler_follows_its_closed_form_schedule():
    scaler = LossScaler(init_scale=2.**4, scale_factor=2., scale_window=3)
    good, bad = [nn.Parameter(torch.ones(1))], [nn.Parameter(torch.ones(1))]
    good[0].grad, bad[0].grad = torch.ones(1), torch.tensor([float('inf')])
    assert not scaler.has_overflow(good) and scaler.has_overflow(bad)
    huge = [nn.Parameter(torch.ones(2))]
    huge[0].grad = torch.full((2, ), 3e38)  # finite, though its float32 sum is not
    assert not scaler.has_overflow(huge)
    history = []
    for overflow in [False, False, True, False, False, False, True, True, True, True, True]:
        scaler.update_scale(overflow)
        history.append(scaler.loss_scale)
    # /2 on an overflow, never below 1; x2 at an iteration without one whose distance to the
    # last overflow (at -1 before the first) is a multiple of the window: iteration 5 (5 - 2)
    assert history == [16, 16, 8, 8, 8, 16, 8, 4, 2, 1, 1]
    restored = LossScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.state_dict() == scaler.state_dict() == dict(
        cur_scale=1, cur_iter=11, mode='dynamic', last_overflow_iter=10, scale_factor=2.,
        scale_window=3)
    static = LossScaler(init_scale=8., mode='static')
    static.update_scale(True)
    assert static.loss_scale == 8. and not static.has_overflow(bad)
    with pytest.raises(AssertionError, match='dynamic or static'):
        LossScaler(mode='other')


def test_patch_norm_fp32_keeps_norm_layers_in_float32_for_a_half_model():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.GroupNorm(1, 2)).half()
    patch_norm_fp32(model)
    assert [p.dtype for p in model.parameters()] == [torch.half] * 2 + [torch.float32] * 4
    # GroupNorm also gets a patched forward: float32 inputs, its output cast back to half
    assert 'forward' in vars(model[2]) and 'forward' not in vars(model[1])
    assert model[2](torch.ones(3, 2, dtype=torch.half)).dtype == torch.half
    double = patch_forward_method(lambda x: x * 2, torch.half, torch.float, convert_output=False)
    assert double(torch.ones(1, dtype=torch.half)).dtype == torch.float32
