"""Inputs that used to be ignored or to fail late (issue 24, item 4): each is named before the
first iteration, or, where MMEngine's behaviour is kept, warned about."""
import inspect
import os
import warnings

import pytest

from minimm.cli import DEMO_CONFIG, main
from minimm.cli_args import load_config
from minimm.config.top_level_keys import RUNNER_KEYS
from minimm.hooks import CheckpointHook, EMAHook, Hook
from minimm.runner import Runner
from toy import toy_runner

pytestmark = pytest.mark.ops_backend  # EMAHook runs on the ops

MMCV_CONFIG = os.path.join(os.path.dirname(DEMO_CONFIG), 'digits_mmcv1.py')


class _CountIters(Hook):
    def __init__(self):
        self.iters = 0

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.iters += 1


def _log_text(runner):
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return f.read()


@pytest.mark.parametrize('train_cfg, message', [
    (dict(by_epoch=True, max_epochs=2, val_interval=0),
     'train_cfg.val_interval=0: must be an integer >= 1'),
    (dict(by_epoch=True, max_epochs='two'), "train_cfg.max_epochs='two': must be an integer >= 0"),
    (dict(by_epoch=False, max_iters=-3), 'train_cfg.max_iters=-3: must be an integer >= 0'),
    (dict(by_epoch=True, max_epochs=True), 'train_cfg.max_epochs=True: must be an integer'),
    (dict(type='EpochBasedTrainLoop', max_epochs=2, val_interval=0.5),
     'train_cfg.val_interval=0.5: must be an integer >= 1'),
    (dict(by_epoch=True, max_epochs=2, dynamic_intervals=[(1, 0)]),
     r'dynamic_intervals has \(1, 0\)'),
])
def test_a_bad_train_cfg_number_is_named_before_the_first_iteration(tmp_path, train_cfg, message):
    counter = _CountIters()
    runner = toy_runner(tmp_path, custom_hooks=[counter])
    runner._train_loop = train_cfg
    with pytest.raises(ValueError, match=message):
        runner.train()
    assert counter.iters == 0


@pytest.mark.parametrize('train_cfg, key', [(dict(by_epoch=True, max_epochs=0), 'max_epochs'),
                                            (dict(by_epoch=False, max_iters=0), 'max_iters')])
def test_zero_epochs_or_iterations_train_nothing_and_say_so(tmp_path, train_cfg, key):
    counter = _CountIters()
    runner = toy_runner(tmp_path, val=False, custom_hooks=[counter])
    runner._train_loop = train_cfg
    runner.train()  # MMEngine's behaviour: nothing trained, no error
    assert counter.iters == 0
    assert f'train_cfg.{key}=0: train() will run no iteration (as in MMEngine)' in \
        _log_text(runner)


def test_a_hook_registered_twice_warns_naming_both_places_and_both_run(tmp_path):
    runner = toy_runner(tmp_path, val=False, custom_hooks=[
        dict(type='EMAHook'), dict(type='EMAHook', momentum=0.1),
        dict(type='CheckpointHook', interval=2)])
    log = _log_text(runner)
    assert 'EMAHook is registered 2 times (custom_hooks[0], custom_hooks[1])' in log
    assert 'CheckpointHook is registered 2 times (default_hooks.checkpoint, custom_hooks[2])' in log
    assert sum(isinstance(hook, EMAHook) for hook in runner.hooks) == 2
    assert sum(isinstance(hook, CheckpointHook) for hook in runner.hooks) == 2
    once = toy_runner(tmp_path / 'once', val=False, custom_hooks=[dict(type='EMAHook')])
    assert 'registered 2 times' not in _log_text(once)
    # A user's own hook class listed twice is normal (two instances with other arguments).
    own = toy_runner(tmp_path / 'own', val=False, custom_hooks=[_CountIters(), _CountIters()])
    assert 'registered 2 times' not in _log_text(own)


def test_a_string_momentum_is_named_before_the_first_iteration(tmp_path):
    counter = _CountIters()
    runner = toy_runner(tmp_path, val=False,
                        custom_hooks=[counter, dict(type='EMAHook', momentum='0.01')])
    with pytest.raises(TypeError, match="EMA momentum='0.01' is a str: it must be a number"):
        runner.train()
    assert counter.iters == 0


def _cfg(tmp_path, **extra):
    return dict(model=dict(type='DigitsCNN'), work_dir=str(tmp_path), **extra)


def test_a_misspelt_runner_key_warns_with_the_close_match(tmp_path):
    with pytest.warns(UserWarning, match="config key 'custom_hook' is not read by the runner and "
                                         "has no effect: did you mean 'custom_hooks'"):
        Runner.from_cfg(_cfg(tmp_path, custom_hook=[dict(type='EMAHook')]))


def test_the_variables_of_real_configs_draw_no_warning(tmp_path):
    variables = dict(dataset_type='CocoDataset', data_root='data/coco/', backend_args=None,
                     train_pipeline=[], test_pipeline=[], auto_scale_lr=dict(enable=False),
                     default_scope='mmdet', vis_backends=[], tta_model=dict(),
                     train_dataset=dict(), max_epochs=3, base_lr=0.01, randomness_cfg=None)
    with warnings.catch_warnings():
        warnings.simplefilter('error', UserWarning)
        Runner.from_cfg(_cfg(tmp_path, **variables))


def test_every_runner_argument_is_a_known_key():
    arguments = set(inspect.signature(Runner.__init__).parameters) - {'self', 'cfg'}
    assert arguments <= RUNNER_KEYS


def test_cfg_options_adding_an_unused_key_warns(tmp_path):
    with pytest.warns(UserWarning, match="--cfg-options sets 'foo', a top-level key that neither "
                                         'the config nor the runner uses'):
        load_config(DEMO_CONFIG, str(tmp_path), ['foo=1', 'train_cfg.max_epochs=1'])
    with warnings.catch_warnings():  # keys the config has, or the runner reads, are quiet
        warnings.simplefilter('error', UserWarning)
        load_config(DEMO_CONFIG, str(tmp_path), ['train_cfg.max_epochs=1', 'resume=True'])


def test_an_mmcv_config_with_a_misspelt_key_warns(tmp_path):
    with pytest.warns(UserWarning, match="'checkpoint_confg' .* did you mean 'checkpoint_config'"):
        load_config(MMCV_CONFIG, str(tmp_path), ['checkpoint_confg.interval=1'])


def test_cli_train_names_a_bad_max_epochs(tmp_path):
    with pytest.raises(ValueError, match="train_cfg.max_epochs='two': must be an integer >= 0"):
        main(['train', DEMO_CONFIG, '--work-dir', str(tmp_path),
              '--cfg-options', 'train_cfg.max_epochs=two'])


@pytest.mark.parametrize('epochs', ['0', '-1', 'x'])
def test_demo_epochs_must_be_positive(capsys, epochs):
    with pytest.raises(SystemExit):
        main(['demo', '--epochs', epochs])
    assert f"argument --epochs: must be an integer >= 1, but got '{epochs}'" in \
        capsys.readouterr().err


@pytest.mark.parametrize('value', [-1, 'two', True, 2.5])
def test_a_train_loop_built_without_the_runner_names_a_bad_counter(tmp_path, value):
    from minimm.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop
    runner = toy_runner(tmp_path)
    loader = runner.train_dataloader
    with pytest.raises(ValueError, match=rf"max_iters={value!r}: must be an integer >= 0"):
        IterBasedTrainLoop(runner, loader, max_iters=value)
    with pytest.raises(ValueError, match=rf"max_epochs={value!r}: must be an integer >= 0"):
        EpochBasedTrainLoop(runner, loader, max_epochs=value)
