"""Every relative link in README.md and the tutorials leads somewhere: the file exists and, for a
``#fragment`` into a Markdown file, one of its headings has that anchor (GitHub's rule: lower
case, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` ... for repeats). Chapters were
renumbered and headings merged in the course's third edition; a link checker finds what a
reader would click into nothing."""
import re
from pathlib import Path
from typing import List, Set

import pytest

from test_docs import FENCED, INLINE_CODE

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r'\]\(([^)\s]+)\)')
HEADING = re.compile(r'^#{1,6} (.*)$', re.MULTILINE)
DOCS = [REPO / 'README.md'] + sorted(p for p in (REPO / 'tutorials').rglob('*.md')
                                     if 'minidet' not in p.parts)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading (``\\w`` keeps letters of every script, CJK included)."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors(path: Path) -> Set[str]:
    seen, found = {}, set()
    for heading in HEADING.findall(FENCED.sub('', path.read_text(encoding='utf-8'))):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f'{base}-{count}')
    return found


def relative_links(path: Path) -> List[str]:
    text = INLINE_CODE.sub('', FENCED.sub('', path.read_text(encoding='utf-8')))
    return [link for link in LINK.findall(text) if not re.match(r'[a-z]+:', link)]


def test_the_anchor_rule():
    assert anchor('3. Generic methods: called by MMCV, silent under MMEngine') == \
        '3-generic-methods-called-by-mmcv-silent-under-mmengine'
    assert anchor('`ProfilerHook` **[minimm-only]**') == 'profilerhook-minimm-only'
    assert anchor('1. 辅助方法，以及它们改了什么名字') == '1-辅助方法以及它们改了什么名字'


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(doc):
    broken = []
    for link in relative_links(doc):
        target, _, fragment = link.partition('#')
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f'{link} (no such file)')
        elif fragment and path.suffix == '.md' and fragment not in anchors(path):
            broken.append(f'{link} (no heading with that anchor)')
    assert not broken, f'{doc.relative_to(REPO)}: ' + ', '.join(broken)
