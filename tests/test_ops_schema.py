"""Custom-op hygiene: torch.library.opcheck on every torch.ops.minimm op (CPU here; the GPU check
runs the CUDA half in test_ops_cuda.py), and schemas that say what each op writes."""
import pytest
import torch
from torch.library import opcheck
from torch.testing._internal.optests.generate_tests import OpCheckError

from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

OPS = ['ema_update_', 'ema_plan_step', 'pack', 'unpack_', 'pack_plan_run']


def opcheck_cases(device):
    """(op, args) covering each list op: mixed dtypes, a 0-dim tensor, a weight tensor."""
    floats = [random_tensor(shape, torch.float32, i, device) for i, shape in enumerate([(3, 4), (), (5,)])]
    src = [random_tensor(t.shape, torch.float32, 10 + i, device) for i, t in enumerate(floats)]
    halves = [random_tensor((6,), torch.float16, 20, device)]
    ints = [random_tensor((2,), torch.int64, 30, device)]
    tensors = floats + halves + ints
    flats = torch.ops.minimm.pack(tensors)
    weight = torch.tensor(0.25, dtype=torch.float64, device=device)
    return [
        (torch.ops.minimm.ema_update_.default, (floats + ints, src + ints, None, 0.3)),
        (torch.ops.minimm.ema_update_.default, (floats + halves, src + halves, weight, 0.0)),
        (torch.ops.minimm.pack.default, (tensors,)),
        (torch.ops.minimm.unpack_.default, (flats, [torch.empty_like(t) for t in tensors], 0.5)),
    ]


def test_opcheck_the_list_ops(native):
    for op, args in opcheck_cases('cpu'):
        assert set(opcheck(op, args).values()) == {'SUCCESS'}, op


def test_the_plan_ops_cannot_be_opchecked(native):
    """The plan ops take a plan (a TorchScript custom class). opcheck treats every argument as a
    pytree and asks for its length, which a custom class without a fake class registration does
    not have; the day that changes this test fails, and the plan ops join the one above."""
    plan = torch.classes.minimm.EMAPlan([torch.zeros(3)], [torch.ones(3)], [], [], 1, 0.5, 1.0, 1)
    with pytest.raises(OpCheckError, match="'__len__' is not implemented"):
        opcheck(torch.ops.minimm.ema_plan_step.default, (plan, [torch.zeros(3)], [], torch.tensor(0)))


def written(op_name):
    schema = getattr(torch.ops.minimm, op_name).default._schema
    return [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def test_every_schema_names_what_the_op_writes(native):
    assert {name: written(name) for name in OPS} == {
        'ema_update_': ['ema'], 'ema_plan_step': ['ema', 'mirror_ema', 'steps'], 'pack': [],
        'unpack_': ['tensors'], 'pack_plan_run': ['flats', 'tensors']}


def test_the_plan_ops_write_only_what_their_schema_names(native):
    """What opcheck's schema test would check for the plan ops, by hand: the plan's sources and
    the flat tensors of an unpack are left as they were."""
    ema, src, mirror_ema, mirror_src = [torch.zeros(3)], [torch.ones(3)], [torch.zeros(2)], [torch.ones(2)]
    plan = torch.classes.minimm.EMAPlan(ema, src, mirror_ema, mirror_src, 1, 0.5, 1.0, 1)
    steps = torch.tensor(1)
    torch.ops.minimm.ema_plan_step(plan, ema, mirror_ema, steps)
    assert ema[0].tolist() == [0.5] * 3 and mirror_ema[0].tolist() == [1.0] * 2 and int(steps) == 2
    assert src[0].tolist() == [1.0] * 3 and mirror_src[0].tolist() == [1.0] * 2
    tensors = [torch.arange(3.0)]
    packer = torch.classes.minimm.PackPlan(tensors)
    flats = packer.pack()
    before = [f.clone() for f in flats]
    packer.unpack_(2.0)
    assert tensors[0].tolist() == [0.0, 2.0, 4.0] and all(torch.equal(a, b) for a, b in zip(flats, before))
