"""Custom-op hygiene: torch.library.opcheck on every torch.ops.minimm op (CPU here; the GPU check
runs the CUDA half in test_ops_cuda.py), schemas that say what each op writes, and plans that
write only their destinations (their methods run outside the dispatcher)."""
import pytest
import torch
from torch.library import opcheck
from torch.testing._internal.optests.generate_tests import OpCheckError

from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

OPS = ['ema_update_', 'pack', 'unpack_']


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


def test_the_plans_are_classes_not_ops(native):
    """A plan's step reads its own table in C++: its tensor lists never cross the dispatcher (which
    would box them, a cost per tensor per step), so there is no plan op to opcheck."""
    registered = {name.split('::')[1] for name in torch._C._dispatch_get_all_op_names() if name.startswith('minimm::')}
    assert registered == set(OPS)
    plan = torch.classes.minimm.EMAPlan([torch.zeros(3)], [torch.ones(3)], [], [], [1], [0.5], [1.0], [1])
    plan.step(torch.tensor(1))


def written(op_name):
    schema = getattr(torch.ops.minimm, op_name).default._schema
    return [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def test_every_schema_names_what_the_op_writes(native):
    assert {name: written(name) for name in OPS} == {'ema_update_': ['ema'], 'pack': [], 'unpack_': ['tensors']}


def test_the_plans_write_only_their_destinations(native):
    """What opcheck's schema test would check, by hand: the plan's sources and the flat tensors of
    an unpack are left as they were."""
    ema, src, mirror_ema, mirror_src = [torch.zeros(3)], [torch.ones(3)], [torch.zeros(2)], [torch.ones(2)]
    plan = torch.classes.minimm.EMAPlan(ema, src, mirror_ema, mirror_src, [1], [0.5], [1.0], [1])
    steps = torch.tensor(1)
    plan.step(steps)
    assert ema[0].tolist() == [0.5] * 3 and mirror_ema[0].tolist() == [1.0] * 2 and int(steps) == 2
    assert src[0].tolist() == [1.0] * 3 and mirror_src[0].tolist() == [1.0] * 2
    tensors = [torch.arange(3.0)]
    packer = torch.classes.minimm.PackPlan(tensors)
    flats = packer.pack()
    before = [f.clone() for f in flats]
    packer.unpack_(2.0)
    assert tensors[0].tolist() == [0.0, 2.0, 4.0] and all(torch.equal(a, b) for a, b in zip(flats, before))
