"""The tutorials' pictures: ``python -m minimm.plot.figures OUT_DIR`` redraws every one of them, and
what they show is checked against the code they were drawn from."""
from pathlib import Path

import pytest

from minimm.plot.figures import main as figures_main
from minimm.plot.figures.ema_timeline import record_ema_run
from minimm.plot.figures.hook_order import mmcv_rows, mmengine_rows

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

REPO = Path(__file__).resolve().parent.parent
CHECKED_IN = REPO / 'tutorials' / 'figures'


def test_the_command_redraws_every_checked_in_picture(tmp_path, capsys):
    figures_main([str(tmp_path)])
    drawn = sorted(Path(line).name for line in capsys.readouterr().out.split())
    assert drawn == sorted(p.name for p in CHECKED_IN.glob('*.png'))
    for name in drawn:
        assert (tmp_path / name).read_bytes()[:4] == b'\x89PNG'
        assert (CHECKED_IN / name).stat().st_size < 200_000        # small enough to check in


def test_mmengine_iteration_rows_are_the_runner_registration():
    rows = mmengine_rows([dict(type='EMAHook', priority=49)])
    after = [(r.name, r.priority) for r in rows if 'after_train_iter' in r.stages]
    assert after == [('RuntimeInfoHook', 10), ('EMAHook', 49), ('IterTimerHook', 50),
                     ('LoggerHook', 60), ('ParamSchedulerHook', 70), ('CheckpointHook', 90)]


def test_mmcv_iteration_rows_are_register_training_hooks():
    rows = mmcv_rows()
    before = [(r.name, r.priority) for r in rows if 'before_train_iter' in r.stages]
    after = [(r.name, r.priority) for r in rows if 'after_train_iter' in r.stages]
    assert before == [('StepLrUpdaterHook', 10), ('IterTimerHook', 70), ('EvalHook', 70)]
    # MMCV's optimizer step is a hook: the first thing after train_step.
    assert after == [('OptimizerHook', 40), ('CheckpointHook', 50), ('IterTimerHook', 70),
                     ('EvalHook', 70), ('TextLoggerHook', 90)]


def test_ema_timeline_events(tmp_path):
    events = record_ema_run(str(tmp_path))
    def epoch(n):
        iters = [f'train iter {i}' for i in range(3 * n - 2, 3 * n + 1)]
        return iters + [f'save epoch_{n}.pth', 'before_val_epoch', 'val iter 1', 'val iter 2',
                        'after_val_epoch']
    assert [e.stage for e in events] == epoch(1) + epoch(2)
    holders = [e.holder for e in events]
    # EMA weights are in the model from the swap in before_val_epoch until after_val_epoch.
    assert holders == (['raw'] * 4 + ['EMA'] * 3 + ['raw']) * 2
    saves = [e for e in events if e.stage.startswith('save')]
    assert all(e.note == 'state_dict=EMA\nema_state_dict=raw' for e in saves)
