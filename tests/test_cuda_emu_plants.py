"""tests/cuda_emu/plant_bugs.py cannot go stale: every bug's text occurs exactly once in the
sources it plants into, and its replacement keeps the brackets balanced. Cheap (reads a few
files); the plant run itself builds each planted copy and runs the tests that should catch it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / 'cuda_emu'))
import plant_bugs  # noqa: E402


def test_every_planted_bug_finds_its_text_once():
    assert plant_bugs.check_patterns() == []


def test_a_stale_pattern_is_reported(tmp_path):
    """The check itself: a source where one bug's text is gone, and one where it occurs twice."""
    name, path, text = plant_bugs.BUGS[0][:3]
    for sources in ('', text + text):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        for other in {bug.path for bug in plant_bugs.BUGS + plant_bugs.COMPILE_BUGS}:
            (tmp_path / other).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / other).write_text((Path(plant_bugs.REPO) / other).read_text())
        (tmp_path / path).write_text(sources)
        problems = plant_bugs.check_patterns(str(tmp_path))
        assert any(p.startswith(f'{name}: its text occurs {sources.count(text)} times') for p in problems), problems


def test_the_bugs_have_distinct_names_and_cover_the_issue_classes():
    names = [bug.name for bug in plant_bugs.BUGS + plant_bugs.COMPILE_BUGS]
    assert len(set(names)) == len(names) >= 24


def test_every_bug_names_tests_that_exist():
    """The tests a bug is planted against (run first) are real test functions of the suite."""
    for bug in plant_bugs.BUGS:
        for test in bug.first.split():
            path, name = test.split('::')
            assert f'def {name}(' in (Path(plant_bugs.REPO) / path).read_text(), (bug.name, test)
