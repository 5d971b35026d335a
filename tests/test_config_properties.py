"""Property-based tests (hypothesis) of the config: _base_/_delete_ merging, dotted overrides,
--cfg-options values and the dump round trip, each against an oracle written here."""
import keyword
import os.path as osp
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minimm.config import Config, parse_cfg_options

SETTINGS = settings(max_examples=60, deadline=None)
TOP_KEYS = st.sampled_from(['model', 'data', 'optim'])
KEYS = st.sampled_from(['a', 'b', 'c'])
LEAVES = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.lists(st.integers(0, 2), max_size=2))
TREES = st.recursive(LEAVES, lambda children: st.dictionaries(KEYS, children, max_size=3),
                     max_leaves=8)


def _with_delete(items, delete):
    return items if delete is None else {**items, '_delete_': delete}


# A child config's dicts may say _delete_=True (replace the base's dict) or _delete_=False.
CHILD_TREES = st.recursive(LEAVES, lambda children: st.builds(
    _with_delete, st.dictionaries(KEYS, children, max_size=3),
    st.sampled_from([None, True, False])), max_leaves=8)


class Refused(Exception):
    """The oracle's answer when minimm must refuse the merge."""


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != '_delete_'}
    return value


def oracle_merge(child, base):
    """MMEngine's documented rule: a child dict merges into the base's dict key by key unless it
    holds ``_delete_=True``; anything else replaces; a dict over a non-dict needs ``_delete_``."""
    merged = dict(base)
    for key, value in child.items():
        if key == '_delete_':
            continue
        replaces = not isinstance(value, dict) or value.get('_delete_') or key not in base
        if replaces:
            merged[key] = _strip(value)
        elif isinstance(base[key], dict):
            merged[key] = oracle_merge(value, base[key])
        else:
            raise Refused(key)
    return merged


def _write(folder, name, settings_dict, header=''):
    text = header + ''.join(f'{key} = {value!r}\n' for key, value in settings_dict.items())
    with open(osp.join(folder, name), 'w') as f:
        f.write(text)
    return osp.join(folder, name)


@SETTINGS
@given(base=st.dictionaries(TOP_KEYS, TREES, max_size=3),
       child=st.dictionaries(TOP_KEYS, CHILD_TREES, max_size=3), split=st.integers(0, 3))
def test_base_and_delete_merge_as_the_oracle(base, child, split):
    # The base is split over two files with disjoint keys: that must not change anything.
    first = dict(list(base.items())[:split])
    second = dict(list(base.items())[split:])
    with tempfile.TemporaryDirectory() as folder:
        _write(folder, 'first.py', first)
        _write(folder, 'second.py', second)
        path = _write(folder, 'child.py', child, header="_base_ = ['first.py', 'second.py']\n")
        try:
            expected = oracle_merge(child, base)
        except Refused:
            with pytest.raises(TypeError, match='_delete_=True'):
                Config.fromfile(path)
            return
        assert Config.fromfile(path).to_dict() == expected


@SETTINGS
@given(base=st.dictionaries(TOP_KEYS, TREES, max_size=3),
       path=st.tuples(TOP_KEYS).map(list) | st.tuples(TOP_KEYS, st.lists(KEYS, max_size=2)).map(
           lambda parts: [parts[0], *parts[1]]),
       value=LEAVES)
def test_merge_from_dict_sets_the_dotted_key(base, path, value):
    """Closed form: walk the dotted key, creating missing dicts, and set the value at its end."""
    cfg = Config(base)
    expected = _copy(base)
    node = expected
    for depth, part in enumerate(path[:-1]):
        if part in node and not isinstance(node[part], dict):
            with pytest.raises(TypeError, match='.'.join(path[:depth + 1])):
                cfg.merge_from_dict({'.'.join(path): value})
            return
        node = node.setdefault(part, {})
    node[path[-1]] = value
    cfg.merge_from_dict({'.'.join(path): value})
    assert cfg.to_dict() == expected


def _copy(tree):
    return {k: _copy(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


# ----------------------------------------------------------------------------- --cfg-options
LITERALS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=3) | st.lists(children, max_size=3).map(tuple),
    max_leaves=10)


@SETTINGS
@given(value=LITERALS)
def test_cfg_option_values_round_trip_through_repr(value):
    # repr() tells lists from tuples, ints from floats and bools, so equal reprs mean equal types.
    assert repr(parse_cfg_options([f'key={value!r}'])['key']) == repr(value)


def _is_plain_word(word):
    try:
        float(word)
        return False
    except ValueError:
        return word.lower() not in ('true', 'false') and word != 'None'


WORDS = st.from_regex(r'[A-Za-z_][A-Za-z0-9_./-]{0,8}', fullmatch=True).filter(_is_plain_word)


@SETTINGS
@given(words=st.lists(WORDS, min_size=1, max_size=4), number=st.integers(-99, 99))
def test_bare_words_are_strings_and_bare_commas_make_lists(words, number):
    """As MMEngine: ``type=SGD`` is the string 'SGD', ``a,b`` the list ['a', 'b']."""
    parsed = parse_cfg_options([f'one={words[0]}', f'many={",".join(words)},{number}'])
    assert parsed['one'] == words[0]
    assert parsed['many'] == [*words, number]


# ----------------------------------------------------------------------------- dump
NAMES = st.from_regex(r'[a-z_][a-z0-9_]{0,6}', fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and not name.startswith('__')
    and name not in ('filename', 'text', 'pretty_text', '_base_', '_delete_'))
DUMPABLE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False),
    lambda children: (st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
                      | st.dictionaries(NAMES, children, max_size=4)
                      | st.dictionaries(st.text(max_size=4) | st.integers(), children,
                                        max_size=3)),
    max_leaves=20)


@SETTINGS
@given(settings_dict=st.dictionaries(NAMES, DUMPABLE, max_size=4))
def test_dump_loads_back_to_the_same_config(settings_dict):
    cfg = Config(settings_dict)
    with tempfile.TemporaryDirectory() as folder:
        cfg.dump(osp.join(folder, 'dumped.py'))
        assert repr(Config.fromfile(osp.join(folder, 'dumped.py')).to_dict()) == \
            repr(cfg.to_dict())
