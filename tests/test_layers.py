"""DESIGN principle 8: the learner's layer reaches the fast layer (minimm/ops/) only through its
seams, the names minimm/ops/__init__.py exports; the modules behind them are the plan's business.
And the line limit (100 characters), which the two files behind issue 31's seam join when it lands.

Read statically (``ast``, with test_layout.py's import parser): nothing here runs an op. The
``ops_backend`` marker is there because the file names the fast layer's modules (the rule of
tests/backend_words.py), not because an outcome depends on the backend.
"""
import ast
import os.path as osp

import pytest

from test_layout import ROOT, _all_python_files, _imported_modules, _python_files

pytestmark = pytest.mark.ops_backend

LEARNER_LAYER = ('registry', 'config', 'hooks', 'runner', 'model', 'logging', 'optim',
                 'evaluator', 'mmcv')
# averaged_model.py still reaches into the plan (ops.aliases): issue 31 moves that behind a seam.
NOT_YET_BEHIND_A_SEAM = ('model/averaged_model.py',)


def _exported_names(path: str):
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', '') == '__all__'
                                                for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f'{path} has no __all__')


@pytest.mark.parametrize('path', [p for entry in LEARNER_LAYER for p in _python_files(entry)
                                  if osp.relpath(p, ROOT) not in NOT_YET_BEHIND_A_SEAM],
                         ids=lambda p: osp.relpath(p, ROOT))
def test_the_learners_layer_uses_only_the_seams_of_the_fast_layer(path):
    seams = {f'minimm.ops.{name}' for name in _exported_names(osp.join(ROOT, 'ops', '__init__.py'))}
    internals = [m for m in _imported_modules(path)
                 if m.startswith('minimm.ops.') and m not in seams]
    assert not internals, f'{osp.relpath(path, ROOT)} imports {internals}'


LINE_LIMIT = 100
# Issue 31's seam (the averaged models' fast-path bookkeeping moving into the ops package) is
# rewriting these two files: they join the limit when it lands.
LONG_LINES_FOR_NOW = ('ops/ema.py', 'model/averaged_model.py')


@pytest.mark.parametrize('path', [p for p in _all_python_files()
                                  if osp.relpath(p, ROOT) not in LONG_LINES_FOR_NOW],
                         ids=lambda p: osp.relpath(p, ROOT))
def test_no_line_over_the_limit(path):
    with open(path, encoding='utf-8') as f:
        long = [n for n, line in enumerate(f, 1) if len(line.rstrip('\n')) > LINE_LIMIT]
    assert not long, f'lines {long} are longer than {LINE_LIMIT} characters'
