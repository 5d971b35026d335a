"""The README's command block ("The command line"), run in order as a new user would (issue 32):
each line as written, from a folder where ``minimm/configs/...`` resolves as in a checkout, on an
install without the optional extras (matplotlib and tensorboard cannot be imported), so a line
that needs one must say which ``pip install`` it needs. ``minimm`` runs as ``python -m minimm``
and ``torchrun`` as ``python -m torch.distributed.run``; a line of alternatives
(``bench overhead|ema|...``) runs each of them with ``--help``, as its comment says.
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


def readme_commands():
    with open(osp.join(REPO, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    section = text[text.index('## The command line'):]
    start = section.index('```bash\n') + len('```bash\n')
    block = section[start:section.index('```', start)]
    commands = []
    for line in block.splitlines():
        line = re.split(r'\s#', line)[0].strip()  # a comment follows a space and '#'
        if not line or line.startswith('#'):
            continue
        words = shlex.split(line)
        alternatives = [i for i, word in enumerate(words) if '|' in word]
        if alternatives:
            i = alternatives[0]
            commands += [words[:i] + [choice, '--help'] for choice in words[i].split('|')]
        else:
            commands.append(words)
    return commands


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
