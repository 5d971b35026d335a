"""The course stays short (issue 34): at most 18,000 English words in the 14 chapters and
tutorials/README.md, code blocks included (every whitespace-separated word counts, as a reader
meets it), and a Chinese edition in step. The reference pages are tables to look things up in,
so they are not counted."""
import re
from pathlib import Path

TUTORIALS = Path(__file__).resolve().parent.parent / 'tutorials'
ENGLISH_WORDS_LIMIT = 18_000
# The Chinese edition ran at about 0.88 CJK characters per English word when the cap was set.
CHINESE_CHARACTERS_LIMIT = 16_000
CJK = re.compile(r'[\u4e00-\u9fff]')


def course_files(folder: Path):
    files = sorted(folder.glob('[0-9][0-9]_*.md')) + [folder / 'README.md']
    assert len(files) == 15, [f.name for f in files]
    return files


def test_the_english_course_is_at_most_18000_words():
    words = {f.name: len(f.read_text(encoding='utf-8').split()) for f in course_files(TUTORIALS)}
    assert sum(words.values()) <= ENGLISH_WORDS_LIMIT, words


def test_the_chinese_course_is_in_step():
    chars = {f.name: len(CJK.findall(f.read_text(encoding='utf-8')))
             for f in course_files(TUTORIALS / 'zh_cn')}
    assert sum(chars.values()) <= CHINESE_CHARACTERS_LIMIT, chars
