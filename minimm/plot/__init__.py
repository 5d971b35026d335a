"""``minimm plot WORK_DIR``: loss, learning rate and validation metrics of a run, in one PNG.

All of minimm's drawing lives in this package: this file (the command above, and the two
helpers every picture uses, ``require_pyplot`` and ``save_figure``), ``lr.py`` (``minimm
plot-lr``: the schedule a config produces) and ``figures/`` (the tutorials' pictures).

It reads what the run already wrote: MMEngine-style runs keep their scalars as JSON lines in
``{work_dir}/{timestamp}/vis_data/scalars.json`` (``LocalVisBackend``), one line per logged training
iteration (``loss``, ``lr``... and ``step`` = iteration) and one per validation (the metrics, with
``step`` = epoch or iteration). MMCV 1.x-style runs keep ``{timestamp}.log.json``, whose first line
is the run's ``meta`` and whose other lines carry ``mode`` 'train' or 'val'. The newest log in the
folder is drawn. MMEngine has no such command; its docs point to TensorBoard or W&B instead.

matplotlib is an optional extra (``pip install -e ".[plot]"``); without it the command says so.
"""
import argparse
import glob
import json
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

PLOT_INSTALL_HINT = ('drawing needs matplotlib, an optional extra of minimm: run '
                     'pip install -e ".[plot]" in your minimm checkout (or pip install matplotlib)')
TRAIN_KEYS = ('loss', 'lr')     # a line holding one of these is a training line


def require_pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or an ImportError saying what to install."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(PLOT_INSTALL_HINT) from e
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, out: str, dpi: int = 80) -> str:
    """Lay out, write and close ``fig``; return ``out``."""
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    require_pyplot().close(fig)
    return out


def find_scalar_logs(work_dir: str) -> List[str]:
    """The scalar logs under ``work_dir``, oldest first: one per run (a resumed run writes a new
    one); ``work_dir`` may also be a log file itself."""
    if osp.isfile(work_dir) and not work_dir.endswith('.json'):
        hint = f'; to see the LR schedule of a config without training: minimm plot-lr ' \
            f'{work_dir}' if work_dir.endswith('.py') else ''
        raise ValueError(f'minimm plot takes a run\'s work dir (or its scalars.json or .log.json), '
                         f'but got the file {work_dir}{hint}')
    if osp.isfile(work_dir):
        return [work_dir]
    if not osp.isdir(work_dir):
        raise FileNotFoundError(f'{work_dir} is neither a work dir nor a scalar log file')
    candidates = glob.glob(osp.join(work_dir, '**', 'vis_data', 'scalars.json'), recursive=True)
    candidates += glob.glob(osp.join(work_dir, '**', '*.log.json'), recursive=True)
    if not candidates:
        raise FileNotFoundError(f'no vis_data/scalars.json and no *.log.json under {work_dir}; '
                                'was it trained with a LocalVisBackend or a TextLoggerHook?')
    return sorted(candidates, key=osp.getmtime)


def find_scalar_log(work_dir: str) -> str:
    """The newest scalar log under ``work_dir`` (``work_dir`` may also be the file itself)."""
    return find_scalar_logs(work_dir)[-1]


def read_scalar_log(path: str) -> Tuple[List[dict], List[dict]]:
    """``(train_rows, val_rows)``, each row a dict with an ``x`` (the step) and the values."""
    train, val, mmcv_train = [], [], []
    with open(path, encoding='utf-8') as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        if 'mode' in row:                                  # MMCV 1.x TextLoggerHook
            mode = row.pop('mode')
            row['x'] = row.pop('epoch', None)
            (mmcv_train if mode == 'train' else val).append(row)
        elif 'step' in row:                                # MMEngine LocalVisBackend
            row['x'] = row.pop('step')
            (train if any(key in row for key in TRAIN_KEYS) else val).append(row)
    _place_mmcv_train_rows(mmcv_train)
    return train + mmcv_train, val  # a log is one kind or the other: one of the two is empty


def _place_mmcv_train_rows(rows: List[dict]) -> None:
    """Set ``x`` of MMCV train lines (which hold ``x`` = epoch and ``iter``) to an iteration.

    An IterBasedRunner logs the global iteration; an EpochBasedRunner logs the iteration *within*
    the epoch, which restarts every epoch. There the largest logged ``iter`` stands for the epoch's
    length: exact when the length is a multiple of the logging interval, else short by less than
    one interval.
    """
    iters = [row.pop('iter') for row in rows]
    by_epoch = any(later < earlier for earlier, later in zip(iters, iters[1:]))
    per_epoch = max(iters, default=0)
    for row, it in zip(rows, iters):
        row['x'] = (row['x'] - 1) * per_epoch + it if by_epoch else it


def _series(rows: Sequence[dict], key: str) -> Tuple[list, list]:
    pairs = [(row['x'], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _metric_keys(val_rows: Sequence[dict]) -> List[str]:
    ignored = {'x', 'iter', 'time', 'data_time', 'memory', 'lr'}
    keys: Dict[str, None] = {}
    for row in val_rows:
        keys.update((key, None) for key, value in row.items()
                    if key not in ignored and isinstance(value, (int, float)))
    return list(keys)


def plot_run(work_dir: str, out: Optional[str] = None) -> str:
    """Draw loss, LR and validation metrics of every run in ``work_dir`` (a resumed run goes on
    where the first stopped; a run started over is drawn over it), one colour per run; return
    the PNG's path."""
    plt = require_pyplot()
    runs = [(path, *read_scalar_log(path)) for path in find_scalar_logs(work_dir)]
    runs = [(path, train, val) for path, train, val in runs if train or val]
    if not runs:
        raise ValueError(f'no training or validation lines in the scalar logs under {work_dir}: '
                         'did its runs reach their first log line?')
    out = out or osp.join(osp.dirname(runs[-1][0]), 'curves.png')
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for number, (path, train, val) in enumerate(runs):
        run = f'run {number + 1}' if len(runs) > 1 else None
        for ax, key in zip(axes, ('loss', 'lr')):
            ax.plot(*_series(train, key), color=f'C{number}', label=run)
        for key in _metric_keys(val):
            axes[2].plot(*_series(val, key), marker='o', label=f'{key} ({run})' if run else key)
    for ax, title in zip(axes, ('training loss', 'learning rate')):
        ax.set(title=title, xlabel='iteration')
    axes[2].set(title='validation', xlabel='step as logged (epoch or iteration)')
    axes[2].xaxis.get_major_locator().set_params(integer=True)
    if any(val for _, _, val in runs):
        axes[2].legend(fontsize='small')
    fig.suptitle(', '.join(f'run {n + 1}: {osp.relpath(path)}' if len(runs) > 1 else
                           osp.relpath(path) for n, (path, _, _) in enumerate(runs)),
                 fontsize='small')
    return save_figure(fig, out)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='minimm plot', description=__doc__.split('\n\n')[0])
    parser.add_argument('work_dir', help="a run's work dir (or its scalars.json / .log.json)")
    parser.add_argument('--out', help='the PNG to write (default: curves.png beside the log)')
    args = parser.parse_args(argv)
    try:
        print(plot_run(args.work_dir, args.out))
    except ImportError as e:
        raise SystemExit(str(e))
