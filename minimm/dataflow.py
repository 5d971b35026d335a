"""Dataflow: what each hook reads and writes, per stage, and the ordering mistakes it reveals.

A priority says *when* a hook runs, never *why*. So a hook may also say, in a class attribute beside
its ``priority``, what each of its stages reads and writes::

    class MyMetricHook(Hook):
        priority = 'LOW'
        dataflow = {'after_val_epoch': 'model.params -> metrics:my_acc'}

Left of ``->`` what the stage reads, right of it what it writes, words separated by spaces. A key
may name several stages (``'after_train_iter after_val_iter'``); ``'*'`` covers every stage the
hook implements and does not name. The words the built-in hooks of both worlds use:

  model.params, model.buffers    the trained model's weights and buffers (``model``: both)
  ema.params, ema.buffers        an averaged copy of them (``ema``: both)
  optimizer, lr                  the optimizer's state; the lr and momentum of its param groups
  message_hub:<key>              a MessageHub entry (MMEngine); ``log_buffer:<key>`` (MMCV 1.x)
  metrics:<key>                  the metrics dict of ``after_val_epoch``; ``metrics:auto``: the
                                 first metric (``save_best='auto'``), so it meets any key
  checkpoint:<key>               the checkpoint dict in before_save/after_load_checkpoint
  file:<pattern>                 a file in the work dir; ``sampler``, ``train_loop``: the objects

A key may be a pattern (``message_hub:train/*``), and ``{name}`` is the hook's attribute ``name``
(a list gives one word each, ``None`` none: ``metrics:{save_best}``). Marks, after a word:

  (local)     written: the value differs per rank (each rank's own BatchNorm statistics)
  (rank0)     a file that rank 0 alone writes; (per-rank): each rank writes its own file;
              unmarked, a file is written by every rank, to the same path
  (old)       read: the value as it was before this stage's other hooks change it
              (RawWeightsEvalHook evaluates the raw weights before EMAHook swaps them out)

``check`` walks each stage's hooks in call order and reports, one finding each: a read of something
a later hook of the stage writes (the EMA weights still swapped in when CheckpointHook saves); an
``(old)`` read after a write; a rank-local value reaching a checkpoint or a file; a file written by
every rank; and, as information, MessageHub/metrics entries nobody reads and hooks that declare
nothing (never checked, never blocking). The Runners of both worlds call ``check_hook_order``
when their hooks are registered; ``minimm hooks CONFIG`` prints ``table`` and the findings.
"""
import fnmatch
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from .priority import get_priority, priority_name

CHECK_HOOKS_MODES = ('warn', 'error', 'off')
MARKS = ('local', 'rank0', 'per-rank', 'old')


class Word(NamedTuple):
    name: str
    mark: Optional[str] = None

    def __str__(self) -> str:
        return self.name + (f'({self.mark})' if self.mark else '')


class Finding(NamedTuple):
    level: str  # 'warning' (a bug or a risk; --strict fails) or 'info'
    text: str
    fix: str = ''

    def __str__(self) -> str:
        return self.text + (f'\n    fix: {self.fix}' if self.fix else '')


Flow = Tuple[List[Word], List[Word]]  # (reads, writes)


def _expand(text: str, hook, where: str) -> List[Word]:
    """The words of one side of an entry, ``{attr}`` filled from the hook, marks split off."""
    words = []
    for token in text.split():
        name, _, mark = token.partition('(')
        mark = mark.rstrip(')') or None
        if mark is not None and mark not in MARKS:
            raise ValueError(f'{where}: unknown mark ({mark}) in {token!r}; use one of {MARKS}')
        if '{' not in name:
            words.append(Word(name, mark))
            continue
        head, _, rest = name.partition('{')
        attr, _, tail = rest.partition('}')
        value = getattr(hook, attr, None)
        for item in ([] if value is None else [value] if isinstance(value, str) else value):
            words.append(Word(f'{head}{item}{tail}', mark))
    return words


def declared_flows(hook) -> Optional[Dict[str, Flow]]:
    """``hook.dataflow`` read per stage it implements; None when it declares nothing."""
    table = getattr(hook, 'dataflow', None)
    if table is None:
        return None
    name = type(hook).__name__
    if not isinstance(table, dict):
        raise TypeError(f'{name}.dataflow must be a dict of stage -> "reads -> writes", '
                        f'but got {type(table).__name__}')
    triggered = hook.get_triggered_stages()
    flows: Dict[str, Flow] = {}
    for key, text in table.items():
        reads, arrow, writes = text.partition('->')
        if text.strip() and not arrow:
            raise ValueError(f'{name}.dataflow[{key!r}] = {text!r}: write "reads -> writes"')
        stages = triggered if key == '*' else key.split()
        for stage in stages:
            if key != '*' and stage not in type(hook).stages:
                raise ValueError(f'{name}.dataflow names {stage!r}, which is no stage; the '
                                 f'stages: {", ".join(type(hook).stages)}')
            if key == '*' and stage in flows:
                continue
            where = f'{name}.dataflow[{key!r}]'
            flows[stage] = (_expand(reads, hook, where), _expand(writes, hook, where))
    return {stage: flows[stage] for stage in triggered if stage in flows}


def _pattern(name: str) -> str:
    return name.replace('metrics:auto', 'metrics:*')


def _ends(pattern: str) -> Tuple[str, str]:
    """What a pattern's matches start and end with: the text before its first ``*`` and after
    its last one."""
    return pattern.split('*')[0], pattern.split('*')[-1]


def overlap(a: str, b: str) -> bool:
    """Whether two words may name the same thing: equal, a pattern matching the other, one
    containing the other (``model`` holds ``model.params``, ``message_hub`` every key), or two
    patterns whose fixed ends agree (``message_hub:*/time`` and ``message_hub:train/*``)."""
    a, b = _pattern(a), _pattern(b)
    if a == b or fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a):
        return True
    if '*' in a and '*' in b:
        (head_a, tail_a), (head_b, tail_b) = _ends(a), _ends(b)
        return (head_a.startswith(head_b) or head_b.startswith(head_a)) and \
            (tail_a.endswith(tail_b) or tail_b.endswith(tail_a))
    return any(long.startswith(short + sep) for short, long in ((a, b), (b, a))
               for sep in '.:')


def _first(words: Sequence[Word], others: Sequence[Word]) -> Optional[Tuple[Word, Word]]:
    for word in words:
        for other in others:
            if overlap(word.name, other.name):
                return word, other
    return None


def _priority(hook) -> Tuple[int, str]:
    """A hook's priority as a number and as ``get_hooks_info`` names it (``'VERY_LOW'``, or
    ``'49'`` between the levels); both worlds share ``Priority`` (``minimm/priority.py``)."""
    value = get_priority(hook.priority)
    return value, priority_name(value)


def _who(hook) -> str:
    value, label = _priority(hook)
    name = type(hook).__name__
    return f'{name} ({label})' if label == str(value) else f'{name} ({label}={value})'


def _earlier_fix(move, before: list) -> str:
    """How to make ``move`` run before every hook of ``before``."""
    value = min(_priority(hook)[0] for hook in before)
    if value > 0:
        return f'give {type(move).__name__} a priority below {value} (e.g. {value - 1})'
    return f'give {type(before[0]).__name__} a priority above {_priority(move)[0]}'


def _is_swap(writes: Sequence[Word]) -> bool:
    names = [word.name for word in writes]
    return any(n.startswith('model') for n in names) and any(n.startswith('ema') for n in names)


def _order_findings(stage: str, rows) -> List[Finding]:
    """Per writer: the hooks before it in the stage that read what it writes (read before
    write); per ``(old)`` reader: the hooks before it that write what it reads."""
    found = []
    for j, (writer, (_, writes)) in enumerate(rows):
        early = [(hook, hit) for hook, (reads, _) in rows[:j] if hook is not writer
                 for hit in [_first([w for w in reads if w.mark != 'old'], writes)] if hit]
        if early:
            names = ', '.join(f'{_who(hook)} reads {hit[0].name}' for hook, hit in early)
            what = 'swaps the EMA weights' if _is_swap(writes) else 'writes ' + ' '.join(
                sorted({hit[1].name for _, hit in early}))
            found.append(Finding('warning', f'{stage}: {names}, before {_who(writer)} {what} '
                                            'later in the stage',
                                 _earlier_fix(writer, [hook for hook, _ in early])))
    for i, (reader, (reads, _)) in enumerate(rows):
        old = [w for w in reads if w.mark == 'old']
        for earlier, (_, writes) in rows[:i]:
            hit = _first(old, writes)
            if hit and earlier is not reader:
                found.append(Finding('warning', (
                    f'{stage}: {_who(reader)} reads {hit[0].name} as it was before the stage, '
                    f'but {_who(earlier)} writes it first'), _earlier_fix(reader, [earlier])))
    return found


def _local_words(by_stage) -> List[Word]:
    """What differs per rank: written ``(local)``, or written by a stage that reads such a value
    (files and checkpoints are what the rank checks look at, not part of the spread)."""
    local = [w for rows in by_stage.values() for _, (_, writes) in rows for w in writes
             if w.mark == 'local']
    grown = True
    while grown:
        grown = False
        for rows in by_stage.values():
            for _, (reads, writes) in rows:
                if not _first(reads, local):
                    continue
                for word in writes:
                    if not word.name.startswith(('file:', 'checkpoint')) and \
                            not any(word.name == w.name for w in local):
                        local.append(Word(word.name, 'local'))
                        grown = True
    return local


def _rank_findings(by_stage) -> List[Finding]:
    found, local = [], _local_words(by_stage)
    for stage, rows in by_stage.items():
        for hook, (reads, writes) in rows:
            saved = [w for w in writes if w.name.startswith(('file:', 'checkpoint'))
                     and w.mark != 'per-rank']
            hit = _first(reads, local) or _first([w for w in writes if w.mark == 'local'], saved)
            if saved and hit:
                found.append(Finding('warning', (
                    f'{stage}: {_who(hook)} writes {saved[0].name} from {hit[0].name}, which '
                    'differs per rank'), 'sync it first (e.g. SyncBuffersHook) or gather it'))
            for word in writes:
                if word.name.startswith('file:') and word.mark is None:
                    found.append(Finding('warning', (
                        f'{stage}: {_who(hook)} writes {word.name} on every rank, to one path'),
                        f'write it on rank 0 alone (`if is_main_process():`) and declare it '
                        f'{word}(rank0), or name the file per rank and declare it (per-rank)'))
    return found


def check(hooks: Sequence, stages: Sequence[str]) -> List[Finding]:
    """The findings for ``hooks`` (in call order) over ``stages``: warnings first, then infos."""
    flows = [(hook, declared_flows(hook)) for hook in hooks]
    by_stage = {stage: [(hook, flow[stage]) for hook, flow in flows
                        if flow is not None and stage in flow] for stage in stages}
    found = []
    for stage, rows in by_stage.items():
        found += _order_findings(stage, rows)
    found += _rank_findings(by_stage)
    reads = [w for rows in by_stage.values() for _, (r, _) in rows for w in r]
    for stage, rows in by_stage.items():
        for hook, (_, writes) in rows:
            for word in writes:
                if word.name.startswith(('message_hub:', 'metrics:', 'log_buffer:')) and \
                        not _first([word], reads):
                    found.append(Finding('info', f'{stage}: {_who(hook)} writes {word.name}, '
                                                 'which no hook reads'))
    found += [Finding('info', f'{_who(hook)} declares no dataflow: its stages are not checked')
              for hook, flow in flows if flow is None]
    return found


def table(hooks: Sequence, stages: Sequence[str]) -> str:
    """Per stage, its hooks in call order, each with its priority and ``reads -> writes``; a
    stage no hook implements is left out."""
    width = max([len(type(hook).__name__) for hook in hooks] + [4])
    lines = []
    for stage in stages:
        rows = [hook for hook in hooks if stage in hook.get_triggered_stages()]
        if not rows:
            continue
        lines.append(f'{stage}:')
        for hook in rows:
            flows = declared_flows(hook)
            if flows is None or stage not in flows:
                flow = '(not declared)'
            else:
                reads, writes = flows[stage]
                flow = (' '.join(map(str, reads)) + ' -> ' + ' '.join(map(str, writes))
                        if reads or writes else '-')
            label = _priority(hook)[1]
            lines.append(f'  {label:<12} {type(hook).__name__:<{width}}  {flow.strip()}'.rstrip())
    return '\n'.join(lines)


def findings_text(found: Sequence[Finding]) -> str:
    if not found:
        return 'No findings.'
    return '\n'.join(f'{finding.level}: {finding}' for finding in found)


def check_hooks_mode(value) -> str:
    if value not in CHECK_HOOKS_MODES:
        raise ValueError(f'check_hooks={value!r}: must be one of '
                         f'{", ".join(map(repr, CHECK_HOOKS_MODES))}')
    return value


def check_hook_order(hooks: Sequence, stages: Sequence[str], mode: str, logger) -> None:
    """What a Runner runs once its hooks are registered: ``'warn'`` logs each warning, ``'error'``
    raises a ValueError listing them, ``'off'`` checks nothing. Information is not logged."""
    if check_hooks_mode(mode) == 'off':
        return
    warnings = [f for f in check(hooks, stages) if f.level == 'warning']
    if warnings and mode == 'error':
        raise ValueError('the hooks run in an order that loses data (check_hooks=\'error\'):\n'
                         + findings_text(warnings))
    for finding in warnings:
        logger.warning(f'hook order: {finding}')
