"""PowerFunctionEMA against a float64 recurrence of its formula, on both backends, for an fp32
model and for an fp32 EMA of a bf16 model; gamma from sigma_rel; the checks on its arguments."""
import math

import pytest
import torch
from torch import nn

import minimm.ops.averaging as averaging
from minimm.hooks import EMAHook
from minimm.model import PowerFunctionEMA
from minimm.model.averaged_model import power_gamma, power_sigma_rel
from minimm.registry import MODELS

pytestmark = pytest.mark.ops_backend

STEPS = 300
EPS = torch.finfo(torch.float32).eps


def bound(gamma):
    """|EMA - float64 recurrence| / max|source| after STEPS steps, elementwise. A step rounds to
    fp32 a few times (the kernels' three roundings, lerp_'s two), at most 4 eps of the scale; an
    error made at step t is carried to step T with weight (t / T) ** (gamma + 1), and those
    weights sum to at most T / (gamma + 2). Measured: at most 3.3e-7 (2.8 eps), both backends,
    against bounds of 8e-6 (sigma_rel 0.05) to 3.8e-5 (0.2)."""
    return 4 * EPS * (1 + STEPS / (gamma + 2))


def recurrence(values, gamma):
    """avg_t = beta_t avg + (1 - beta_t) src_t, beta_t = (1 - 1/t) ** (gamma + 1), in float64."""
    avg = None
    for t, value in enumerate(values, start=1):
        beta = (1 - 1 / t) ** (gamma + 1)
        avg = value.clone() if avg is None else beta * avg + (1 - beta) * value
    return avg


@pytest.mark.parametrize('model_dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('sigma_rel', [0.05, 0.10, 0.2])
def test_power_ema_follows_the_float64_recurrence(backend, monkeypatch, model_dtype, sigma_rel):
    monkeypatch.setattr(averaging, 'PLAN_BACKEND', backend)
    torch.manual_seed(0)
    model = nn.Linear(40, 30).to(model_dtype)
    ema_dtype = 'float32' if model_dtype == torch.bfloat16 else None
    averaged = PowerFunctionEMA(model, sigma_rel=sigma_rel, ema_dtype=ema_dtype)
    seen = []
    for _ in range(STEPS):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p, dtype=torch.float32).to(model_dtype))
        seen.append([p.detach().double() for p in model.parameters()])
        averaged.update_parameters(model)
    assert averaged.backend == backend and int(averaged.steps) == STEPS
    for i, got in enumerate(averaged.module.parameters()):
        assert got.dtype == torch.float32
        values = [s[i] for s in seen]
        want = recurrence(values, averaged.gamma)
        scale = max(float(v.abs().max()) for v in values)
        error = float((got.double() - want).abs().max())
        assert error <= bound(averaged.gamma) * scale, (error, bound(averaged.gamma) * scale)


def test_gamma_is_the_largest_root_and_gives_back_sigma_rel():
    for sigma_rel in (0.01, 0.05, 0.1, 0.2, 0.29):
        gamma = power_gamma(sigma_rel)
        inv = sigma_rel ** -2
        residual = gamma ** 3 + 7 * gamma ** 2 + (16 - inv) * gamma + 12 - inv
        assert abs(residual) < 1e-9 * (abs(gamma) ** 3 + inv)
        assert power_sigma_rel(gamma) == pytest.approx(sigma_rel, rel=1e-12)
        assert gamma > -0.382  # the larger of the two roots above -1 (sigma_rel peaks at -0.382)
    assert power_gamma(0.05) == pytest.approx(16.97, abs=0.01)  # EDM2's pair: 16.97 and 6.94
    assert power_gamma(0.10) == pytest.approx(6.94, abs=0.01)


def test_the_arguments_are_checked_by_name():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match='give sigma_rel or gamma, exactly one'):
        PowerFunctionEMA(model)
    with pytest.raises(ValueError, match='give sigma_rel or gamma, exactly one'):
        PowerFunctionEMA(model, sigma_rel=0.1, gamma=7.0)
    with pytest.raises(ValueError, match=r'sigma_rel=0.4 must be in \(0, 0.3\)'):
        PowerFunctionEMA(model, sigma_rel=0.4)
    with pytest.raises(ValueError, match=r'sigma_rel=0 must be in \(0, 0.3\)'):
        PowerFunctionEMA(model, sigma_rel=0)
    with pytest.raises(TypeError, match="sigma_rel='0.1' must be a number"):
        PowerFunctionEMA(model, sigma_rel='0.1')
    with pytest.raises(ValueError, match='gamma=-1.0 must be a finite number > -1'):
        PowerFunctionEMA(model, gamma=-1.0)
    ema = PowerFunctionEMA(model, gamma=0.0)
    assert ema.sigma_rel == pytest.approx(math.sqrt(1 / 12))


def test_registered_and_built_by_ema_hook():
    assert MODELS.get('PowerFunctionEMA') is PowerFunctionEMA
    hook = EMAHook(ema_type='PowerFunctionEMA', sigma_rel=0.10)
    assert hook.ema_cfg == dict(type='PowerFunctionEMA', sigma_rel=0.10)
    ema = MODELS.build(hook.ema_cfg, default_args=dict(model=nn.Linear(2, 2)))
    assert isinstance(ema, PowerFunctionEMA) and ema.gamma == pytest.approx(6.94, abs=0.01)
