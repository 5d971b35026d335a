"""The tutorials' pictures, drawn by minimm from its own code:
``python -m minimm.plot.figures OUT_DIR``.

* ``one_iteration.png`` — one training iteration, MMCV 1.x beside MMEngine: hooks in call order
  against the stages, ``train_step`` in the middle;
* ``priorities.png`` — the 0-100 priority line with the default hooks placed on it;
* ``ema_timeline.png`` — whose weights the model holds around validation, and what a checkpoint
  saves, recorded from a real ``EMAHook`` run;
* ``lr_schedules.png`` — common ``param_scheduler`` configs, stepped as the Runner steps them.

The test suite redraws them all into a temporary folder, so this command cannot rot. Neither
MMEngine nor MMCV draws such pictures; their docs have hand-made diagrams that can drift from the
code.
"""
import os
import sys
import tempfile
from typing import List, Optional


def make_all(out_dir: str) -> List[str]:
    """Draw every picture into ``out_dir``; return their paths."""
    from .ema_timeline import draw_ema_timeline, record_ema_run
    from .hook_order import mmcv_rows, mmengine_rows, save_iteration_figure, save_priority_figure
    from .schedules import draw_schedules
    os.makedirs(out_dir, exist_ok=True)
    # EMAHook at 49, as MMDetection's configs place it: a custom hook beside the defaults.
    worlds = {'MMCV 1.x': mmcv_rows(),
              'MMEngine': mmengine_rows([dict(type='EMAHook', priority=49)])}
    with tempfile.TemporaryDirectory() as work_dir:
        events = record_ema_run(work_dir)
    return [save_iteration_figure(worlds, os.path.join(out_dir, 'one_iteration.png')),
            save_priority_figure(worlds, os.path.join(out_dir, 'priorities.png')),
            draw_ema_timeline(events, os.path.join(out_dir, 'ema_timeline.png')),
            draw_schedules(os.path.join(out_dir, 'lr_schedules.png'))]


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit('usage: python -m minimm.plot.figures OUT_DIR')
    try:
        for path in make_all(argv[0]):
            print(path)
    except ImportError as e:
        raise SystemExit(str(e))
