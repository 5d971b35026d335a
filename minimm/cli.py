"""minimm: demo, train, test, info, bench, plot, plot-lr, posthoc-ema and hooks.

    minimm demo                      # train the shipped digits CNN with EMA, print the accuracy
    minimm train CONFIG [--work-dir DIR] [--resume [CKPT]] [--trust-checkpoint]
                        [--cfg-options k=v ...] [--launcher none|pytorch|slurm|mpi]
                        [--profile-hooks]
    minimm test CONFIG --checkpoint CKPT [--trust-checkpoint] [--work-dir DIR]
                       [--cfg-options k=v ...]
    minimm info                      # versions, devices, which native backend is active and why
    minimm bench overhead|ema|pack|ema-hook|syncs [options]
    minimm plot WORK_DIR [--out PNG]  # loss, LR and validation metrics of a run (needs matplotlib)
    minimm plot-lr CONFIG [--out PNG] # the LR/momentum schedule of a config, without training
    minimm posthoc-ema WORK_DIR --sigma-rel S --out FILE   # choose the EMA length after training
    minimm posthoc-ema WORK_DIR --sweep S1,S2,...          # evaluate several (PostHocEMAHook)
    minimm hooks CONFIG [--strict]  # the hook table with what each hook reads and writes

``train`` and ``test`` are MMEngine's ``tools/train.py`` and ``tools/test.py`` in one command.
``train`` also runs MMCV 1.x configs (``runner``/``lr_config``/``optimizer_config``/``workflow``
keys) on ``minimm.mmcv``'s classic runner, as MMDetection 2.x's ``tools/train.py`` did.
"""
import argparse
import importlib
import os.path as osp
import sys
import traceback
from typing import List, Optional

from .cli_args import add_cfg_options, help_text, load_config, positive_int
from .console_details import show_details

DEMO_CONFIG = osp.join(osp.dirname(__file__), 'configs', 'digits_ema.py')
BENCHMARKS = {'overhead': 'minimm.bench.overhead', 'ema': 'minimm.bench.ema',
              'pack': 'minimm.bench.pack', 'ema-hook': 'minimm.bench.ema_hook',
              'syncs': 'minimm.bench.syncs'}
PLOTS = {'plot': 'minimm.plot', 'plot-lr': 'minimm.plot.lr'}
TOOLS = {'posthoc-ema': 'minimm.posthoc_cli', 'hooks': 'minimm.hooks_cli'}


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--verbose', action='store_true',
                        help='print the config dump, the hook table and, on a failure, the '
                             'traceback (they are in the log file either way)')


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('config', help='a .py config file')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='allow loading a checkpoint that needs arbitrary unpickling (e.g. '
                             "one written by MMEngine); it can run code: only for files you trust")
    parser.add_argument('--work-dir', help='where checkpoints and logs go (overrides the config)')
    _add_verbose(parser)
    add_cfg_options(parser)


def _trusted(load_from) -> dict:
    """``load_from`` (a path or a dict) marked as trusted: it may need arbitrary unpickling."""
    path = load_from['path'] if isinstance(load_from, dict) else load_from
    return dict(path=path, trusted=True)


def cmd_train(args) -> None:
    from .dist import destroy_dist
    from .mmcv.train import is_mmcv_config, train_from_cfg
    from .registry import RUNNERS
    from .runner import Runner  # noqa: F401  (registers Runner in RUNNERS)
    cfg = load_config(args.config, args.work_dir, args.cfg_options)
    if is_mmcv_config(cfg):  # an MMCV 1.x config: the classic runner and hooks
        if args.check_hooks is not None:
            cfg['check_hooks'] = args.check_hooks
        if args.profile_hooks:
            raise SystemExit('minimm train: --profile-hooks needs an MMEngine-style config; the '
                             'classic MMCV 1.x runner has no hook profiler')
        train_from_cfg(cfg, launcher=args.launcher, resume=args.resume)
        destroy_dist()
        return
    if args.resume == 'auto':
        cfg['resume'] = True
    elif args.resume is not None:
        cfg['load_from'], cfg['resume'] = args.resume, True
    if args.trust_checkpoint and cfg.get('load_from') is not None:
        cfg['load_from'] = _trusted(cfg['load_from'])
    cfg['launcher'] = args.launcher
    if args.check_hooks is not None:
        cfg['check_hooks'] = args.check_hooks
    if args.profile_hooks:  # time each hook and count its device reads (HookProfiler)
        cfg['profile_hooks'] = True
    # As MMEngine's tools/train.py: RUNNERS builds the config's `runner_type` (default Runner).
    RUNNERS.build(cfg).train()
    destroy_dist()


def cmd_test(args) -> None:
    from .dist import destroy_dist
    from .mmcv.train import is_mmcv_config, test_from_cfg
    from .registry import RUNNERS
    from .runner import Runner  # noqa: F401  (registers Runner in RUNNERS)
    cfg = load_config(args.config, args.work_dir, args.cfg_options)
    if is_mmcv_config(cfg):  # an MMCV 1.x config: its model, dataset and evaluate
        print(test_from_cfg(cfg, args.checkpoint))
        return
    cfg['load_from'] = _trusted(args.checkpoint) if args.trust_checkpoint else args.checkpoint
    cfg['launcher'] = args.launcher
    metrics = RUNNERS.build(cfg).test()
    destroy_dist()
    print(metrics)


def cmd_demo(args) -> None:
    from .runner import Runner
    options = None if args.epochs is None else [f'train_cfg.max_epochs={args.epochs}']
    from .work_dir import free_work_dir  # a second demo keeps the first one's checkpoints
    cfg = load_config(DEMO_CONFIG, args.work_dir or free_work_dir('work_dirs/demo'), options)
    runner = Runner.from_cfg(cfg)  # logs the hook table (per stage, the hooks in call order)
    runner.train()
    final = runner.message_hub.get_scalar('val/accuracy/top1').current()
    best, best_file = (runner.message_hub.get_info(key) for key in ('best_score', 'best_ckpt'))
    kept = '' if best_file is None else f'; the best, {best:.2f}%, is kept in {best_file}'
    print(f'\nFinal validation accuracy (EMA weights): {final:.2f}% (chance: 10%){kept}. '
          f'Work dir: {runner.work_dir}')


def cmd_info(args) -> None:
    import torch

    from . import __version__
    from .ops import backend_info
    print(f'minimm {__version__}')
    print(f'python {sys.version.split()[0]}, torch {torch.__version__}, '
          f'CUDA available: {torch.cuda.is_available()}')
    if torch.cuda.is_available():
        print(f'device: {torch.cuda.get_device_name()}')
    for device, info in backend_info().items():
        print(f"native ops on {device}: {info['backend']} ({info['reason']})")


def _error_line(error: BaseException) -> str:
    """``error`` as the CLI's first line: its message, and where a hook raised it."""
    text = str(error)
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        text = error.args[0]  # str() of a KeyError is the repr of its message
    notes = [note for note in getattr(error, '__notes__', ()) if note.startswith('raised in')]
    return f'minimm: error: {text}' + (f' ({notes[0]})' if notes else '')


def _write_traceback_to_log_files() -> None:
    """Append the traceback to the text log of the run that failed (its handler may be closed)."""
    from .logging import MMLogger
    log_file = MMLogger.get_current_instance().log_file
    if log_file is not None and osp.isfile(log_file):
        with open(log_file, 'a') as f:
            f.write(traceback.format_exc())


def command_line(argv: Optional[List[str]] = None) -> int:
    """``minimm ...`` from a shell (``main`` raises, for scripts and tests). A failure prints
    ``minimm: error: <what, where, what is allowed>`` first, then the traceback with
    ``--verbose`` (it is in the run's log file either way); and the config dump and the hook
    table go to the log file only, unless ``--verbose``. Returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose = '--verbose' in argv
    argv = [arg for arg in argv if arg != '--verbose']
    show_details(verbose)
    try:
        main(argv)
    except Exception as error:  # KeyboardInterrupt and SystemExit (argparse's) pass through
        _write_traceback_to_log_files()
        print(_error_line(error), file=sys.stderr, flush=True)
        if verbose:
            traceback.print_exc()
        else:
            print('(the traceback: --verbose, or the log file of the run)', file=sys.stderr)
        return 1
    finally:
        show_details(False)
    return 0


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) >= 2 and argv[0] == 'bench' and argv[1] in BENCHMARKS:
        # Each benchmark parses its own options (so `minimm bench ema --help` shows them).
        importlib.import_module(BENCHMARKS[argv[1]]).main(argv[2:])
        return
    own_parsers = {**PLOTS, **TOOLS}
    if argv and argv[0] in own_parsers:  # the plots and tools parse their own options too
        importlib.import_module(own_parsers[argv[0]]).main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog='minimm', description=help_text(__doc__.split('\n\n')[0]))
    sub = parser.add_subparsers(dest='command', required=True)

    demo = sub.add_parser('demo', help='train the shipped digits CNN with EMA (under a minute)')
    demo.add_argument('--work-dir', help='default: work_dirs/demo (or demo_2... if it holds '
                                         'an earlier demo\'s checkpoints)')
    demo.add_argument('--epochs', type=positive_int, help='override train_cfg.max_epochs')
    _add_verbose(demo)

    train = sub.add_parser('train', help='train from a config')
    _add_config_args(train)
    train.add_argument('--resume', nargs='?', const='auto', default=None, metavar='CKPT',
                       help='resume from CKPT, or from the latest checkpoint in the work dir')
    train.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                       default='none')
    train.add_argument('--profile-hooks', action='store_true',
                       help="log each hook's time and device reads per stage at the end")
    train.add_argument('--check-hooks', choices=['warn', 'error', 'off'],
                       help="on an ordering bug in the hooks' dataflow (`minimm hooks`): "
                            'warn (default), stop with an error, or do not check')

    test = sub.add_parser('test', help='test a checkpoint')
    _add_config_args(test)
    test.add_argument('--checkpoint', required=True, help='the checkpoint to test')
    test.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                       default='none')

    sub.add_parser('info', help='versions, devices and the native-ops backend')

    bench = sub.add_parser('bench', help='benchmarks; `minimm bench NAME --help` for options')
    bench.add_argument('name', choices=sorted(BENCHMARKS))
    sub.add_parser('plot', help="draw a run's loss, LR and metrics; `minimm plot --help`")
    sub.add_parser('plot-lr', help="draw a config's LR schedule; `minimm plot-lr --help`")
    sub.add_parser('posthoc-ema', help='choose the EMA length after training (PostHocEMAHook); '
                                       '`minimm posthoc-ema --help`')
    sub.add_parser('hooks', help="a config's hook table with each hook's reads and writes; "
                                 '`minimm hooks --help`')

    args = parser.parse_args(argv)
    # main() from a script honours --verbose too (command_line has taken it out of argv).
    before = show_details(True) if getattr(args, 'verbose', False) else None
    try:
        commands = {'demo': cmd_demo, 'train': cmd_train, 'test': cmd_test, 'info': cmd_info}
        commands[args.command](args)
    finally:
        if before is not None:
            show_details(before)


if __name__ == '__main__':
    sys.exit(command_line())
