"""ImgDataPreprocessor against the same steps written in plain PyTorch."""
import pytest
import torch

from minimm.model import ImgDataPreprocessor, stack_batch
from minimm.registry import MODELS


def test_list_of_images_is_converted_normalised_padded_and_stacked():
    g = torch.Generator().manual_seed(0)
    images = [torch.randint(0, 256, (3, 5, 7), generator=g, dtype=torch.uint8),
              torch.randint(0, 256, (3, 6, 4), generator=g, dtype=torch.uint8)]
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    pre = MODELS.build(dict(type='ImgDataPreprocessor', mean=mean, std=std, bgr_to_rgb=True,
                            pad_size_divisor=4, pad_value=-1))
    out = pre(dict(inputs=images, data_samples=[1, 2]))
    assert out['data_samples'] == [1, 2]
    assert out['inputs'].shape == (2, 3, 8, 8)  # max 6 x 7, rounded up to multiples of 4
    for image, batch_item in zip(images, out['inputs']):
        c, h, w = image.shape
        expected = (image[[2, 1, 0]].float() - torch.tensor(mean).view(3, 1, 1)) \
            / torch.tensor(std).view(3, 1, 1)
        assert torch.equal(batch_item[:, :h, :w], expected)
        assert (batch_item[:, h:, :] == -1).all() and (batch_item[:, :, w:] == -1).all()


def test_a_batch_tensor_and_no_normalisation():
    batch = torch.arange(2 * 1 * 3 * 3, dtype=torch.float32).view(2, 1, 3, 3)
    out = ImgDataPreprocessor(pad_size_divisor=2)(dict(inputs=batch))
    assert out['data_samples'] is None
    assert torch.equal(out['inputs'][:, :, :3, :3], batch)
    assert out['inputs'].shape == (2, 1, 4, 4) and out['inputs'][:, :, 3:].abs().sum() == 0
    assert torch.equal(stack_batch([batch[0], batch[1]]), batch)


@pytest.mark.parametrize('kwargs, message', [
    (dict(mean=[1, 2, 3]), 'both None or both set'),
    (dict(bgr_to_rgb=True, rgb_to_bgr=True), 'cannot both be True'),
    (dict(mean=[1, 2], std=[1, 2]), '1 or 3 values'),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ImgDataPreprocessor(**kwargs)


def test_three_channel_normalisation_needs_three_channels():
    pre = ImgDataPreprocessor(mean=[0, 0, 0], std=[1, 1, 1])
    with pytest.raises(ValueError, match='need 3 channels'):
        pre(dict(inputs=[torch.zeros(1, 2, 2)]))
