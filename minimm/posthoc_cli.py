"""``minimm posthoc-ema``: choose the EMA length after training, from PostHocEMAHook's snapshots.

    minimm posthoc-ema WORK_DIR --sigma-rel 0.08 [--step N] --out FILE
    minimm posthoc-ema WORK_DIR --sweep 0.02,0.05,0.1,0.2 [--config CONFIG] [--out PNG]

The first writes the synthesized EMA as a checkpoint (its ``state_dict``), which
``minimm test CONFIG --checkpoint FILE`` loads. The second synthesizes each width, evaluates it
on the config's validation set (the config the run dumped into WORK_DIR, or ``--config``), prints
a table and, when matplotlib is installed, draws the metric against the width (into ``--out``,
default ``WORK_DIR/posthoc_sweep.png``).
"""
import argparse
import glob
import os.path as osp
from typing import List, Optional

from .checkpoint import save_checkpoint
from .cli_args import load_config
from .hooks.posthoc_ema_hook import SNAPSHOT_DIR
from .model.averaged_model import SIGMA_REL_MAX
from .model.posthoc_ema import read_snapshots, synthesize


def _widths(text: str) -> List[float]:
    try:
        widths = [float(w) for w in text.split(',') if w.strip()]
    except ValueError:
        widths = []
    if not widths or not all(0 < w < SIGMA_REL_MAX for w in widths):
        raise argparse.ArgumentTypeError(f'--sweep {text!r}: give widths in (0, {SIGMA_REL_MAX}) '
                                         'separated by commas, e.g. 0.02,0.05,0.1,0.2')
    return widths


def _config_of(work_dir: str, config: Optional[str]) -> str:
    if config:
        return config
    found = sorted(glob.glob(osp.join(glob.escape(work_dir), '*.py')))
    if len(found) != 1:
        raise SystemExit(f'minimm posthoc-ema: --sweep needs the run\'s config; found {len(found)} '
                         f'.py files in {work_dir} ({found}); pass --config CONFIG')
    return found[0]


def sweep(work_dir: str, widths: List[float], config: Optional[str], step: Optional[int]) -> list:
    """[(sigma_rel, metrics)] for each width, evaluated with the config's val loop."""
    from .runner import Runner
    cfg = load_config(_config_of(work_dir, config), osp.join(work_dir, 'posthoc_sweep'), None)
    cfg['custom_hooks'] = []  # the synthesized weights only: no EMAHook swapping its own in
    cfg['default_hooks'] = dict(cfg.get('default_hooks') or {}, checkpoint=None)
    cfg['load_from'], cfg['resume'] = None, False
    runner = Runner.from_cfg(cfg)
    rows = []
    for width in widths:
        runner.model.load_state_dict(synthesize(osp.join(work_dir, SNAPSHOT_DIR), width, step))
        rows.append((width, runner.val()))
    return rows


def draw(rows: list, key: str, path: str) -> str:
    """The metric against the width, as a PNG; the message to print."""
    from .plot import require_pyplot, save_figure
    try:
        plt = require_pyplot()
    except ImportError as e:
        return f'no picture: {e}'
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([w for w, _ in rows], [m[key] for _, m in rows], marker='o')
    ax.set(xlabel='sigma_rel (EMA length relative to the run)', ylabel=key)
    ax.grid(alpha=0.3)
    return f'curve: {save_figure(fig, path)}'


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='minimm posthoc-ema',
                                     description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split('\n\n', 1)[1])
    parser.add_argument('work_dir', help='the run\'s work dir (snapshots in WORK_DIR/posthoc_ema)')
    parser.add_argument('--sigma-rel', type=float, help='the width to synthesize, e.g. 0.08')
    parser.add_argument('--sweep', type=_widths, help='widths to evaluate, e.g. 0.02,0.05,0.1,0.2')
    parser.add_argument('--step', type=int, help='averaging step (default: the last snapshot\'s)')
    parser.add_argument('--config', help='for --sweep: the config (default: the one in WORK_DIR)')
    parser.add_argument('--out', help='--sigma-rel: the checkpoint to write; --sweep: the PNG')
    args = parser.parse_args(argv)
    if (args.sigma_rel is None) == (args.sweep is None):
        parser.error('give --sigma-rel (with --out) or --sweep')
    snapshot_dir = osp.join(args.work_dir, SNAPSHOT_DIR)
    if args.sigma_rel is not None:
        if not args.out:
            parser.error('--sigma-rel needs --out FILE')
        state_dict = synthesize(snapshot_dir, args.sigma_rel, args.step)
        step = args.step or read_snapshots(snapshot_dir)[-1]['step']
        meta = dict(posthoc_ema=dict(sigma_rel=args.sigma_rel, step=step))
        save_checkpoint(dict(state_dict=state_dict, meta=meta), args.out)
        print(f'post-hoc EMA sigma_rel={args.sigma_rel} at step {step}: {args.out}')
        return
    rows = sweep(args.work_dir, args.sweep, args.config, args.step)
    keys = list(rows[0][1])
    print('sigma_rel  ' + '  '.join(f'{k:>20}' for k in keys))
    for width, metrics in rows:
        print(f'{width:<9.3f}  ' + '  '.join(f'{metrics[k]:>20.2f}' for k in keys))
    print(draw(rows, keys[0], args.out or osp.join(args.work_dir, 'posthoc_sweep.png')))


if __name__ == '__main__':
    main()
