"""Config: loading .py files, _base_ inheritance, _delete_, overrides, custom_imports, dump."""
import argparse
import copy
import pickle
import sys
import textwrap

import pytest
import torch

from minimm.config import Config, ConfigDict, DictAction, parse_cfg_options
from minimm.registry import FUNCTIONS, HOOKS, MODELS, OPTIMIZERS
from minimm.runner import Runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.fixture
def three_levels(tmp_path):
    """runtime.py <- schedule.py <- child.py, with a list of hooks and nested dicts."""
    write(tmp_path / '_base_' / 'runtime.py', """
        default_hooks = dict(logger=dict(type='LoggerHook', interval=10),
                             checkpoint=dict(type='CheckpointHook', interval=1))
        custom_hooks = [dict(type='EMAHook', momentum=0.0002, priority=49)]
        log_level = 'INFO'
    """)
    write(tmp_path / '_base_' / 'schedule.py', """
        _base_ = './runtime.py'
        optim_wrapper = dict(type='OptimWrapper',
                             optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4))
        train_cfg = dict(by_epoch=True, max_epochs=10)
    """)
    return write(tmp_path / 'configs' / 'child.py', """
        import math

        _base_ = ['../_base_/schedule.py']

        def helper(x):
            return x * 2

        optim_wrapper = dict(optimizer=dict(lr=helper(_base_.optim_wrapper.optimizer.lr)))
        default_hooks = dict(logger=dict(interval=50))
        train_cfg = dict(_delete_=True, by_epoch=False, max_iters=math.floor(100.5))
        work_dir = './work_dirs/child'
        _private = 1
    """)


# ----------------------------------------------------------------------------- loading
def test_two_level_inheritance_merges_and_overrides(three_levels):
    cfg = Config.fromfile(three_levels)
    assert cfg.filename == three_levels
    # child overrides one key; the base's siblings stay
    assert cfg.optim_wrapper.to_dict() == dict(
        type='OptimWrapper', optimizer=dict(type='SGD', lr=0.2, momentum=0.9, weight_decay=1e-4))
    assert cfg.default_hooks.logger == dict(type='LoggerHook', interval=50)
    assert cfg.default_hooks.checkpoint.interval == 1
    # grand-parent keys come through
    assert cfg.custom_hooks[0].priority == 49 and cfg.log_level == 'INFO'
    assert cfg.work_dir == './work_dirs/child' and cfg['_private'] == 1


def test_delete_replaces_the_base_dict(three_levels):
    assert Config.fromfile(three_levels).train_cfg.to_dict() == dict(by_epoch=False, max_iters=100)


def test_modules_functions_dunders_and_base_are_not_keys(three_levels):
    cfg = Config.fromfile(three_levels)
    assert list(cfg) == ['default_hooks', 'custom_hooks', 'log_level', 'optim_wrapper', 'train_cfg',
                         'work_dir', '_private']
    assert 'math' not in cfg and 'helper' not in cfg and '_base_' not in cfg


def test_text_holds_every_file_of_the_chain(three_levels):
    text = Config.fromfile(three_levels).text
    assert text.index('runtime.py') < text.index('schedule.py') < text.index('child.py')


def test_delete_key_never_reaches_the_result(tmp_path):
    path = write(tmp_path / 'a.py',
                 "model = dict(_delete_=True, backbone=dict(_delete_=True, depth=1))\n")
    assert Config.fromfile(path).to_dict() == dict(model=dict(backbone=dict(depth=1)))


def test_duplicate_keys_among_bases_are_rejected(tmp_path):
    write(tmp_path / 'a.py', 'x = 1\n')
    write(tmp_path / 'b.py', 'x = 2\n')
    path = write(tmp_path / 'c.py', "_base_ = ['a.py', 'b.py']\n")
    with pytest.raises(KeyError, match=r"\['x'\].*more than one _base_"):
        Config.fromfile(path)


def test_child_dict_over_base_scalar_names_the_key(tmp_path):
    write(tmp_path / 'base.py', "model = dict(neck='FPN')\n")
    path = write(tmp_path / 'child.py',
                 "_base_ = 'base.py'\nmodel = dict(neck=dict(type='PAFPN'))\n")
    with pytest.raises(TypeError, match=r'model\.neck: .*_delete_=True'):
        Config.fromfile(path)


def test_loading_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing.py'):
        Config.fromfile(tmp_path / 'missing.py')
    path = write(tmp_path / 'a.yaml', 'a: 1\n')
    with pytest.raises(ValueError, match='.py config files only'):
        Config.fromfile(path)
    write(tmp_path / 'loop1.py', "_base_ = 'loop2.py'\n")
    write(tmp_path / 'loop2.py', "_base_ = 'loop1.py'\n")
    with pytest.raises(ValueError, match='inheritance cycle'):
        Config.fromfile(tmp_path / 'loop1.py')
    path = write(tmp_path / 'bad_base.py', "name = 'x.py'\n_base_ = name\n")
    with pytest.raises(TypeError, match='string literals'):
        Config.fromfile(path)
    path = write(tmp_path / 'reserved.py', "filename = 'x'\n")
    with pytest.raises(KeyError, match="'filename' is reserved"):
        Config.fromfile(path)


# ----------------------------------------------------------------------------- custom_imports
def test_custom_imports_registers_a_module_from_tmp_path(tmp_path, monkeypatch):
    write(tmp_path / 'pkg_h4_custom' / '__init__.py', '')
    write(tmp_path / 'pkg_h4_custom' / 'my_hooks.py', """
        from minimm.registry import HOOKS

        @HOOKS.register_module(force=True)
        class H4CustomHook:
            pass
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path / 'cfg.py', "custom_imports = dict(imports=['pkg_h4_custom.my_hooks'])\n")
    try:
        cfg = Config.fromfile(path)
        assert HOOKS.get('H4CustomHook') is not None
        assert cfg.custom_imports.imports == ['pkg_h4_custom.my_hooks']
    finally:
        HOOKS.module_dict.pop('H4CustomHook', None)
        sys.modules.pop('pkg_h4_custom.my_hooks', None)
        sys.modules.pop('pkg_h4_custom', None)


def test_custom_imports_failure_is_clear_unless_allowed(tmp_path):
    path = write(tmp_path / 'cfg.py', "custom_imports = dict(imports='no_such_module_h4')\n")
    with pytest.raises(ImportError, match="failed to import 'no_such_module_h4'.*sys.path"):
        Config.fromfile(path)
    path = write(tmp_path / 'ok.py', "custom_imports = dict(imports=['no_such_module_h4'], "
                                     "allow_failed_imports=True)\n")
    with pytest.warns(UserWarning, match='no_such_module_h4'):
        Config.fromfile(path)


# ----------------------------------------------------------------------------- overrides
def test_merge_from_dict_with_list_index(three_levels):
    cfg = Config.fromfile(three_levels, cfg_options={'custom_hooks.0.momentum': 0.001,
                                                     'optim_wrapper.optimizer.lr': 0.5,
                                                     'train_cfg': dict(max_epochs=3),
                                                     'new.key': [1, 2]})
    assert cfg.custom_hooks[0].to_dict() == dict(type='EMAHook', momentum=0.001, priority=49)
    assert cfg.optim_wrapper.optimizer.lr == 0.5 and cfg.optim_wrapper.optimizer.momentum == 0.9
    assert cfg.train_cfg.to_dict() == dict(by_epoch=False, max_iters=100, max_epochs=3)
    assert cfg.new.key == [1, 2]


def test_merge_from_dict_errors_name_the_key():
    cfg = Config(dict(custom_hooks=[dict(type='A')], model=dict(depth=1)))
    with pytest.raises(KeyError, match=r'custom_hooks\.3: index 3 is out of range.*length 1'):
        cfg.merge_from_dict({'custom_hooks.3.priority': 1})
    with pytest.raises(TypeError, match=r'custom_hooks\.first: .*must be an index'):
        cfg.merge_from_dict({'custom_hooks.first.priority': 1})
    with pytest.raises(TypeError, match=r'custom_hooks: .*type list'):
        cfg.merge_from_dict({'custom_hooks.0.priority': 1}, allow_list_keys=False)
    with pytest.raises(TypeError, match=r'model\.depth: '):
        cfg.merge_from_dict({'model.depth.x': 1})
    assert cfg.to_dict() == dict(custom_hooks=[dict(type='A')], model=dict(depth=1))  # unchanged


def test_parse_cfg_options_values():
    assert parse_cfg_options([
        'a.b=1', 'f=0.5', 'e=1e-3', 't=true', 'F=False', 'n=None', 's=SGD', 'q="12"',
        'l=[1,2]', 'bare=x,y', 'tup=(1,)', 'empty=[]', 'nested=[(1,2),[a,b],c]', 'sp=a b',
    ]) == {'a.b': 1, 'f': 0.5, 'e': 0.001, 't': True, 'F': False, 'n': None, 's': 'SGD', 'q': '12',
           'l': [1, 2], 'bare': ['x', 'y'], 'tup': (1, ), 'empty': [],
           'nested': [(1, 2), ['a', 'b'], 'c'],
           'sp': 'a b'}
    with pytest.raises(ValueError, match='key=value'):
        parse_cfg_options(['lr'])
    with pytest.raises(ValueError, match='unbalanced'):
        parse_cfg_options(['a=[1,(2]'])


def test_dict_action_with_argparse():
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    args = parser.parse_args(['--cfg-options', 'model.num_classes=5',
                              'custom_hooks.0.momentum=0.001',
                              '--cfg-options', 'seed=0'])
    assert args.cfg_options == {'model.num_classes': 5, 'custom_hooks.0.momentum': 0.001, 'seed': 0}
    cfg = Config(dict(model=dict(num_classes=10), custom_hooks=[dict(type='EMAHook')]))
    cfg.merge_from_dict(args.cfg_options)
    assert cfg.model.num_classes == 5 and cfg.custom_hooks[0].momentum == 0.001 and cfg.seed == 0


# ----------------------------------------------------------------------------- dump
def test_dump_round_trip(three_levels, tmp_path):
    cfg = Config.fromfile(three_levels)
    cfg.merge_from_dict({'extra': dict(inf=float('inf'), tup=(1, ), nums=list(range(50)),
                                       mapping={'not-a-name': 1, 2: 'two', 'class': None},
                                       long_string='x' * 120, flag=False)})
    out = tmp_path / 'dumped.py'
    cfg.dump(str(out))
    assert Config.fromfile(out).to_dict() == cfg.to_dict()
    assert cfg.dump() == out.read_text() == cfg.pretty_text
    long_lines = [line for line in cfg.pretty_text.splitlines() if len(line) > 100]
    assert long_lines == [f"    long_string='{'x' * 120}',"]  # only what cannot be split


def test_dump_writes_classes_and_functions_by_import_path(tmp_path):
    cfg = Config(dict(model=dict(type=ConfigDict, act=torch.nn.functional.relu),
                      optimizer=dict(type=torch.optim.SGD, lr=0.1)))
    text = cfg.dump()
    # The shortest path that imports the object again, as a user writes it (the class lives in
    # torch.optim.sgd); the pretty text shows the same.
    assert text == ("model = dict(type='minimm.config.ConfigDict', "
                    "act='torch.nn.functional.relu')\n"
                    "optimizer = dict(type='torch.optim.SGD', lr=0.1)\n") == cfg.pretty_text
    (tmp_path / 'dumped.py').write_text(text)
    loaded = Config.fromfile(tmp_path / 'dumped.py')
    assert OPTIMIZERS.get(loaded.optimizer.type) is torch.optim.SGD
    assert MODELS.get(loaded.model.type) is ConfigDict
    assert FUNCTIONS.get(loaded.model.act) is torch.nn.functional.relu


def test_dump_leaves_out_what_cannot_be_written_and_names_it(tmp_path):
    cfg = Config({'model': dict(type='M', init=object(), act=lambda x: x,
                                layers=[1, torch.float32], names={'ok': 1, object(): 2}),
                  'not-a-name': 1, 'class': 2, 'keep': 3})
    with pytest.warns(UserWarning) as record:
        text = cfg.dump()
    assert text == "model = dict(type='M', layers=[1], names={'ok': 1})\nkeep = 3\n"
    messages = '\n'.join(str(w.message) for w in record)
    for key in ('model.init: object', 'model.act: function', 'model.layers.1: dtype',
                'model.names (a key): object', "'not-a-name' is not a Python name",
                "'class' is not a Python name"):
        assert key in messages
    assert 'init=<object object at' in cfg.pretty_text  # readable in the log, not loadable
    with pytest.raises(ValueError, match='.py files only'):
        Config(dict(a=1)).dump(str(tmp_path / 'a.json'))


def test_py_config_with_a_class_as_type_trains_and_its_dump_rebuilds_it(tmp_path):
    """MMEngine accepts ``type=SGD`` after ``from torch.optim import SGD``; so does minimm."""
    path = write(tmp_path / 'cfg.py', f"""
        from torch.optim import SGD
        from toy import ToyDataset, ToyModel

        model = dict(type=ToyModel)
        work_dir = {str(tmp_path / 'work')!r}
        train_dataloader = dict(dataset=dict(type=ToyDataset, n=8), batch_size=4,
                                sampler=dict(type='DefaultSampler', shuffle=False),
                                collate_fn=dict(type='default_collate'))
        train_cfg = dict(by_epoch=True, max_epochs=1)
        optim_wrapper = dict(optimizer=dict(type=SGD, lr=0.05, momentum=0.5))
        randomness = dict(seed=0)
        default_hooks = dict(checkpoint=None)
    """)
    cfg = Config.fromfile(path)
    assert 'SGD' not in cfg and 'ToyModel' not in cfg  # imported classes are not settings
    runner = Runner.from_cfg(cfg)
    runner.train()
    dumped = Config.fromfile(tmp_path / 'work' / 'cfg.py')
    assert dumped.optim_wrapper.optimizer.to_dict() == dict(type='torch.optim.SGD', lr=0.05,
                                                            momentum=0.5)
    assert dumped.model.type == 'toy.ToyModel'
    rebuilt = OPTIMIZERS.build(dumped.optim_wrapper.optimizer,
                               default_args=dict(params=runner.model.parameters()))
    original = runner.optim_wrapper.optimizer
    assert type(rebuilt) is type(original) is torch.optim.SGD
    assert rebuilt.defaults == original.defaults


# ----------------------------------------------------------------------------- Config / ConfigDict
def test_config_from_dict_does_not_mutate_or_alias_the_input():
    source = dict(model=dict(type='M', layers=[dict(k=1)]), _delete_marker=dict(_delete_=True))
    snapshot = copy.deepcopy(source)
    cfg = Config(source)
    cfg.model.layers[0].k = 2
    cfg.merge_from_dict({'model.type': 'N'})
    assert source == snapshot
    assert isinstance(cfg.model, ConfigDict) and isinstance(cfg.model.layers[0], ConfigDict)


def test_attribute_and_item_access():
    cfg = Config(dict(a=1))
    cfg.b = dict(c=2)
    cfg['d'] = [dict(e=3)]
    assert cfg.b.c == 2 and cfg['b']['c'] == 2 and cfg.d[0].e == 3
    assert cfg.get('missing', 'default') == 'default' and 'a' in cfg and len(cfg) == 3
    assert cfg.to_dict() == dict(a=1, b=dict(c=2), d=[dict(e=3)])
    assert type(cfg.to_dict()['b']) is dict
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        cfg.missing
    with pytest.raises(KeyError):
        cfg['missing']
    with pytest.raises(TypeError, match='cfg_dict must be a dict'):
        Config([1])


def test_config_dict_conversions():
    d = ConfigDict(a=dict(b=1), l=[dict(c=2)], t=(dict(d=3), ))
    assert isinstance(d.a, ConfigDict) and isinstance(d.l[0], ConfigDict) and isinstance(d.t, tuple)
    d.update(e=dict(f=4))
    assert d.e.f == 4 and d.setdefault('g', dict(h=5)).h == 5
    del d.g
    assert 'g' not in d
    with pytest.raises(AttributeError):
        del d.g


def test_copy_and_pickle():
    cfg = Config(dict(model=dict(type='M', layers=[1, 2])), filename='x.py')
    for clone in (copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):
        assert clone.to_dict() == cfg.to_dict() and clone.filename == 'x.py'
        clone.model.layers.append(3)
        assert cfg.model.layers == [1, 2]
    plain = pickle.loads(pickle.dumps(ConfigDict(a=dict(b=1))))
    assert isinstance(plain.a, ConfigDict) and plain.a.b == 1
