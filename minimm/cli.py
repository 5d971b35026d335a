"""The minimm command: demo, train, test, info, bench, plot and plot-lr.

    minimm demo                      # train the shipped digits CNN with EMA, print the accuracy
    minimm train CONFIG [--work-dir DIR] [--resume [CKPT]] [--trust-checkpoint]
                        [--cfg-options k=v ...] [--launcher none|pytorch] [--profile-hooks]
    minimm test CONFIG --checkpoint CKPT [--trust-checkpoint] [--work-dir DIR]
                       [--cfg-options k=v ...]
    minimm info                      # versions, devices, which native backend is active and why
    minimm bench overhead|ema|pack|ema-hook|syncs [options]
    minimm plot WORK_DIR [--out PNG]  # loss, LR and validation metrics of a run (needs matplotlib)
    minimm plot-lr CONFIG [--out PNG] # the LR/momentum schedule of a config, without training

``train`` and ``test`` are MMEngine's ``tools/train.py`` and ``tools/test.py`` in one command.
``train`` also runs MMCV 1.x configs (``runner``/``lr_config``/``optimizer_config``/``workflow``
keys) on ``minimm.mmcv``'s classic runner, as MMDetection 2.x's ``tools/train.py`` did.
"""
import argparse
import importlib
import os.path as osp
import sys
from typing import List, Optional

DEMO_CONFIG = osp.join(osp.dirname(__file__), 'configs', 'digits_ema.py')
BENCHMARKS = {'overhead': 'minimm.bench.overhead', 'ema': 'minimm.bench.ema',
              'pack': 'minimm.bench.pack', 'ema-hook': 'minimm.bench.ema_hook',
              'syncs': 'minimm.bench.syncs'}
PLOTS = {'plot': 'minimm.plot', 'plot-lr': 'minimm.plot.lr'}


def help_text(docstring: str) -> str:
    """A docstring as ``--help`` shows it: reST's literal and bold marks dropped, the lines kept
    (pass ``formatter_class=argparse.RawDescriptionHelpFormatter`` so lists stay lists)."""
    return docstring.replace('``', '').replace('**', '').strip()


def default_work_dir(config_path: str) -> str:
    """``work_dirs/<config name>``, where a config without ``work_dir`` writes (MMEngine's rule)."""
    return osp.join('work_dirs', osp.splitext(osp.basename(config_path))[0])


def _load_config(path: str, work_dir: Optional[str], cfg_options: Optional[List[str]]):
    from .config import Config, parse_cfg_options
    from .config.top_level_keys import MMCV_KEYS, RUNNER_KEYS, warn_unknown_keys
    from .mmcv.train import is_mmcv_config
    cfg = Config.fromfile(path)
    added = []
    if cfg_options:
        options = parse_cfg_options(cfg_options)
        added = sorted({key.split('.')[0] for key in options} - set(cfg))
        cfg.merge_from_dict(options)
    if is_mmcv_config(cfg):  # the classic runner: nothing else checks its keys
        warn_unknown_keys(cfg, MMCV_KEYS, added)
    else:  # Runner.from_cfg warns about the config's misspelt keys itself
        warn_unknown_keys((), RUNNER_KEYS, added)
    if work_dir is not None:
        cfg['work_dir'] = work_dir
    elif cfg.get('work_dir') is None:
        cfg['work_dir'] = default_work_dir(path)
    return cfg


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('config', help='a .py config file')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='allow loading a checkpoint that needs arbitrary unpickling (e.g. '
                             "one written by MMEngine); it can run code: only for files you trust")
    parser.add_argument('--work-dir', help='where checkpoints and logs go (overrides the config)')
    parser.add_argument('--cfg-options', nargs='+', metavar='KEY=VALUE',
                        help='override config entries, e.g. train_cfg.max_epochs=2 '
                             'custom_hooks.0.momentum=0.001')


def _trusted(load_from) -> dict:
    """``load_from`` (a path or a dict) marked as trusted: it may need arbitrary unpickling."""
    path = load_from['path'] if isinstance(load_from, dict) else load_from
    return dict(path=path, trusted=True)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f'must be an integer >= 1, but got {text!r}')
    return int(text)


def cmd_train(args) -> None:
    from .dist import destroy_dist
    from .mmcv.train import is_mmcv_config, train_from_cfg
    from .registry import RUNNERS
    from .runner import Runner  # noqa: F401  (registers Runner in RUNNERS)
    cfg = _load_config(args.config, args.work_dir, args.cfg_options)
    if is_mmcv_config(cfg):  # an MMCV 1.x config: the classic runner and hooks
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
    if args.profile_hooks:  # time each hook and count its device reads (HookProfiler)
        cfg['profile_hooks'] = True
    # As MMEngine's tools/train.py: RUNNERS builds the config's `runner_type` (default Runner).
    RUNNERS.build(cfg).train()
    destroy_dist()


def cmd_test(args) -> None:
    from .dist import destroy_dist
    from .registry import RUNNERS
    from .runner import Runner  # noqa: F401  (registers Runner in RUNNERS)
    cfg = _load_config(args.config, args.work_dir, args.cfg_options)
    cfg['load_from'] = _trusted(args.checkpoint) if args.trust_checkpoint else args.checkpoint
    cfg['launcher'] = args.launcher
    metrics = RUNNERS.build(cfg).test()
    destroy_dist()
    print(metrics)


def cmd_demo(args) -> None:
    from .runner import Runner
    options = None if args.epochs is None else [f'train_cfg.max_epochs={args.epochs}']
    cfg = _load_config(DEMO_CONFIG, args.work_dir or 'work_dirs/demo', options)
    runner = Runner.from_cfg(cfg)  # logs the hook table: per stage, the hooks in call order
    runner.train()
    metrics = runner.message_hub.get_scalar('val/accuracy/top1').current()
    print(f'\nFinal validation accuracy (EMA weights): {metrics:.2f}% '
          f'(chance: 10%). Work dir: {runner.work_dir}')


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


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) >= 2 and argv[0] == 'bench' and argv[1] in BENCHMARKS:
        # Each benchmark parses its own options (so `minimm bench ema --help` shows them).
        importlib.import_module(BENCHMARKS[argv[1]]).main(argv[2:])
        return
    if argv and argv[0] in PLOTS:  # these parse their own options too
        importlib.import_module(PLOTS[argv[0]]).main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog='minimm', description=help_text(__doc__.split('\n\n')[0]))
    sub = parser.add_subparsers(dest='command', required=True)

    demo = sub.add_parser('demo', help='train the shipped digits CNN with EMA (under a minute)')
    demo.add_argument('--work-dir', help='default: work_dirs/demo')
    demo.add_argument('--epochs', type=_positive_int, help='override train_cfg.max_epochs')

    train = sub.add_parser('train', help='train from a config')
    _add_config_args(train)
    train.add_argument('--resume', nargs='?', const='auto', default=None, metavar='CKPT',
                       help='resume from CKPT, or from the latest checkpoint in the work dir')
    train.add_argument('--launcher', choices=['none', 'pytorch'], default='none')
    train.add_argument('--profile-hooks', action='store_true',
                       help="log each hook's time and device reads per stage at the end")

    test = sub.add_parser('test', help='test a checkpoint')
    _add_config_args(test)
    test.add_argument('--checkpoint', required=True, help='the checkpoint to test')
    test.add_argument('--launcher', choices=['none', 'pytorch'], default='none')

    sub.add_parser('info', help='versions, devices and the native-ops backend')

    bench = sub.add_parser('bench', help='benchmarks; `minimm bench NAME --help` for options')
    bench.add_argument('name', choices=sorted(BENCHMARKS))
    sub.add_parser('plot', help="draw a run's loss, LR and metrics; `minimm plot --help`")
    sub.add_parser('plot-lr', help="draw a config's LR schedule; `minimm plot-lr --help`")

    args = parser.parse_args(argv)
    {'demo': cmd_demo, 'train': cmd_train, 'test': cmd_test, 'info': cmd_info}[args.command](args)


if __name__ == '__main__':
    main()
