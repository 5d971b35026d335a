"""Samplers, collate functions, the dataloader builder and the digits data.

The literal index lists below were recorded from MMEngine 0.10.7's samplers with the same
arguments: minimm must reproduce them exactly, so runs here and there see the same batches.
"""
import collections
import itertools

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import minimm.dataset.sampler as sampler_module
from minimm.dataset import (DefaultSampler, DigitsDataset, InfiniteSampler, build_dataloader,
                            default_collate, pseudo_collate, worker_init_fn)
from minimm.randomness import set_random_seed, sync_random_seed
from minimm.registry import DATA_SAMPLERS, DATASETS, FUNCTIONS

from dist_utils import run_distributed


@pytest.fixture
def ranks(monkeypatch):
    """Build a sampler as if running on ``rank`` of ``world`` processes."""

    def build(rank, world, cls, *args, **kwargs):
        monkeypatch.setattr(sampler_module, 'get_dist_info', lambda: (rank, world))
        return cls(*args, **kwargs)

    return build


# ----------------------------------------------------------------------------- samplers
def test_samplers_are_registered():
    assert DATA_SAMPLERS.get('DefaultSampler') is DefaultSampler
    assert DATA_SAMPLERS.get('InfiniteSampler') is InfiniteSampler


def test_default_sampler_single_rank_matches_mmengine():
    sampler = DefaultSampler(list(range(10)), seed=0)
    assert list(sampler) == [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
    assert list(sampler) == [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]  # same epoch, same order
    assert len(sampler) == 10


def test_set_epoch_changes_the_order_reproducibly():
    sampler = DefaultSampler(list(range(10)), seed=0)
    sampler.set_epoch(1)
    assert list(sampler) == [5, 6, 1, 2, 0, 8, 9, 3, 7, 4]
    # The shuffle seed is seed + epoch: epoch 1 of seed 0 is epoch 0 of seed 1.
    assert list(sampler) == list(DefaultSampler(list(range(10)), seed=1))


def test_default_sampler_without_shuffle_is_in_order():
    assert list(DefaultSampler(list(range(5)), shuffle=False)) == [0, 1, 2, 3, 4]


def test_default_sampler_two_ranks_round_up(ranks):
    rank0 = ranks(0, 2, DefaultSampler, list(range(7)), seed=0)
    rank1 = ranks(1, 2, DefaultSampler, list(range(7)), seed=0)
    assert list(rank0) == [4, 5, 2, 1]
    assert list(rank1) == [0, 3, 6, 4]  # padded with the first index of the permutation
    assert len(rank0) == len(rank1) == 4
    assert sorted(list(rank0) + list(rank1)) == [0, 1, 2, 3, 4, 4, 5, 6]


def test_default_sampler_two_ranks_without_round_up(ranks):
    rank0 = ranks(0, 2, DefaultSampler, list(range(7)), seed=0, round_up=False)
    rank1 = ranks(1, 2, DefaultSampler, list(range(7)), seed=0, round_up=False)
    assert list(rank0) == [4, 5, 2, 1] and len(rank0) == 4
    assert list(rank1) == [0, 3, 6] and len(rank1) == 3
    assert sorted(list(rank0) + list(rank1)) == list(range(7))  # every sample exactly once


def test_default_sampler_more_ranks_than_samples(ranks):
    got = [list(ranks(r, 3, DefaultSampler, [10, 11], seed=0)) for r in range(3)]
    assert got == [[0], [1], [0]]


def test_default_sampler_seed_none_uses_numpy_draw():
    np.random.seed(3)
    expected_seed = np.random.randint(2**31)
    np.random.seed(3)
    sampler = DefaultSampler(list(range(20)))
    assert sampler.seed == expected_seed
    assert list(sampler) == list(DefaultSampler(list(range(20)), seed=int(expected_seed)))


def test_infinite_sampler_matches_mmengine():
    sampler = InfiniteSampler(list(range(5)), seed=0)
    assert list(itertools.islice(iter(sampler), 15)) == \
        [4, 0, 1, 3, 2, 3, 4, 0, 1, 2, 2, 4, 1, 3, 0]
    assert len(sampler) == 5


def test_infinite_sampler_two_ranks(ranks):
    rank0 = ranks(0, 2, InfiniteSampler, list(range(5)), seed=0)
    rank1 = ranks(1, 2, InfiniteSampler, list(range(5)), seed=0)
    assert list(itertools.islice(iter(rank0), 8)) == [4, 1, 2, 4, 1, 2, 1, 0]
    assert list(itertools.islice(iter(rank1), 8)) == [0, 3, 3, 0, 2, 4, 3, 1]


def test_infinite_sampler_one_shared_stream_and_set_epoch_is_a_no_op():
    sampler = InfiniteSampler(list(range(5)), shuffle=False, seed=0)
    sampler.set_epoch(7)
    it = iter(sampler)
    assert [next(it) for _ in range(7)] == [0, 1, 2, 3, 4, 0, 1]
    second = iter(sampler)
    assert [next(second), next(second)] == [2, 3]  # continues, does not restart
    # MMEngine's quirk, kept for identical sequences: a discarded iterator closes the stream.
    del it, second
    assert list(iter(sampler)) == []


def test_default_sampler_start_index_skips_the_first_indices_of_one_pass(ranks):
    for rank in (0, 1):
        whole = list(ranks(rank, 2, DefaultSampler, list(range(7)), seed=3))
        sampler = ranks(rank, 2, DefaultSampler, list(range(7)), seed=3)
        sampler.set_start_index(3)
        assert list(sampler) == whole[3:]
        assert list(sampler) == whole  # the next pass is whole again
    with pytest.raises(ValueError, match=r'start index must be in \[0, 4\].*got 5'):
        sampler.set_start_index(5)


def test_infinite_sampler_start_index_continues_the_stream_of_each_rank(ranks):
    for rank in (0, 1):
        stream = iter(ranks(rank, 2, InfiniteSampler, list(range(5)), seed=3))
        expected = [next(stream) for _ in range(20)][13:]  # past two permutations and a bit
        sampler = ranks(rank, 2, InfiniteSampler, list(range(5)), seed=3)
        sampler.set_start_index(13)
        assert list(itertools.islice(iter(sampler), 7)) == expected
    with pytest.raises(ValueError, match='must be >= 0'):
        sampler.set_start_index(-1)


@pytest.mark.parametrize('cls', [DefaultSampler, InfiniteSampler])
def test_sampler_rejects_empty_dataset(cls):
    with pytest.raises(ValueError, match='length 0'):
        cls([], seed=0)


# ----------------------------------------------------------------------------- randomness
def test_set_random_seed_seeds_every_generator():
    import random
    assert set_random_seed(123) == 123
    first = (random.random(), np.random.rand(), torch.rand(2))
    set_random_seed(123)
    second = (random.random(), np.random.rand(), torch.rand(2))
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])


def test_set_random_seed_none_and_diff_rank_seed(monkeypatch):
    np.random.seed(5)
    expected = int(np.random.randint(2**31))
    np.random.seed(5)
    assert set_random_seed(None) == expected
    import minimm.randomness as randomness
    monkeypatch.setattr(randomness, 'get_rank', lambda: 3)
    assert set_random_seed(10, diff_rank_seed=True) == 13


def test_set_random_seed_rejects_non_int():
    with pytest.raises(TypeError, match='seed must be an int'):
        set_random_seed('0')


def _sync_seed_worker(rank):
    np.random.seed(100 + rank)  # each rank would draw a different number on its own
    seed = sync_random_seed()
    indices = list(DefaultSampler(list(range(9))))  # seed None: must still agree across ranks
    return seed, indices


def test_sync_random_seed_broadcasts_rank0_seed(tmp_path):
    (seed0, idx0), (seed1, idx1) = run_distributed(_sync_seed_worker, tmp_path)
    np.random.seed(100)
    assert seed0 == seed1 == int(np.random.randint(2**31))
    # Both ranks shuffled with the same seed: together they cover all 9 samples, plus one pad.
    assert sorted(idx0 + idx1) == sorted(list(range(9)) + [idx0[0]])


def test_worker_init_fn_seed_formula():
    worker_init_fn(worker_id=1, num_workers=4, rank=2, seed=10)  # 4 * 2 + 1 + 10 = 19
    after_init = (np.random.rand(), torch.rand(1))
    set_random_seed(19)
    assert after_init[0] == np.random.rand() and torch.equal(after_init[1], torch.rand(1))


# ----------------------------------------------------------------------------- collate
def test_collate_functions_are_registered():
    assert FUNCTIONS.get('pseudo_collate') is pseudo_collate
    assert FUNCTIONS.get('default_collate') is default_collate


def test_pseudo_collate_transposes_without_stacking():
    a, b = torch.ones(2), torch.zeros(3)  # different shapes are fine: nothing is stacked
    batch = pseudo_collate([dict(inputs=a, label=1, name='x'), dict(inputs=b, label=2, name='y')])
    assert list(batch) == ['inputs', 'label', 'name']
    assert batch['inputs'][0] is a and batch['inputs'][1] is b
    assert batch['label'] == [1, 2] and batch['name'] == ['x', 'y']


def test_pseudo_collate_sequences_follow_mmengine():
    # A batch of tuples becomes a list of per-field tuples; a batch of lists keeps lists outside.
    assert pseudo_collate([(1, 'a'), (2, 'b')]) == [(1, 2), ('a', 'b')]
    assert pseudo_collate([[1, 2.0], [3, 4.0]]) == [(1, 3), (2.0, 4.0)]
    Pair = collections.namedtuple('Pair', 'x y')
    assert pseudo_collate([Pair(1, 2), Pair(3, 4)]) == Pair((1, 3), (2, 4))
    with pytest.raises(RuntimeError, match='equal size'):
        pseudo_collate([[1, 2], [3]])


def test_default_collate_stacks_leaves():
    batch = default_collate([dict(inputs=torch.ones(1, 8, 8), data_samples=torch.tensor(3)),
                             dict(inputs=torch.zeros(1, 8, 8), data_samples=torch.tensor(5))])
    assert batch['inputs'].shape == (2, 1, 8, 8)
    assert torch.equal(batch['data_samples'], torch.tensor([3, 5]))
    names, values = default_collate([('s', 1.5), ('t', 2.5)])
    assert names == ('s', 't')
    assert torch.equal(values, torch.tensor([1.5, 2.5], dtype=torch.float64))


def test_collate_rejects_empty_batch():
    with pytest.raises(ValueError, match='non-empty'):
        pseudo_collate([])


# ----------------------------------------------------------------------------- builder
class CountingDataset(Dataset):
    def __init__(self, size=11):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return dict(inputs=torch.full((2,), float(index)), data_samples=index)


@pytest.fixture(scope='module', autouse=True)
def _register_counting_dataset():
    DATASETS.register_module(module=CountingDataset, force=True)


def _indices(loader):
    return [int(x) for batch in loader for x in batch['data_samples']]


def test_build_dataloader_defaults_to_pseudo_collate_and_seeded_sampler():
    cfg = dict(dataset=dict(type='CountingDataset'), sampler=dict(type='DefaultSampler'),
               batch_size=4)
    snapshot = repr(cfg)
    loader = build_dataloader(cfg, seed=0)
    assert repr(cfg) == snapshot  # the caller's dict is not mutated
    assert isinstance(loader.sampler, DefaultSampler) and loader.sampler.seed == 0
    batch = next(iter(loader))
    assert isinstance(batch['inputs'], list) and isinstance(batch['data_samples'], list)
    assert _indices(loader) == list(DefaultSampler(CountingDataset(), seed=0))
    assert loader.worker_init_fn.keywords == dict(num_workers=0, rank=0, seed=0)


def test_build_dataloader_default_collate_and_workers():
    cfg = dict(dataset=dict(type='CountingDataset'),
               sampler=dict(type='DefaultSampler', shuffle=False),
               collate_fn=dict(type='default_collate'), batch_size=4, num_workers=2)
    loader = build_dataloader(cfg, seed=3)
    assert loader.num_workers == 2 and loader.worker_init_fn.keywords['num_workers'] == 2
    batches = list(loader)
    assert batches[0]['inputs'].shape == (4, 2)
    assert torch.equal(batches[-1]['data_samples'], torch.tensor([8, 9, 10]))


def test_build_dataloader_without_seed_and_with_objects():
    dataset = CountingDataset(5)
    sampler = DefaultSampler(dataset, shuffle=False)
    loader = build_dataloader(dict(dataset=dataset, sampler=sampler, batch_size=2,
                                   collate_fn=default_collate))
    assert loader.dataset is dataset and loader.sampler is sampler
    assert loader.worker_init_fn is None
    assert _indices(loader) == [0, 1, 2, 3, 4]


def test_build_dataloader_diff_rank_seed_gives_sampler_a_shared_seed():
    np.random.seed(9)
    shared = int(np.random.randint(2**31))
    np.random.seed(9)
    loader = build_dataloader(dict(dataset=dict(type='CountingDataset'),
                                   sampler=dict(type='DefaultSampler'), batch_size=2),
                              seed=4, diff_rank_seed=True)
    assert loader.sampler.seed == shared
    assert loader.worker_init_fn.keywords['seed'] == 4


def test_build_dataloader_batch_sampler_and_collate_kwargs():
    def collate_with_tag(batch, tag):
        return tag, pseudo_collate(batch)

    loader = build_dataloader(dict(
        dataset=dict(type='CountingDataset', size=5),
        sampler=dict(type='DefaultSampler', shuffle=False),
        batch_sampler=dict(type=torch.utils.data.BatchSampler, drop_last=True), batch_size=2,
        collate_fn=dict(type=collate_with_tag, tag='t')))
    assert [(tag, batch['data_samples']) for tag, batch in loader] == [('t', [0, 1]), ('t', [2, 3])]


def test_build_dataloader_passes_a_dataloader_through():
    loader = DataLoader(CountingDataset())
    assert build_dataloader(loader) is loader


def test_build_dataloader_errors_name_the_problem():
    with pytest.raises(KeyError, match="'sampler'"):
        build_dataloader(dict(dataset=dict(type='CountingDataset'), batch_size=2))
    with pytest.raises(KeyError, match='collate_fn.*no_such_collate'):
        build_dataloader(dict(dataset=dict(type='CountingDataset'),
                              sampler=dict(type='DefaultSampler'),
                              collate_fn=dict(type='no_such_collate')), seed=0)
    with pytest.raises(TypeError, match='DataLoader or a dict'):
        build_dataloader([1, 2])


# ----------------------------------------------------------------------------- digits
def test_digits_split_sizes_shapes_and_labels():
    train, val, test = DigitsDataset('train'), DigitsDataset('val'), DigitsDataset('test')
    assert (len(train), len(val), len(test)) == (1437, 360, 360)
    assert torch.equal(val.images, test.images) and torch.equal(val.labels, test.labels)
    item = train[0]
    assert item['inputs'].shape == (1, 8, 8) and item['inputs'].dtype == torch.float32
    assert item['data_samples'].dtype == torch.int64 and item['data_samples'].dim() == 0
    all_images = torch.cat([train.images, val.images])
    assert all_images.min() == 0 and all_images.max() == 1
    # Pixel values are counts 0..16 scaled by 1/16.
    assert torch.equal(all_images * 16, (all_images * 16).round())
    all_labels = torch.cat([train.labels, val.labels])
    assert torch.equal(all_labels.bincount(),
                       torch.tensor([178, 182, 177, 183, 181, 182, 181, 179, 174, 180]))
    assert train.metainfo['classes'] == tuple('0123456789')


def test_digits_split_is_fixed_and_disjoint():
    train, val = DigitsDataset('train'), DigitsDataset('val')
    torch.manual_seed(1234)  # the split does not depend on the global seed
    again = DigitsDataset('train')
    assert torch.equal(train.images, again.images)
    train_rows = {tuple(x.flatten().tolist()) for x in train.images}
    val_rows = [tuple(x.flatten().tolist()) for x in val.images]
    # (a handful of images are exact duplicates in the original data; most are distinct)
    assert sum(row in train_rows for row in val_rows) < 10


def test_digits_errors():
    with pytest.raises(ValueError, match="split must be one of"):
        DigitsDataset('training')
    with pytest.raises(FileNotFoundError, match='digits data not found'):
        DigitsDataset(data_root='/nonexistent')


def test_digits_with_default_collate_gives_a_stacked_batch():
    loader = build_dataloader(dict(dataset=dict(type='DigitsDataset', split='val'),
                                   sampler=dict(type='DefaultSampler', shuffle=False),
                                   collate_fn=dict(type='default_collate'), batch_size=16), seed=0)
    batch = next(iter(loader))
    assert batch['inputs'].shape == (16, 1, 8, 8) and batch['data_samples'].shape == (16,)
