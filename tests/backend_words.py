"""Which tests depend on the op backend, read from their code: the rule behind the
``ops_backend`` marker (tests/conftest.py enforces it, tests/test_docs.py applies it per doc).

A test's outcome depends on the backend (native kernels or their PyTorch twins, the choice
``MINIMM_NO_EXT=1`` forces) when it runs the ops, the averaged models built on them, or the hooks
and the packed collective that use those: so CI's ``MINIMM_NO_EXT=1`` lane runs exactly the tests
marked ``ops_backend``. A test names such code by importing it, by a registry type name in a
config (``dict(type='EMAHook')``), through a helper module of tests/ that does, or through a
shipped config file that does (``minimm/configs/digits_ema.py``); a doc by the same words in its
python blocks. Docstrings and comments do not count.
"""
import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

TESTS = Path(__file__).resolve().parent
CONFIGS = TESTS.parent / 'minimm' / 'configs'

BACKEND_WORDS = (
    'minimm.ops', 'averaged_model', 'ExponentialMovingAverage', 'MomentumAnnealingEMA',
    'StochasticWeightAverage', 'EMAHook', 'EMAOnlyCheckpointHook', 'RawWeightsEvalHook',
    'SyncBuffersHook', 'all_reduce_params', 'ema_update_', 'EMAPlan', 'PackPlan', 'MINIMM_NO_EXT',
)


def code_text(source: str) -> str:
    """The names, imported modules and non-docstring strings of Python ``source``, one a line."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            words += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            words += [f'{node.module}.{alias.name}' for alias in node.names]
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings):
            words.append(node.value)
    return '\n'.join(words)


@lru_cache(maxsize=None)
def _words_and_helpers() -> Tuple[tuple, tuple]:
    """BACKEND_WORDS plus the shipped configs that use them (found by name, as in a path), and
    the helper modules of tests/ that use them (found as imports)."""
    words, helpers = list(BACKEND_WORDS), []
    for path in sorted(CONFIGS.glob('*.py')):
        if _found(code_text(path.read_text()), BACKEND_WORDS):
            words.append(path.stem)
    for path in sorted(TESTS.glob('*.py')):
        if path.name.startswith(('test_', 'conftest', 'backend_words')):
            continue
        if _found(code_text(path.read_text()), words):
            helpers.append(path.stem)
    return tuple(words), tuple(helpers)


def _found(text: str, words) -> List[str]:
    return [word for word in words if word in text]


def backend_words_in_code(source: str) -> List[str]:
    """What in ``source`` (a test module) names backend code; empty when nothing does."""
    words, helpers = _words_and_helpers()
    lines = code_text(source).splitlines()
    imported = [h for h in helpers if any(line == h or line.startswith(h + '.') for line in lines)]
    return _found('\n'.join(lines), words) + imported


PYTHON_BLOCK = re.compile(r'^```python[ \t]*\n(.*?)^```[ \t]*$', re.DOTALL | re.MULTILINE)


def backend_words_in_doc(path: Path) -> List[str]:
    """What the python blocks of the Markdown file ``path`` name of backend code."""
    return backend_words_in_code('\n\n'.join(PYTHON_BLOCK.findall(path.read_text('utf-8'))))
