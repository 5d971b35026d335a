"""The sync-free step (DESIGN principle 9): between log lines a training iteration reads no device
value, with the default hooks, EMAHook (every averaging rule, on this lane's op backend),
``clip_grad`` and bf16 AMP, with a ValLoop beside; and what is logged and stored is what a run
that reads every value at once (MMEngine's way) logs and stores, to the bit.

Oracle for the counts: :class:`minimm.runner.device_reads.DeviceReads` (tested on its own in
test_device_reads.py), read by two hooks that open and close each iteration."""
import json
import os
import re
from pathlib import Path

import pytest
import torch

from minimm.hooks import Hook
from minimm.logging import pending_reads
from minimm.ops import backend_info
from minimm.runner.device_reads import DeviceReads
from toy import toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # EMAHook runs on this lane's backend (see backend_words.py)

ITERS, INTERVAL = 20, 5
CONFIGS = {
    'default hooks': {},
    'EMAHook': dict(ema=dict(type='EMAHook')),
    'MomentumAnnealingEMA': dict(ema=dict(type='EMAHook', ema_type='MomentumAnnealingEMA',
                                          momentum=0.01, gamma=4)),
    'StochasticWeightAverage, interval 2, buffers': dict(ema=dict(
        type='EMAHook', ema_type='StochasticWeightAverage', interval=2, update_buffers=True)),
    'clip_grad': dict(clip=True),
    'bf16 AMP': dict(amp=True),
    'all': dict(ema=dict(type='EMAHook', begin_iter=3), clip=True, amp=True),
}


class Marks:
    """The first ``before_train_iter`` and the last ``after_train_iter`` hook: the reads in
    between are the iteration's."""

    def __init__(self, reads):
        self.per_iter = []
        marks = self

        class Start(Hook):
            priority = 'HIGHEST'

            def before_train_iter(self, runner, batch_idx, data_batch=None):
                marks.per_iter.append(-reads.total)

        class End(Hook):
            priority = 'LOWEST'

            def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
                marks.per_iter[-1] += reads.total
        self.hooks = [Start(), End()]


def _runner(tmp_path, config, hooks=(), **kwargs):
    optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))
    if config.get('clip'):
        optim_wrapper['clip_grad'] = dict(max_norm=0.5)
    if config.get('amp'):
        optim_wrapper.update(type='AmpOptimWrapper', dtype='bfloat16')
    custom = list(hooks) + ([config['ema']] if 'ema' in config else [])
    # 80 samples in batches of 4: one pass of the dataloader is the whole run (an epoch's end
    # would add a log line); a ValLoop every 3 iterations, between iterations.
    return toy_runner(tmp_path, by_epoch=False, max_=ITERS, custom_hooks=custom,
                      train_dataloader=toy_loader(80, 4, shuffle=True),
                      optim_wrapper=optim_wrapper,
                      default_hooks=dict(logger=dict(type='LoggerHook', interval=INTERVAL),
                                         checkpoint=dict(type='CheckpointHook', interval=10,
                                                         by_epoch=False)), **kwargs)


def _ema_backend(runner):
    hooks = [h for h in runner.hooks if type(h).__name__ == 'EMAHook']
    return hooks[0].ema_model.backend if hooks else None


@pytest.mark.parametrize('name', list(CONFIGS))
def test_no_device_read_between_log_lines(tmp_path, name):
    reads = DeviceReads('dispatch')
    marks = Marks(reads)
    runner = _runner(tmp_path, CONFIGS[name], marks.hooks)
    with reads:
        runner.train()
    assert len(marks.per_iter) == ITERS
    tensor_keys = 2 if CONFIGS[name].get('clip') else 1  # train/loss (and train/grad_norm)
    for i, n in enumerate(marks.per_iter):
        # one read per tensor-fed scalar at each log line (one stack each), none in between
        assert n == (tensor_keys if (i + 1) % INTERVAL == 0 else 0), (i, marks.per_iter)
    if 'ema' in CONFIGS[name]:  # the averaging ran on this lane's backend
        native = backend_info()['cpu']['backend'] == 'native'
        assert _ema_backend(runner) == ('native' if native else 'ref')
        assert os.environ.get('MINIMM_NO_EXT') != '1' or _ema_backend(runner) == 'ref'


def _logged(work_dir: Path):
    """What the run logged and stored, without the timings: the training lines of the log file,
    the scalars.json lines, the checkpoint's message hub and EMA state."""
    run_dir = next(p for p in work_dir.iterdir() if p.is_dir() and re.fullmatch(r'\d{8}_\d{6}',
                                                                                  p.name))
    timing = re.compile(r'(eta|time|data_time): \S+')
    lines = [timing.sub(r'\1: -', line.split(' - ', 2)[-1])
             for line in (run_dir / f'{run_dir.name}.log').read_text().splitlines()
             if '(train)' in line or '(val)' in line]
    scalars = [{k: v for k, v in json.loads(line).items() if k not in ('time', 'data_time')}
               for line in (run_dir / 'vis_data' / 'scalars.json').read_text().splitlines()]
    checkpoint = torch.load(work_dir / f'iter_{ITERS}.pth', weights_only=True)
    hub = checkpoint['message_hub']['log_scalars']
    stored = {key: value for key, value in hub.items() if 'time' not in key}
    return lines, scalars, stored, checkpoint.get('ema_state_dict')


def test_logged_and_stored_values_are_those_of_a_run_that_reads_every_iteration(
        tmp_path, monkeypatch):
    config = CONFIGS['all']
    _runner(tmp_path / 'lazy', config).train()
    # The twin: every tensor read the moment it is logged, as MMEngine's MessageHub does.
    eager = DeviceReads('dispatch')
    monkeypatch.setattr(pending_reads, 'kept', lambda tensor: tensor.item())
    with eager:
        _runner(tmp_path / 'eager', config).train()
    assert eager.total >= 2 * ITERS  # it did read every iteration: the loss and the norm
    lazy_logged, eager_logged = _logged(tmp_path / 'lazy'), _logged(tmp_path / 'eager')
    lines, scalars, stored, ema = lazy_logged
    train_lines = [line for line in lines if '(train)' in line]
    assert len(train_lines) == ITERS // INTERVAL and 'grad_norm: ' in train_lines[0]
    assert len(lines) == len(train_lines) + 7  # and validation every 3 iterations and at the end
    assert [s['iter'] for s in scalars if 'loss' in s] == [5, 10, 15, 20]
    assert len(stored['train/loss']['log_history']) == ITERS
    assert lines == eager_logged[0]
    assert scalars == eager_logged[1]  # JSON keeps each float's repr: equal means bit-equal
    assert stored == eager_logged[2]
    assert int(ema['steps']) == ITERS - 2  # begin_iter=3: averaging from the third iteration
    assert ema.keys() == eager_logged[3].keys()
    assert all(torch.equal(ema[key], eager_logged[3][key]) for key in ema)


class CheckInvalidLossHook(Hook):
    """The seed article's hook (tests/test_check_invalid_loss_hook.py runs it as written): it
    reads the loss every ``interval`` iterations."""

    def __init__(self, interval=50):
        self.interval = interval

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if self.every_n_train_iters(runner, self.interval):
            assert torch.isfinite(outputs['loss']), \
                runner.logger.info('loss become infinite or NaN!')


def test_the_sync_audit_names_a_hook_that_reads(tmp_path):
    runner = _runner(tmp_path, CONFIGS['EMAHook'], [CheckInvalidLossHook(interval=2)],
                     profile_hooks=True)
    runner.train()
    lines = runner._hook_profiler.table().splitlines()
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in lines}
    assert rows[('CheckInvalidLossHook', 'after_train_iter')] == str(ITERS // 2)
    assert rows[('LoggerHook', 'after_train_iter')] == str(ITERS // INTERVAL)
    assert rows[('EMAHook', 'after_train_iter')] == '0'
    assert rows[('RuntimeInfoHook', 'after_train_iter')] == '0'
    assert rows[('model', 'train/val/test_step')] == '0'
    who = lines[lines.index(next(l for l in lines if l.startswith('Device reads'))) + 1:]
    assert any(line.split() == [str(ITERS // 2), 'CheckInvalidLossHook.after_train_iter,', 'in',
                                'test_sync_free.py:CheckInvalidLossHook.after_train_iter']
               for line in who), who


def _filled(model, value):
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


@pytest.mark.parametrize('custom', [False, True], ids=['plan', 'loop'])
def test_the_steps_counter_is_read_only_after_someone_else_wrote_it(custom):
    from minimm.model import StochasticWeightAverage

    class LoopSWA(StochasticWeightAverage):  # a custom avg_func: MMEngine's per-tensor loop
        def avg_func(self, averaged_param, source_param, steps):
            super().avg_func(averaged_param, source_param, steps)

    model = torch.nn.Linear(3, 2)
    swa = (LoopSWA if custom else StochasticWeightAverage)(_filled(model, 1.0))

    def update(value):
        with DeviceReads('dispatch') as reads:
            swa.update_parameters(_filled(model, value))
        return reads.by_owner.get(('loop', 'host_count.py:HostCount.get'), 0)

    # 1, 2, 3, 6 average to 1, 1.5, 2, 3; the loop's avg_func reads steps itself (MMEngine's)
    assert [update(v) for v in (1.0, 2.0, 3.0, 6.0)] == [0, 0, 0, 0]
    assert swa.module.weight.flatten().tolist() == [3.0] * 6 and int(swa.steps) == 4
    swa.steps.zero_()                       # written outside: read once, then known again
    assert [update(5.0), update(7.0)] == [1, 0]
    assert swa.module.weight.flatten().tolist() == [6.0] * 6   # a copy, then (5 + 7) / 2
    other = StochasticWeightAverage(_filled(torch.nn.Linear(3, 2), 0.0))
    other.steps.fill_(3)
    swa.load_state_dict(other.state_dict())  # a resume: averages at count 3, weight 1/4
    assert [update(4.0), update(4.0)] == [1, 0]
    # 0 (loaded) + (4 - 0) / 4 = 1 at count 3, then 1 + (4 - 1) / 5 at count 4
    assert swa.module.weight.flatten().tolist() == pytest.approx([1.6] * 6)
    assert int(swa.steps) == 5


def test_the_fallback_plan_reads_steps_only_when_not_told_its_value():
    from minimm.ops import EMAPlan
    ema, src = [torch.zeros(3)], [torch.ones(3)]
    plan, steps = EMAPlan(ema, src, rule='swa', backend='ref'), torch.tensor(0)
    with DeviceReads('dispatch') as told:
        plan.step(steps, 0)
        plan.step(steps, 1)
    with DeviceReads('dispatch') as not_told:
        plan.step(steps)
    assert (told.total, not_told.total, int(steps)) == (0, 1, 3)
    assert ema[0].tolist() == [1.0] * 3


def test_fp16_loss_scaling_reads_found_inf_inside_torch_once_per_step():
    from minimm.optim import AmpOptimWrapper
    model = torch.nn.Linear(4, 1)
    wrapper = AmpOptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              dtype='float16', clip_grad=dict(max_norm=1.0))
    wrapper.loss_scaler = torch.amp.GradScaler('cpu')  # what AmpOptimWrapper has on CUDA
    with DeviceReads('dispatch') as reads:
        for _ in range(3):
            with wrapper.optim_context(model):
                loss = model(torch.randn(8, 4)).float().pow(2).mean()
            wrapper.update_params(loss)
    # GradScaler.step reads found_inf (torch's code, not minimm's), once per step; unscale_,
    # the clipping and update() read nothing
    assert reads.where == {(('loop', 'amp_optim_wrapper.py:AmpOptimWrapper.step'),
                            'amp_optim_wrapper.py:AmpOptimWrapper.step'): 3}
