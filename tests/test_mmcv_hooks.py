"""minimm.mmcv's hooks against MMCV 1.7.2's behaviour, each checked with an independent oracle
(a plain PyTorch training loop, a closed form, or MMCV's documented numbers and names)."""
import logging
import os
from types import SimpleNamespace

import pytest
import torch
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import DistributedSampler

from minimm.mmcv import (HOOKS, CheckpointHook, ClosureHook, DistEvalHook, DistSamplerSeedHook,
                         EMAHook, EvalHook, Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook,
                         GradientCumulativeOptimizerHook, IterBasedRunner, IterTimerHook,
                         OptimizerHook, ProfilerHook, SyncBuffersHook)
from mmcv_toy import ToyModel, loader, make_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

MMCV_HOOK_NAMES = ['CheckpointHook', 'ClosureHook', 'DistSamplerSeedHook', 'EMAHook', 'EmptyCacheHook',
                   'Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook',
                   'GradientCumulativeOptimizerHook', 'IterTimerHook', 'OptimizerHook', 'ProfilerHook',
                   'SyncBuffersHook']


def test_core_hooks_are_registered_under_mmcv_names():
    assert set(MMCV_HOOK_NAMES) <= set(HOOKS.module_dict)


def _plain_sgd(batches_per_step, epochs, clip=None, lr=0.1, momentum=0.9):
    """Oracle: a plain PyTorch loop; each step uses the concatenation of ``batches_per_step``
    consecutive batches (batches are taken across epoch ends, as global iterations are)."""
    model = ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    batches = [b for _ in range(epochs) for b in loader()]
    norms, snapshots = [], [[p.detach().clone() for p in model.parameters()]]
    for start in range(0, len(batches), batches_per_step):
        group = batches[start:start + batches_per_step]
        optimizer.zero_grad()
        model(torch.cat([b['x'] for b in group]), torch.cat([b['y'] for b in group])).backward()
        if clip is not None:
            norms.append(float(clip_grad_norm_(model.parameters(), clip)))
        optimizer.step()
        snapshots.append([p.detach().clone() for p in model.parameters()])
    return model, norms, snapshots


def _run(hook, epochs=2, priority='ABOVE_NORMAL', **runner_kwargs):
    runner = make_runner(max_epochs=epochs, **runner_kwargs)
    runner.register_hook(hook, priority)
    runner.run([loader()], [('train', 1)])
    return runner


def test_grad_clip_final_weights_and_logged_norm():
    runner = _run(OptimizerHook(grad_clip=dict(max_norm=0.3)))
    oracle, norms, _ = _plain_sgd(1, 2, clip=0.3)
    for a, b in zip(oracle.parameters(), runner.model.parameters()):
        assert torch.equal(a, b)
    assert runner.log_buffer.val_history['grad_norm'] == pytest.approx(norms, rel=1e-6)
    assert max(norms) > 0.3  # the clipping did act
    assert runner.log_buffer.n_history['grad_norm'] == [2] * 6


def test_gradient_accumulation_equals_a_bigger_batch():
    # 3 iterations per epoch, groups of 2: groups cross the epoch end; 9 iterations leave a last
    # group of 1, whose loss MMCV divides by 1.
    runner = _run(GradientCumulativeOptimizerHook(cumulative_iters=2), epochs=3)
    oracle, _, _ = _plain_sgd(2, 3)
    for a, b in zip(oracle.parameters(), runner.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    unaccumulated, _, _ = _plain_sgd(1, 3)
    assert not torch.allclose(unaccumulated.linear.weight, runner.model.linear.weight, atol=1e-4)


@pytest.mark.parametrize('max_iters, start, factors', [
    (8, 0, [3] * 6 + [2, 2]), (10, 0, [3] * 9 + [1]), (10, 5, [3, 3, 3, 3, 1])])
def test_gradient_accumulation_divisors(max_iters, start, factors):
    hook = GradientCumulativeOptimizerHook(cumulative_iters=3)
    runner = SimpleNamespace(iter=start, max_iters=max_iters, model=ToyModel(),
                             logger=logging.getLogger('mmcv-test'))
    hook._init(runner)
    got = []
    for it in range(start, max_iters):
        runner.iter = it
        got.append(hook._get_loss_factor(runner))
    assert got == factors


def test_fp16_hook_without_cuda_is_a_plain_step_and_stores_the_scaler_state(tmp_path):
    if torch.cuda.is_available():
        pytest.skip('the scaler is active with CUDA; see tests/gpu_check.sh')
    with pytest.raises(ValueError, match='loss_scale must be of type float, dict, or "dynamic"'):
        Fp16OptimizerHook(loss_scale=512)
    assert Fp16OptimizerHook(loss_scale=64.)._scale_update_param == 64.
    with pytest.raises(TypeError):
        _run(Fp16OptimizerHook(loss_scale='dynamic'))  # runner.meta must be a dict
    runner = _run(GradientCumulativeFp16OptimizerHook(cumulative_iters=2, loss_scale=dict(init_scale=8.)),
                  epochs=3, meta=dict())
    oracle, _, _ = _plain_sgd(2, 3)
    torch.testing.assert_close(oracle.linear.weight, runner.model.linear.weight, rtol=1e-6, atol=1e-7)
    assert runner.meta['fp16'] == dict(loss_scaler={})


def test_detect_anomalous_params_logs_unused_parameters(caplog):
    runner = make_runner(max_epochs=1)
    runner.model.unused = torch.nn.Linear(1, 1)
    runner.register_hook(OptimizerHook(detect_anomalous_params=True), 'ABOVE_NORMAL')
    with caplog.at_level(logging.ERROR, logger='mmcv-test'):
        runner.run([loader()], [('train', 1)])
    assert 'unused.weight with shape torch.Size([1, 1]) is not in the computational graph' in caplog.text
    assert 'linear.weight' not in caplog.text


def _closed_form_ema(snapshots, momentum, interval, warm_up, iters):
    """MMCV's rule on the raw weights ``snapshots[k]`` (the weights after k optimizer steps):
    at iteration t the EMA hook runs before that iteration's step, so it sees snapshots[t]."""
    ema = [p.clone() for p in snapshots[0]]
    m = momentum ** interval
    for t in range(iters):
        weight = min(m, (1 + t) / (warm_up + t))
        if t % interval == 0:
            ema = [(1 - weight) * e + weight * p for e, p in zip(ema, snapshots[t])]
    return ema


@pytest.mark.parametrize('momentum, interval, warm_up', [(0.5, 2, 3), (0.9, 1, 3)])
def test_ema_hook_numbers(momentum, interval, warm_up):
    runner = make_runner(max_epochs=2)
    runner.register_hook(EMAHook(momentum=momentum, interval=interval, warm_up=warm_up), 'HIGHEST')
    runner.register_hook(OptimizerHook(), 'ABOVE_NORMAL')
    runner.run([loader()], [('train', 1)])
    _, _, snapshots = _plain_sgd(1, 2)
    expected = _closed_form_ema(snapshots, momentum, interval, warm_up, iters=6)
    # after the last train epoch the parameters hold the EMA and the ema_* buffers the raw weights
    torch.testing.assert_close(runner.model.linear.weight, expected[0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(runner.model.linear.bias, expected[1], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(runner.model.ema_linear_weight, snapshots[6][0], rtol=1e-6, atol=1e-7)
    assert list(runner.model.state_dict()) == ['ema_linear_weight', 'ema_linear_bias',
                                               'linear.weight', 'linear.bias']
    assert EMAHook(momentum=0.5, interval=2).momentum == 0.25


def test_checkpoint_hook_by_iter_on_epoch_runner_keeps_mmcv_names(tmp_path):
    runner = make_runner(tmp_path, max_epochs=2, meta=dict())
    runner.register_hook(OptimizerHook(), 'ABOVE_NORMAL')
    runner.register_hook(CheckpointHook(interval=2, by_epoch=False, max_keep_ckpts=1))
    runner.run([loader()], [('train', 1)])
    # files are named by the runner (epoch_N), last_ckpt by the hook (iter_N)
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'epoch_2.pth', 'latest.pth']
    assert runner.meta['hook_msgs']['last_ckpt'] == str(tmp_path / 'iter_6.pth')


def test_checkpoint_and_eval_hooks_say_where_without_a_file_backend(tmp_path, caplog):
    runner = make_runner(tmp_path / 'work', max_epochs=1)
    runner.register_hook(CheckpointHook(out_dir=str(tmp_path / 'ckpts')))
    runner.register_hook(EvalHook(loader(), out_dir=str(tmp_path / 'best'),
                                  test_fn=_scripted_test_fn([1.0])), 'LOW')
    with caplog.at_level(logging.INFO):
        runner.call_hook('before_run')
    # another folder than the work dir gets a subfolder named after the work dir
    assert f"Checkpoints will be saved to {tmp_path / 'ckpts' / 'work'}." in caplog.text
    assert f"The best checkpoint will be saved to {tmp_path / 'best' / 'work'}." in caplog.text
    assert 'Backend' not in caplog.text  # minimm.mmcv has no file backends to name


def test_checkpoint_deletion_stops_at_the_first_missing_file(tmp_path):
    (tmp_path / 'epoch_1.pth').write_text('stale')
    runner = make_runner(tmp_path, max_epochs=5)
    runner._epoch = 3  # as after resuming from epoch_3.pth, which is not in this folder
    runner.register_hook(CheckpointHook(interval=1, max_keep_ckpts=1))
    runner.run([loader()], [('train', 1)])
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'epoch_5.pth', 'latest.pth']


def _scripted_test_fn(scores):
    scores = iter(scores)
    return lambda model, data_loader: [torch.tensor(next(scores))]


def test_eval_hook_keeps_the_best_checkpoint(tmp_path):
    runner = make_runner(tmp_path, max_epochs=3)
    runner.register_hook(EvalHook(loader(), save_best='score', rule='greater',
                                  test_fn=_scripted_test_fn([0.5, 0.9, 0.7])), 'LOW')
    runner.run([loader()], [('train', 1)])
    assert os.listdir(tmp_path) == ['best_score_epoch_2.pth']
    msgs = runner.meta['hook_msgs']
    assert msgs == dict(best_score=pytest.approx(0.9), best_ckpt=str(tmp_path / 'best_score_epoch_2.pth'))
    saved = torch.load(tmp_path / 'best_score_epoch_2.pth', weights_only=True)['meta']['hook_msgs']
    assert saved['best_score'] == pytest.approx(0.9)
    assert runner.log_buffer.output['eval_iter_num'] == 3


def test_eval_hook_quirks(tmp_path):
    runner = make_runner(tmp_path, max_epochs=2)
    hook = EvalHook(loader(), save_best='auto', rule='less', test_fn=_scripted_test_fn([0.0, 0.5]),
                    offset=0.0)
    runner.register_hook(hook, 'LOW')
    runner.run([loader()], [('train', 1)])
    # a score of 0 is never saved, though it is better than the 0.5 saved after it
    assert os.listdir(tmp_path) == ['best_score_epoch_2.pth'] and hook.key_indicator == 'score'
    with pytest.raises(AssertionError):
        EvalHook(loader(), less_keys='loss')  # MMCV checks greater_keys when less_keys is given
    assert EvalHook(loader(), save_best='val_acc').rule == 'greater'
    assert EvalHook(loader(), save_best='val_loss').rule == 'less'
    with pytest.raises(ValueError, match='Cannot infer the rule for key'):
        EvalHook(loader(), save_best='mystery')
    with pytest.raises(TypeError):
        EvalHook([1, 2])
    assert 'EvalHook' not in HOOKS and 'DistEvalHook' not in HOOKS


def test_eval_hook_start_evaluates_before_training_and_dist_eval_in_one_process(tmp_path):
    runner = make_runner(tmp_path, max_epochs=2)
    seen = []
    runner.register_hook(DistEvalHook(loader(), start=0, test_fn=lambda m, d, **kw:
                                      seen.append((runner.epoch, kw)) or [torch.tensor(1.0)]), 'LOW')
    runner.run([loader()], [('train', 1)])
    options = dict(tmpdir=os.path.join(str(tmp_path), '.eval_hook'), gpu_collect=False)
    assert seen == [(0, options), (0, options), (1, options)]  # before training, then per epoch


def test_small_hooks():
    calls = []
    runner = make_runner(max_epochs=2)
    runner.register_hook(ClosureHook('after_train_epoch', lambda r: calls.append(r.epoch)))
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(SyncBuffersHook())
    runner.register_hook(DistSamplerSeedHook())
    assert 'ClosureHook' not in runner.get_hook_info()
    assert SyncBuffersHook().get_triggered_stages() == ['after_train_epoch', 'after_val_epoch']
    sampler_loader = torch.utils.data.DataLoader(loader().dataset, batch_size=2,
                                                 sampler=DistributedSampler(loader().dataset, 1, 0))
    runner.run([sampler_loader, loader()], [('train', 1), ('val', 1)])
    assert calls == [0, 1] and sampler_loader.sampler.epoch == 1
    assert list(runner.log_buffer.val_history) == ['data_time', 'loss', 'time']


def test_sampler_seed_hook_finds_the_sampler_inside_a_batch_sampler():
    dataset = loader().dataset
    batches = torch.utils.data.BatchSampler(DistributedSampler(dataset, 1, 0), 2, False)
    batch_sampled = torch.utils.data.DataLoader(dataset, batch_sampler=batches)
    runner = make_runner(max_epochs=3)
    runner.register_hook(DistSamplerSeedHook())
    runner.run([batch_sampled], [('train', 1)])
    assert batches.sampler.epoch == 2  # set before each of the 3 epochs: 0, 1, 2


def test_profiler_hook_writes_a_chrome_trace_to_the_work_dir(tmp_path):
    runner = make_runner(tmp_path, runner_cls=IterBasedRunner, max_iters=3)
    runner.register_hook(ProfilerHook(by_epoch=False, profile_iters=2, json_trace_path='trace.json'))
    runner.run([loader()], [('train', 1)])
    assert (tmp_path / 'trace.json').stat().st_size > 0
    with pytest.raises(ValueError, match='should not be greater than 3'):
        runner = make_runner(tmp_path, runner_cls=IterBasedRunner, max_iters=3)
        runner.register_hook(ProfilerHook(by_epoch=False, profile_iters=4))
        runner.run([loader()], [('train', 1)])
    with pytest.raises(ValueError):
        ProfilerHook(activities=['tpu'])


def test_by_iter_eval_flushes_the_logger_hooks_first():
    from minimm.mmcv.hooks.logger import LoggerHook

    class Logged(LoggerHook):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.lines = []

        def log(self, runner):
            self.lines.append(dict(runner.log_buffer.output))

    runner = make_runner(max_epochs=1)
    logger = Logged(interval=2, by_epoch=False)
    runner.register_hook(EvalHook(loader(), by_epoch=False, interval=2,
                                  test_fn=_scripted_test_fn([0.5])), 'LOW')
    runner.register_hook(logger, 'VERY_LOW')
    runner.run([loader()], [('train', 1)])
    # at iteration 2 the eval hook (LOW) makes the logger log the train average first; then the
    # eval results are logged by the logger's own after_train_iter
    assert [sorted(line) for line in logger.lines] == [['loss'], ['eval_iter_num', 'score']]


def _fp16_run(tmp_path, max_epochs, resume_from=None):
    """A run whose Fp16OptimizerHook has an *enabled* scaler on the CPU (growing every step), so
    its state is real without CUDA."""
    hook = Fp16OptimizerHook(loss_scale=dict(init_scale=8., growth_interval=1))
    hook.loss_scaler = torch.amp.GradScaler('cpu', init_scale=8., growth_interval=1)
    runner = make_runner(tmp_path, max_epochs=max_epochs, meta=dict())
    runner.register_hook(hook, 'ABOVE_NORMAL')
    runner.register_hook(CheckpointHook(interval=1))
    if resume_from is not None:
        runner.resume(resume_from)
    runner.run([loader()], [('train', 1)])
    return runner, hook


def test_fp16_loss_scaler_state_survives_resume(tmp_path):
    full, full_hook = _fp16_run(tmp_path / 'full', 2)
    _fp16_run(tmp_path / 'part', 1)
    saved = torch.load(tmp_path / 'part' / 'epoch_1.pth', weights_only=True)['meta']['fp16']
    assert saved['loss_scaler']['scale'] == 8. * 2 ** 3  # 3 steps, each doubling the scale
    resumed, hook = _fp16_run(tmp_path / 'resumed', 2, resume_from=str(tmp_path / 'part' / 'epoch_1.pth'))
    assert hook.loss_scaler.get_scale() == full_hook.loss_scaler.get_scale() == 8. * 2 ** 6
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
