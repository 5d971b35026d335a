"""DigitsDataset: a real, tiny image-classification dataset that ships with minimm.

The tutorials and the demo need data that trains to a meaningful accuracy in seconds on a laptop
CPU, with no download. The UCI "Optical Recognition of Handwritten Digits" data fits: 1,797
grey-scale 8x8 images of the digits 0-9 (pixel counts 0..16).

Data credit: E. Alpaydin and C. Kaynak (1998), "Optical Recognition of Handwritten Digits",
UCI Machine Learning Repository,
https://archive.ics.uci.edu/ml/datasets/Optical+Recognition+of+Handwritten+Digits, licensed
CC BY 4.0. The file
``data/digits.csv.gz`` is the copy scikit-learn ships (``sklearn/datasets/data/digits.csv.gz``,
BSD-3-Clause); see ``data/README.md``.

The split is fixed: one permutation drawn from a ``torch.Generator`` seeded with
:data:`SPLIT_SEED` puts the first 1,437 samples in ``'train'`` and the other 360 in ``'val'``
(``'test'`` is the same as ``'val'``). It does not depend on the run's seed, so a checkpoint is
always evaluated on the samples it was not trained on.

Each item is ``dict(inputs=float tensor (1, 8, 8) in [0, 1], data_samples=int64 scalar tensor)``:
the keys are the arguments of ``BaseModel.forward(inputs, data_samples, mode)``, so a collated batch
can be passed on with ``model(**batch)``.

Left out compared with MMEngine's ``BaseDataset``: annotation files, ``pipeline`` transforms,
lazy ``full_init`` and serialisation.
"""
import gzip
import os.path as osp
from typing import Dict, Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from minimm.registry import DATASETS

__all__ = ['DigitsDataset']

DATA_FILE = 'digits.csv.gz'
NUM_SAMPLES = 1797
NUM_TRAIN = 1437
SPLIT_SEED = 0
MAX_PIXEL = 16.0
SPLITS = ('train', 'val', 'test')


@DATASETS.register_module()
class DigitsDataset(Dataset):
    """The 8x8 handwritten digits, split 1,437 train / 360 val.

    Args:
        split: ``'train'``, ``'val'`` or ``'test'`` (the same samples as ``'val'``).
        data_root: folder holding ``digits.csv.gz``; ``None`` uses the copy shipped in
            ``minimm/dataset/data``.
    """

    METAINFO = dict(classes=tuple(str(digit) for digit in range(10)))

    def __init__(self, split: str = 'train', data_root: Optional[str] = None):
        if split not in SPLITS:
            raise ValueError(f'split must be one of {SPLITS}, but got {split!r}')
        self.split = split
        if data_root is None:
            data_root = osp.join(osp.dirname(__file__), 'data')
        self.data_root = data_root
        images, labels = _load(osp.join(self.data_root, DATA_FILE))
        order = torch.randperm(NUM_SAMPLES, generator=torch.Generator().manual_seed(SPLIT_SEED))
        keep = order[:NUM_TRAIN] if split == 'train' else order[NUM_TRAIN:]
        self.images = images[keep]
        self.labels = labels[keep]

    @property
    def metainfo(self) -> dict:
        """Dataset meta information: the class names, ``'0'`` ... ``'9'``."""
        return dict(self.METAINFO)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Dict[str, torch.Tensor]:
        return dict(inputs=self.images[index], data_samples=self.labels[index])


def _load(path: str):
    """Read the CSV (64 pixel counts then the label per row) into tensors."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'digits data not found at {path}; pass data_root=None to use the '
                                'copy shipped with minimm')
    with gzip.open(path, 'rt') as f:
        table = np.loadtxt(f, delimiter=',', dtype=np.float32)
    if table.shape != (NUM_SAMPLES, 65):
        raise ValueError(f'{path} should hold {NUM_SAMPLES} rows of 64 pixels + 1 label, '
                         f'but has shape {table.shape}')
    images = torch.from_numpy(table[:, :64] / MAX_PIXEL).reshape(NUM_SAMPLES, 1, 8, 8)
    labels = torch.from_numpy(table[:, 64].astype(np.int64))
    return images, labels
