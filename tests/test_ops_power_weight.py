"""The power rule's weight, ``1 - (1 - 1/t) ** (gamma + 1)``: computed with + - * / alone (csrc/ema.h
power_beta, minimm/ops/ema.py _power_beta), so that the CPU kernels, a GPU and Python give the same
bits where library pows differ (CUDA's double pow is documented within 2 ulp). Checked here
against the exact value (50-digit decimals) and, on the CPU kernels, bit for bit against Python."""
import math
from decimal import Decimal, localcontext

import pytest
import torch

from minimm.ops import EMAPlan, averaging_weight

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

CASES = [(t, gamma) for t in (2, 3, 7, 100, 12_345, 10**6, 10**9, 2**40)
         for gamma in (-0.5, 0.0, 0.5, 6.94, 16.97, 39.0, 1200.0)]


def exact_weight(t, gamma):
    with localcontext() as context:
        context.prec = 50
        beta = ((1 - Decimal(1) / Decimal(t)).ln() * (Decimal(gamma) + 1)).exp()
        return float(1 - beta)


@pytest.mark.parametrize('t,gamma', CASES)
def test_the_weight_is_within_half_a_unit_of_one_of_the_exact_value(t, gamma):
    """1 - beta: within 2**-53 of the exact weight, as close as a double near 1 holds it (a
    library pow then 1 - beta is off by up to 20 such units here)."""
    got = averaging_weight('power', t - 1, gamma=gamma)
    assert abs(got - exact_weight(t, gamma)) <= 2.0**-53 + math.ulp(got) / 2


def test_gamma_zero_is_the_running_mean_and_the_first_call_copies():
    assert averaging_weight('power', 0, gamma=3.0) == 1.0
    for steps in range(1, 50):
        assert averaging_weight('power', steps, gamma=0.0) == pytest.approx(1 / (steps + 1), rel=1e-15)


@pytest.mark.parametrize('gamma', [0.5, 6.94, 39.0])
def test_the_cpu_kernels_weight_equals_pythons_bit_for_bit(native, gamma):
    """One fp64 averaging call per count, against ``ema + w * (src - ema)`` in Python floats with
    averaging_weight's w: any other weight shows in the last bits of some of the 64 values."""
    ema = torch.linspace(-3.0, 5.0, 64, dtype=torch.float64)
    src = torch.linspace(7.0, -1.0, 64, dtype=torch.float64).sqrt().nan_to_num(0.5)
    plan = EMAPlan([ema], [src], rule='power', gamma=gamma, backend='native')
    steps = torch.tensor(1)
    want = ema.tolist()
    for count in range(1, 200):
        plan.step(steps)
        w = averaging_weight('power', count, gamma=gamma)
        want = [a + w * (s - a) for a, s in zip(want, src.tolist())]
        assert ema.tolist() == want, count
