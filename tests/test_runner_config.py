"""Runner from configs: same seed → same losses, bad configs name the offending key, hook profiling."""
import pytest

from minimm.config import Config
from minimm.hooks import Hook
from minimm.runner import Runner
from toy import ToyDataset, toy_runner


class LossRecorder(Hook):
    def __init__(self):
        self.losses = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.losses.append(outputs['loss'].item())


def _cfg(tmp_path, **overrides):
    cfg = dict(
        model=dict(type='DigitsCNN'), work_dir=str(tmp_path),
        train_dataloader=dict(batch_size=64, dataset=dict(type='DigitsDataset'),
                              sampler=dict(type='DefaultSampler', shuffle=True),
                              collate_fn=dict(type='default_collate')),
        train_cfg=dict(by_epoch=True, max_epochs=1),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        randomness=dict(seed=7), default_hooks=dict(checkpoint=None))
    cfg.update(overrides)
    return cfg


def _losses(cfg):
    recorder = LossRecorder()
    runner = Runner.from_cfg(cfg)
    runner.register_hook(recorder)
    runner.train()
    return recorder.losses


def test_same_seed_same_losses(tmp_path):
    first = _losses(_cfg(tmp_path / 'a'))
    second = _losses(_cfg(tmp_path / 'b'))
    third = _losses(_cfg(tmp_path / 'c', randomness=dict(seed=8)))
    assert len(first) == 23 and first == second
    assert first != third


@pytest.mark.parametrize('override, error, pattern', [
    (dict(model=dict(type='DigitCNN')), KeyError, "DigitCNN is not in the mmengine::model registry.*"
                                                  "Did you mean 'DigitsCNN'"),
    (dict(model=dict(type='DigitsCNN', num_clases=3)), TypeError,
     "DigitsCNN.*unexpected keyword argument 'num_clases'"),
    (dict(custom_hooks=[dict(type='EMAHok')]), KeyError, "EMAHok is not in the mmengine::hook registry"),
    (dict(default_hooks=dict(logger=dict(type='LoggerHook', intervall=5))), TypeError,
     "LoggerHook.*'intervall'"),
])
def test_bad_config_names_the_key(tmp_path, override, error, pattern):
    with pytest.raises(error, match=pattern):
        Runner.from_cfg(_cfg(tmp_path, **override))


def test_bad_optimizer_and_scheduler_fail_in_train(tmp_path):
    runner = Runner.from_cfg(_cfg(tmp_path / 'a', optim_wrapper=dict(
        optimizer=dict(type='SGD', lr=0.1, momentun=0.9))))
    with pytest.raises(TypeError, match="SGD.*'momentun'"):
        runner.train()
    runner = Runner.from_cfg(_cfg(tmp_path / 'b', param_scheduler=dict(type='StepLRR',
                                                                       step_size=1)))
    with pytest.raises(KeyError, match="StepLRR is not in the mmengine::parameter scheduler registry"):
        runner.train()


def test_from_cfg_accepts_config_and_dumps_it(tmp_path):
    cfg = Config(_cfg(tmp_path))
    runner = Runner.from_cfg(cfg)
    dumped = Config.fromfile(str(tmp_path / f'{runner.timestamp}.py'))
    assert dumped['model'] == dict(type='DigitsCNN')
    assert cfg['work_dir'] == str(tmp_path)   # from_cfg does not modify the caller's config


def test_profile_hooks_table(tmp_path):
    runner = toy_runner(tmp_path, profile_hooks=True, val=False)
    assert runner._hook_profiler is not None
    runner.train()
    lines = runner._hook_profiler.table().splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith('all hooks'))
    rows = {tuple(line.split()[:2]): line.split() for line in lines[1:end]}
    assert rows[('RuntimeInfoHook', 'before_train_iter')][2] == '6'      # 2 epochs x 3 iters
    assert rows[('CheckpointHook', 'after_train_epoch')][2] == '2'
    # the reads column: the loss is read once per log line (one at each epoch's end), no more
    assert rows[('LoggerHook', 'after_train_iter')][-1] == '2'
    assert rows[('RuntimeInfoHook', 'after_train_iter')][-1] == '0'
    assert lines[end + 1].split()[:2] == ['model', 'train/val/test_step']
    assert toy_runner(tmp_path / 'off', val=False)._hook_profiler is None


def test_dataset_object_in_dataloader_config(tmp_path):
    runner = toy_runner(tmp_path, val=False, train_dataloader=dict(
        dataset=ToyDataset(8), batch_size=4, collate_fn=dict(type='default_collate'),
        sampler=dict(type='InfiniteSampler', shuffle=False)), by_epoch=False, max_=5)
    runner.train()
    assert runner.iter == 5
