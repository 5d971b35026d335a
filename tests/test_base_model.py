"""BaseModel's step methods and loss parsing, the data preprocessor and the DigitsCNN model."""
import contextlib
import itertools
from collections import OrderedDict, namedtuple

import pytest
import torch
from torch import nn

from minimm.dataset import build_dataloader
from minimm.model import BaseDataPreprocessor, BaseModel, DigitsCNN
from minimm.randomness import set_random_seed
from minimm.registry import MODELS


class LinearModel(BaseModel):
    """y = w * x; loss = mean((y - target)^2); also logs a non-loss 'error' entry."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = nn.Parameter(torch.tensor(2.0))

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = self.w * inputs
        if mode == 'loss':
            return dict(loss_mse=((out - data_samples) ** 2).mean(),
                        error=(out - data_samples).abs())
        if mode == 'predict':
            return [dict(pred=value) for value in out]
        return out


class SGDWrapper:
    """The two methods train_step needs from an OptimWrapper, over torch's SGD."""

    def __init__(self, model, lr):
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.contexts = 0

    @contextlib.contextmanager
    def optim_context(self, model):
        self.contexts += 1
        yield

    def update_params(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


# ----------------------------------------------------------------------------- parse_losses
def test_parse_losses_sums_only_keys_containing_loss():
    model = LinearModel()
    loss, log_vars = model.parse_losses(dict(
        loss_cls=torch.tensor([1.0, 2.0]),                      # mean 1.5
        acc=torch.tensor(0.5),                                  # logged, not summed
        loss_bbox=[torch.tensor([1.0, 3.0]), torch.tensor(4.0)]))  # 2 + 4
    assert isinstance(log_vars, OrderedDict)
    assert list(log_vars) == ['loss', 'loss_cls', 'acc', 'loss_bbox']
    assert loss.item() == 7.5 and log_vars['loss'] is loss
    assert [v.item() for v in log_vars.values()] == [7.5, 1.5, 0.5, 6.0]


def test_parse_losses_with_a_key_named_loss_logs_that_entry_and_returns_the_total():
    # MMEngine builds log_vars from [('loss', total), ('loss', a), ...]: the later pair wins
    # the value, the first keeps the place.
    model = LinearModel()
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    loss, log_vars = model.parse_losses(dict(loss_x=b, loss=a))
    assert loss.item() == 3.0
    assert list(log_vars) == ['loss', 'loss_x'] and log_vars['loss'] is a


def test_parse_losses_keeps_the_graph_and_rejects_bad_values():
    model = LinearModel()
    w = torch.tensor(3.0, requires_grad=True)
    loss, _ = model.parse_losses(dict(loss=w * 2))
    loss.backward()
    assert w.grad.item() == 2.0
    with pytest.raises(TypeError, match='loss_x is not a tensor or list of tensors'):
        model.parse_losses(dict(loss_x=1.0))
    with pytest.raises(TypeError, match='dict of losses'):
        model.parse_losses(torch.tensor(1.0))


# ----------------------------------------------------------------------------- steps
def test_train_step_one_sgd_step_closed_form():
    model = LinearModel()
    wrapper = SGDWrapper(model, lr=0.1)
    x, target = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    log_vars = model.train_step(dict(inputs=x, data_samples=target), wrapper)
    # loss = mean((2x - x)^2) = mean(x^2) = 2.5; d/dw = mean(2 (w x - t) x) = mean(2 x^2) = 5
    assert log_vars['loss'].item() == pytest.approx(2.5)
    assert log_vars['loss_mse'].item() == pytest.approx(2.5)
    assert log_vars['error'].item() == pytest.approx(1.5)
    assert model.w.item() == pytest.approx(2.0 - 0.1 * 5.0)
    assert wrapper.contexts == 1


def test_train_step_unpacks_a_tuple_positionally():
    model = LinearModel()
    batch = (torch.tensor([3.0]), torch.tensor([3.0]))
    log_vars = model.train_step(batch, SGDWrapper(model, lr=0.0))
    assert log_vars['loss'].item() == pytest.approx(9.0)


def test_val_and_test_step_predict():
    model = LinearModel()
    batch = dict(inputs=torch.tensor([1.0, 4.0]), data_samples=None)
    for step in (model.val_step, model.test_step):
        assert [p['pred'].item() for p in step(batch)] == [2.0, 8.0]


def test_run_forward_rejects_other_types():
    with pytest.raises(TypeError, match='should be list, tuple or dict'):
        LinearModel().val_step(torch.tensor([1.0]))


def test_forward_is_abstract():
    class NoForward(BaseModel):
        pass

    with pytest.raises(TypeError, match='abstract'):
        NoForward()


def test_init_cfg_is_rejected_and_init_weights_calls_children():
    with pytest.raises(NotImplementedError, match='init_cfg'):
        LinearModel(init_cfg=dict(type='Normal', std=0.01))

    class Child(nn.Module):
        calls = 0

        def init_weights(self):
            Child.calls += 1

    model = LinearModel()
    model.child = Child()
    model.init_weights()
    model.init_weights()  # only once, as MMEngine's BaseModule
    assert Child.calls == 1 and model.is_init


# ----------------------------------------------------------------------------- data preprocessor
def test_data_preprocessor_default_dict_and_module():
    assert type(LinearModel().data_preprocessor) is BaseDataPreprocessor
    assert MODELS.get('BaseDataPreprocessor') is BaseDataPreprocessor
    custom = BaseDataPreprocessor(non_blocking=True)
    assert LinearModel(data_preprocessor=custom).data_preprocessor is custom
    built = LinearModel(data_preprocessor=dict(type='BaseDataPreprocessor', non_blocking=True))
    assert built.data_preprocessor._non_blocking
    with pytest.raises(TypeError, match='data_preprocessor should be'):
        LinearModel(data_preprocessor='BaseDataPreprocessor')


def test_cast_data_keeps_structure_and_moves_tensors():
    Pair = namedtuple('Pair', 'a b')
    pre = BaseDataPreprocessor()
    data = dict(x=torch.ones(1), items=[torch.zeros(1), 'name', None, 3],
                pair=Pair(torch.ones(1), 1.5),
                t=(torch.ones(2),))
    out = pre(data, training=True)
    assert out is not data and list(out) == ['x', 'items', 'pair', 't']
    assert out['items'][1:] == ['name', None, 3]
    assert isinstance(out['pair'], Pair) and out['pair'].b == 1.5
    assert isinstance(out['t'], tuple) and torch.equal(out['t'][0], torch.ones(2))


def test_model_to_tells_the_preprocessor_its_device():
    model = LinearModel()
    pre = model.data_preprocessor
    assert pre.device == torch.device('cpu')
    model.to('meta')
    assert pre.device == torch.device('meta')
    assert pre(dict(x=torch.ones(2)))['x'].device == torch.device('meta')
    model.to(torch.float64)  # a dtype-only move keeps the device
    assert pre.device == torch.device('meta')
    model.to_empty(device='cpu')  # meta tensors have no data to copy back
    model.cpu()
    assert pre.device == torch.device('cpu')
    assert pre.to('meta').device == torch.device('meta')
    assert pre.cpu().device == torch.device('cpu')


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_model_cuda_moves_batches_to_gpu():
    model = LinearModel().cuda()
    out = model.data_preprocessor(dict(inputs=torch.ones(2)))
    assert out['inputs'].is_cuda


# ----------------------------------------------------------------------------- DigitsCNN
def test_digits_cnn_modes_and_shapes():
    set_random_seed(0)
    model = MODELS.build(dict(type='DigitsCNN'))
    assert isinstance(model, DigitsCNN)
    inputs, labels = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, 3])
    assert model(inputs).shape == (4, 10)
    loss = model(inputs, labels, mode='loss')
    assert list(loss) == ['loss'] and loss['loss'].dim() == 0
    # A list of samples (the Runner's default pseudo_collate) gives the same numbers as a stack.
    model.eval()
    stacked = model(inputs, labels, mode='predict')
    listed = model(list(inputs), list(labels), mode='predict')
    assert len(stacked) == 4 and list(stacked[0]) == ['pred_score', 'pred_label', 'gt_label']
    for a, b in zip(stacked, listed):
        assert torch.allclose(a['pred_score'], b['pred_score'])
        assert a['pred_label'] == a['pred_score'].argmax() and a['gt_label'] == b['gt_label']
        assert a['pred_score'].sum().item() == pytest.approx(1.0)
    assert 'gt_label' not in model(inputs, mode='predict')[0]


def test_digits_cnn_errors():
    with pytest.raises(ValueError, match="mode must be"):
        DigitsCNN()(torch.rand(2, 1, 8, 8), mode='train')
    with pytest.raises(ValueError, match='needs the labels'):
        DigitsCNN()(torch.rand(2, 1, 8, 8), mode='loss')
    with pytest.raises(ValueError, match='two convolution widths'):
        DigitsCNN(channels=(8,))


def test_digits_cnn_learns_in_100_sgd_steps():
    set_random_seed(0)
    model = DigitsCNN()
    wrapper = SGDWrapper(model, lr=0.1)
    train = build_dataloader(dict(dataset=dict(type='DigitsDataset', split='train'),
                                  sampler=dict(type='InfiniteSampler'), batch_size=32), seed=0)
    batches = iter(train)
    for _ in range(100):
        model.train_step(next(batches), wrapper)
    model.eval()
    val = build_dataloader(dict(dataset=dict(type='DigitsDataset', split='val'),
                                sampler=dict(type='DefaultSampler', shuffle=False),
                                collate_fn=dict(type='default_collate'), batch_size=120), seed=0)
    with torch.no_grad():
        results = list(itertools.chain.from_iterable(model.val_step(batch) for batch in val))
    accuracy = sum(int(r['pred_label'] == r['gt_label']) for r in results) / len(results)
    assert len(results) == 360
    assert accuracy > 0.8  # chance is 0.1
