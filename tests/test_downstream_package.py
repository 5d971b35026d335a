"""A downstream package plugs into the Runner through child registries and ``default_scope``.

``tutorials/minidet`` is written as OpenMMLab packages are (``minidet/registry.py`` makes children
of minimm's root ``HOOKS`` and ``MODELS``). These tests train it through ``minimm train``, name its
modules across scopes, and check what a run whose default scope is another package sees.
"""
import os
import re
import subprocess
import sys

import pytest
import torch.nn as nn

from minimm.model import is_model_wrapper
from minimm.registry import (HOOKS, LOOPS, MODEL_WRAPPERS, MODELS, DefaultScope, Registry,
                             default_scope)
from minimm.runner import EpochBasedTrainLoop, Runner, get_state_dict
from toy import toy_runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINIDET = os.path.join(REPO, 'tutorials', 'minidet')
CONFIG = os.path.join(MINIDET, 'configs', 'digits_mlp.py')
if MINIDET not in sys.path:
    sys.path.insert(0, MINIDET)

import minidet.registry  # noqa: E402
from minidet.engine.hooks import CheckInvalidLossHook  # noqa: E402
from minidet.models import DigitsMLP  # noqa: E402

# Another package's hook registry, in this test module's scope: a run whose default scope is
# 'test_downstream_package' looks here, then in minimm's root HOOKS, never in minidet's.
OTHER_HOOKS = Registry('hook', parent=HOOKS)
OTHER_LOOPS = Registry('loop', parent=LOOPS)
OTHER_WRAPPERS = Registry('model_wrapper', parent=MODEL_WRAPPERS)


@OTHER_WRAPPERS.register_module()
class PackagesWrapper(nn.Module):
    """A package's own model wrapper: the model is its ``module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module


@OTHER_LOOPS.register_module()
class PackagesEpochLoop(EpochBasedTrainLoop):
    """A package's own train loop, a subclass of the built-in one."""


@pytest.fixture(autouse=True)
def no_default_scope_left_behind():
    """Each Runner makes its default scope current; leave none behind for the next test."""
    yield
    DefaultScope._instance_dict.clear()


def test_the_children_are_minidets():
    assert OTHER_HOOKS.scope == 'test_downstream_package'
    assert minidet.registry.HOOKS.scope == 'minidet'
    assert minidet.registry.HOOKS.parent is HOOKS and MODELS.children['minidet'] is \
        minidet.registry.MODELS
    assert minidet.registry.HOOKS.get('CheckInvalidLossHook') is CheckInvalidLossHook
    # Through the parent, the child sees every root hook too.
    assert minidet.registry.HOOKS.get('CheckpointHook') is HOOKS.get('CheckpointHook')


def test_minimm_train_finds_the_packages_and_the_roots_modules(tmp_path):
    """``PYTHONPATH=tutorials/minidet`` is what ``pip install -e tutorials/minidet`` amounts to.
    The config has no ``custom_imports``: ``default_scope`` imports ``minidet.registry``, whose
    ``locations`` import the hook and the model."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [MINIDET, REPO, os.environ.get('PYTHONPATH')])))
    result = subprocess.run(
        [sys.executable, '-m', 'minimm', 'train', CONFIG, '--work-dir', str(tmp_path),
         '--cfg-options', 'train_cfg.max_epochs=1', '--verbose'],  # --verbose: the hook table
        capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    hooks_table = log[log.index('Hooks will be executed'):]
    # minidet's hook, ABOVE_NORMAL, beside the root's default hooks.
    assert re.search(r'\(ABOVE_NORMAL\) CheckInvalidLossHook', hooks_table)
    assert re.search(r'\(VERY_LOW {4}\) CheckpointHook', hooks_table)
    assert 'WARNING' not in log, log[-3000:]
    assert os.path.isfile(tmp_path / 'epoch_1.pth')
    assert re.search(r'Epoch\(val\) \[1\]\[3/3\] +accuracy/top1: \d', log)


def test_scope_dot_name_works_from_another_scope():
    # From the root (no default scope, or 'mmengine'), and from the other package's registry.
    assert HOOKS.get('minidet.CheckInvalidLossHook') is CheckInvalidLossHook
    assert OTHER_HOOKS.get('minidet.CheckInvalidLossHook') is CheckInvalidLossHook
    with DefaultScope.overwrite_default_scope('mmengine'):
        model = MODELS.build(dict(type='minidet.DigitsMLP', hidden=8))
    assert type(model) is DigitsMLP and model.net[1].out_features == 8
    # ... and minidet's registry reaches the root's modules by the root's scope.
    assert minidet.registry.HOOKS.get('mmengine.CheckpointHook') is HOOKS.get('CheckpointHook')


def test_a_childs_hook_listed_twice_in_its_scope_builds_both(tmp_path):
    # The duplicate-hook check looks the types up as the build did: in minidet's scope, where
    # the root HOOKS alone does not have the name. A user's hook listed twice draws no warning.
    runner = toy_runner(tmp_path, default_scope='minidet', val=False,
                        custom_hooks=[dict(type='CheckInvalidLossHook', interval=1),
                                      dict(type='CheckInvalidLossHook', interval=2)])
    assert [h.interval for h in runner.hooks if type(h) is CheckInvalidLossHook] == [1, 2]


def test_a_packages_subclass_of_a_built_in_loop_gets_the_train_cfg_checks(tmp_path):
    # Looked up in the package's child LOOPS (the default scope's), as the build does.
    runner = toy_runner(tmp_path, default_scope='test_downstream_package', val=False)
    runner._train_loop = dict(type='PackagesEpochLoop', max_epochs=2, val_interval=0)
    with pytest.raises(ValueError, match='train_cfg.val_interval=0: must be an integer >= 1'):
        runner.train()


def test_a_wrapper_in_a_childs_model_wrappers_is_looked_through():
    net = nn.Sequential(nn.Linear(2, 3))
    assert is_model_wrapper(PackagesWrapper(net))  # MMEngine searches the children too
    assert list(get_state_dict(PackagesWrapper(net))) == list(net.state_dict())


def test_a_childs_hook_is_not_found_from_another_packages_scope(tmp_path):
    with pytest.raises(KeyError) as info:
        toy_runner(tmp_path, default_scope='test_downstream_package',
                   custom_hooks=[dict(type='CheckInvalidLossHook')])
    message = str(info.value)
    # The registry searched (the other package's) and the scope that has the hook.
    assert 'CheckInvalidLossHook is not in the test_downstream_package::hook registry' in message
    assert "registered in the scope 'minidet'" in message
    assert "type='minidet.CheckInvalidLossHook'" in message


def test_a_runner_in_minidets_scope_builds_the_packages_hook_and_model(tmp_path):
    runner = toy_runner(tmp_path, default_scope='minidet', val=False,
                        custom_hooks=[dict(type='CheckInvalidLossHook', interval=1)])
    assert DefaultScope.get_current_instance().scope_name == 'minidet'
    assert isinstance(runner.hooks[1], CheckInvalidLossHook) or \
        any(type(h) is CheckInvalidLossHook for h in runner.hooks)
    assert runner.build_model(dict(type='DigitsMLP')).__class__ is DigitsMLP
    runner.train()


def test_an_uninstalled_scope_warns_and_builds_from_the_root(tmp_path, monkeypatch):
    # As MMEngine: a config's default_scope='mmdet' without mmdet still builds minimm's modules.
    # (The warning goes to the current MMLogger, which, this early, is not the new runner's.)
    warnings = []
    monkeypatch.setattr(default_scope, '_warn', warnings.append)
    runner = toy_runner(tmp_path, default_scope='no_such_det', val=False,
                        custom_hooks=[dict(type='EmptyCacheHook')])
    assert runner.default_scope.scope_name == 'no_such_det'
    assert warnings and all(w.startswith('Failed to search registry with scope "no_such_det"')
                            for w in warnings)
    assert any('"mmengine::hook" registry builds instead' in w for w in warnings)
    # Once per registry, however many objects a registry builds.
    assert len(warnings) == len(set(warnings))
    runner.train()


def test_a_scope_key_in_one_config_switches_for_that_build_only():
    with DefaultScope.overwrite_default_scope('mmengine'):
        hook = HOOKS.build(dict(_scope_='minidet', type='CheckInvalidLossHook', interval=3))
        assert hook.interval == 3
        assert DefaultScope.get_current_instance().scope_name == 'mmengine'


def test_runner_default_scope_is_a_default_scope(tmp_path):
    runner = Runner(model=DigitsMLP(), work_dir=str(tmp_path), default_scope='minidet')
    assert runner.default_scope.scope_name == 'minidet'
    runner = Runner(model=DigitsMLP(), work_dir=str(tmp_path / 'none'), default_scope=None)
    assert runner.default_scope is None
