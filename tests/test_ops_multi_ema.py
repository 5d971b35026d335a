"""EMAPlan.joint: K averaged copies of one source in one pass. The oracle is K single plans on
the same backend, which the joint plan must equal bit for bit, for every dtype pair, every rule,
integer pairs and mirrored buffers, with counters that differ between the copies."""
import itertools

import pytest
import torch

from minimm.ops import EMAPlan, EMATarget, averaging_weight
from minimm.ops.ema import MAX_TARGETS
from toy import random_tensor

pytestmark = pytest.mark.ops_backend

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# (rule, momentum, gamma, interval) of up to eight copies, and the count each copy starts at.
RULES = [('ema', 0.1, 100.0, 1), ('anneal', 0.01, 4.0, 2), ('swa', 0.0, 100.0, 1),
         ('power', 0.0, 6.94, 1), ('power', 0.0, 16.97, 3), ('ema', 0.3, 100.0, 2),
         ('power', 0.0, 0.5, 1), ('anneal', 0.2, 3.0, 1)]
STARTS = [0, 0, 2, 0, 5, 1, 0, 3]


def make_copies(shapes, ema_dtype, src_dtype, k, seed):
    """The sources (floating, an int64 counter, a mirrored buffer) and k copies' tensors."""
    src = [random_tensor(s, src_dtype, seed + i) for i, s in enumerate(shapes)]
    src.append(torch.arange(3, dtype=torch.long))
    mirror_src = [random_tensor((6,), src_dtype, seed + 99), torch.tensor([7, 8])]
    copies = []
    for j in range(k):
        ema = [random_tensor(s, ema_dtype, seed + 50 * (j + 1) + i) for i, s in enumerate(shapes)]
        ema.append(torch.zeros(3, dtype=torch.long))
        copies.append((ema, [torch.zeros(6, dtype=ema_dtype), torch.zeros(2, dtype=torch.long)]))
    return src, mirror_src, copies


def step_sources(src, mirror_src, call):
    for t in src + mirror_src:
        t.add_(1 if not t.is_floating_point() else 0.37 * (call % 3) - 0.2)


@pytest.mark.parametrize('ema_dtype,src_dtype', list(itertools.product(FLOATS, FLOATS)))
def test_k_copies_in_one_pass_equal_k_single_plans(backend, ema_dtype, src_dtype):
    k = 3 + FLOATS.index(src_dtype)  # 3 to 6 copies
    shapes = [(), (7,), (3, 5), (5000,), (2, 4, 33)]
    results = []
    for joint in (True, False):
        src, mirror_src, copies = make_copies(shapes, ema_dtype, src_dtype, k, seed=10)
        counters = [torch.tensor(STARTS[j]) for j in range(k)]
        targets = [EMATarget(ema, mirror, *RULES[j]) for j, (ema, mirror) in enumerate(copies)]
        if joint:
            plans = [EMAPlan.joint(targets, src, mirror_src, backend=backend)]
        else:
            plans = [EMAPlan.joint([t], src, mirror_src, backend=backend) for t in targets]
        for call in range(7):
            step_sources(src, mirror_src, call)
            if joint:
                plans[0].step(counters)
            else:
                for plan, counter in zip(plans, counters):
                    plan.step([counter])
        results.append((copies, counters))
    (joint_copies, joint_counts), (single_copies, single_counts) = results
    expected_counts = [s + 7 for s in STARTS[:k]]
    assert [int(c) for c in joint_counts] == [int(c) for c in single_counts] == expected_counts
    for (ema_a, mirror_a), (ema_b, mirror_b) in zip(joint_copies, single_copies):
        for a, b in zip(ema_a + mirror_a, ema_b + mirror_b):
            assert a.dtype == b.dtype and torch.equal(a, b)


def test_the_copies_follow_their_own_rules(backend):
    """Against a float64 recurrence per copy: each copy copies on its call 0 and averages with
    its own rule's weight on its own counter."""
    src = [torch.linspace(-1, 1, 9, dtype=torch.float64)]
    copies = [[torch.zeros(9, dtype=torch.float64)] for _ in range(MAX_TARGETS)]
    targets = [EMATarget(ema, (), *RULES[j]) for j, ema in enumerate(copies)]
    plan = EMAPlan.joint(targets, src, backend=backend)
    counters = [torch.tensor(s) for s in STARTS]
    expected = [c[0].clone() for c in copies]
    for call in range(6):
        src[0].mul_(-1.1).add_(0.05)
        for j, (rule, momentum, gamma, interval) in enumerate(RULES):
            count = STARTS[j] + call
            if count == 0:
                expected[j] = src[0].clone()
            elif count % interval == 0:
                w = averaging_weight(rule, count, momentum, gamma, interval)
                expected[j] = expected[j] + w * (src[0] - expected[j])
        plan.step(counters)
        for got, want in zip(copies, expected):
            torch.testing.assert_close(got[0], want, rtol=1e-14, atol=1e-14)


def test_power_weights_are_swa_at_gamma_zero_and_copy_first():
    assert averaging_weight('power', 0, gamma=3.0) == 1.0
    for steps in range(1, 9):
        assert averaging_weight('power', steps, gamma=0.0) == pytest.approx(
            averaging_weight('swa', steps), rel=1e-15)
        t = steps + 1
        assert averaging_weight('power', steps, gamma=2.5) == pytest.approx(1 - (1 - 1 / t) ** 3.5)


def test_joint_plan_checks_its_targets(backend):
    src = [torch.ones(4)]

    def target(*tensors, **kwargs):
        return EMATarget(list(tensors), **kwargs)

    with pytest.raises(ValueError, match='1 to 8 targets'):
        EMAPlan.joint([target(torch.zeros(4)) for _ in range(9)], src, backend=backend)
    with pytest.raises(ValueError, match='tensor 0 of target 1 is torch.float64'):
        EMAPlan.joint([target(torch.zeros(4)), target(torch.zeros(4, dtype=torch.float64))], src,
                      backend=backend)
    with pytest.raises(ValueError, match="rule 'power' needs gamma > -1"):
        EMAPlan.joint([target(torch.zeros(4), rule='power', gamma=-1.0)], src, backend=backend)
    shared = torch.zeros(4)
    with pytest.raises(ValueError, match='share memory'):
        EMAPlan.joint([target(shared), target(shared)], src, backend=backend)
    plan = EMAPlan.joint([target(torch.zeros(4)), target(torch.zeros(4))], src, backend=backend)
    with pytest.raises(ValueError, match='2 targets need as many counters, got 1'):
        plan.step(torch.tensor(0))
