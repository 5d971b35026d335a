"""``ema_dtype``: an fp32 average of a model trained in bf16.

The oracle is MMEngine's recurrence ``ema += m * (x - ema)`` computed here in float64 from the bf16
weights after every optimizer step. An fp32 EMA follows it within the bound of minimm/ops/ema.py
(FALLBACK_ULPS units of fp32's last place of the largest value, per update); a bf16 EMA of the
same weights does not move at all, and says so once, naming ``ema_dtype``.
"""
import warnings
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from minimm.hooks import EMAHook
from minimm.model import ExponentialMovingAverage, MomentumAnnealingEMA
from minimm.ops import EMAPlan
from minimm.ops.ema import FALLBACK_ULPS
from test_ops_ema import assert_within_fallback_bound, magnitude
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

MOMENTUM = 0.001
STEPS = 200


def bf16_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8)).to(torch.bfloat16)
    with torch.no_grad():
        model[0].weight.uniform_(0.5, 1.0)
    return model


def train(model, averaged, steps=STEPS):
    """SGD pulls the weights towards 2.0 in bf16; returns the float64 reference EMA of them."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005)
    reference = None
    for _ in range(steps):
        loss = sum(((p.float() - 2.0) ** 2).sum() for p in model.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for avg in averaged:
            avg.update_parameters(model)
        weights = [p.detach().double() for p in model.parameters()]
        if reference is None:
            reference = weights
        else:
            reference = [r + MOMENTUM * (w - r) for r, w in zip(reference, weights)]
    return reference


def test_an_fp32_ema_follows_the_reference_while_a_bf16_one_stalls_and_warns():
    model = bf16_model()
    start = [p.detach().clone() for p in model.parameters()]
    fp32 = ExponentialMovingAverage(model, momentum=MOMENTUM, ema_dtype='float32')
    bf16 = ExponentialMovingAverage(model, momentum=MOMENTUM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        reference = train(model, [fp32, bf16])
    stalls = [w for w in caught if 'ema_dtype' in str(w.message)]
    assert len(stalls) == 1 and 'kept in bfloat16' in str(stalls[0].message)  # once, and only for bf16
    for got, ref, first in zip(fp32.module.parameters(), reference, start):
        assert got.dtype == torch.float32
        bound = STEPS * FALLBACK_ULPS * torch.finfo(torch.float32).eps * 2.0
        assert float((got.double() - ref).abs().max()) <= bound
        assert float((ref - first.double()).abs().max()) > 100 * bound  # the reference did move
    # The bf16 average of the Linear weight (0.5 to 2.0, where a step of 0.001 * (x - ema) is under
    # half a bf16 ulp) never left the weights the first call copied.
    assert float((bf16.module[0].weight.double() - reference[0]).abs().max()) > 100 * bound


def test_ema_dtype_casts_the_copy_and_refuses_other_dtypes():
    model = bf16_model()
    ema = ExponentialMovingAverage(model, ema_dtype=torch.float32)
    assert {p.dtype for p in ema.module.parameters()} == {torch.float32}
    assert ema.module[1].num_batches_tracked.dtype == torch.int64 and ema.steps.dtype == torch.int64
    assert ema.ema_dtype == torch.float32
    with pytest.raises(ValueError, match=r"ema_dtype must be one of \['float16', 'bfloat16', 'float32', "
                                         r"'float64'\] \(or the torch dtype\), got 'int8'"):
        ExponentialMovingAverage(model, ema_dtype='int8')


@pytest.mark.parametrize('src_dtype', [torch.bfloat16, torch.float16])
def test_native_and_fallback_agree_on_an_fp32_average_of_a_low_precision_source(native, src_dtype):
    results = {}
    for backend in ('ref', 'native'):
        ema = [random_tensor((n,), torch.float32, n) for n in (1, 100, 70_001)]
        sources = [[random_tensor((t.numel(),), src_dtype, 7 * k + t.numel()) for t in ema] for k in range(3)]
        plan = EMAPlan(ema, sources[0], rule='ema', momentum=0.3, backend=backend)
        steps = torch.tensor(0)
        scales = [magnitude(e, *(s[i] for s in sources)) for i, e in enumerate(ema)]
        for src in sources:
            for held, new in zip(plan.src, src):
                held.copy_(new)
            plan.step(steps)
        results[backend] = (ema, scales)
    for got, want, scale in zip(results['native'][0], *results['ref']):
        assert_within_fallback_bound(got, want, scale, updates=2)


def hook_runner(model, resume=False):
    logger = SimpleNamespace(info=lambda *a: None, warning=lambda *a: None)
    return SimpleNamespace(model=model, logger=logger, iter=0, epoch=0, _resume=resume)


def test_ema_hook_validates_and_saves_in_the_model_dtype_and_resumes_the_fp32_copy():
    model = bf16_model()
    hook = EMAHook(momentum=0.3, ema_dtype='float32')
    runner = hook_runner(model)
    hook.before_run(runner)
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1)
        hook.after_train_iter(runner, 0)
    raw = {k: v.clone() for k, v in model.state_dict().items()}
    average = {k: v.clone() for k, v in hook.ema_model.module.state_dict().items()}
    assert average['0.weight'].dtype == torch.float32
    hook.before_val_epoch(runner)  # validation sees the average, rounded to bf16
    assert torch.equal(model[0].weight, average['0.weight'].to(torch.bfloat16))
    hook.after_val_epoch(runner)  # training goes on from the raw weights, the average kept in fp32
    assert torch.equal(model[0].weight, raw['0.weight'])
    assert torch.equal(hook.ema_model.module[0].weight, average['0.weight'])

    checkpoint = {'state_dict': dict(model.state_dict())}
    hook.before_save_checkpoint(runner, checkpoint)
    assert checkpoint['state_dict']['0.weight'].dtype == torch.bfloat16
    assert torch.equal(checkpoint['state_dict']['0.weight'], average['0.weight'].to(torch.bfloat16))
    assert torch.equal(checkpoint['ema_state_dict']['module.0.weight'], average['0.weight'])
    assert torch.equal(checkpoint['raw_state_dict']['0.weight'], raw['0.weight'])

    resumed_model = bf16_model()
    resumed = EMAHook(momentum=0.3, ema_dtype='float32')
    resumed_runner = hook_runner(resumed_model, resume=True)
    resumed.before_run(resumed_runner)
    resumed.after_load_checkpoint(resumed_runner, checkpoint)
    assert 'raw_state_dict' not in checkpoint
    assert torch.equal(checkpoint['state_dict']['0.weight'], raw['0.weight'])  # what the runner loads
    for name, value in average.items():
        assert torch.equal(resumed.ema_model.module.state_dict()[name], value)
    assert int(resumed.ema_model.steps) == 3


def test_the_stall_check_weighs_a_step_with_the_rule_s_weight_not_the_momentum():
    """A bf16 MomentumAnnealingEMA's second call averages with gamma / (gamma + 1) = 0.99, which
    moves every element: no warning (issue 39 found one saying 96 % would not move, judged with
    the momentum floor 0.0002). A bf16 ExponentialMovingAverage with that momentum does warn."""
    caught = {}
    for cls in (MomentumAnnealingEMA, ExponentialMovingAverage):
        model = bf16_model()
        averaged = cls(model)
        with warnings.catch_warnings(record=True) as caught[cls]:
            warnings.simplefilter('always')
            train(model, [averaged], steps=2)
    assert not [w for w in caught[MomentumAnnealingEMA] if 'would not move' in str(w.message)]
    assert [w for w in caught[ExponentialMovingAverage] if 'would not move' in str(w.message)]
