"""Every rank agrees, on 2 gloo processes training the demo config: the EMA copy's every tensor is
the same on both ranks after training (SyncBuffersHook syncs the copy's BatchNorm statistics with
the model's; in the MMCV world every tensor of the model, its EMA included), the checkpoint's
``state_dict`` is what the last validation used, the agreement check stays quiet then and names a
disagreement a test hook plants; a post-hoc EMA run stopped and resumed on 2 ranks writes the same
snapshots as one that was not; and a checkpoint written by 2 processes, resumed by 1, says what
changes.
"""
import glob
import os
import time

import pytest
import torch

from dist_utils import run_distributed

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'minimm', 'configs', 'digits_ema.py')


def _runner(work_dir, max_epochs, extra_hooks=(), launcher='pytorch', resume=False,
            config=CONFIG):
    from minimm.config import Config
    from minimm.runner import Runner
    cfg = Config.fromfile(config)
    cfg.work_dir, cfg.launcher, cfg.resume = str(work_dir), launcher, resume
    cfg.train_cfg.max_epochs = max_epochs
    cfg.env_cfg = dict(dist_cfg=dict(backend='gloo'))
    cfg.custom_hooks = list(cfg.custom_hooks) + [dict(type='SyncBuffersHook')] + list(extra_hooks)
    return Runner.from_cfg(cfg)


def _train_mmcv(work_dir):
    """The MMCV 1.x demo for 1 epoch with MMCV's SyncBuffersHook: every tensor of the model, its
    EMA buffers (``ema_*``, MMCV's EMAHook keeps the average on the model) included."""
    from minimm.config import Config
    from minimm.mmcv.train import train_from_cfg
    cfg = Config.fromfile(os.path.join(REPO, 'minimm', 'configs', 'digits_mmcv1.py'))
    cfg.work_dir, cfg.runner.max_epochs = work_dir, 1
    cfg.custom_hooks = list(cfg.custom_hooks) + [dict(type='SyncBuffersHook')]
    runner = train_from_cfg(cfg)  # the group exists: distributed without a launcher
    model = runner.model.module
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _posthoc_resumed(base):
    """PostHocEMAHook's snapshots of a 2-epoch run, and of one stopped after epoch 1 and resumed:
    ``{name: (step, state_dict)}`` each (the LR warm-up only, so both runs schedule alike)."""
    config = os.path.join(REPO, 'minimm', 'configs', 'digits_posthoc.py')
    seen = {}
    for name, stops in (('whole', [2]), ('resumed', [1, 2])):
        for index, max_epochs in enumerate(stops):
            runner = _runner(os.path.join(base, name), max_epochs, config=config,
                             resume=index > 0)
            runner.param_schedulers = runner.param_schedulers[:1]
            runner.train()
        folder = os.path.join(base, name, 'posthoc_ema')
        if runner.rank == 0:  # the one that writes them
            seen[name] = {f: torch.load(os.path.join(folder, f), weights_only=True)
                          for f in sorted(os.listdir(folder))}
    return seen


def _train_two_ranks(rank, work_dir, planted_dir):
    from minimm.checkpoint import unwrap_model
    from minimm.hooks import EMAHook, Hook
    from minimm.hooks import CheckpointHook
    from minimm.hooks.agreement_check import (buffers_synced_before, check_agreement,
                                              replicated_tensors)

    class RecordWhatValidationUses(Hook):
        priority = 'LOW'  # after EMAHook swapped the average in and SyncBuffersHook synced

        def before_val_epoch(self, runner):
            self.seen = {k: v.detach().clone()
                         for k, v in unwrap_model(runner.model).state_dict().items()}

    runner = _runner(work_dir, 2, [RecordWhatValidationUses()])
    runner.train()
    (ema_hook, ) = [h for h in runner.hooks if isinstance(h, EMAHook)]
    (recorder, ) = [h for h in runner.hooks if isinstance(h, RecordWhatValidationUses)]
    (saver, ) = [h for h in runner.hooks if isinstance(h, CheckpointHook)]
    start = time.perf_counter()
    check_agreement(runner, 'error', saver, 'after_train_epoch')
    check_seconds = time.perf_counter() - start
    synced = buffers_synced_before(runner, saver, 'after_train_epoch')  # SyncBuffersHook's
    assert synced and not buffers_synced_before(runner, saver, 'after_train_iter')
    out = dict(ema={k: v.detach().clone() for k, v in ema_hook.ema_model.state_dict().items()},
               val=recorder.seen, check_seconds=check_seconds,
               checked=len(replicated_tensors(runner, synced)))

    class PlantDisagreement(Hook):
        priority = 'HIGHEST'

        def after_train_epoch(self, runner):
            if runner.rank == 1:
                with torch.no_grad():
                    unwrap_model(runner.model).head.bias[0] += 1

    out['mmcv'] = _train_mmcv(os.path.join(os.path.dirname(planted_dir), 'mmcv'))
    out['posthoc'] = _posthoc_resumed(os.path.join(os.path.dirname(planted_dir), 'posthoc'))

    runner = _runner(planted_dir, 1, [PlantDisagreement()])
    (ckpt_hook, ) = [h for h in runner.hooks if type(h).__name__ == 'CheckpointHook']
    ckpt_hook.agreement_check = 'error'
    try:
        runner.train()
        out['planted'] = None
    except RuntimeError as error:
        out['planted'] = str(error)
    return out


def test_ranks_agree_on_the_ema_and_the_checkpoint_and_a_planted_disagreement_is_named(tmp_path):
    work_dir = tmp_path / 'work'
    rank0, rank1 = run_distributed(_train_two_ranks, tmp_path, str(work_dir),
                                   str(tmp_path / 'planted'))
    # Every tensor of the EMA copy (averaged weights, BatchNorm statistics, counters) agrees.
    assert rank0['ema'].keys() == rank1['ema'].keys() and len(rank0['ema']) > 10
    differ = [k for k in rank0['ema'] if not torch.equal(rank0['ema'][k], rank1['ema'][k])]
    assert differ == []
    # The same in the MMCV world, where the averages are model buffers that SyncBuffersHook syncs.
    assert any(k.startswith('ema_') for k in rank0['mmcv'])
    assert [k for k in rank0['mmcv'] if not torch.equal(rank0['mmcv'][k], rank1['mmcv'][k])] == []
    # Post-hoc EMA stopped after epoch 1 and resumed on 2 ranks continues its snapshots exactly.
    whole, resumed = rank0['posthoc']['whole'], rank0['posthoc']['resumed']
    later = [name for name in whole if int(name.split('_iter_')[1][:7]) > 23]
    assert len(later) == 8 and set(later) <= set(resumed)  # iterations 27, 36, 45, 46
    for name in later:
        assert whole[name]['step'] == resumed[name]['step']
        assert all(torch.equal(whole[name]['state_dict'][k], resumed[name]['state_dict'][k])
                   for k in whole[name]['state_dict'])
    # The checkpoint's state_dict (the EMA weights, to deploy) is what validation used.
    saved = torch.load(work_dir / 'epoch_2.pth', weights_only=True)
    assert saved['meta']['world_size'] == 2
    assert saved['state_dict'].keys() == rank0['val'].keys()
    assert all(torch.equal(saved['state_dict'][k], rank0['val'][k]) for k in rank0['val'])
    # No false alarm on a run whose ranks agree...
    (log_file, ) = glob.glob(str(work_dir / '*' / '*.log'))
    with open(log_file) as f:
        assert 'ranks disagree' not in f.read()
    print(f"agreement check: {rank0['checked']} tensors, {rank0['check_seconds'] * 1e3:.1f} ms")
    # ... and the planted one is named, with its rank, on both ranks.
    for seen in (rank0['planted'], rank1['planted']):
        assert seen is not None and '1 tensor(s) differ' in seen
        assert 'model.head.bias on rank(s) [1]' in seen
    assert not (tmp_path / 'planted' / 'epoch_1.pth').exists()  # 'error' stops before writing

    # Resumed by 1 process: one line says what changes, and the run goes on.
    runner = _runner(work_dir, 2, launcher='none', resume=True)
    runner.train()
    with open(runner.logger.log_file) as f:
        lines = [line for line in f if 'World size changed' in line]
    assert len(lines) == 1
    assert 'written by 2 process(es), this run has 1' in lines[0]
    assert 'an epoch is now 45 iterations (was 23)' in lines[0]
