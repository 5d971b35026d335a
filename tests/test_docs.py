"""The docs execute: the ```python blocks of README.md and of every tutorial run and pass, and the
```text blocks show what the code prints.

Each Markdown file's python blocks are joined into one script, which runs in a subprocess in a
fresh temporary working directory (so relative ``work_dirs/...`` paths never collide), with this
process's environment — the ``MINIMM_NO_EXT=1`` lane therefore runs the docs on the PyTorch
fallback — plus the repository root on ``PYTHONPATH`` (a checkout works without
``pip install -e .``), ``OMP_NUM_THREADS=1`` unless it is set, ``PYTHONUNBUFFERED=1`` (so
that printed lines and log lines, which go to stderr, arrive in the order they were written), and
the float kernels pinned (``PORTABLE_KERNELS``, below): a shown number that comes from training is
what any x86-64 machine prints. CI runs the docs that show trained numbers a second time, claiming
an AVX2 machine (``.ci/run``). The
tutorials end in assertions, so a doc that drifts from the code fails here, naming the file and
showing its output.

**Shown output.** A ```text block shows what the python block right before it prints (stdout and
stderr together). The script announces each block with a marker line, so the output is cut per
block, and the shown text must equal what that block printed, after one masking rule is applied
to both sides (``mask_volatile``):

* timings — a number with a unit ``s``/``ms``/``us`` (``0.8 s``, ``12ms``) and the value after
  the log keys ``time:``, ``data_time:`` and ``eta:`` — become ``<t>``;
* dates and clock times — ``2026-12-01``, ``2026/12/01``, ``12/01`` before a clock time,
  ``20261201_081105``, ``08:11:05`` (with any fraction) — become ``<date>`` and ``<time>``;
* addresses — ``0x7f3a...`` — become ``0x…``;

and the extension's one-time build lines (each starts ``minimm: compiling the native ops``: the
notice, then a progress line every 15 s; printed only by the run that compiles) are dropped. A line holding only ``...`` stands for any
number of lines (for long logs). Trailing spaces and leading or trailing blank lines do not count. Everything else — every number a tutorial
prints — must match, so the shown output cannot drift from the code.

The Chinese tutorials (``tutorials/zh_cn/``) carry the code of their English twins with the
comments translated, as MMEngine's zh_cn docs do: ``test_zh_cn_code_matches_english`` checks that
their python blocks are token for token the English ones once comments are dropped, and that
their text blocks are the English ones, in the same places. A comment cannot change what code
does, so each Chinese tutorial is checked against the run of its English twin, which runs once.

The scripts are single-threaded, so the selected ones are started together, as many at a time as
the machine has cores: on 2 cores the whole course takes about half its sequential time.
"""
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import torch

from backend_words import backend_words_in_doc

REPO = Path(__file__).resolve().parent.parent
TUTORIALS = REPO / 'tutorials'
ZH_CN = TUTORIALS / 'zh_cn'
FENCED_BLOCK = re.compile(r'^```(python|text)[ \t]*\n(.*?)^```[ \t]*$', re.DOTALL | re.MULTILINE)
# A tutorial takes about 10 s on 2 cores; the limit leaves room for a machine busy with other work.
TIMEOUT_S = 600
OUTPUT_TAIL = 6000
# Printed before each python block's code; never part of what a block shows.
BLOCK_MARKER = '\x1e minimm doc block {} \x1e'
BLOCK_MARKER_LINE = re.compile(r'\x1e minimm doc block (\d+) \x1e\n')


def fenced_blocks(path: Path) -> List[Tuple[str, str]]:
    """The ```python and ```text blocks of ``path``, in order, as (kind, body)."""
    return FENCED_BLOCK.findall(path.read_text(encoding='utf-8'))


def python_blocks(path: Path) -> List[str]:
    return [body for kind, body in fenced_blocks(path) if kind == 'python']


def text_blocks(path: Path) -> List[Tuple[int, str]]:
    """Each ```text block as (index of the python block right before it, body)."""
    shown, index = [], -1
    for kind, body in fenced_blocks(path):
        if kind == 'python':
            index += 1
        else:
            shown.append((index, body))
    return shown


def doc_id(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


DOCS = [REPO / 'README.md'] + sorted(TUTORIALS.glob('*.md')) + sorted(ZH_CN.glob('*.md'))
DOCS_WITH_CODE = [doc for doc in DOCS if python_blocks(doc)]
NUMBERED = [doc for doc in DOCS if doc.name[:2].isdigit()]


def english_twin(doc: Path) -> Path:
    """The file whose run checks ``doc``: itself, or for a Chinese tutorial its English original."""
    return TUTORIALS / doc.name if doc.parent == ZH_CN else doc


# The float kernels every doc run uses, whatever the machine offers (DESIGN.md 12). Left alone,
# ATen, oneDNN (convolutions) and MKL (matrix products) pick AVX2 or AVX-512 code at run time, and
# the tutorials' trained accuracies moved by up to 1 % between the two: tutorial 11's sweep showed
# 98.06 % on one machine and printed 97.78 % on another. These are the lowest levels each library
# offers that every x86-64 CPU of the last fifteen years runs (SSE4.1), with code chosen by the
# level alone: ATen's unvectorised kernels, oneDNN's SSE4.1 kernels, MKL's conditional numerical
# reproducibility mode. They replace whatever the caller set, so CI's second pass, which claims an
# AVX2 machine, must print the same numbers.
PORTABLE_KERNELS = {'ATEN_CPU_CAPABILITY': 'default', 'ONEDNN_MAX_CPU_ISA': 'SSE41',
                    'MKL_CBWR': 'COMPATIBLE'}
# Tutorial 13 times the EMA update on the machine's own kernels (unvectorised, one tensor's lerp_
# is 50 times slower and its "one tensor beats the loop" no longer holds); it shows no trained
# number and its timings are masked, so it runs with the kernels the machine picks.
OWN_KERNELS = {'13_inside_the_fast_ema.md'}


def run_script(script: str, pinned: bool = True) -> Tuple[Optional[int], str]:
    """Run ``script`` in a fresh temporary working directory, with PORTABLE_KERNELS when
    ``pinned``; return (exit code, output).

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
        env['PYTHONUNBUFFERED'] = '1'
        if pinned:
            env.update(PORTABLE_KERNELS)
        try:
            result = subprocess.run([sys.executable, str(script_path)], cwd=cwd, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or '')
            return None, output
        return result.returncode, result.stdout


def doc_script(doc: Path) -> str:
    return '\n\n'.join(f'print({BLOCK_MARKER.format(i)!r})\n{block}'
                       for i, block in enumerate(python_blocks(doc)))


def output_by_block(output: str) -> Dict[int, str]:
    """What each python block printed, cut at the marker lines."""
    pieces = BLOCK_MARKER_LINE.split(output)
    return {int(number): printed for number, printed in zip(pieces[1::2], pieces[2::2])}


def readable(output: str) -> str:
    return BLOCK_MARKER_LINE.sub(lambda m: f'--- python block {int(m.group(1)) + 1} ---\n', output)


VOLATILE = [
    (re.compile(r'\b((?:data_)?time|eta): \S+?(?=,|\s|$)'), r'\1: <t>'),
    (re.compile(r'\b\d+(?:\.\d+)?(?:e-?\d+)? ?(?:s|ms|us|µs)\b'), '<t>'),
    (re.compile(r'\b\d{4}[-/]\d{2}[-/]\d{2}\b|\b\d{2}/\d{2}(?= \d{2}:\d{2})'), '<date>'),
    (re.compile(r'\b\d{8}_\d{6}\b'), '<date>_<time>'),
    (re.compile(r'\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?'), '<time>'),
    (re.compile(r'\b0x[0-9a-fA-F]+\b'), '0x…'),
]


BUILD_NOTICE = 'minimm: compiling the native ops'


def mask_volatile(text: str) -> str:
    """The masking rule of the module docstring, applied line by line."""
    lines = []
    for line in text.strip('\n').splitlines():
        if line.startswith(BUILD_NOTICE):
            continue
        for pattern, replacement in VOLATILE:
            line = pattern.sub(replacement, line)
        lines.append(line.rstrip())
    return '\n'.join(lines)


def shows(shown: str, printed: str) -> bool:
    """Whether a text block ``shown`` is what was ``printed`` (masked; ``...`` lines elide)."""
    pattern = ''.join(r'(?:[^\n]*\n)*?' if line == '...' else re.escape(line) + r'\n'
                      for line in mask_volatile(shown).split('\n'))
    return re.fullmatch(pattern, mask_volatile(printed) + '\n') is not None


def code_tokens(code: str) -> List[Tuple[int, str]]:
    """The tokens of ``code`` without its comments (and the line breaks those leave)."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return [(t.type, t.string) for t in tokens
            if t.type not in (tokenize.COMMENT, tokenize.NL)]


@lru_cache(maxsize=None)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)))


@lru_cache(maxsize=None)
def scheduled(script: str, pinned: bool) -> Future:
    """The run of ``script``, started once (a Chinese tutorial shares its English twin's run)."""
    return _pool().submit(run_script, script, pinned)


def doc_run(doc: Path) -> Future:
    """The run that checks ``doc`` (its English twin's), pinned unless it is in OWN_KERNELS."""
    return scheduled(doc_script(english_twin(doc)), doc.name not in OWN_KERNELS)


RUN_TESTS = ('test_doc_code_runs', 'test_doc_shows_what_its_code_prints')


@pytest.fixture(scope='module')
def start_selected_docs(request):
    """Start every doc this session will run, so they run side by side, in file order."""
    for item in request.session.items:
        if item.originalname in RUN_TESTS:
            doc_run(item.callspec.params['doc'])


def lane_marked(docs: List[Path]) -> list:
    """``docs`` as parameters; a doc whose code uses the ops, averaged models or EMA/sync hooks
    is marked ``ops_backend``, so it runs (and its shown output is checked) in both CI lanes."""
    return [pytest.param(doc, marks=pytest.mark.ops_backend) if backend_words_in_doc(doc) else doc
            for doc in docs]


@pytest.mark.parametrize('doc', lane_marked(DOCS_WITH_CODE), ids=doc_id)
def test_doc_code_runs(doc, start_selected_docs):
    returncode, output = doc_run(doc).result()
    if returncode != 0:
        what = f'ran past {TIMEOUT_S} s' if returncode is None else f'exit code {returncode}'
        pytest.fail(f'the python blocks of {doc_id(english_twin(doc))} failed ({what}); last '
                    f'output:\n{readable(output)[-OUTPUT_TAIL:]}', pytrace=False)


@pytest.mark.parametrize('doc', lane_marked([doc for doc in DOCS_WITH_CODE if text_blocks(doc)]),
                         ids=doc_id)
def test_doc_shows_what_its_code_prints(doc, start_selected_docs):
    returncode, output = doc_run(doc).result()
    if returncode != 0:
        pytest.skip('the code failed; test_doc_code_runs reports it')
    printed = output_by_block(output)
    for index, shown in text_blocks(doc):
        assert index >= 0, f'{doc_id(doc)}: a text block before any python block shows nothing'
        actual = printed[index]
        assert shows(shown, actual), (
            f'{doc_id(doc)}: the text block after python block {index + 1} shows\n{shown}\n'
            f'but that block printed (masked)\n{mask_volatile(actual)}')


def test_the_doc_runs_pin_the_float_kernels(monkeypatch):
    monkeypatch.setenv('ATEN_CPU_CAPABILITY', 'avx2')         # what an AVX2 machine picks
    script = 'import torch\nprint(torch.backends.cpu.get_cpu_capability())'
    assert run_script(script) == (0, 'DEFAULT\n')
    if 'AVX' in torch.backends.cpu.get_cpu_capability():     # else AVX2 is not there to pick
        assert run_script(script, pinned=False) == (0, 'AVX2\n')


def test_the_masking_rule():
    log = '12/01 08:11:05 - minimm - INFO - Epoch(train) [1][10/45]  eta: 0:00:03  time: 0.0123'
    assert mask_volatile(log) == ('<date> <time> - minimm - INFO - Epoch(train) [1][10/45]  '
                                  'eta: <t>  time: <t>')
    assert mask_volatile('took 0.8 s, 12ms; saved 20261201_081105 at 0x7f3a1c2b') == (
        'took <t>, <t>; saved <date>_<time> at 0x…')
    assert mask_volatile('loss: 0.1234  lr: 1.0000e-01  12 steps') == (
        'loss: 0.1234  lr: 1.0000e-01  12 steps')                 # numbers are compared
    assert mask_volatile('minimm: compiling the native ops into /x (first use)\nok') == 'ok'
    assert mask_volatile('minimm: compiling the native ops: still compiling, 15 s so far\nok') == 'ok'
    assert shows('a\n...\nd', 'a\nb\nc\nd\n') and shows('a\n...\nb', 'a\nb')
    assert not shows('a\nd', 'a\nb\nd') and not shows('loss: 0.1235', 'loss: 0.1234')


# The engineering notes were the top-level README's second half, which is in English only; they
# teach nothing the course needs, so they have no Chinese twin.
ENGLISH_ONLY = {'engineering.md'}


def test_every_tutorial_has_code_and_a_translation():
    english = sorted(p.name for p in TUTORIALS.glob('*.md') if p.name not in ENGLISH_ONLY)
    chinese = sorted(p.name for p in ZH_CN.glob('*.md'))
    assert english, 'no tutorials found'
    assert chinese == english, 'tutorials/ and tutorials/zh_cn/ must hold the same file names'
    for doc in NUMBERED:
        assert any('assert ' in block for block in python_blocks(doc)), (
            f'{doc_id(doc)} has no python block with an assertion')
        assert text_blocks(doc), f'{doc_id(doc)} shows no output in a ```text block'


@pytest.mark.parametrize('doc', sorted(ZH_CN.glob('*.md')), ids=doc_id)
def test_zh_cn_code_matches_english(doc):
    english = TUTORIALS / doc.name
    assert english.exists(), f'{doc_id(doc)} has no English original {doc_id(english)}'
    chinese_code, english_code = python_blocks(doc), python_blocks(english)
    assert len(chinese_code) == len(english_code), (
        f'{doc_id(doc)} has {len(chinese_code)} python blocks, {doc_id(english)} '
        f'{len(english_code)}')
    for number, (zh, en) in enumerate(zip(chinese_code, english_code), 1):
        assert code_tokens(zh) == code_tokens(en), (
            f'{doc_id(doc)}: python block {number} differs from {doc_id(english)}\'s in more '
            f'than its comments')
    assert text_blocks(doc) == text_blocks(english), (
        f'{doc_id(doc)}: the text blocks must be those of {doc_id(english)}, in the same places')


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


# The names the course must teach (MMCV 1.7's hooks, MMEngine's built-ins, MMCV's helpers, ...) are
# listed in tests/course_names.txt: as data, because some of them name backend code, and a test
# module that does must run in both CI lanes (tests/backend_words.py).
COURSE_NAMES = Path(__file__).with_name('course_names.txt')
# The reference pages (every hook of each world, in a table) are part of the course's prose.
REFERENCE_PAGES = sorted(TUTORIALS.glob('reference_*.md'))
PRIORITY_LEVELS = {'HIGHEST': 0, 'VERY_HIGH': 10, 'HIGH': 30, 'ABOVE_NORMAL': 40, 'NORMAL': 50,
                   'BELOW_NORMAL': 60, 'LOW': 70, 'VERY_LOW': 90, 'LOWEST': 100}


def test_the_course_teaches_the_hook_names_and_the_priority_levels():
    pages = [doc for doc in NUMBERED if doc.parent == TUTORIALS] + REFERENCE_PAGES
    prose = '\n'.join(FENCED.sub('', doc.read_text(encoding='utf-8')) for doc in pages)
    names = sorted({name for line in COURSE_NAMES.read_text(encoding='utf-8').splitlines()
                    if not line.startswith('#') for name in line.split()})
    assert len(names) > 50, f'{COURSE_NAMES.name} lists only {len(names)} names'
    missing = [name for name in names if f'`{name}' not in prose]
    assert not missing, f'never named in the prose of the English course: {missing}'
    unnamed = [level for level, value in PRIORITY_LEVELS.items()
               if not re.search(rf'`{level}` \(?{value}\b', prose)]
    assert not unnamed, f'priority levels never named with their number: {unnamed}'


# What is minimm's and not MMEngine's or MMCV's carries one mark, explained in tutorials/README.md,
# at its first mention in each tutorial's prose (the paragraph, table row or heading that names it).
MINIMM_MARK = {TUTORIALS: '**[minimm-only]**', ZH_CN: '**[仅 minimm]**'}
MINIMM_ONLY = [line for line in Path(__file__).with_name('minimm_only_names.txt').read_text(
    encoding='utf-8').splitlines() if line and not line.startswith('#')]


def first_mentions(path: Path) -> List[Tuple[str, str]]:
    """(term, the prose paragraph of its first mention) for each minimm-only term ``path`` names.
    A mark on a heading covers its section, so each paragraph is read with its heading."""
    paragraphs = re.split(r'\n\s*\n|\n(?=[|#*])', FENCED.sub('', path.read_text(encoding='utf-8')))
    heading, with_headings = '', []
    for paragraph in paragraphs:
        if paragraph.lstrip('\n').startswith('#'):
            heading = paragraph
        with_headings.append(paragraph if paragraph == heading else heading + '\n' + paragraph)
    found = []
    for term in MINIMM_ONLY:
        hits = [p for p in with_headings if term in p]
        if hits:
            found.append((term, hits[0]))
    return found


@pytest.mark.parametrize('doc', NUMBERED, ids=doc_id)
def test_minimm_only_features_carry_the_mark(doc):
    mark = MINIMM_MARK[doc.parent]
    assert mark in (doc.parent / 'README.md').read_text(encoding='utf-8')
    unmarked = [term for term, paragraph in first_mentions(doc) if mark not in paragraph]
    assert not unmarked, f'{doc_id(doc)}: first mentioned without {mark}: {unmarked}'
