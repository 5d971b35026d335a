"""Registry: register (decorator, call, aliases, force), get, build, and the error messages."""
import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minimm.hooks  # noqa: F401  (registers the built-in hooks these tests build)
from minimm.registry import HOOKS, OPTIMIZERS, Registry, build_from_cfg


def test_decorator_call_and_aliases():
    reg = Registry('thing')

    @reg.register_module()
    class Cat:
        def __init__(self, name='tom'):
            self.name = name

    @reg.register_module(name=['Dog', 'Puppy'])
    class Dog:
        pass

    reg.register_module(module=functools.partial(Cat, name='felix'), name='Felix')
    assert reg.get('Cat') is Cat and 'Cat' in reg
    assert reg.get('Dog') is Dog and reg.get('Puppy') is Dog
    assert reg.build(dict(type='Felix')).name == 'felix'
    assert 'Nothing' not in reg and reg.get('Nothing') is None
    assert len(reg) == 4


def test_duplicate_needs_force():
    reg = Registry('thing')
    reg.register_module(name='A', module=int)
    with pytest.raises(KeyError, match='A is already registered in thing'):
        reg.register_module(name='A', module=float)
    reg.register_module(name='A', module=float, force=True)
    assert reg.get('A') is float
    with pytest.raises(TypeError, match='force must be a boolean'):
        reg.register_module(force=1)


def test_build_merges_default_args_without_mutating():
    reg = Registry('thing')
    reg.register_module(name='Pair', module=lambda a, b=2: (a, b))
    cfg = dict(type='Pair', a=1)
    defaults = dict(b=5, a=9)
    assert build_from_cfg(cfg, reg, defaults) == (1, 5)
    assert cfg == dict(type='Pair', a=1) and defaults == dict(b=5, a=9)
    # type may be a callable, or come from default_args
    assert build_from_cfg(dict(type=lambda a: a * 2, a=3), reg) == 6
    assert build_from_cfg(dict(a=4), reg, dict(type='Pair')) == (4, 2)


def test_missing_type_message_suggests_and_explains():
    with pytest.raises(KeyError) as info:
        HOOKS.build(dict(type='CheckpointHok'))
    message = str(info.value)
    assert "CheckpointHok is not in the mmengine::hook registry" in message
    assert "Did you mean 'CheckpointHook'" in message
    assert 'custom_imports' in message


def test_wrong_argument_names_the_type_and_key():
    with pytest.raises(TypeError, match="CheckpointHook.*unexpected keyword argument 'intervall'"):
        HOOKS.build(dict(type='CheckpointHook', intervall=1))
    with pytest.raises(TypeError, match='DistSamplerSeedHook.*takes no arguments'):
        HOOKS.build(dict(type='DistSamplerSeedHook', x=1))


def test_bad_inputs():
    reg = Registry('thing')
    with pytest.raises(TypeError, match='cfg should be a dict, ConfigDict or Config'):
        reg.build('Cat')
    with pytest.raises(KeyError, match='must contain the key "type"'):
        reg.build(dict(a=1))
    with pytest.raises(TypeError, match='type must be a str or valid type'):
        reg.build(dict(type=3))
    with pytest.raises(TypeError, match='module must be Callable'):
        reg.register_module(name='x', module=3)


def test_optimizers_prefilled_from_torch():
    assert OPTIMIZERS.get('SGD') is torch.optim.SGD
    assert OPTIMIZERS.get('AdamW') is torch.optim.AdamW
    opt = OPTIMIZERS.build(dict(type='SGD', lr=0.1),
                           default_args=dict(params=[torch.nn.Parameter(torch.ones(1))]))
    assert opt.defaults['lr'] == 0.1


def test_a_dotted_path_that_is_not_registered_is_imported():
    """As MMEngine 0.10's Registry.get: the last resort for ``type='torch.optim.SGD'``."""
    reg = Registry('thing')
    assert reg.get('torch.optim.SGD') is torch.optim.SGD and 'torch.nn.Linear' in reg
    assert reg.build(dict(type='torch.nn.Linear', in_features=2, out_features=3)).out_features == 3
    for missing in ('torch.optim.NoSuchThing', 'no_such_module_x.Thing', 'torch.float32',
                    '.relative.Name', 'a..b'):
        assert reg.get(missing) is None
    with pytest.raises(KeyError, match='no_such_module_x.Thing is not in the test_registry::thing registry'):
        reg.build(dict(type='no_such_module_x.Thing'))


NAMES = st.from_regex(r'[A-Za-z_][A-Za-z0-9_]{0,8}', fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(aliases=st.lists(NAMES, min_size=1, max_size=4, unique=True),
       others=st.lists(NAMES, min_size=1, max_size=4, unique=True), absent=NAMES)
def test_aliases_resolve_and_a_refused_registration_changes_nothing(aliases, others, absent):
    reg = Registry('thing')

    class First:
        pass

    class Second:
        pass

    reg.register_module(name=aliases, module=First)
    assert len(reg) == len(aliases)
    assert all(reg.get(name) is First and type(reg.build(dict(type=name))) is First
               for name in aliases)
    before = dict(reg.module_dict)
    if set(others) & set(aliases):
        with pytest.raises(KeyError, match='already registered in thing'):
            reg.register_module(name=others, module=Second)
        assert reg.module_dict == before  # not even the names that were free
    reg.register_module(name=others, module=Second, force=True)
    assert {name: reg.get(name) for name in set(aliases) | set(others)} == {
        **{name: First for name in aliases}, **{name: Second for name in others}}
    with pytest.raises(KeyError, match='listed twice'):
        Registry('fresh').register_module(name=[*others, others[0]], module=Second)
    if absent not in set(aliases) | set(others):
        assert reg.get(absent) is None and absent not in reg
