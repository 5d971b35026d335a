"""A model whose outputs the loops cannot use is named with its class and the mode (issue 39):
``forward(mode='predict')`` returning a raw tensor the metrics cannot read, a loss without a
gradient."""
import pytest

from toy import ToyModel, toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops


class RawPredictToy(ToyModel):
    def forward(self, inputs, data_samples=None, mode='tensor'):
        return super().forward(inputs, data_samples, 'tensor' if mode == 'predict' else mode)


class DetachedLossToy(ToyModel):
    def forward(self, inputs, data_samples=None, mode='tensor'):
        outputs = super().forward(inputs, data_samples, mode)
        return {key: value.detach() for key, value in outputs.items()} if mode == 'loss' \
            else outputs


def test_a_raw_tensor_from_predict_is_named_at_the_first_validation(tmp_path):
    runner = toy_runner(tmp_path, max_=1, model=RawPredictToy())
    with pytest.raises(TypeError) as info:
        runner.train()
    assert str(info.value).startswith(
        "RawPredictToy.val_step (forward(mode='predict')) returned a Tensor, which the metrics "
        'cannot read (')
    assert str(info.value).endswith('return a list with one prediction per sample (data samples '
                                    'or dicts, as the metrics read them)')


def test_a_loss_without_gradient_is_named_at_the_first_iteration(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False, model=DetachedLossToy())
    with pytest.raises(RuntimeError) as info:
        runner.train()
    assert str(info.value) == (
        "DetachedLossToy.forward(mode='loss') returned losses without a gradient (loss): compute "
        "them from the model's outputs, without .detach(), .item() or torch.no_grad()")
    assert runner.iter == 0
