"""Checkpoint files: save atomically, load safely, find what to resume, load weights into a model.

What a checkpoint holds is decided by ``Runner.save_checkpoint`` (``runner/resume.py``); this file
only moves dicts to and from disk, with three safety rules, all stricter than MMEngine 0.10:

* **No data is lost on a crash.** A checkpoint is written to a temporary file in the same folder,
  flushed to disk, then renamed over the target (a rename within a folder is atomic), and the
  folder is flushed so the rename itself survives a power cut. A reader sees either the old file
  or the whole new one, never half a file, and a failed write leaves no temporary file behind.
  The temporary file's name holds its writer's pid and host, and only a writer's own leftovers
  or those of a dead process on this machine are cleared: two processes saving one file (two
  ranks, or two machines sharing the work dir) never delete each other's file mid-write.
  ``last_checkpoint`` is written the same way, and only after the checkpoint it names exists.
* **Loading runs no code.** Files are read with ``torch.load(weights_only=True)``, so everything
  minimm writes is first converted to plain data (``minimm/plain_data.py``). A file that needs
  arbitrary unpickling (MMEngine's, or an old torchvision one) is refused with a message naming
  the opt-in for trusted files (``trusted=True``).
* **A bad file is named.** Every read error says which file and why; ``resume_candidates`` lists
  the older checkpoints to fall back to when the newest one cannot be read.

This file reads and writes local files; MMEngine's public API over it, with ``http(s)://`` URLs
and ``CheckpointLoader``, is ``minimm/runner/checkpoint.py``. Left out: file backends
(``backend_args``).
"""
import glob
import os
import os.path as osp
import pickle
import re
import socket
import tempfile
from collections import OrderedDict
from errno import ENOSPC
from typing import List, Optional

import torch
import torch.nn as nn
from torch.nn.modules.module import _IncompatibleKeys

from . import mmengine_pickle
from .dist.utils import is_dtensor
from .plain_data import to_plain_data


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be read; the message names the file and the reason."""


class UntrustedCheckpointError(CheckpointError):
    """A checkpoint that needs arbitrary unpickling, read without ``trusted=True``."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint file that does not exist (a ``FileNotFoundError``, as MMEngine raises)."""


def _file_mode() -> int:
    # mkstemp creates files 0600; a checkpoint gets the mode open() would give it (0666 less the
    # umask). The umask can only be read by setting it, so it is set back at once.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _owner_tag() -> str:
    """``<pid>@<host>``: who writes a temporary file. Each process writes under its own name, so
    two ranks (or two machines sharing the work dir) saving one file never touch each other's."""
    host = re.sub(r'[^A-Za-z0-9.-]', '_', socket.gethostname()) or 'host'
    return f'{os.getpid()}@{host}'


def _owner_gone(tag: str) -> bool:
    """True when the process named by ``tag`` (``<pid>@<host>``) is this one or has ended, so its
    temporary file is a leftover. A process on another machine cannot be asked: never gone."""
    pid, _, host = tag.partition('@')
    if not pid.isdigit() or host != _owner_tag().partition('@')[2]:
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _atomic_write(path: str, write) -> None:
    """Call ``write(file_object)`` on a temporary file beside ``path``, then rename it to
    ``path``."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    prefix = f'.{osp.basename(path)}.'
    # Left by a process killed while writing this same file (it could not clean up): removed
    # only when that process is this one or is dead; a live one may be writing it right now.
    for stale in glob.glob(osp.join(glob.escape(folder), glob.escape(prefix) + '*.tmp')):
        tag = osp.basename(stale)[len(prefix):].rsplit('.', 2)[0]
        if _owner_gone(tag):
            try:
                os.remove(stale)
            except FileNotFoundError:  # its owner's own clean-up came first
                pass
    fd, tmp_path = tempfile.mkstemp(prefix=f'{prefix}{_owner_tag()}.', suffix='.tmp', dir=folder)
    try:
        with os.fdopen(fd, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_path, _file_mode())
        os.replace(tmp_path, path)
    except BaseException as error:
        if osp.exists(tmp_path):
            os.remove(tmp_path)
        cause = error  # torch reports a full disk as "unexpected pos ...", the cause behind it
        while cause is not None and not (isinstance(cause, OSError) and cause.errno == ENOSPC):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise OSError(ENOSPC, f'No space left on device: {path} was not written (the files '
                          'already there are intact)') from error
        raise
    if os.name == 'posix':
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def save_checkpoint(checkpoint: dict, filename: str) -> None:
    """Write ``checkpoint`` to ``filename`` atomically, as plain data (a value with no plain form
    is a TypeError naming its key, raised before anything is written)."""
    checkpoint = to_plain_data(checkpoint, where='checkpoint')
    _atomic_write(filename, lambda f: torch.save(checkpoint, f))


def write_last_checkpoint(work_dir: str, ckpt_path: str) -> None:
    """Record ``ckpt_path`` in ``work_dir/last_checkpoint`` (what ``resume=True`` reads)."""
    _atomic_write(osp.join(work_dir, 'last_checkpoint'), lambda f: f.write(ckpt_path.encode()))


def find_latest_checkpoint(work_dir: str) -> Optional[str]:
    """The path stored in ``work_dir/last_checkpoint``, or None when there is none."""
    save_file = osp.join(work_dir, 'last_checkpoint')
    if not osp.exists(save_file):
        return None
    with open(save_file) as f:
        path = f.read().strip()
    return path or None


def resume_candidates(latest: str) -> List[str]:
    """``latest``, then the older checkpoints named like it, newest first.

    "Named like it" means the same name with another number (``epoch_3.pth`` -> ``epoch_2.pth``,
    ``epoch_1.pth``), so best, published and EMA-only files, which cannot resume a run, are not
    candidates.
    """
    folder, name = osp.split(latest)
    numbers = list(re.finditer(r'\d+', name))
    if not numbers:
        return [latest]
    last = numbers[-1]
    pattern = re.compile(re.escape(name[:last.start()]) + r'(\d+)' + re.escape(name[last.end():]))
    older = []
    for other in os.listdir(folder) if osp.isdir(folder) else []:
        match = pattern.fullmatch(other)
        if match and int(match.group(1)) < int(last.group()):
            older.append((int(match.group(1)), osp.join(folder, other)))
    return [latest] + [path for _, path in sorted(older, reverse=True)]


NUMBERED = re.compile(r'(epoch|iter)_(\d+)\.pth')


def numbered_checkpoints(folder: str) -> List[str]:
    """The ``epoch_N.pth`` and ``iter_N.pth`` files in ``folder``, highest number first (an
    ``epoch_N`` before an ``iter_N`` of the same number): what a run resumes from when its
    record of the latest checkpoint is missing."""
    found = [(int(match.group(2)), match.group(1) == 'epoch', osp.join(folder, name))
             for name in (os.listdir(folder) if osp.isdir(folder) else [])
             for match in [NUMBERED.fullmatch(name)] if match]
    return [path for _, _, path in sorted(found, reverse=True)]


def set_aside(path: str) -> str:
    """Rename an unreadable checkpoint to ``<path>.unreadable``, so a resumed run that writes
    ``path`` again does not overwrite it; return the words that say so ('' if there is no file)."""
    if not osp.isfile(path) or osp.islink(path):
        return ''
    os.replace(path, path + '.unreadable')
    return f' (kept as {path}.unreadable)'


def _not_a_checkpoint(filename: str) -> Optional[str]:
    """Why ``filename`` cannot be a PyTorch checkpoint, judged from its first bytes, or None.
    torch.save writes a zip archive (``PK``); older files are a pickle (``0x80``)."""
    with open(filename, 'rb') as f:
        head = f.read(4)
    if head.startswith(b'PK') or head.startswith(b'\x80'):
        return None
    if filename.endswith('.py'):
        return 'it is a Python file (a config?), not a checkpoint'
    return f'it starts with {head!r}, not like a file written by torch.save'


def load_checkpoint_file(filename: str, map_location='cpu', trusted: bool = False,
                         mmap: bool = False) -> dict:
    """Read a checkpoint with ``weights_only=True`` (``trusted=True``: any pickle; only for files
    from a trusted source; MMEngine's and MMCV's own objects are read without importing them, see
    ``mmengine_pickle.py``). ``mmap=True`` maps the tensors' bytes instead of reading them, for a
    caller that wants only the small entries. Any failure is a ``CheckpointError`` naming the file
    and the reason."""
    if osp.isdir(filename):
        raise CheckpointError(f'{filename!r} is a directory, not a checkpoint file: name a file in '
                              'it, or resume=True (`--resume` without a path) to resume from the '
                              "latest checkpoint of the run's work_dir")
    if not osp.isfile(filename):
        raise CheckpointNotFoundError(f'checkpoint file {filename!r} does not exist')
    why_not = _not_a_checkpoint(filename)
    if why_not is not None:
        raise CheckpointError(f'cannot read checkpoint {filename!r}: {why_not}')
    try:
        if trusted:
            checkpoint = mmengine_pickle.adopt(torch.load(
                filename, map_location=map_location, weights_only=False, mmap=mmap,
                pickle_module=mmengine_pickle))
        else:
            checkpoint = torch.load(filename, map_location=map_location, weights_only=True,
                                    mmap=mmap)
    except pickle.UnpicklingError as e:
        needed = re.search(r'Unsupported global: GLOBAL (\S+)', str(e))
        if needed is None or trusted:
            raise CheckpointError(f'cannot read checkpoint {filename!r}: {e}') from e
        raise UntrustedCheckpointError(
            f'checkpoint {filename!r} needs arbitrary unpickling (it holds a {needed.group(1)} '
            'object, as checkpoints written by MMEngine do), which can run code from the file. '
            'Only if you trust the file, load it with load_from=dict(path=..., trusted=True) '
            '(or `minimm train/test --trust-checkpoint`).') from None
    except ModuleNotFoundError as e:  # only a trusted load imports modules
        raise CheckpointError(f'cannot read checkpoint {filename!r}: it holds objects of the '
                              f'module {e.name!r}, which is not installed') from e
    except Exception as e:
        raise CheckpointError(f'cannot read checkpoint {filename!r} (truncated or corrupt?): '
                              f'{type(e).__name__}: {e}') from e
    if not isinstance(checkpoint, dict):
        raise CheckpointError(f'no state dict found in checkpoint file {filename!r}')
    return checkpoint


def weights_to_cpu(state_dict: dict) -> OrderedDict:
    """A copy of ``state_dict`` with every tensor on the CPU (so a GPU run's file loads anywhere),
    keeping its ``_metadata`` (the module versions). A shard of a sharded model (a ``DTensor``)
    stays where it is: ``minimm/sharded_checkpoint.py`` writes it, each rank its own."""
    cpu = OrderedDict((k, v.detach() if is_dtensor(v) else v.detach().cpu())
                      for k, v in state_dict.items())
    cpu._metadata = getattr(state_dict, '_metadata', OrderedDict())
    return cpu


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model inside a wrapper: DistributedDataParallel, DataParallel, or any class registered
    in ``MODEL_WRAPPERS`` or a registry below it (MMEngine's ``is_model_wrapper``, which this
    floor may not import)."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    from .registry import MODEL_WRAPPERS
    from .registry.lookup import walk
    wrappers = (DataParallel, DistributedDataParallel,
                *(cls for node in walk(MODEL_WRAPPERS) for cls in node.module_dict.values()))
    return model.module if isinstance(model, wrappers) else model


def _some(keys) -> str:
    keys = list(keys)
    return ', '.join(keys[:3]) + (', ...' if len(keys) > 3 else '') if keys else 'none'


def _shape(tensor) -> str:
    return str(list(getattr(tensor, 'shape', ())))


def check_fit(module: nn.Module, state_dict: dict, filename: str, revise_keys=(),
              purpose: str = 'load', other_shapes: bool = False, keys: bool = True) -> None:
    """Raise a ValueError, before anything is loaded, when ``state_dict`` (its keys renamed by
    ``revise_keys``) cannot stand for ``module``'s weights:

    * no key names one of the module's weights (another model's file, a dict of other things);
    * a weight it holds has another shape than the module's (the first few are named, with both
      shapes): a model tested with its random weights there gives a random number. Unless
      ``other_shapes`` (``load_from`` to fine-tune: MMEngine skips them with a warning, so a
      checkpoint with another head starts a new task);
    * a floating weight holds NaN or inf (named, with the count): nothing useful runs from it;
    * ``purpose='resume'`` and any weight of the module is missing: a partly loaded model cannot
      go on training as before. (Testing part of a model is MMEngine's way, which its tests
      expect: the load warns then, with the keys.)

    ``purpose`` ('load', 'test', 'val', 'resume') is the verb of the message. ``keys=False``
    checks only the values (shapes, NaN), for a checkpoint whose keys hooks may still rename."""
    def revised(keys_and_values):  # both sides: a wrapper of one's own adds 'module.' too
        renamed = {}
        for key, value in keys_and_values:
            for pattern, replacement in revise_keys:
                key = re.sub(pattern, replacement, key)
            renamed[key] = value
        return renamed

    own = revised((key, value) for key, value in unwrap_model(module).state_dict().items()
                  if 'num_batches_tracked' not in key)
    theirs = revised(state_dict.items())
    name = type(unwrap_model(module)).__name__
    if keys and own and not set(own) & set(theirs):
        raise ValueError(f'checkpoint {filename!r} holds none of the weights of the model '
                         f'({name}): none of its keys ({_some(theirs)}) names a weight of the '
                         f'model ({_some(own)}). Is it another model\'s file?')
    resized = [f'{key} {_shape(theirs[key])} (model: {_shape(value)})'
               for key, value in own.items() if key in theirs and
               getattr(theirs[key], 'shape', None) != value.shape]
    if resized and not other_shapes:
        raise ValueError(f'cannot {purpose} from checkpoint {filename!r}: {len(resized)} of its '
                         f'weights have another shape than in the model ({name}): '
                         f'{_some(resized)}; give a checkpoint of this model')
    broken = [f'{key} ({int((~value.isfinite()).sum())} of {value.numel()})'
              for key, value in theirs.items() if isinstance(value, torch.Tensor) and
              value.is_floating_point() and not bool(value.isfinite().all())]
    if broken:
        raise ValueError(f'cannot {purpose} from checkpoint {filename!r}: {len(broken)} of its '
                         f'tensors hold NaN or inf values: {_some(broken)}; give a checkpoint '
                         'written before training diverged')
    lacking = [key for key in own if key not in theirs]
    if keys and purpose == 'resume' and lacking:
        raise ValueError(f'cannot resume from checkpoint {filename!r}: {len(lacking)} of the '
                         f'{len(own)} weights of the model ({name}) are missing from it '
                         f'({_some(lacking)}); to resume, give a checkpoint of this model '
                         '(load_from starts from part of another model\'s weights)')


def load_what_fits(module: nn.Module, state_dict: dict, what: str = 'model') -> Optional[str]:
    """Load ``state_dict`` into ``module`` module by module, skipping what does not fit; return
    the report of unexpected, missing and mismatched keys (``None`` when all matched).

    Module by module, as ``nn.Module.load_state_dict`` does, so that each module reads its own
    ``_metadata`` version (to convert an old checkpoint's keys) and its load post-hooks may drop
    keys from the report. A wrapper anywhere in the model is looked through. Missing
    ``num_batches_tracked`` buffers are not reported (old checkpoints lack them).
    """
    metadata = getattr(state_dict, '_metadata', None)
    state_dict = OrderedDict(state_dict)  # _load_from_state_dict may rewrite keys: copy
    missing: List[str] = []
    unexpected: List[str] = []
    errors: List[str] = []

    def load(mod: nn.Module, prefix: str) -> None:
        mod = unwrap_model(mod)
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        mod._load_from_state_dict(state_dict, prefix, local_metadata, True, missing, unexpected,
                                  errors)
        for name, child in mod._modules.items():
            if child is not None:
                load(child, f'{prefix}{name}.')
        report = _IncompatibleKeys(missing, unexpected)
        for hook in mod._load_state_dict_post_hooks.values():
            hook(mod, report)  # may remove keys from the two lists

    load(module, '')
    missing = [key for key in missing if 'num_batches_tracked' not in key]
    lines = ([f'unexpected key in source state_dict: {", ".join(unexpected)}'] * bool(unexpected)
             + [f'missing keys in source state_dict: {", ".join(missing)}'] * bool(missing)
             + errors)  # torch's "size mismatch for ..." lines
    if not lines:
        return None
    return '\n'.join([f'The {what} and loaded state dict do not match exactly'] + lines)


def load_state_dict(module: nn.Module, state_dict: dict, strict: bool = False,
                    logger=None, what: str = 'model') -> None:
    """Load ``state_dict`` into ``module`` (see ``load_what_fits``); a mismatch is a RuntimeError
    with ``strict=True``, else a warning on ``logger`` (if given). For hooks, which may not
    import the runner; code written for MMEngine uses ``minimm.runner.checkpoint``'s. ``what``
    names the module in the report (EMAHook loads the same checkpoint into its averaged copy, and
    the two reports must be told apart)."""
    message = load_what_fits(module, state_dict, what)
    if message is not None and strict:
        raise RuntimeError(message)
    if message is not None and logger is not None:
        logger.warning(message)
