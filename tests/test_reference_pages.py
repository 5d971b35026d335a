"""The reference pages (tutorials/reference_mmengine.md, tutorials/reference_mmcv.md and their
zh_cn twins) agree with the code: every hook has a row, and each row's arguments and defaults are
the constructor's (``inspect.signature``), its stages are the methods the class overrides (a
generic method standing for its stages), and its priority is the class's (MMEngine) or the one its
registration helper gives (MMCV, found by registering a stand-in). A default changed in the code
fails here until the pages say so too.
"""
import ast
import inspect
import logging
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import minimm.hooks
import minimm.mmcv.hooks
from minimm.mmcv import EpochBasedRunner
from minimm.mmcv.digits import MMCVDigitsClassifier
from minimm.runner.priority import get_priority

pytestmark = pytest.mark.ops_backend   # it imports the EMA hooks (tests/backend_words.py)

TUTORIALS = Path(__file__).resolve().parent.parent / 'tutorials'
PAGES = {'mmengine': ['reference_mmengine.md', 'zh_cn/reference_mmengine.md'],
         'mmcv': ['reference_mmcv.md', 'zh_cn/reference_mmcv.md']}
MODULES = {'mmengine': minimm.hooks, 'mmcv': minimm.mmcv.hooks}
GENERIC = {
    'mmengine': {f'_{when}_{what}': [f'{when}_{mode}_{what}' for mode in ('train', 'val', 'test')]
                 for when in ('before', 'after') for what in ('epoch', 'iter')},
    'mmcv': {f'{when}_{what}': [f'{when}_{mode}_{what}' for mode in ('train', 'val')]
             for when in ('before', 'after') for what in ('epoch', 'iter')},
}
# MMEngine hooks the pages list as left out of minimm (their rows cannot be checked).
LEFT_OUT = {'NaiveVisualizationHook', 'PrepareTTAHook', 'NPUProfilerHook'}
ROW = re.compile(r'^\| `(\w+)` \|(.*)\|\s*$', re.MULTILINE)
NO_DEFAULT = inspect.Parameter.empty


def rows(page: str) -> Dict[str, List[str]]:
    """hook name -> its cells (arguments, stages, priority, notes) in ``page``."""
    found = {}
    for name, rest in ROW.findall((TUTORIALS / page).read_text(encoding='utf-8')):
        assert name not in found, f'{page}: {name} has two rows'
        found[name] = [cell.strip() for cell in rest.split(' | ')]
    return found


def page_arguments(cell: str) -> List[Tuple[str, object]]:
    """``\\`interval=10\\`, \\`monitor\\``` -> [('interval', 10), ('monitor', NO_DEFAULT)]."""
    if cell == '—':
        return []
    arguments = []
    for text in re.findall(r'`([^`]+)`', cell):
        name, _, default = text.partition('=')
        arguments.append((name, ast.literal_eval(default) if default else NO_DEFAULT))
    return arguments


def code_arguments(cls) -> List[Tuple[str, object]]:
    if cls.__init__ is object.__init__:
        return []
    arguments = []
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == 'self':
            continue
        stars = {parameter.VAR_POSITIONAL: '*', parameter.VAR_KEYWORD: '**'}
        prefix = stars.get(parameter.kind, '')
        arguments.append((prefix + name, parameter.default))
    return arguments


def overridden_stages(world: str, cls) -> set:
    base = MODULES[world].Hook
    stages = {stage for stage in base.stages if getattr(cls, stage) is not getattr(base, stage)}
    for method, its_stages in GENERIC[world].items():
        if getattr(cls, method) is not getattr(base, method):
            stages.update(its_stages)
    return stages


def page_stages(world: str, cell: str) -> set:
    words = set(re.findall(r'\b_?[a-z]+(?:_[a-z]+)+\b', cell))
    stages = words & set(MODULES[world].Hook.stages)
    for method in words & set(GENERIC[world]):
        stages.update(GENERIC[world][method])
    return stages


def page_priority(cell: str) -> int:
    """``\\`VERY_LOW\\` (90), ...`` -> 90, after checking that the name and the number agree."""
    match = re.match(r'`([A-Z_]+)` \((\d+)\)', cell)
    assert match, f'a priority cell must start with `LEVEL` (number): {cell!r}'
    assert get_priority(match.group(1)) == int(match.group(2)), cell
    return int(match.group(2))


def mmcv_priorities() -> Dict[str, int]:
    """What each MMCV registration helper gives, read off a runner: a bare ``Hook()`` registered
    by each helper keeps the priority it was given."""
    runner = EpochBasedRunner(MMCVDigitsClassifier(), logger=logging.getLogger('reference'),
                              max_epochs=1)
    given = {}
    for helper in ('lr', 'momentum', 'optimizer', 'checkpoint', 'timer', 'profiler'):
        stand_in = minimm.mmcv.hooks.Hook()
        getattr(runner, f'register_{helper}_hook')(stand_in)
        given[helper] = stand_in.priority
    runner.register_logger_hooks(dict(interval=1, hooks=[dict(type='TextLoggerHook')]))
    given['logger'] = next(h.priority for h in runner.hooks if type(h).__name__ == 'TextLoggerHook')
    default = inspect.signature(EpochBasedRunner.register_hook).parameters['priority'].default
    given['register_hook'] = get_priority(default)
    return given


def mmcv_helper(cls) -> str:
    """The registration helper of ``register_training_hooks`` that builds ``cls``."""
    hooks = minimm.mmcv.hooks
    for base, helper in ((hooks.LrUpdaterHook, 'lr'), (hooks.MomentumUpdaterHook, 'momentum'),
                         (hooks.OptimizerHook, 'optimizer'), (hooks.CheckpointHook, 'checkpoint'),
                         (hooks.IterTimerHook, 'timer'), (hooks.LoggerHook, 'logger'),
                         (hooks.ProfilerHook, 'profiler')):
        if issubclass(cls, base):
            return helper
    return 'register_hook'


def exported_hooks(world: str) -> set:
    module = MODULES[world]
    return {name for name, value in vars(module).items() if isinstance(value, type)
            and issubclass(value, module.Hook) and value is not module.Hook}


CASES = [(world, page) for world, pages in PAGES.items() for page in pages]


@pytest.mark.parametrize('world,page', CASES, ids=[page for _, page in CASES])
def test_every_hook_has_a_row(world, page):
    listed = set(rows(page))
    expected = exported_hooks(world) | (LEFT_OUT if world == 'mmengine' else set())
    assert listed == expected, (f'{page}: missing {sorted(expected - listed)}, '
                                f'not hooks of minimm: {sorted(listed - expected)}')
    assert not LEFT_OUT & exported_hooks('mmengine'), 'a hook listed as left out exists now'


@pytest.mark.parametrize('world,page', CASES, ids=[page for _, page in CASES])
def test_arguments_stages_and_priorities_are_the_code(world, page):
    priorities = mmcv_priorities() if world == 'mmcv' else None
    problems = []
    for name, cells in rows(page).items():
        if name in LEFT_OUT:
            continue
        cls = getattr(MODULES[world], name)
        arguments, stages, priority = cells[0], cells[1], cells[2]
        if page_arguments(arguments) != code_arguments(cls):
            problems.append(f'{name}: the page says {page_arguments(arguments)}, the code '
                            f'{code_arguments(cls)}')
        if page_stages(world, stages) != overridden_stages(world, cls):
            problems.append(f'{name}: stages {sorted(page_stages(world, stages))} on the page, '
                            f'{sorted(overridden_stages(world, cls))} in the code')
        code_priority = (get_priority(cls.priority) if world == 'mmengine'
                         else priorities[mmcv_helper(cls)])
        if page_priority(priority) != code_priority:
            problems.append(f'{name}: priority {page_priority(priority)} on the page, '
                            f'{code_priority} in the code')
    assert not problems, f'{page} disagrees with the code:\n' + '\n'.join(problems)


def test_the_english_and_chinese_tables_agree():
    for english, chinese in PAGES.values():
        en, zh = rows(english), rows(chinese)
        assert {name: cells[:3] for name, cells in en.items()} == {
            name: cells[:3] for name, cells in zh.items()}, f'{chinese} differs from {english}'


def test_the_default_hooks_paragraph_is_the_runner():
    from minimm.runner.hook_dispatch import DEFAULT_HOOKS
    assert DEFAULT_HOOKS['checkpoint'] == dict(type='CheckpointHook', interval=1)
    text = (TUTORIALS / 'reference_mmengine.md').read_text(encoding='utf-8')
    assert "`dict(type='CheckpointHook', interval=1)`" in text
    section = text.split('## The default hooks')[1].split('\n## ')[0]
    assert {name for name, _ in ROW.findall(section)} == {
        cfg['type'] for cfg in DEFAULT_HOOKS.values()}
