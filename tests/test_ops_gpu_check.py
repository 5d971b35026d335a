"""tests/gpu_check.sh without a GPU: its dry run prints the steps of either size with their limits,
the default's adding up to 300 s at most (the first run on a lent machine, build included); its
real run stops at its one-line preflight, says what is missing, and leaves in $OUT only what the
GPU machine's tool can send back (a few files, no folders)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent / 'gpu_check.sh'


def dry_run(*args):
    result = subprocess.run(['bash', str(SCRIPT), '--dry-run', *args], capture_output=True, text=True,
                            timeout=60, env=dict(os.environ, PATH='/usr/bin:/bin'))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    steps = [re.fullmatch(r'step (.+?) +limit +(\d+) s +(hard|soft) +(\S+)', line) for line in lines[:-1]]
    assert all(steps), lines
    total = re.fullmatch(r'total: (\d+) s', lines[-1])
    assert total, lines[-1]
    return [(m[1], int(m[2]), m[3]) for m in steps], int(total[1])


def test_the_default_run_fits_in_300_seconds_build_included():
    """The first run on a fresh machine: a failed one must leave time for a second in a 15-minute
    loan whose start takes minutes; the budget is the sum of the step limits."""
    steps, total = dry_run()
    assert total == sum(limit for _, limit, _ in steps) <= 300
    names = [name for name, _, _ in steps]
    assert names[:2] == ['preflight', 'build'] and {'cuda ops', 'memcheck', 'training'} <= set(names)
    # No GPU here: the NCCL step is listed with no time (it needs two GPUs).
    assert ('sharded nccl', 0, 'hard') in steps
    assert all(kind == 'soft' for name, _, kind in steps if name.startswith('bench'))


def test_the_full_run_fits_one_ten_minute_command():
    steps, total = dry_run('--full')
    assert total == sum(limit for _, limit, _ in steps) <= 600
    assert len(steps) > len(dry_run()[0])


def test_an_unknown_argument_is_refused():
    result = subprocess.run(['bash', str(SCRIPT), '--fast'], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and 'unknown argument --fast (allowed: --full, --dry-run)' in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here: gpu_check.sh would run in full')
def test_without_a_gpu_it_stops_at_the_preflight(tmp_path):
    # PREFLIGHT_S: a loaded CI machine may take longer than a GPU machine's 20 s to import torch.
    env = dict(os.environ, OUT=str(tmp_path / 'out'), TMPDIR=str(tmp_path), PYTHON=sys.executable, PREFLIGHT_S='300')
    result = subprocess.run(['bash', str(SCRIPT)], env=env, capture_output=True, text=True, timeout=400)
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    preflight = [line for line in lines if line.startswith('preflight: ')]
    assert len(preflight) == 1
    for tool in ('python', 'torch', 'GPU none', 'nvcc', 'ninja', 'pytest', 'hypothesis', 'compute-sanitizer',
                 'CUDA_HOME='):
        assert tool in preflight[0]
    assert any(line.startswith('gpu_check.sh: missing: ') and 'no CUDA device' in line for line in lines)
    summary = lines[lines.index(next(line for line in lines if line.startswith('== summary'))):]
    assert summary[1].split()[0] == 'preflight' and 'no CUDA device' in summary[1]
    sent_back = sorted(p.name for p in (tmp_path / 'out').iterdir())
    assert sent_back == ['gpu_check.log', 'summary.txt']


def test_the_dist_backend_is_gloo_unless_nccl_is_asked_for(monkeypatch):
    """tests/dist_utils.py's switch, which gpu_check.sh's NCCL step sets."""
    from dist_utils import dist_backend, rank_device
    monkeypatch.delenv('MINIMM_DIST_BACKEND', raising=False)
    assert dist_backend() == 'gloo' and rank_device(1) == torch.device('cpu')
    monkeypatch.setenv('MINIMM_DIST_BACKEND', 'nccl')
    assert dist_backend() == 'nccl' and rank_device(1) == torch.device('cuda', 1)
    monkeypatch.setenv('MINIMM_DIST_BACKEND', 'mpi')
    with pytest.raises(ValueError, match="MINIMM_DIST_BACKEND='mpi': allowed values are gloo, nccl"):
        dist_backend()
