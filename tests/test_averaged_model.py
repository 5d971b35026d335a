"""Averaged models: MMEngine's recurrences against closed forms, the state-dict layout, buffers,
the decay alias, and native == reference on a small CNN with BatchNorm."""
import copy
import io
import os
import pickle

import pytest
import torch
from torch import nn

import minimm.ops.averaging as averaging
from minimm.hooks import EMAHook, Hook
from minimm.model import (BaseAveragedModel, ExponentialMovingAverage, MomentumAnnealingEMA,
                          StochasticWeightAverage)
from minimm.ops import backend_info
from minimm.registry import MODELS
from test_ops_ema import assert_within_fallback_bound, magnitude
from toy import toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


class Scalar(nn.Module):
    """One parameter holding x, and a buffer, so each update can be checked by hand."""

    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.zeros((), dtype=torch.float64))
        self.register_buffer('seen', torch.zeros((), dtype=torch.float64))

    def forward(self, inputs):
        return inputs * self.x


@pytest.fixture
def use_backend(backend, monkeypatch):
    """Make the averaged models build their plan on the given backend."""
    monkeypatch.setattr(averaging, 'PLAN_BACKEND', backend)
    return backend


def run(averaged, model, values):
    """Feed the values to the model one by one, updating after each; return the averages."""
    out = []
    for v in values:
        model.x.data.fill_(v)
        averaged.update_parameters(model)
        out.append(float(averaged.module.x))
    return out


def test_ema_closed_form(use_backend):
    model = Scalar()
    ema = ExponentialMovingAverage(model, momentum=0.25)
    got = run(ema, model, [4.0, 8.0, 0.0, 4.0])
    # copy, then avg += 0.25 * (src - avg)
    assert got == pytest.approx([4.0, 5.0, 3.75, 3.8125], abs=1e-12)
    assert int(ema.steps) == 4


def test_interval_counts_before_incrementing(use_backend):
    """interval=2: call 0 copies, calls 2 and 4 average, the others only count."""
    model = Scalar()
    ema = ExponentialMovingAverage(model, momentum=0.5, interval=2)
    got = run(ema, model, [2.0, 100.0, 6.0, 100.0, 0.0])
    assert got == pytest.approx([2.0, 2.0, 4.0, 4.0, 2.0], abs=1e-12)


def test_momentum_annealing_closed_form(use_backend):
    """gamma=4, momentum=0.01: the averaging calls use 4/5, 4/6, 4/7, then 4/8, ..."""
    model = Scalar()
    ema = MomentumAnnealingEMA(model, momentum=0.01, gamma=4)
    values = [0.0, 1.0, 1.0, 1.0]
    got = run(ema, model, values)
    expected, avg = [0.0], 0.0
    for steps, v in zip((1, 2, 3), values[1:]):
        avg += max(0.01, 4 / (4 + steps)) * (v - avg)
        expected.append(avg)
    assert got == pytest.approx(expected, abs=1e-12)
    assert got[1] == pytest.approx(0.8)


def test_swa_is_the_running_mean(use_backend):
    model = Scalar()
    swa = StochasticWeightAverage(model)
    assert run(swa, model, [1.0, 2.0, 3.0, 6.0]) == [1.0, 1.5, 2.0, 3.0]


def test_swa_with_interval(use_backend):
    model = Scalar()
    swa = StochasticWeightAverage(model, interval=2)
    # averaging calls 0, 2, 4 with weights 1 (copy), 1/2, 1/3
    assert run(swa, model, [3.0, 99.0, 6.0, 99.0, 0.0]) == pytest.approx([3.0, 3.0, 4.5, 4.5, 3.0])


def test_buffers_are_mirrored_every_call_without_update_buffers(use_backend):
    model = Scalar()
    ema = ExponentialMovingAverage(model, momentum=0.5, interval=3)
    for i in range(4):
        model.seen.fill_(i + 10)
        ema.update_parameters(model)
        assert float(ema.module.seen) == i + 10


def bn_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))


def train(model, averaged, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        averaged.update_parameters(model)


def test_update_buffers_averages_floats_and_copies_integers(use_backend):
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.5, update_buffers=True)
    train(model, ema, 5)
    bn, bn_avg = model[1], ema.module[1]
    # MMEngine freezes num_batches_tracked at 1 here; minimm copies it on every averaging call.
    assert int(bn_avg.num_batches_tracked) == int(bn.num_batches_tracked) == 5
    assert not torch.equal(bn_avg.running_mean, bn.running_mean)  # averaged, not mirrored


@pytest.mark.parametrize('cls,kwargs', [(ExponentialMovingAverage, dict(momentum=0.1)),
                                        (MomentumAnnealingEMA, dict(momentum=0.01, gamma=3)),
                                        (StochasticWeightAverage, {})])
@pytest.mark.parametrize('update_buffers', [False, True])
def test_native_equals_reference_on_a_cnn(native, monkeypatch, cls, kwargs, update_buffers):
    results = {}
    for name in ('ref', 'native'):
        monkeypatch.setattr(averaging, 'PLAN_BACKEND', name)
        model = bn_model()
        averaged = cls(model, interval=2, update_buffers=update_buffers, **kwargs)
        train(model, averaged, 5)
        results[name] = averaged.state_dict()
    for key, value in results['ref'].items():
        got = results['native'][key]
        assert_within_fallback_bound(got, value, magnitude(got, value) + 1, updates=5)


class LoopEMA(ExponentialMovingAverage):
    """Overriding avg_func turns the plan off: MMEngine's per-tensor loop runs."""

    def avg_func(self, averaged_param, source_param, steps):
        super().avg_func(averaged_param, source_param, steps)


def test_custom_avg_func_runs_the_loop_with_the_same_numbers(use_backend):
    """Equal to the plan within the kernels' bound (bit for bit on the fallback, also lerp_)."""
    results = []
    for cls in (ExponentialMovingAverage, LoopEMA):
        model = bn_model()
        averaged = cls(model, momentum=0.2, interval=2)
        train(model, averaged, 5)
        assert (averaged._fused.plan is None) == (cls is LoopEMA)
        results.append(averaged.state_dict())
    for key, value in results[1].items():  # the loop runs the fallback's lerp_
        assert_within_fallback_bound(results[0][key], value, magnitude(value) + 1, updates=5)


def test_state_dict_layout_and_round_trip(use_backend):
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.3)
    train(model, ema, 3)
    state = ema.state_dict()
    assert list(state)[0] == 'steps' and state['steps'].dtype == torch.long and int(state['steps']) == 3
    assert set(state) == {'steps'} | {f'module.{k}' for k in model.state_dict()}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = ExponentialMovingAverage(bn_model(), momentum=0.3)
    weight = fresh.module[0].weight
    fresh.load_state_dict(loaded)
    assert fresh.module[0].weight is weight  # copied into the existing tensors, not replaced
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in state.items())
    train(model, ema, 1)
    train(copy.deepcopy(model), fresh, 0)
    fresh.update_parameters(model)
    assert torch.equal(fresh.module[0].weight, ema.module[0].weight)


def test_copies_and_pickles_after_updates(use_backend):
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.3)
    train(model, ema, 2)
    for clone in (copy.deepcopy(ema), pickle.loads(pickle.dumps(ema))):
        assert all(torch.equal(v, clone.state_dict()[k]) for k, v in ema.state_dict().items())
        clone.update_parameters(model)
        assert int(clone.steps) == 3


def test_forward_delegates_and_module_is_frozen():
    model = Scalar()
    model.x.data.fill_(3.0)
    ema = ExponentialMovingAverage(model)
    assert float(ema(torch.tensor(2.0, dtype=torch.float64))) == 6.0
    assert not any(p.requires_grad for p in ema.parameters())
    assert ema.module is not model


def test_momentum_and_decay():
    model = Scalar()
    assert ExponentialMovingAverage(model).momentum == 0.0002
    assert ExponentialMovingAverage(model, decay=0.75).momentum == 0.25
    assert MomentumAnnealingEMA(model, decay=0.9).momentum == pytest.approx(0.1)
    with pytest.raises(ValueError, match='not both'):
        ExponentialMovingAverage(model, momentum=0.1, decay=0.9)
    with pytest.warns(UserWarning, match='weight of the \\*new\\* value'):
        ExponentialMovingAverage(model, momentum=0.9)
    for bad in (dict(momentum=0.0), dict(momentum=1.0), dict(decay=1.5)):
        with pytest.raises(ValueError, match='must be in'):
            ExponentialMovingAverage(model, **bad)
    with pytest.raises(ValueError, match='gamma'):
        MomentumAnnealingEMA(model, gamma=0)
    with pytest.raises(ValueError, match='interval'):
        StochasticWeightAverage(model, interval=0)


def test_registered_in_models():
    model = Scalar()
    for name in ('ExponentialMovingAverage', 'MomentumAnnealingEMA', 'StochasticWeightAverage'):
        averaged = MODELS.build(dict(type=name), default_args=dict(model=model))
        assert type(averaged).__name__ == name and isinstance(averaged, BaseAveragedModel)


def test_another_model_rebuilds_the_plan(use_backend):
    a, b = Scalar(), Scalar()
    ema = ExponentialMovingAverage(a, momentum=0.5)
    a.x.data.fill_(2.0)
    ema.update_parameters(a)
    b.x.data.fill_(4.0)
    ema.update_parameters(b)
    assert float(ema.module.x) == 3.0
    with pytest.raises(ValueError, match='not the model'):
        ema.update_parameters(nn.Linear(1, 1))


def test_conversions_and_reassigned_data_are_followed(use_backend):
    """`ema.double()` replaces the averaged copy's tensors and `param.data = ...` re-points a
    source parameter; the next updates average into and from the new tensors."""
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.5)
    train(model, ema, 2)
    ema.double()
    model[0].weight.data = model[0].weight.data.clone()
    before = {name: p.clone() for name, p in ema.module.named_parameters()}
    train(model, ema, 1)
    for name, p in model.named_parameters():
        expected = before[name] + 0.5 * (p.double() - before[name])
        torch.testing.assert_close(ema.module.get_parameter(name), expected, rtol=1e-6, atol=1e-7)
    assert torch.equal(ema.module[1].running_mean, model[1].running_mean.double())


class Tied(nn.Module):
    """Two modules sharing one weight (tied embeddings): state_dict() lists it twice."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight
        nn.init.zeros_(self.a.weight)


@pytest.mark.parametrize('update_buffers', [False, True])
@pytest.mark.parametrize('custom_avg_func', [False, True])
def test_a_tied_weight_is_averaged_once(use_backend, update_buffers, custom_avg_func):
    """EMA 0, source 1, momentum 0.5: one update gives 0.5 (twice would give 0.75), on the plan
    and on the per-tensor loop."""
    model = Tied()
    ema = (LoopEMA if custom_avg_func else ExponentialMovingAverage)(model, momentum=0.5,
                                                                    update_buffers=update_buffers)
    ema.update_parameters(model)  # the first call copies the zeros
    model.a.weight.data.fill_(1.0)
    ema.update_parameters(model)
    assert ema.module.a.weight is ema.module.b.weight
    assert ema.module.a.weight.tolist() == [[0.5, 0.5], [0.5, 0.5]]
    assert list(ema.avg_parameters) == ['a.weight']
    assert ema.backend == ('loop' if custom_avg_func else use_backend)


@pytest.mark.filterwarnings('ignore:for .*copying from a non-meta parameter')
def test_the_counter_sits_with_the_averaged_copy():
    """steps is made on the module's device (here `meta`, a device without data) and moves with
    it, and a checkpoint's counter saved on the CPU is loaded onto it."""
    model = nn.Linear(3, 3, device='meta')
    ema = ExponentialMovingAverage(model, momentum=0.5)
    assert ema.steps.device.type == 'meta'
    assert ema.describe(model).startswith('PyTorch plan (torch._foreach_*) on meta, 2 tensors (0.0 M values)')
    ema.to_empty(device='cpu')
    assert ema.steps.device.type == 'cpu'
    on_meta = ExponentialMovingAverage(nn.Linear(3, 3, device='meta'), momentum=0.5)
    state = ema.state_dict()
    on_meta.load_state_dict(state)
    assert on_meta.steps.device.type == 'meta' and state['steps'].device.type == 'cpu'


def test_describe_names_the_path_and_why(use_backend):
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.5)
    assert ema.backend is None
    line = ema.describe(model)
    kind = 'fused native plan' if use_backend == 'native' else 'PyTorch plan (torch._foreach_*)'
    assert line.startswith(f'{kind} on cpu, 6 tensors (0.0 M values)') and ema.backend == use_backend
    loop = LoopEMA(model, momentum=0.5)
    assert loop.describe(model) == 'per-tensor loop (LoopEMA overrides avg_func)' and loop.backend == 'loop'
    elsewhere = ExponentialMovingAverage(model, momentum=0.5, device='meta')
    assert elsewhere.describe(model) == "per-tensor loop (tensors on ['cpu'] and the averaged copy's counter on meta)"


def test_ema_hook_logs_the_path_at_before_run(tmp_path):
    """One line at before_run says which path averages the model, on whatever device the Runner
    put it (cuda:0 on a GPU machine)."""
    hook = EMAHook(momentum=0.5)
    runner = toy_runner(tmp_path, max_=1, val=False, custom_hooks=[hook])
    runner.train()
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        log = f.read()
    device = next(hook.src_model.parameters()).device
    kind = ('fused native plan' if backend_info()[device.type]['backend'] == 'native'
            else 'PyTorch plan (torch._foreach_*)')
    assert f'EMA: {kind} on {device}, 4 tensors (0.0 M values)' in log
    assert hook.ema_model.backend == ('native' if kind == 'fused native plan' else 'ref')


# ---- source tensors replaced on the model --------------------------------------------------

def mmengine_update(avg_module, model, steps, momentum, update_buffers):
    """MMEngine 0.10's BaseAveragedModel.update_parameters with ExponentialMovingAverage.avg_func,
    written out: it reads the entries by name at every call (integer entries copied, as minimm does)."""
    averaged = avg_module.state_dict() if update_buffers else dict(avg_module.named_parameters())
    src = model.state_dict() if update_buffers else dict(model.named_parameters())
    for name, p_avg in averaged.items():
        if steps == 0 or not p_avg.is_floating_point():
            p_avg.data.copy_(src[name].data)
        else:
            p_avg.data.lerp_(src[name].data, momentum)
    if not update_buffers:
        for b_avg, b_src in zip(avg_module.buffers(), model.buffers()):
            b_avg.data.copy_(b_src.data)


def replace_bn_stats(model, step):
    """What MMPretrain's PreciseBNHook does: assign *new* running_mean/running_var tensors."""
    bn = model[1]
    bn.running_mean = torch.full_like(bn.running_mean, float(step + 1))
    bn.running_var = torch.full_like(bn.running_var, 0.5 * step + 2)


@pytest.mark.parametrize('update_buffers', [False, True])
def test_replaced_buffers_are_followed_like_mmengine(use_backend, update_buffers):
    """A hook replacing BatchNorm statistics between updates: the averaged model uses the new
    tensors, as MMEngine's per-tensor recurrence (which reads state_dict() every call) does."""
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.25, update_buffers=update_buffers)
    oracle = copy.deepcopy(ema.module)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for step in range(5):
        loss = model(torch.randn(8, 1, 8, 8, generator=g)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step >= 1:
            replace_bn_stats(model, step)
        ema.update_parameters(model)
        mmengine_update(oracle, model, step, 0.25, update_buffers)
        for (name, got), want in zip(ema.module.state_dict().items(), oracle.state_dict().values()):
            assert_within_fallback_bound(got, want, magnitude(got, want) + 1, updates=step + 1)
    assert float(ema.module[1].running_mean[0]) != float(model[1].running_mean[0]) or not update_buffers


def test_a_replaced_parameter_and_a_converted_source_are_followed(use_backend):
    """A new Parameter object under the same name, and `model.double()` (which re-points the
    parameters and replaces the buffers) between updates."""
    model = bn_model()
    ema = ExponentialMovingAverage(model, momentum=0.5)
    ema.update_parameters(model)
    before = ema.module[4].bias.clone()
    model[4].bias = nn.Parameter(torch.full_like(model[4].bias, 4.0))
    ema.update_parameters(model)
    torch.testing.assert_close(ema.module[4].bias, before + 0.5 * (4.0 - before), rtol=0, atol=1e-6)
    if use_backend == 'native':  # the fallback does not see the replaced buffers (module docstring)
        ema.double()
        model.double()
        model[1].running_mean.fill_(7.0)
        ema.update_parameters(model)
        assert torch.equal(ema.module[1].running_mean, model[1].running_mean)


class ReplaceBNStatsHook(Hook):
    """Replaces the model's BatchNorm statistics after each iteration, before EMAHook's update."""

    priority = 'ABOVE_NORMAL'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        bn = runner.model.bn
        bn.running_mean = bn.running_mean + 1.0
        bn.running_var = bn.running_var * 2.0


class CheckMirroredStatsHook(Hook):
    priority = 'LOW'

    def __init__(self):
        self.checked = 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        ema = next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model.module.bn
        assert torch.equal(ema.running_mean, runner.model.bn.running_mean)
        assert torch.equal(ema.running_var, runner.model.bn.running_var)
        self.checked += 1


def test_ema_hook_follows_a_hook_that_replaces_bn_stats(tmp_path):
    """In a Runner, as with PreciseBNHook before EMAHook: the EMA model's mirrored statistics are
    the model's current ones after every iteration."""
    check = CheckMirroredStatsHook()
    runner = toy_runner(tmp_path, max_=2, val=False,
                        custom_hooks=[ReplaceBNStatsHook(), EMAHook(momentum=0.5), check])
    runner.train()
    assert check.checked == 6
