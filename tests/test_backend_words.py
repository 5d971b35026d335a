"""The rule that decides which tests CI's MINIMM_NO_EXT=1 lane runs (tests/backend_words.py),
on sources written here, and the suite held to it (tests/conftest.py enforces it at collection)."""
import subprocess
import sys
from pathlib import Path

import pytest

from backend_words import backend_words_in_code

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py (this file names its words)

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize('source, words', [
    ('from minimm.ops import pack', ['minimm.ops']),
    ('from minimm import ops', ['minimm.ops']),
    ('import minimm.model.averaged_model as m', ['averaged_model']),
    ("hooks = [dict(type='EMAHook', momentum=0.1)]", ['EMAHook']),
    ("cfg = 'minimm/configs/digits_ema.py'", ['digits_ema']),   # a shipped config using EMA
    ('"""A docstring may mention EMAHook."""\n# and so may a comment: SyncBuffersHook', []),
    ("from toy import toy_runner\nhooks = [dict(type='CheckpointHook')]", []),
])
def test_what_names_backend_code(source, words):
    assert backend_words_in_code(source) == words


def test_an_unmarked_backend_test_fails_the_collection(tmp_path):
    # A copy of the suite's conftest and rule beside a new test module without the marker.
    for name in ('conftest.py', 'backend_words.py'):
        (tmp_path / name).write_text((TESTS / name).read_text())
    (tmp_path / 'test_new.py').write_text(
        "from minimm.ops import ema_update_\n\n\ndef test_it():\n    assert ema_update_\n")
    command = [sys.executable, '-m', 'pytest', '-q', '--collect-only', '-p', 'no:cacheprovider',
               str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    assert 'test_new.py::test_it: names minimm.ops' in result.stdout + result.stderr
    # (With the marker it collects: every run of this suite, whose backend tests carry it.)
