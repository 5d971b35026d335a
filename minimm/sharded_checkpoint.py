"""Sharded checkpoints: every process writes its own shards, through torch's distributed checkpoint.

A model sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``) holds no whole weight anywhere:
each parameter is a ``DTensor``, and each rank holds a slice of it (its *shard*); the optimizer's
state and the EMA copies are sharded the same way. Gathering all of that on one rank to write one
file would need the whole model's memory there, the very thing sharding avoids. So a checkpoint
that holds DTensors is written by every rank, each writing its own shards, with torch's
distributed checkpoint (DCP, ``torch.distributed.checkpoint``), into a folder named as the file
would have been (``epoch_3.pth/``)::

    epoch_3.pth/
        __0_0.distcp, __1_0.distcp   one file of shards per rank (DCP's)
        .metadata                    where each tensor's pieces are (DCP's; written by rank 0)
        checkpoint.pth               the rest, written by rank 0 as a plain checkpoint file

``checkpoint.pth`` is the checkpoint dict as the Runner built it, with each DTensor replaced by a
small *marker* (its key in the DCP part, global shape, dtype and placements). Everything that is
not sharded (the counters, the MessageHub, the schedulers, BatchNorm's statistics, the EMA's step
counter) stays in it, as in a single-file checkpoint, readable with ``weights_only=True``.

**Written atomically.** The ranks write into a hidden folder beside the target
(``.epoch_3.pth.sharded.tmp``); once all of them are done (a barrier), rank 0 writes
``checkpoint.pth`` last and renames the folder into place, and only then does CheckpointHook
update ``last_checkpoint``. A process killed during the save leaves the hidden folder (cleared by
the next save of that name) and the previous checkpoint untouched. Replacing a folder of the same
name (CheckpointHook re-saves the latest checkpoint after a new best) takes two renames: the old
folder is moved aside, then the new one in.

**Read on another number of processes.** DCP records each shard's place in the whole tensor, so a
rank can read any slice of it: a run on 4 processes reads what 2 wrote, each rank asking for its
own quarter (``load_sharded_checkpoint``). A run whose model is not sharded (one process, DDP,
``minimm test``) reads every tensor whole, without a process group (``read_checkpoint``).

**One file, when it must be one.** ``save_full_checkpoint`` gathers every shard (a collective) and
writes a single plain file on rank 0, which ``torch.load(weights_only=True)`` reads: what a
FlexibleRunner with ``FSDPStrategy(state_dict_cfg='full')`` saves. Its ``meta['shard_layout']``
names the entries that were shards, so a sharded run resumes from it, each rank cutting its own
part again (``shard_whole``). On the Runner, ``CheckpointHook(published_keys=[...])`` and
``EMAOnlyCheckpointHook`` write whole files from sharded checkpoints (rank 0 reads the folder
whole), to deploy or share; and a sharded model starts from any whole file (``load_from``: its
weights are laid out like the model's, ``shard_like``).

**Reading runs no code**, as for a checkpoint file: DCP writes its ``.metadata`` with ``pickle``
and would read it back with ``pickle.load``, which runs whatever the file names. minimm reads it
with an unpickler that builds only DCP's own record classes, sizes, dtypes and paths, and refuses
anything else (``trusted=True`` lifts that, as for files); the shards themselves are read by DCP
with ``weights_only=True``, and ``checkpoint.pth`` like any checkpoint file.
"""
import os
import os.path as osp
import pickle
import re
import shutil
import warnings
from typing import Callable, Dict, Iterable, Optional

import torch

from .checkpoint import (CheckpointError, UntrustedCheckpointError, load_checkpoint_file,
                         save_checkpoint, unwrap_model)
from .dist import barrier, is_main_process
from .dist.utils import is_dtensor
from .plain_data import to_plain_data

PLAIN_PART = 'checkpoint.pth'
LAYOUT = 'shard_layout'  # in a whole file's meta: the entries that were shards, and how
MARKER = '__shard__'  # the key that makes a dict a marker: its value is the key in the DCP part


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` has sharded (DTensor) parameters, so its checkpoints are sharded."""
    return any(is_dtensor(p) for p in model.parameters())


def _mesh_of(model: torch.nn.Module):
    """The device mesh a sharded ``model``'s parameters are spread over."""
    return next(p.device_mesh for p in model.parameters() if is_dtensor(p))


def saves_whole_files(runner) -> bool:
    """Whether a run of a sharded model asks for whole checkpoint files:
    ``FSDPStrategy(state_dict_cfg='full')`` (or MMEngine's dict with
    ``state_dict_type='FULL_STATE_DICT'``) on a FlexibleRunner. Otherwise each rank saves its
    shards (``'local'``, the default, and the Runner's way)."""
    cfg = getattr(getattr(runner, 'strategy', None), 'state_dict_cfg', 'local')
    return (cfg.get('state_dict_type') if isinstance(cfg, dict) else cfg) in (
        'full', 'FULL_STATE_DICT')


def is_sharded_checkpoint(path: str) -> bool:
    """Whether ``path`` is a complete sharded checkpoint folder (its plain part is written last)."""
    return osp.isdir(path) and osp.isfile(osp.join(path, PLAIN_PART))


def _placement_words(tensor) -> list:
    from torch.distributed.tensor import Replicate, Shard
    words = []
    for placement in tensor.placements:
        if isinstance(placement, Shard):
            words.append(f'Shard({placement.dim})')
        elif isinstance(placement, Replicate):
            words.append('Replicate()')
        else:  # Partial: a sum still to be reduced, not a value
            raise ValueError(f'cannot save a DTensor with placements {tensor.placements}: only '
                             'Shard and Replicate hold values; redistribute it first')
    return words


def _placements(words: list) -> list:
    from torch.distributed.tensor import Replicate, Shard
    return [Replicate() if word == 'Replicate()' else Shard(int(word[6:-1])) for word in words]


def _shard_or_marker(value) -> bool:
    return is_dtensor(value) or isinstance(value, dict)


def _map(value, key: str, fn: Callable, is_leaf: Callable = _shard_or_marker):
    """``value`` rebuilt with ``fn(key, leaf)`` in place of each leaf (by default each DTensor
    or marker), keys joined by ``/``. Containers are rebuilt (an OrderedDict keeps its
    ``_metadata``)."""
    if isinstance(value, dict) and MARKER not in value:
        rebuilt = type(value)((k, _map(v, f'{key}/{k}' if key else str(k), fn, is_leaf))
                              for k, v in value.items())
        if hasattr(value, '_metadata'):
            rebuilt._metadata = value._metadata  # a state dict's module versions
        return rebuilt
    if type(value) in (list, tuple):
        return type(value)(_map(v, f'{key}/{i}', fn, is_leaf) for i, v in enumerate(value))
    return fn(key, value) if is_leaf(value) else value


def _split(checkpoint: dict):
    """``(plain, shards)``: ``checkpoint`` with a marker for each DTensor; the DTensors by key."""
    shards = {}

    def mark(key, tensor):
        shards[key] = tensor
        return {MARKER: key, 'shape': tensor.shape, 'dtype': tensor.dtype,
                'placements': _placement_words(tensor)}
    return _map(checkpoint, '', mark), shards


def _remove_tree(path: str) -> None:
    if osp.isdir(path) and not osp.islink(path):
        shutil.rmtree(path)
    elif osp.lexists(path):
        os.remove(path)


def _move_into_place(tmp: str, filename: str) -> None:
    """Rename the finished folder ``tmp`` to ``filename`` (rank 0), moving an earlier checkpoint
    of that name aside first and deleting it after."""
    aside = None
    if osp.lexists(filename):
        if not (osp.isfile(filename) or is_sharded_checkpoint(filename)):
            raise FileExistsError(f'{filename} exists and is not a checkpoint: not replaced')
        aside = osp.join(osp.dirname(filename), f'.{osp.basename(filename)}.replaced.tmp')
        _remove_tree(aside)
        os.replace(filename, aside)
    os.replace(tmp, filename)
    if os.name == 'posix':  # the renames survive a power cut
        folder = os.open(osp.dirname(filename), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    if aside is not None:
        _remove_tree(aside)


def save_sharded_checkpoint(checkpoint: dict, filename: str) -> None:
    """Write ``checkpoint`` (which holds DTensors) as the folder ``filename``; every rank calls
    it, at the same point, with its own shards."""
    import torch.distributed.checkpoint as dcp
    plain, shards = _split(checkpoint)
    to_plain_data(plain, where='checkpoint')  # a bad value fails on every rank, before any write
    filename = osp.abspath(filename)
    tmp = osp.join(osp.dirname(filename), f'.{osp.basename(filename)}.sharded.tmp')
    if is_main_process():
        _remove_tree(tmp)  # left by a save that was killed
        os.makedirs(tmp)
    barrier()
    dcp.save(shards, storage_writer=dcp.FileSystemWriter(tmp))  # each rank writes its shards
    if is_main_process():
        save_checkpoint(plain, osp.join(tmp, PLAIN_PART))
        _move_into_place(tmp, filename)
    barrier()  # no rank goes on (CheckpointHook then names it in last_checkpoint) before it is in


def save_full_checkpoint(checkpoint: dict, filename: str) -> None:
    """Write ``checkpoint`` as one plain file on rank 0, each DTensor gathered whole. Every rank
    calls it (the gathering is a collective, and each rank holds a whole copy for a moment).
    ``meta['shard_layout']`` records which entries were shards, so a resumed run can shard them
    again (``shard_whole``)."""
    layout = {}

    def gather(key, tensor):
        layout[key] = _placement_words(tensor)
        return tensor.full_tensor().cpu()
    whole = _map(checkpoint, '', gather)
    if isinstance(whole.get('meta'), dict):
        whole['meta'] = dict(whole['meta'], **{LAYOUT: layout})
    if is_main_process():
        save_checkpoint(whole, filename)
    barrier()


# What DCP's .metadata names besides its own record classes (torch.distributed.checkpoint.metadata).
_METADATA_GLOBALS = {('torch', 'Size'), ('torch.serialization', '_get_layout'),
                     ('torch.distributed.checkpoint.filesystem', '_StorageInfo'),
                     ('pathlib', 'PosixPath'), ('pathlib', 'WindowsPath'),
                     ('collections', 'OrderedDict')}


class _RecordsOnly(pickle.Unpickler):
    """Unpickles DCP's metadata: its record classes, torch sizes, dtypes and paths, nothing else."""

    def find_class(self, module, name):
        records = module == 'torch.distributed.checkpoint.metadata'
        if (module, name) in _METADATA_GLOBALS or records or module == 'torch':
            found = super().find_class(module, name)
            if (module, name) in _METADATA_GLOBALS or isinstance(found, torch.dtype) or (
                    records and isinstance(found, type)):
                return found
        raise pickle.UnpicklingError(f'{module}.{name}')


def _reader(path: str, trusted: bool):
    """DCP's reader of the folder ``path``, reading its ``.metadata`` with ``_RecordsOnly``
    unless ``trusted``."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class Reader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            if trusted:
                return super().read_metadata(*args, **kwargs)
            rank = kwargs.get('rank')
            name = '.metadata' if rank is None else f'__{rank}.metadata'
            with open(osp.join(path, name), 'rb') as f:
                try:
                    metadata = _RecordsOnly(f).load()
                except pickle.UnpicklingError as e:
                    raise UntrustedCheckpointError(
                        f'the shard index of {path!r} ({name}) names {e}, which reading it would '
                        'run; only if you trust the checkpoint, load it with trusted=True (or '
                        '`minimm train/test --trust-checkpoint`)') from None
            if getattr(metadata, 'storage_meta', None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata
    return Reader(path)


def _fill(plain: dict, path: str, make: Callable, no_dist: bool, trusted: bool) -> dict:
    """``plain`` with each marker replaced by a tensor ``make(marker)`` that DCP fills from the
    folder ``path``."""
    import torch.distributed.checkpoint as dcp
    templates: Dict[str, torch.Tensor] = {}

    def template(key, marker):
        templates[marker[MARKER]] = make(marker)
        return templates[marker[MARKER]]
    filled = _map(plain, '', template)
    if templates:
        reader = _reader(path, trusted)
        reader.read_metadata()  # refused here, on every rank alike, before any collective
        try:
            with warnings.catch_warnings():  # "assuming the intent is to load in a single process"
                warnings.filterwarnings('ignore', message='torch.distributed is disabled')
                dcp.load(templates, storage_reader=reader, no_dist=no_dist)
        except Exception as e:
            raise CheckpointError(f'cannot read the shards of checkpoint {path!r}: '
                                  f'{type(e).__name__}: {e}') from e
    return filled


def read_checkpoint(path: str, map_location='cpu', trusted: bool = False,
                    keys: Optional[Iterable[str]] = None, mmap: bool = False) -> dict:
    """A checkpoint file, or a sharded checkpoint folder read whole in this process (no process
    group needed: every tensor is read in full, onto the CPU). ``keys``: only these top-level
    entries (a folder's other shards are not read). ``mmap``: a file's tensors are mapped."""
    sharded = is_sharded_checkpoint(path)
    checkpoint = load_checkpoint_file(osp.join(path, PLAIN_PART) if sharded else path,
                                      map_location, trusted, mmap=mmap)
    if keys is not None:
        checkpoint = {key: checkpoint[key] for key in keys if key in checkpoint}
    if not sharded:
        return checkpoint
    return _fill(checkpoint, path, lambda m: torch.empty(m['shape'], dtype=m['dtype']),
                 no_dist=True, trusted=trusted)


def load_sharded_checkpoint(path: str, model: torch.nn.Module, trusted: bool = False) -> dict:
    """A sharded checkpoint folder read for a sharded ``model``: each sharded tensor comes back as
    a DTensor over the model's device mesh, with the placements it was saved with, and each rank
    reads only its own part of it, whatever the number of processes that wrote it. Every rank
    calls it."""
    from torch.distributed.tensor import empty as empty_dtensor
    mesh = _mesh_of(model)
    plain = load_checkpoint_file(osp.join(path, PLAIN_PART), 'cpu', trusted)

    def make(marker):
        if len(marker['placements']) != mesh.ndim:
            raise CheckpointError(
                f'checkpoint {path!r}: {marker[MARKER]} was sharded as {marker["placements"]}, '
                f'over a {len(marker["placements"])}-D mesh, but this run\'s mesh is {mesh.ndim}-D')
        return empty_dtensor(marker['shape'], dtype=marker['dtype'], device_mesh=mesh,
                             placements=_placements(marker['placements']))
    return _fill(plain, path, make, no_dist=False, trusted=trusted)


def shard_like(state_dict: dict, model: torch.nn.Module, revise_keys=()) -> dict:
    """``state_dict`` of whole tensors (a file's: ``load_from`` a consolidated or DDP checkpoint)
    with each weight that the sharded ``model`` holds as a DTensor replaced by a DTensor laid out
    like it; each rank keeps its own rows of the whole tensor it read, with no communication.
    Keys are matched after ``revise_keys``, as the load will rename them."""
    from torch.distributed.tensor import distribute_tensor
    live = {key: value for key, value in unwrap_model(model).state_dict().items()
            if is_dtensor(value)}
    laid_out = type(state_dict)()
    for key, value in state_dict.items():
        name = key
        for pattern, replacement in revise_keys:
            name = re.sub(pattern, replacement, name)
        like = live.get(name)
        if like is not None and type(value) is torch.Tensor and value.shape == like.shape:
            value = distribute_tensor(value, like.device_mesh, like.placements, src_data_rank=None)
        laid_out[key] = value
    if hasattr(state_dict, '_metadata'):
        laid_out._metadata = state_dict._metadata
    return laid_out


def shard_whole(checkpoint: dict, model: torch.nn.Module, filename: str, revise_keys=(),
                resuming: bool = False) -> dict:
    """A whole file's ``checkpoint``, for the sharded ``model``. Written by
    ``save_full_checkpoint`` (its ``meta['shard_layout']``): every entry that was a shard is
    sharded again, as it was, over the model's mesh. Any other file (a DDP run's, a published
    one) holds no such record: its ``state_dict`` is laid out like the model's weights
    (``shard_like``), enough to start from (``load_from``), not to resume (``resuming``: a
    ValueError)."""
    from torch.distributed.tensor import distribute_tensor
    layout = (checkpoint.get('meta') or {}).get(LAYOUT)
    if layout is None:
        if resuming:
            raise ValueError(f'cannot resume the sharded model from the file {filename!r}: it '
                             'does not say which of its tensors were shards (only a sharded '
                             "checkpoint, or FSDPStrategy(state_dict_cfg='full')'s file, does); "
                             'start from its weights with load_from')
        if 'state_dict' in checkpoint:
            checkpoint['state_dict'] = shard_like(checkpoint['state_dict'], model, revise_keys)
        return checkpoint
    mesh = _mesh_of(model)

    def place(key, tensor):
        if key not in layout:
            return tensor
        return distribute_tensor(tensor, mesh, _placements(layout[key]), src_data_rank=None)
    return _map(checkpoint, '', place, lambda value: isinstance(value, torch.Tensor))
