"""What minimm's subcommands share: the config a command line names, and the argument helpers.

``cli.py`` (train, test, demo), ``hooks_cli.py``, ``posthoc_cli.py``, ``plot/`` and ``bench/``
each parse their own options; this file sits below all of them so none reaches back up into
another command's module for a helper. It imports the config package only when a config is
read, so ``minimm bench ...`` starts without it.
"""
import argparse
import os.path as osp
from typing import List, Optional


def help_text(docstring: str) -> str:
    """A docstring as ``--help`` shows it: reST's literal and bold marks dropped, the lines kept
    (pass ``formatter_class=argparse.RawDescriptionHelpFormatter`` so lists stay lists)."""
    return docstring.replace('``', '').replace('**', '').strip()


def default_work_dir(config_path: str) -> str:
    """``work_dirs/<config name>``, where a config without ``work_dir`` writes (MMEngine's rule)."""
    return osp.join('work_dirs', osp.splitext(osp.basename(config_path))[0])


def load_config(path: str, work_dir: Optional[str], cfg_options: Optional[List[str]]):
    """The config at ``path`` with ``--cfg-options`` merged and ``work_dir`` settled (the
    argument, else the config's own, else ``default_work_dir``); a key the options add that no
    runner reads is warned about here, since nothing later sees where it came from."""
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


def add_cfg_options(parser: argparse.ArgumentParser) -> None:
    # 'extend': a second --cfg-options adds to the first (MMEngine's DictAction merges them).
    parser.add_argument('--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
                        help='override config entries, e.g. train_cfg.max_epochs=2 '
                             'custom_hooks.0.momentum=0.001')


def positive_int(text: str) -> int:
    """An argparse ``type``: a whole number >= 1 (``--epochs``, ``--epoch-length``)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f'must be an integer >= 1, but got {text!r}')
    return int(text)
