"""The benchmarks run on the CPU with every workload shrunk to a few tiny tensors, and report
every method the GPU check compares (the real sizes run in tests/gpu_check.sh)."""
import pytest
import torch

from minimm.bench import common, ema, ema_hook, pack
from minimm.ops import backend_info

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


@pytest.fixture
def tiny_workloads(monkeypatch):
    for name, workload in list(common.WORKLOADS.items()):
        monkeypatch.setitem(common.WORKLOADS, name, workload._replace(shapes=lambda: [(3, 5), (7,), ()]))


def test_ema_compares_every_method_on_every_workload(tiny_workloads, capsys):
    # the sharded rows spawn processes: tests/test_fsdp.py measures them in its 2-rank run
    rows = ema.main(['--device', 'cpu', '--rounds', '1', '--threads', '1', '--shards', ''])
    methods = {'loop', 'fallback', 'one tensor', 'limit'} | ({'native'} if backend_info()['cpu']['backend'] == 'native'
                                                             else set())
    assert {(r['workload'], r['method']) for r in rows} == {
        (w, m) for w in ('resnet50', 'vit_b', 'small', 'resnet50_bf16') for m in methods} | {
        (f'resnet50 x{k}', m) for k in (2, 4) for m in ('K passes', 'one pass')}
    assert all(r['values'] == 23 and r['ms'] > 0 for r in rows)
    out = capsys.readouterr().out
    assert 'resnet50_bf16: 3 tensors' in out and 'faster than the loop; per-tensor ratio' in out
    assert 'multi-EMA: K copies of resnet50 in one pass vs K passes' in out


def test_ema_hook_and_pack_run(tiny_workloads):
    rows = ema_hook.main(['--workloads', 'small', '--iters', '2', '--rounds', '1', '--json'])
    assert {r['method'] for r in rows} == {'EMAHook', 'per-tensor', 'limit'}
    rows = pack.main(['--workloads', 'resnet50_bf16', '--device', 'cpu', '--rounds', '1', '--json'])
    assert {r['method'] for r in rows} == {'per_buffer', 'flatten_cat', 'plan', 'limit'}
    assert rows[0]['tensors'] == 3


def test_workload_shapes_are_the_models():
    assert len(common.resnet50_shapes()) == 161 and common.numel(common.resnet50_shapes()) == 25_557_032
    assert len(common.vit_b_shapes()) == 152 and common.numel(common.vit_b_shapes()) == 86_567_656
    assert common.WORKLOADS['resnet50_bf16'].dtype == torch.bfloat16


def test_syncs_counts_every_configuration(monkeypatch, capsys):
    from minimm.bench import syncs
    monkeypatch.setattr(syncs, 'ITERS', 10)
    monkeypatch.setattr(syncs, 'INTERVAL', 5)
    result = syncs.main(['--engine', 'minimm', '--json'])['minimm']
    assert set(result) == set(syncs.CONFIGS) | {'backend'}
    for name in syncs.CONFIGS:  # two log lines: one read each, two with clip_grad's norm
        reads = 4 if 'clip' in syncs.CONFIGS[name] or name == 'all three' else 2
        assert result[name] == dict(per_iter=reads / 10, between=0), name
