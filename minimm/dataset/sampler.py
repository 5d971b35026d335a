"""Samplers: which dataset indices each rank reads, in which order.

A sampler yields dataset *indices*; the DataLoader turns them into batches. In a distributed run
every rank builds the same sampler with the same seed, computes the same (shuffled) index list,
and keeps every ``world_size``-th entry starting at its own rank — so ranks never overlap and
together they cover the dataset once per epoch.

* :class:`DefaultSampler` — one finite pass per epoch; reshuffles each epoch because the shuffle
  is seeded with ``seed + epoch`` (``DistSamplerSeedHook`` calls :meth:`DefaultSampler.set_epoch`).
* :class:`InfiniteSampler` — an endless stream of permutations, for iteration-based training.

Both can start part-way (``set_start_index``): a resumed iteration-based run moves the sampler past
the samples it already trained on instead of loading them and throwing them away
(``start_dataloader_at``, which the train loop calls; minimm's addition: MMEngine loads every
skipped batch).

Both reproduce MMEngine 0.10's index sequences exactly for the same seed (``torch.randperm`` with a
``torch.Generator``), so a run here and one in MMEngine see the same samples in the same order.
Left out compared with MMEngine: process groups other than the default one.
"""
import itertools
import math
from typing import Iterator, Optional, Sized

import torch
from torch.utils.data import BatchSampler, Sampler

from minimm.dist import get_dist_info
from minimm.randomness import sync_random_seed
from minimm.registry import DATA_SAMPLERS

__all__ = ['DefaultSampler', 'InfiniteSampler']


def _check_dataset(dataset: Sized) -> int:
    if not hasattr(dataset, '__len__'):
        raise TypeError(f'a sampler needs a dataset with __len__, but got {type(dataset).__name__}')
    if len(dataset) == 0:
        raise ValueError('a sampler needs a non-empty dataset, but the dataset has length 0')
    return len(dataset)


@DATA_SAMPLERS.register_module()
class DefaultSampler(Sampler):
    """Finite sampler for epoch-based training, distributed-aware.

    Args:
        dataset: anything with ``__len__``.
        shuffle: shuffle the indices (with a generator seeded ``seed + epoch``).
        seed: shuffle seed; ``None`` draws one with :func:`sync_random_seed`, shared by all ranks.
        round_up: pad the index list by repeating it from the start so that every rank gets the
            same number of samples (``ceil(len / world_size)``). Without it the last ranks get one
            sample fewer and the dataset is covered exactly once.
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: Optional[int] = None,
                 round_up: bool = True):
        size = _check_dataset(dataset)
        self.rank, self.world_size = get_dist_info()
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = sync_random_seed() if seed is None else seed
        self.epoch = 0
        self.round_up = round_up
        if round_up:
            self.num_samples = math.ceil(size / self.world_size)
            self.total_size = self.num_samples * self.world_size
        else:
            self.num_samples = math.ceil((size - self.rank) / self.world_size)
            self.total_size = size
        self._start_index = 0

    def __iter__(self) -> Iterator[int]:
        size = len(self.dataset)
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(size, generator=generator).tolist()
        else:
            indices = list(range(size))
        if self.round_up:
            # Repeat the whole list enough times, then cut: also right when world_size > size.
            indices = (indices * (self.total_size // size + 1))[:self.total_size]
        indices = indices[self.rank:self.total_size:self.world_size]
        start, self._start_index = self._start_index, 0  # only this pass starts part-way
        return iter(indices[start:])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle seed, so each epoch has its own order."""
        self.epoch = epoch

    def set_start_index(self, index: int) -> None:
        """Let the next pass begin at position ``index`` of this rank's indices, as if the ones
        before it had been drawn already; the passes after it are whole again."""
        if not 0 <= index <= self.num_samples:
            raise ValueError(f'start index must be in [0, {self.num_samples}] (the samples of '
                             f'this rank), but got {index}')
        self._start_index = index


@DATA_SAMPLERS.register_module()
class InfiniteSampler(Sampler):
    """Endless sampler for iteration-based training, distributed-aware.

    One generator seeded with ``seed`` produces permutation after permutation; the concatenated
    stream is sliced ``[rank::world_size]``. There are no epochs, so :meth:`set_epoch` does nothing.
    As in MMEngine the stream is created once and shared by every ``iter(sampler)``: a second
    iterator continues where the first one stopped instead of starting over. Also as in MMEngine,
    an iterator that is discarded (garbage-collected) closes the shared stream — ``yield from``
    passes the close on — so the sampler yields nothing afterwards; iteration-based training keeps
    one iterator alive for the whole run, which is what this design assumes.

    Args:
        dataset: anything with ``__len__``.
        shuffle: shuffle each pass; otherwise ``0, 1, ..., len-1`` repeated.
        seed: shuffle seed; ``None`` draws one with :func:`sync_random_seed`, shared by all ranks.
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: Optional[int] = None):
        self.size = _check_dataset(dataset)
        self.rank, self.world_size = get_dist_info()
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = sync_random_seed() if seed is None else seed
        self.indices = self._indices_of_rank()

    def _infinite_indices(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed)
        while True:
            if self.shuffle:
                yield from torch.randperm(self.size, generator=generator).tolist()
            else:
                yield from range(self.size)

    def _indices_of_rank(self, start: int = 0) -> Iterator[int]:
        # The skipped permutations are still drawn: the generator must be where it would be.
        first = self.rank + start * self.world_size
        yield from itertools.islice(self._infinite_indices(), first, None, self.world_size)

    def __iter__(self) -> Iterator[int]:
        yield from self.indices

    def __len__(self) -> int:
        """The dataset length (what MMEngine reports; the stream itself never ends)."""
        return self.size

    def set_epoch(self, epoch: int) -> None:
        """No epochs in an infinite stream: kept so ``DistSamplerSeedHook`` can call it."""

    def set_start_index(self, index: int) -> None:
        """Start the shared stream over, at position ``index`` of this rank's indices: what an
        uninterrupted stream yields after its first ``index`` indices."""
        if index < 0:
            raise ValueError(f'start index must be >= 0, but got {index}')
        self.indices = self._indices_of_rank(index)


def start_dataloader_at(dataloader, num_batches: int) -> Optional[int]:
    """Move ``dataloader``'s sampler past its first ``num_batches`` batches without loading them;
    return the epoch it is then in, or ``None`` when it cannot (the caller then draws and drops
    the batches, as MMEngine does). How a resumed iteration-based run skips what it trained on.

    It can when the sampler starts part-way (``set_start_index``: DefaultSampler and
    InfiniteSampler) and the batch sampler is a plain ``BatchSampler``, whose batches are
    consecutive runs of ``batch_size`` indices. Any other (torch's RandomSampler, a user's own)
    cannot."""
    sampler = dataloader.sampler
    plain_batches = type(dataloader.batch_sampler) is BatchSampler
    if not (hasattr(sampler, 'set_start_index') and plain_batches):
        return None
    if isinstance(sampler, InfiniteSampler):  # one endless stream: it never wraps around
        epochs, batches = 0, num_batches
    else:
        epochs, batches = divmod(num_batches, len(dataloader))
    if epochs:
        sampler.set_epoch(epochs)
    sampler.set_start_index(batches * dataloader.batch_size)
    return epochs
