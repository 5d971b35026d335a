"""The README's command block ("The command line"), run in order as a new user would (issue 32):
each line as written, from a folder where ``minimm/configs/...`` resolves as in a checkout, on an
install without the optional extras (matplotlib and tensorboard cannot be imported), so a line
that needs one must say which ``pip install`` it needs. ``minimm`` runs as ``python -m minimm``
and ``torchrun`` as ``python -m torch.distributed.run`` with this interpreter, which stands for
the block's first line (``. .venv/bin/activate``); each ``minimm bench NAME`` line runs with
``--help``, as its comment says (the benchmarks themselves run in tests/test_bench.py). The block
pastes into a shell as it is (issue 39): one command a line, no ``|`` between alternatives.
"""
import os
import os.path as osp
import re
import shlex
import socket
import subprocess
import sys

import pytest

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
EXTRAS = ('matplotlib', 'tensorboard')


ACTIVATE = '. .venv/bin/activate'


def readme_block():
    """The lines of the command block, comments dropped (a comment follows a space and '#')."""
    with open(osp.join(REPO, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    section = text[text.index('## The command line'):]
    start = section.index('```bash\n') + len('```bash\n')
    block = section[start:section.index('```', start)]
    lines = [re.split(r'\s#', line)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith('#')]


def readme_commands():
    """The block's commands as argument lists, the activation line left out (see above)."""
    commands = []
    for line in readme_block():
        if line == ACTIVATE:
            continue
        words = shlex.split(line)
        commands.append(words + ['--help'] if words[:2] == ['minimm', 'bench'] else words)
    return commands


def test_the_readme_command_block_pastes_into_a_shell():
    from minimm.cli import BENCHMARKS
    lines = readme_block()
    assert lines[0] == ACTIVATE, 'bare `minimm` lines need the virtual environment active first'
    assert '-m venv .venv &&' in open(osp.join(REPO, 'README.md'), encoding='utf-8').read()
    assert not [line for line in lines if '|' in line], 'a | is a shell pipe, not "one of"'
    benches = [shlex.split(line)[2:] for line in lines if line.startswith('minimm bench')]
    assert sorted(benches) == sorted([name] for name in BENCHMARKS), benches


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_the_readme_command_block_runs_in_order(tmp_path):
    os.symlink(osp.join(REPO, 'minimm'), tmp_path / 'minimm')  # as in a checkout
    hidden = tmp_path / 'no_extras'
    for name in EXTRAS:
        (hidden / name).mkdir(parents=True)
        (hidden / name / '__init__.py').write_text(
            f'raise ImportError("No module named {name!r} (the README install has no extras)")\n')
    env = dict(os.environ, PYTHONPATH=str(hidden), PET_MASTER_PORT=str(_free_port()))
    outputs = {}
    for words in readme_commands():
        program = {'minimm': [sys.executable, '-m', 'minimm'],
                   'torchrun': [sys.executable, '-m', 'torch.distributed.run']}[words[0]]
        done = subprocess.run(program + words[1:], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        line = ' '.join(words)
        outputs[line] = done.stdout
        if words[1] in ('plot', 'plot-lr'):  # the [plot] extra: one line saying what to install
            assert done.returncode != 0 and 'pip install' in done.stdout, (line, done.stdout)
            continue
        assert done.returncode == 0, (line, done.stdout[-3000:])

    demo = outputs['minimm demo'].splitlines()
    first_train = next(i for i, text in enumerate(demo) if 'Epoch(train)' in text)
    assert first_train <= 20, demo[:first_train]
    assert 'Final validation accuracy' in demo[-1] and 'the best' in demo[-1]
    assert 'best_accuracy_top1_epoch_' in demo[-1]
    tests = [text for line, text in outputs.items() if line.startswith('minimm test')]
    assert "{'accuracy/top1': " in tests[0] and "{'accuracy': " in tests[1]
    resumed = next(text for line, text in outputs.items() if '--resume' in line)
    assert 'Auto resumed from the latest checkpoint' in resumed
    assert 'CosineAnnealingLR ended at epoch 2' in resumed
    assert osp.isfile(tmp_path / 'work_dirs' / 'x' / 'epoch_3.pth')
