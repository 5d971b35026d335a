"""`minimm train CONFIG --launcher pytorch` under torchrun with 2 CPU processes (gloo)."""
import glob
import json
import os

import torch

from dist_utils import audited_train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'minimm', 'configs', 'digits_ema.py')


def test_torchrun_trains_the_demo_config_writing_files_on_rank0_only(tmp_path):
    work_dir, writes = audited_train(CONFIG, tmp_path, ['train_cfg.max_epochs=1'])
    # Every file under the work dir opened for writing, renamed, removed or made, by rank 0 only.
    assert set(writes) == {'0'}, {rank: lines[:5] for rank, lines in writes.items()}

    # One text log, written by rank 0 alone: each logged line appears once (two writers
    # appending to the same file would double them).
    (log_file, ) = glob.glob(str(work_dir / '*' / '*.log'))
    with open(log_file) as f:
        log = f.read()
    assert 'rank 0/2' in log and 'rank 1/2' not in log
    assert log.count('Epoch(train) [1][15/23]') == 1  # 720 samples / 2 ranks / batch 32
    assert log.count('Epoch(val) [1][2/2]') == 1
    (scalars, ) = glob.glob(str(work_dir / '*' / 'vis_data' / 'scalars.json'))
    with open(scalars) as f:
        steps = [json.loads(line)['step'] for line in f]
    assert steps == [15, 1]  # the train line at iteration 15, the epoch-1 metrics

    with open(work_dir / 'last_checkpoint') as f:
        assert f.read() == str(work_dir / 'epoch_1.pth')
    ckpt = torch.load(work_dir / 'epoch_1.pth', weights_only=True)
    assert ckpt['meta']['epoch'] == 1 and ckpt['meta']['iter'] == 23
    assert ckpt['ema_state_dict']['steps'].item() == 23
    assert not any(key.startswith('module.') for key in ckpt['state_dict'])
