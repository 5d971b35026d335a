"""minimm.mmcv's runners against MMCV 1.7.2's behaviour: call sequences, hook order, hook info,
register_training_hooks, learning-rate views, checkpoints and resume."""
import logging
import os

import pytest
import torch

from minimm.mmcv import (HOOKS, RUNNERS, EpochBasedRunner, Hook, IterBasedRunner, OptimizerHook,
                         build_runner)
from mmcv_toy import Recorder, ToyModel, loader, make_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

# MMCV 1.7.2's trace: max_epochs=2, 3 train batches, 2 val batches, [('train', 1), ('val', 1)].
EPOCH_TRACE = """before_run (None,0,0,0)
before_train_epoch (train,0,0,0)
before_train_iter (train,0,0,0) after_train_iter (train,0,0,0)
before_train_iter (train,0,1,1) after_train_iter (train,0,1,1)
before_train_iter (train,0,2,2) after_train_iter (train,0,2,2)
after_train_epoch (train,0,3,2)
before_val_epoch (val,1,3,2)
before_val_iter (val,1,3,0) after_val_iter (val,1,3,0)
before_val_iter (val,1,3,1) after_val_iter (val,1,3,1)
after_val_epoch (val,1,3,1)
before_train_epoch (train,1,3,1)
before_train_iter (train,1,3,0) after_train_iter (train,1,3,0)
before_train_iter (train,1,4,1) after_train_iter (train,1,4,1)
before_train_iter (train,1,5,2) after_train_iter (train,1,5,2)
after_train_epoch (train,1,6,2)
before_val_epoch (val,2,6,2)
before_val_iter (val,2,6,0) after_val_iter (val,2,6,0)
before_val_iter (val,2,6,1) after_val_iter (val,2,6,1)
after_val_epoch (val,2,6,1)
after_run (val,2,6,1)"""

# MMCV 1.7.2's trace: max_iters=5, the same loaders and workflow, generic epoch stages recorded.
ITER_TRACE = """before_run (None,0,0,0) before_epoch (None,0,0,0)
before_train_iter (train,0,0,0) after_train_iter (train,0,0,0)
before_val_iter (val,0,1,0) after_val_iter (val,0,1,0)
before_train_iter (train,0,1,0) after_train_iter (train,0,1,0)
before_val_iter (val,0,2,0) after_val_iter (val,0,2,0)
before_train_iter (train,0,2,0) after_train_iter (train,0,2,0)
before_val_iter (val,0,3,0) after_val_iter (val,0,3,0)
before_train_iter (train,0,3,0) after_train_iter (train,0,3,0)
before_val_iter (val,0,4,0) after_val_iter (val,0,4,0)
before_train_iter (train,1,4,0) after_train_iter (train,1,4,0)
before_val_iter (val,1,5,0) after_val_iter (val,1,5,0)
after_epoch (val,1,5,1) after_run (val,1,5,1)"""


def test_epoch_based_call_sequence_matches_mmcv():
    runner = make_runner(max_epochs=2)
    recorder = Recorder()
    runner.register_hook(recorder)
    runner.run([loader(6, 2), loader(4, 2)], [('train', 1), ('val', 1)])
    assert recorder.trace == _lines(EPOCH_TRACE)


def _lines(trace):
    return [' '.join(pair) for pair in zip(*[iter(trace.replace('\n', ' ').split(' '))] * 2)]


def test_iter_based_call_sequence_matches_mmcv():
    runner = make_runner(runner_cls=IterBasedRunner, max_iters=5)
    recorder = Recorder(generic=True)
    runner.register_hook(recorder)
    runner.run([loader(6, 2), loader(4, 2)], [('train', 1), ('val', 1)])
    assert recorder.trace == _lines(ITER_TRACE)


def test_val_log_vars_join_the_train_buffer_on_iter_based_runner():
    runner = make_runner(runner_cls=IterBasedRunner, max_iters=2)
    runner.run([loader(6, 2), loader(4, 2)], [('train', 1), ('val', 1)])
    assert len(runner.log_buffer.val_history['loss']) == 4  # 2 train + 2 val, one buffer


def test_register_hook_orders_by_priority_and_keeps_registration_order():
    runner = make_runner()
    hooks = [Hook() for _ in range(5)]
    for hook, priority in zip(hooks, ['LOW', 'high', 40, 'LOW', 0]):
        runner.register_hook(hook, priority)
    assert runner.hooks == [hooks[4], hooks[1], hooks[2], hooks[0], hooks[3]]
    assert [h.priority for h in runner.hooks] == [0, 30, 40, 70, 70]
    with pytest.raises(ValueError, match='"priority" is a reserved attribute for hooks'):
        runner.register_hook(hooks[0])
    with pytest.raises(AssertionError):
        runner.register_hook(dict(type='IterTimerHook'))


HOOK_INFO = '''before_run:
(VERY_HIGH   ) StepLrUpdaterHook                  
(49          ) EMAHook                            
 -------------------- 
before_train_epoch:
(VERY_HIGH   ) StepLrUpdaterHook                  
(49          ) EMAHook                            
(LOW         ) IterTimerHook                      
 -------------------- 
before_train_iter:
(VERY_HIGH   ) StepLrUpdaterHook                  
(LOW         ) IterTimerHook                      
 -------------------- 
after_train_iter:
(ABOVE_NORMAL) OptimizerHook                      
(49          ) EMAHook                            
(LOW         ) IterTimerHook                      
 -------------------- 
after_train_epoch:
(49          ) EMAHook                            
 -------------------- 
before_val_epoch:
(LOW         ) IterTimerHook                      
 -------------------- 
before_val_iter:
(LOW         ) IterTimerHook                      
 -------------------- 
after_val_iter:
(LOW         ) IterTimerHook                      
 -------------------- '''  # noqa: W291 (the trailing spaces are MMCV's)


def test_get_hook_info_text_is_mmcvs():
    runner = make_runner()
    assert runner.get_hook_info() == ''
    lr_config = dict(policy='step', step=[1])
    runner.register_training_hooks(lr_config=lr_config, optimizer_config=dict(),
                                   custom_hooks_config=[dict(type='EMAHook', priority=49)])
    assert runner.get_hook_info() == HOOK_INFO
    assert lr_config == dict(type='StepLrUpdaterHook', step=[1])  # mutated in place, as MMCV
    assert type(runner.hooks[0]) is HOOKS.get('StepLrUpdaterHook')


def test_policy_names_are_title_cased_only_when_all_lowercase():
    runner = make_runner()
    for policy, missing in [('flatcosineannealing', 'FlatcosineannealingLrUpdaterHook'),
                            ('cosine_annealing', 'Cosine_AnnealingLrUpdaterHook'),
                            ('cosineAnnealing', 'cosineAnnealingLrUpdaterHook')]:
        with pytest.raises(KeyError, match=f'{missing} is not in the hook registry'):
            runner.register_lr_hook(dict(policy=policy))
    with pytest.raises(KeyError, match='OnecycleMomentumUpdaterHook is not in the hook registry'):
        runner.register_momentum_hook(dict(policy='onecycle'))
    runner.register_lr_hook(dict(policy='step', step=1))
    runner.register_lr_hook(dict(policy='CosineAnnealing', min_lr=0))
    runner.register_momentum_hook(dict(policy='cyclic'))
    assert [(type(h).__name__, h.priority) for h in runner.hooks] == [
        ('StepLrUpdaterHook', 10), ('CosineAnnealingLrUpdaterHook', 10), ('CyclicMomentumUpdaterHook', 30)]
    with pytest.raises(AssertionError):
        runner.register_lr_hook(dict(type='StepLrUpdaterHook'))


def test_training_hooks_order_with_custom_priorities():
    runner = make_runner()

    class Custom(Hook):
        pass

    hooks = [Custom() for _ in range(3)]
    runner.register_training_hooks(
        lr_config=None, optimizer_config=dict(grad_clip=None), checkpoint_config=dict(interval=1),
        log_config=None, custom_hooks_config=[dict(type=Custom, priority=1), hooks[0],
                                              dict(type=Custom, priority=89)])
    names = [(type(h).__name__, h.priority) for h in runner.hooks]
    assert names == [('Custom', 1), ('OptimizerHook', 40), ('CheckpointHook', 50), ('Custom', 50),
                     ('IterTimerHook', 70), ('Custom', 89)]


def test_iter_based_register_training_hooks_defaults_by_epoch_false():
    runner = make_runner(runner_cls=IterBasedRunner)
    checkpoint_config = dict(interval=2)
    runner.register_training_hooks(lr_config=None, checkpoint_config=checkpoint_config,
                                   momentum_config=None)
    assert checkpoint_config == dict(interval=2, by_epoch=False, type='CheckpointHook')
    assert runner.hooks[0].by_epoch is False
    assert type(runner.hooks[1]).__name__ == 'IterTimerHook'


def test_constructor_validation_and_state():
    model = ToyModel()
    logger = logging.getLogger('mmcv-test')
    with pytest.raises(TypeError):
        EpochBasedRunner(model, logger=None)
    with pytest.raises(TypeError):
        EpochBasedRunner(model, optimizer=dict(a='sgd'), logger=logger)
    with pytest.raises(TypeError):
        EpochBasedRunner(model, logger=logger, meta=[1])
    with pytest.raises(TypeError, match='"work_dir" must be a str or None'):
        EpochBasedRunner(model, logger=logger, work_dir=1)
    with pytest.raises(ValueError, match='Only one of `max_epochs` or `max_iters` can be set.'):
        EpochBasedRunner(model, logger=logger, max_epochs=1, max_iters=1)
    with pytest.raises(RuntimeError):
        with pytest.warns(DeprecationWarning):
            EpochBasedRunner(model, batch_processor=lambda *a, **k: None, logger=logger)
    with pytest.raises(AssertionError):
        EpochBasedRunner(torch.nn.Linear(1, 1), logger=logger)
    meta = dict(a=1)
    runner = EpochBasedRunner(model, logger=logger, meta=meta, max_epochs=3)
    assert runner.meta is meta and runner.model_name == 'ToyModel' and runner.max_epochs == 3
    assert (runner.rank, runner.world_size, runner.epoch, runner.iter, runner.mode) == (0, 1, 0, 0, None)
    assert len(runner.timestamp) == 15 and runner.timestamp[8] == '_'
    with pytest.raises(RuntimeError, match='lr is not applicable because optimizer does not exist.'):
        runner.current_lr()


def test_current_lr_and_momentum_single_and_dict():
    runner = make_runner(lr=0.1, momentum=0.9)
    assert runner.current_lr() == [0.1] and runner.current_momentum() == [0.9]
    a, b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    runner.optimizer = dict(a=torch.optim.Adam(a.parameters(), lr=0.01, betas=(0.8, 0.99)),
                            b=torch.optim.SGD([dict(params=b.weight), dict(params=b.bias, lr=0.3)], lr=0.2))
    assert runner.current_lr() == dict(a=[0.01], b=[0.2, 0.3])
    assert runner.current_momentum() == dict(a=[0.8], b=[0, 0])


def test_build_runner_and_registered_names():
    runner = build_runner(dict(type='EpochBasedRunner', max_epochs=2),
                          default_args=dict(model=ToyModel(), logger=logging.getLogger('x')))
    assert isinstance(runner, EpochBasedRunner) and runner.max_epochs == 2
    assert {'EpochBasedRunner', 'IterBasedRunner', 'Runner'} <= set(RUNNERS.module_dict)
    with pytest.warns(DeprecationWarning):
        RUNNERS.build(dict(type='Runner', model=ToyModel(), logger=logging.getLogger('x')))
    for name in ['EvalHook', 'DistEvalHook', 'Hook', 'LrUpdaterHook', 'LoggerHook',
                 'MomentumUpdaterHook']:
        assert name not in HOOKS


def test_workflow_errors_and_val_after_last_train_epoch():
    runner = make_runner(max_epochs=1)
    with pytest.raises(ValueError, match='runner has no method named "test" to run an epoch'):
        runner.run([loader()], [('test', 1)])
    runner = make_runner(max_epochs=1)
    recorder = Recorder()
    runner.register_hook(recorder)
    runner.run([loader(), loader()], [('train', 1), ('val', 2)])
    assert sum(t.startswith('after_val_epoch') for t in recorder.trace) == 2


def _train(tmp_path, max_epochs, resume_from=None, workflow_epochs=None):
    runner = make_runner(tmp_path, max_epochs=max_epochs, meta=dict(seed=1))
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(),
                                   checkpoint_config=dict(interval=1, max_keep_ckpts=2))
    if resume_from:
        runner.resume(resume_from)
    runner.run([loader(6, 2, shuffle=False)], [('train', 1)])
    return runner


def test_checkpoint_files_keys_and_latest_link(tmp_path):
    runner = _train(tmp_path, 3)
    files = sorted(os.listdir(tmp_path))
    assert files == ['epoch_2.pth', 'epoch_3.pth', 'latest.pth']
    assert os.readlink(tmp_path / 'latest.pth') == 'epoch_3.pth'
    ckpt = torch.load(tmp_path / 'epoch_3.pth', weights_only=True)
    assert list(ckpt) == ['meta', 'state_dict', 'optimizer']
    meta = ckpt['meta']
    assert (meta['epoch'], meta['iter'], meta['seed'], meta['mmcv_version']) == (3, 9, 1, '1.7.2')
    # last_ckpt is recorded after writing: a file names the checkpoint before it.
    assert meta['hook_msgs']['last_ckpt'] == str(tmp_path / 'epoch_2.pth')
    assert runner.meta['hook_msgs']['last_ckpt'] == str(tmp_path / 'epoch_3.pth')
    assert torch.equal(ckpt['state_dict']['linear.weight'], runner.model.linear.weight)


def test_first_checkpoint_has_no_hook_msgs(tmp_path):
    _train(tmp_path, 1)
    assert 'hook_msgs' not in torch.load(tmp_path / 'epoch_1.pth', weights_only=True)['meta']


def test_resume_gives_the_weights_of_an_uninterrupted_run(tmp_path):
    full = _train(tmp_path / 'full', 3)
    _train(tmp_path / 'part', 2)
    resumed = _train(tmp_path / 'resumed', 3, resume_from=str(tmp_path / 'part' / 'epoch_2.pth'))
    assert (resumed.epoch, resumed.iter) == (3, 9)
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
    assert resumed.meta['seed'] == 1 and resumed.meta['epoch'] == 2  # meta replaced by the file's


def test_resume_replaces_meta_and_leaves_the_callers_dict_alone(tmp_path):
    _train(tmp_path / 'part', 2)
    callers_meta = dict(seed=5)
    runner = make_runner(max_epochs=3, meta=callers_meta)
    runner.resume(str(tmp_path / 'part' / 'epoch_2.pth'))
    assert runner.meta['seed'] == 1 and 'hook_msgs' in runner.meta  # the file's meta
    assert callers_meta == dict(seed=5)  # MMCV would have added hook_msgs to it


def test_iter_based_checkpoint_is_off_by_one_and_resume_keeps_meta(tmp_path):
    runner = make_runner(tmp_path, runner_cls=IterBasedRunner, max_iters=4, meta=dict(run='a'))
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(),
                                   checkpoint_config=dict(interval=2))
    runner.run([loader()], [('train', 1)])
    assert sorted(os.listdir(tmp_path)) == ['iter_2.pth', 'iter_4.pth', 'latest.pth']
    meta = torch.load(tmp_path / 'iter_2.pth', weights_only=True)['meta']
    assert (meta['iter'], meta['epoch']) == (1, 1)
    other = make_runner(runner_cls=IterBasedRunner, max_iters=4, meta=dict(run='b'))
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            other.resume(str(tmp_path / 'iter_2.pth'))
    other.resume(str(tmp_path / 'iter_2.pth'), map_location='cpu')
    assert (other.epoch, other.iter, other.inner_iter, other.meta) == (1, 1, 1, dict(run='b'))


def test_optimizer_hook_alone_is_plain_sgd():
    runner = make_runner(max_epochs=2)
    runner.register_hook(OptimizerHook(), 'ABOVE_NORMAL')
    runner.run([loader()], [('train', 1)])
    model = ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for batch in loader():
            optimizer.zero_grad()
            model(**batch).backward()
            optimizer.step()
    for a, b in zip(model.parameters(), runner.model.parameters()):
        assert torch.equal(a, b)


class KwargsModel(ToyModel):
    """Records the keyword arguments each step receives (and whether it got an optimizer)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def train_step(self, data_batch, optimizer, **kwargs):
        self.seen.append(('train', optimizer is not None, kwargs))
        return super().train_step(data_batch, optimizer)

    def val_step(self, data_batch, optimizer=None, **kwargs):
        self.seen.append(('val', optimizer is not None, kwargs))
        return super().train_step(data_batch, optimizer)


def test_run_kwargs_reach_train_but_not_val_and_max_iters_is_known_before_run():
    model = KwargsModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              logger=logging.getLogger('mmcv-test'), max_epochs=1)
    seen_max_iters = []
    hook = Hook()
    hook.before_run = lambda r: seen_max_iters.append(r.max_iters)
    runner.register_hook(hook)
    runner.run([loader(4, 4), loader(6, 2)], [('val', 1), ('train', 1)], flag=1)
    assert seen_max_iters == [3]  # from the first *train* loader, before any hook runs
    assert model.seen == [('val', True, {})] + [('train', True, dict(flag=1))] * 3


def test_iter_based_val_step_gets_no_optimizer():
    model = KwargsModel()
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             logger=logging.getLogger('mmcv-test'), max_iters=1)
    runner.run([loader(), loader()], [('train', 1), ('val', 1)], flag=1)
    assert model.seen == [('train', True, dict(flag=1)), ('val', False, dict(flag=1))]
