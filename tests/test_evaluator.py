"""BaseMetric/Evaluator/Accuracy: exact percentages, prefixes, padding cut-off, 2-rank gathering."""

import pytest
import torch

from minimm.evaluator import Accuracy, BaseMetric, Evaluator, collect_results
from minimm.logging import MMLogger
from minimm.registry import METRICS

from dist_utils import run_distributed


class CountMetric(BaseMetric):
    """Records each sample as given; reports how many it saw and in which order."""

    default_prefix = 'count'

    def process(self, data_batch, data_samples):
        self.results.extend(data_samples)

    def compute_metrics(self, results):
        return {'n': len(results), 'order': list(results)}


SCORES = torch.tensor([[0.1, 0.7, 0.2],   # label 1: top1 hit
                       [0.5, 0.3, 0.2],   # label 1: top2 hit
                       [0.2, 0.3, 0.5],   # label 0: miss in top2, hit in top3
                       [0.6, 0.3, 0.1]])  # label 0: top1 hit
LABELS = torch.tensor([1, 1, 0, 0])


def test_accuracy_from_scores_and_labels_pair():
    metric = Accuracy(topk=(1, 2, 3))
    metric.process(None, [SCORES[:2], LABELS[:2]])
    metric.process(None, [SCORES[2:], LABELS[2:]])
    assert metric.evaluate(4) == {'accuracy/top1': 50.0, 'accuracy/top2': 75.0,
                                  'accuracy/top3': 100.0}
    assert metric.results == []


def test_accuracy_from_data_sample_dicts_and_padding_cut():
    metric = Accuracy(topk=2, prefix='acc')
    samples = [dict(pred_score=s, gt_label=l) for s, l in zip(SCORES, LABELS)]
    metric.process(None, samples)
    # The last sample is sampler padding: evaluate(3) ignores it.
    assert metric.evaluate(3) == {'acc/top2': pytest.approx(200 / 3)}
    with pytest.raises(ValueError, match='needs pred_score'):
        metric.process(None, [dict(pred_label=torch.tensor(1), gt_label=torch.tensor(1))])


def test_accuracy_pred_label_and_bad_input():
    metric = Accuracy()
    metric.process(None, [dict(pred_label=torch.tensor(1), gt_label=torch.tensor(1)),
                          dict(pred_label=0, gt_label=1),
                          dict(pred_label=2, gt_label=torch.tensor([2]))])
    assert metric.evaluate(3) == {'accuracy/top1': pytest.approx(200 / 3)}
    with pytest.raises(ValueError, match='positive int'):
        Accuracy(topk=(0,))
    with pytest.raises(ValueError, match='at least 5 classes'):
        Accuracy(topk=5).process(None, [SCORES, LABELS])
    with pytest.raises(TypeError, match='gt_label'):
        metric.process(None, [dict(pred_label=1)])
    with pytest.raises(KeyError, match='pred_score or pred_label'):
        metric.process(None, [dict(gt_label=1)])
    assert METRICS.get('Accuracy') is Accuracy


def test_evaluator_builds_merges_and_rejects_duplicate_names():
    evaluator = Evaluator([dict(type='Accuracy'), CountMetric()])
    evaluator.dataset_meta = {'classes': ('a', 'b', 'c')}
    assert all(m.dataset_meta == {'classes': ('a', 'b', 'c')} for m in evaluator.metrics)
    evaluator.process(data_samples=[SCORES, LABELS])
    metrics = evaluator.evaluate(4)
    assert metrics['accuracy/top1'] == 50.0 and metrics['count/n'] == 2
    duplicate = Evaluator([Accuracy(), Accuracy()])
    duplicate.process([SCORES, LABELS])
    with pytest.raises(ValueError, match='same metric name accuracy/top1'):
        duplicate.evaluate(4)
    with pytest.raises(TypeError, match='BaseMetric'):
        Evaluator([object()])


def test_empty_results_warn_and_bad_collect_args(capsys):
    # A logger made inside the test prints to the stdout that capsys captures.
    MMLogger.get_instance('evaluator_empty_warning')
    metric = CountMetric()
    assert metric.evaluate(0) == {'count/n': 0, 'count/order': []}
    assert 'got empty `self.results`' in capsys.readouterr().out
    with pytest.raises(ValueError, match='collect_dir'):
        CountMetric(collect_device='gpu', collect_dir='/tmp')


def test_collect_results_without_distributed_truncates():
    assert collect_results([1, 2, 3], 2) == [1, 2]


def _two_rank_evaluate(rank):
    metric = CountMetric()
    # A DistributedSampler over 5 samples on 2 ranks deals 0,2,4 / 1,3,0(padding).
    metric.process(None, [0, 2, 4] if rank == 0 else [1, 3, 0])
    return metric.evaluate(5)


def test_two_ranks_gather_in_sampler_order_and_share_the_result(tmp_path):
    results = run_distributed(_two_rank_evaluate, tmp_path)
    expected = {'count/n': 5, 'count/order': [0, 1, 2, 3, 4]}
    for rank in (0, 1):
        assert results[rank] == expected
