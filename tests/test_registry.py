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


# ---------------------------------------------------------------- the tree of registries
def _family():
    """root (scope 'fam') with children a and b, and a's child a1 (the oracle: this drawing)."""
    root = Registry('thing', scope='fam')
    a = Registry('thing', parent=root, scope='a')
    b = Registry('thing', parent=root, scope='b')
    a1 = Registry('thing', parent=a, scope='a1')
    return root, a, b, a1


def test_scope_is_inferred_from_the_defining_package():
    assert Registry('thing').scope == 'test_registry'       # this module's top-level name
    assert HOOKS.scope == 'mmengine'                          # minimm stands for MMEngine ...
    from minimm.mmcv.hooks.hook import HOOKS as MMCV_HOOKS
    assert MMCV_HOOKS.scope == 'mmcv'                         # ... and, in minimm.mmcv, for MMCV
    with pytest.raises(AssertionError, match='parent must be None or a Registry'):
        Registry('thing', parent='root')


def test_names_resolve_up_the_tree_and_by_scope_across_it():
    root, a, b, a1 = _family()
    root.register_module(name='R', module=int)
    a.register_module(name='A', module=float)
    b.register_module(name='B', module=str)
    a1.register_module(name='A', module=complex)   # shadows a's A below a1
    assert a1.get('A') is complex and a.get('A') is float
    assert a1.get('R') is int                                  # falls back through the parents
    assert root.get('A') is None and b.get('A') is None        # never down, never sideways
    assert root.get('a.a1.A') is complex and a1.get('b.B') is str and b.get('a1.A') is complex
    assert a.get('a.R') is None                                # a scoped key is that registry's own
    assert Registry.split_scope_key('a.a1.A') == ('a', 'a1.A')
    assert a1._get_root_registry() is root and root._search_child('a1') is a1
    with pytest.raises(AssertionError, match='scope a exists'):
        Registry('thing', parent=root, scope='a')


def test_build_uses_the_default_scope_and_scope_keys_switch_for_one_build():
    from minimm.registry import DefaultScope
    root, a, b, _ = _family()

    class Box:
        def __init__(self, inner=None):
            self.inner = None if inner is None else root.build(inner)

    a.register_module(name='Box', module=Box)
    b.register_module(name='Box', module=lambda: 'b-box')
    with DefaultScope.overwrite_default_scope('b'):
        assert root.build(dict(type='Box')) == 'b-box'
        # _scope_ switches for the build, including the builds inside the object's __init__.
        box = root.build(dict(type='Box', _scope_='a', inner=dict(type='Box')))
        assert isinstance(box.inner, Box)
        assert DefaultScope.get_current_instance().scope_name == 'b'
    assert DefaultScope.get_current_instance() is None or \
        DefaultScope.get_current_instance().scope_name != 'b'


def test_a_child_inherits_the_build_function_mmcv_style():
    """MMDetection 2.x declares ``MODELS = Registry('models', parent=MMCV_MODELS)``."""
    from minimm.mmcv.hooks.hook import HOOKS as MMCV_HOOKS
    from minimm.mmcv.registry import build_from_cfg as mmcv_build_from_cfg
    child = Registry('hook', parent=MMCV_HOOKS)
    assert child.build_func is mmcv_build_from_cfg and child.parent is MMCV_HOOKS
    child.register_module(name='Mine', module=lambda x: x * 2)
    assert child.build(dict(type='Mine', x=4)) == 8
    assert child.get('CheckpointHook') is MMCV_HOOKS.get('CheckpointHook')


def test_models_builds_a_list_as_sequential():
    from minimm.registry import MODELS
    model = MODELS.build([dict(type='torch.nn.Linear', in_features=2, out_features=3),
                          dict(type='torch.nn.ReLU')])
    assert isinstance(model, torch.nn.Sequential) and model[0].out_features == 3


def test_root_registries_import_their_locations_lazily():
    """In a fresh interpreter, minimm.optim is imported by the first lookup, not before."""
    import subprocess
    import sys
    code = ('import sys\n'
            'from minimm.registry import PARAM_SCHEDULERS\n'
            "before = 'minimm.optim' in sys.modules\n"
            "cls = PARAM_SCHEDULERS.get('StepLR')\n"
            "print(before, cls.__module__, 'minimm.optim' in sys.modules)\n")
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ['False', 'minimm.optim.scheduler.lr_scheduler', 'True'], \
        result.stderr


def test_traverse_and_count(tmp_path):
    import json
    from minimm.registry import count_registered_modules, traverse_registry_tree
    root, a, _, a1 = _family()
    a1.register_module(name='X', module=int)
    tree = traverse_registry_tree(a1, verbose=False)
    assert [(n['scope'], n['num_modules']) for n in tree] == [('fam', 0), ('a', 0), ('a1', 1),
                                                              ('b', 0)]
    assert tree == traverse_registry_tree(root, verbose=False)
    result = count_registered_modules(str(tmp_path), verbose=False)
    assert result['registries']['HOOKS'][0]['num_modules'] == len(HOOKS.module_dict) > 10
    with open(tmp_path / 'modules_statistic_results.json') as f:
        assert json.load(f)['registries'].keys() == result['registries'].keys()
