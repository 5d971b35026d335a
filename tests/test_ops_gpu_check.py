"""tests/gpu_check.sh on a machine without a GPU: it stops at its one-line preflight, says why,
and leaves in $OUT only what the GPU machine's tool can send back (a few files, no folders)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent / 'gpu_check.sh'


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here: gpu_check.sh would run in full')
def test_without_a_gpu_it_stops_at_the_preflight(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path / 'out'), TMPDIR=str(tmp_path), PYTHON=sys.executable)
    result = subprocess.run(['bash', str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    preflight = [line for line in lines if line.startswith('preflight: ')]
    assert len(preflight) == 1
    for tool in ('python', 'torch', 'GPU none', 'nvcc', 'ninja', 'pytest', 'hypothesis', 'compute-sanitizer',
                 'CUDA_HOME='):
        assert tool in preflight[0]
    assert any('no CUDA device' in line for line in lines)
    summary = lines[lines.index(next(line for line in lines if line.startswith('== summary'))):]
    assert summary[2].split()[0] == 'preflight' and 'no CUDA device' in summary[2]
    sent_back = sorted(p.name for p in (tmp_path / 'out').iterdir())
    assert sent_back == ['gpu_check.log', 'summary.txt']


def test_the_step_limits_add_up_to_less_than_the_budget():
    """A step past the budget is not run, so limits that add up to more than it would starve the
    last steps on a slow machine; the budget leaves room in a 15-minute loan for the start."""
    text = SCRIPT.read_text()
    budget = int(re.search(r'BUDGET_S=\$\{BUDGET_S:-(\d+)\}', text)[1])
    steps = re.finditer(r'^\s*step (?:"[^"]+"|\S+) (\d+) ', text, re.MULTILINE)
    limits = [int(m[1]) for m in steps]
    assert limits and sum(limits) <= budget <= 600, (limits, budget)
