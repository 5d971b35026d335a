"""The docs execute: the ```python blocks of README.md and of every tutorial run and pass.

Each Markdown file's python blocks are joined into one script, which runs in a subprocess in a
fresh temporary working directory (so relative ``work_dirs/...`` paths never collide), with this
process's environment — the ``MINIMM_NO_EXT=1`` lane therefore runs the docs on the PyTorch
fallback — plus the repository root on ``PYTHONPATH`` (a checkout works without
``pip install -e .``) and ``OMP_NUM_THREADS=1`` unless it is set. The tutorials end in
assertions, so a doc that drifts from the code fails here, naming the file and showing its output.

The Chinese tutorials (``tutorials/zh_cn/``) must carry exactly the code of their English twins;
``test_zh_cn_code_matches_english`` checks that. Their scripts are then byte-for-byte the English
ones, so each distinct script runs once and both files share the result.

The scripts are single-threaded, so the selected ones are started together, as many at a time as
the machine has cores: on 2 cores the whole course takes about half its sequential time.
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Optional, Tuple

import pytest

from backend_words import backend_words_in_doc

REPO = Path(__file__).resolve().parent.parent
TUTORIALS = REPO / 'tutorials'
ZH_CN = TUTORIALS / 'zh_cn'
PYTHON_BLOCK = re.compile(r'^```python[ \t]*\n(.*?)^```[ \t]*$', re.DOTALL | re.MULTILINE)
# A tutorial takes about 10 s on 2 cores; the limit leaves room for a machine busy with other work.
TIMEOUT_S = 600
OUTPUT_TAIL = 6000


def python_blocks(path: Path) -> list:
    return PYTHON_BLOCK.findall(path.read_text(encoding='utf-8'))


def doc_id(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


DOCS = [REPO / 'README.md'] + sorted(TUTORIALS.glob('*.md')) + sorted(ZH_CN.glob('*.md'))
DOCS_WITH_CODE = [doc for doc in DOCS if python_blocks(doc)]


def run_script(script: str) -> Tuple[Optional[int], str]:
    """Run ``script`` in a fresh temporary working directory; return (exit code, output).

    The exit code is None when the script ran past ``TIMEOUT_S``. Results are cached per script.
    """
    with tempfile.TemporaryDirectory(prefix='minimm_doc_') as tmp:
        cwd = Path(tmp, 'cwd')
        cwd.mkdir()
        script_path = Path(tmp, 'doc_script.py')   # outside cwd: a doc must not rely on it
        script_path.write_text(script, encoding='utf-8')
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(REPO), env.get('PYTHONPATH')]))
        # The tutorials' models are tiny, so a second thread buys nothing, while OpenMP threads
        # spin-waiting on a busy machine turned a 9 s tutorial into 70 s here.
        env.setdefault('OMP_NUM_THREADS', '1')
        try:
            result = subprocess.run([sys.executable, str(script_path)], cwd=cwd, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or '')
            return None, output
        return result.returncode, result.stdout


def doc_script(doc: Path) -> str:
    return '\n\n'.join(python_blocks(doc))


@lru_cache(maxsize=None)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)))


@lru_cache(maxsize=None)
def scheduled(script: str) -> Future:
    """The run of ``script``, started once (the Chinese twins share the English run)."""
    return _pool().submit(run_script, script)


@pytest.fixture(scope='module')
def start_selected_docs(request):
    """Start every doc this session will run, so they run side by side, in file order."""
    for item in request.session.items:
        if item.originalname == 'test_doc_code_runs':
            scheduled(doc_script(item.callspec.params['doc']))


# A doc whose code uses the ops, averaged models or EMA/sync hooks runs in both CI lanes.
@pytest.mark.parametrize('doc', [pytest.param(doc, marks=pytest.mark.ops_backend)
                                 if backend_words_in_doc(doc) else doc
                                 for doc in DOCS_WITH_CODE], ids=doc_id)
def test_doc_code_runs(doc, start_selected_docs):
    returncode, output = scheduled(doc_script(doc)).result()
    if returncode != 0:
        what = f'ran past {TIMEOUT_S} s' if returncode is None else f'exit code {returncode}'
        pytest.fail(f'the python blocks of {doc_id(doc)} failed ({what}); last output:\n'
                    f'{output[-OUTPUT_TAIL:]}', pytrace=False)


def test_every_tutorial_has_code_and_a_translation():
    english = sorted(p.name for p in TUTORIALS.glob('*.md'))
    chinese = sorted(p.name for p in ZH_CN.glob('*.md'))
    assert english, 'no tutorials found'
    assert chinese == english, 'tutorials/ and tutorials/zh_cn/ must hold the same file names'
    numbered = [name for name in english if name[:2].isdigit()]
    assert numbered and all(python_blocks(TUTORIALS / name) for name in numbered)


@pytest.mark.parametrize('doc', sorted(ZH_CN.glob('*.md')), ids=doc_id)
def test_zh_cn_code_matches_english(doc):
    english = TUTORIALS / doc.name
    assert english.exists(), f'{doc_id(doc)} has no English original {doc_id(english)}'
    assert python_blocks(doc) == python_blocks(english), (
        f'{doc_id(doc)}: the python blocks must be identical to those of {doc_id(english)}')


FENCED = re.compile(r'^```.*?^```[ \t]*$', re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r'`[^`\n]*`')
ENGLISH_QUOTE = re.compile(r'"[^"\n]*"')    # issue titles, quoted in their original English
# One Chinese term per concept (as MMEngine's Chinese docs): 检查点 for checkpoint, 轮次 for epoch.
ZH_TERM_RULES = [
    (re.compile(r'(?<![\w/.])checkpoints?(?![\w(])', re.IGNORECASE), 'write 检查点, not "checkpoint"'),
    (re.compile(r'轮(?!次)'), 'write 轮次 for epoch, not 轮'),
    # An issue's title stays in English, so that it can be searched for.
    (re.compile(r'#\d+\s*[（(]?“[^”]*[\u4e00-\u9fff][^”]*”'), 'leave issue titles in English'),
]


def zh_prose(path: Path) -> str:
    """The Markdown outside code blocks, inline code and English quotations."""
    text = INLINE_CODE.sub('', FENCED.sub('', path.read_text(encoding='utf-8')))
    return ENGLISH_QUOTE.sub('', text)


@pytest.mark.parametrize('doc', sorted(ZH_CN.glob('*.md')), ids=doc_id)
def test_zh_cn_uses_one_term_per_concept(doc):
    prose = zh_prose(doc)
    problems = [f'{message}: ...{prose[max(0, m.start() - 20):m.end() + 20]!r}...'
                for pattern, message in ZH_TERM_RULES for m in pattern.finditer(prose)]
    assert not problems, f'{doc_id(doc)}:\n' + '\n'.join(problems)
