"""Files on several processes: `minimm train ... --launcher pytorch` under torchrun (2 CPU
processes, gloo) for the post-hoc EMA and the MMCV 1.x configs (the demo config's run is
``test_torchrun.py``'s), with every process's writes recorded
(``tests/write_audit/sitecustomize.py``): only rank 0 writes under the work dir.
The post-hoc run must exit 0 (every rank used to write every snapshot, and the atomic write's
clean-up deleted the other rank's temporary file mid-write) and its snapshots must reconstruct.
"""
import os
import subprocess
import sys

import torch

from dist_utils import audited_train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(name):
    return os.path.join(REPO, 'minimm', 'configs', name)


def test_only_rank_0_writes_under_the_work_dir_of_an_mmcv_run(tmp_path):
    work_dir, writes = audited_train(_config('digits_mmcv1.py'), tmp_path, ['runner.max_epochs=1'])
    assert set(writes) == {'0'}, {rank: lines[:5] for rank, lines in writes.items()}
    assert any(line.endswith('epoch_1.pth') for line in writes['0'])  # the audit sees writes


def test_posthoc_ema_on_two_processes_writes_its_snapshots_once_and_they_reconstruct(tmp_path):
    work_dir, writes = audited_train(_config('digits_posthoc.py'), tmp_path,
                                      ['train_cfg.max_epochs=3'])
    assert set(writes) == {'0'}, {rank: lines[:5] for rank, lines in writes.items()}
    snapshots = sorted(os.listdir(work_dir / 'posthoc_ema'))
    # 23 iterations per epoch on 2 ranks: snapshots at 9, 18, ..., 63 and the last, 69.
    iters = sorted({int(name.split('_iter_')[1][:7]) for name in snapshots})
    assert iters == [9, 18, 27, 36, 45, 54, 63, 69]
    assert len(snapshots) == 2 * len(iters)  # two widths, no temporary file left
    out = tmp_path / 'ema_0.08.pth'
    done = subprocess.run([sys.executable, '-m', 'minimm.cli', 'posthoc-ema', str(work_dir),
                           '--sigma-rel', '0.08', '--out', str(out)],
                          env=dict(os.environ, PYTHONPATH=REPO, MINIMM_NO_EXT='1'),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    state = torch.load(out, weights_only=True)['state_dict']
    model = torch.load(work_dir / 'epoch_3.pth', weights_only=True)['state_dict']
    assert state.keys() == model.keys() and all(state[k].shape == model[k].shape for k in state)
