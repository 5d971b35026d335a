"""ProfilerHook: a real Chrome trace, MMEngine's argument checks, and when the profiler closes."""
import json
from unittest.mock import MagicMock

import pytest
import torch

from minimm.hooks import ProfilerHook
from minimm.hooks.profiler_hook import check_kineto
from toy import toy_runner


def _ops_in_trace(path):
    """The operator names of a Chrome trace, one entry per call."""
    return [event.get('name') for event in json.loads(path.read_text())['traceEvents']]


def test_by_iter_writes_a_trace_of_the_profiled_iterations(tmp_path):
    trace = tmp_path / 'trace.json'
    hook = ProfilerHook(by_epoch=False, profile_times=2, json_trace_path=str(trace),
                        record_shapes=True)
    runner = toy_runner(tmp_path, by_epoch=False, max_=4, val=False, custom_hooks=[hook],
                        default_hooks=dict(checkpoint=None))
    runner.train()
    names = _ops_in_trace(trace)
    # The toy model's forward (addmm) and backward ran while the profiler recorded.
    assert 'aten::addmm' in names and any('Backward' in str(n) for n in names)
    # The toy model's one Linear layer calls addmm once per forward: 2 of the 4 iterations.
    assert names.count('aten::addmm') == 2
    assert hook._closed


def test_by_epoch_profiles_the_first_epoch(tmp_path):
    trace = tmp_path / 'trace.json'
    hook = ProfilerHook(json_trace_path=str(trace))
    toy_runner(tmp_path, max_=2, val=False, custom_hooks=[hook],
               default_hooks=dict(checkpoint=None)).train()
    assert _ops_in_trace(trace).count('aten::addmm') == 3      # the 3 iterations of epoch 1


def test_on_trace_ready_callable_and_log_trace(tmp_path, capsys):
    seen = []
    runner = toy_runner(tmp_path / 'a', by_epoch=False, max_=2, val=False,
                        custom_hooks=[ProfilerHook(by_epoch=False, on_trace_ready=seen.append)],
                        default_hooks=dict(checkpoint=None))
    runner.train()
    assert len(seen) == 1 and seen[0] is runner.hooks[-1].profiler
    log_hook = ProfilerHook(by_epoch=False, on_trace_ready=dict(type='log_trace', row_limit=3,
                                                                sort_by='cpu_time_total'))
    toy_runner(tmp_path / 'b', by_epoch=False, max_=2, val=False, custom_hooks=[log_hook],
               default_hooks=dict(checkpoint=None)).train()
    assert 'Self CPU' in capsys.readouterr().out


def test_tb_trace_writes_into_the_log_dir(tmp_path):
    runner = toy_runner(tmp_path, by_epoch=False, max_=1, val=False,
                        custom_hooks=[ProfilerHook(by_epoch=False,
                                                   on_trace_ready=dict(type='tb_trace'))],
                        default_hooks=dict(checkpoint=None))
    runner.train()
    written = list((tmp_path / runner.timestamp / 'tf_tracing_logs').glob('*.pt.trace.json'))
    assert len(written) == 1


def test_schedule_is_passed_to_torch(tmp_path):
    seen = []
    hook = ProfilerHook(by_epoch=False, profile_times=4, on_trace_ready=seen.append,
                        schedule=dict(wait=1, warmup=1, active=2))
    toy_runner(tmp_path, by_epoch=False, max_=4, val=False, custom_hooks=[hook],
               default_hooks=dict(checkpoint=None)).train()
    # wait 1 step, warm up 1, record 2: the forwards of iterations 3 and 4 only.
    assert len(seen) == 1
    assert [e.name for e in seen[0].events()].count('aten::addmm') == 2


def test_a_run_that_stops_early_closes_the_profiler(tmp_path):
    hook = ProfilerHook(by_epoch=False, profile_times=5)
    runner = toy_runner(tmp_path, by_epoch=False, max_=5, val=False, custom_hooks=[hook],
                        default_hooks=dict(checkpoint=None))
    runner.train_loop.stop_training = True          # as EarlyStoppingHook would
    runner.train()
    assert hook._closed


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(by_epoch=True, profile_times=2), ValueError, 'Profile 1 epoch'),
    (dict(profile_times=0), ValueError, 'positive int'),
    (dict(by_epoch='yes'), TypeError, 'by_epoch'),
    (dict(schedule=[1, 1, 1]), TypeError, 'schedule'),
    (dict(on_trace_ready='log_trace'), ValueError, 'on_trace_ready'),
])
def test_bad_arguments_fail_in_the_constructor(kwargs, error, match):
    with pytest.raises(error, match=match):
        ProfilerHook(**kwargs)


def test_positional_arguments_are_refused():
    with pytest.raises(TypeError):
        ProfilerHook(False)


def test_more_times_than_training_and_unknown_trace_type(tmp_path):
    runner = toy_runner(tmp_path / 'a', by_epoch=False, max_=2, val=False,
                        custom_hooks=[ProfilerHook(by_epoch=False, profile_times=3)])
    with pytest.raises(ValueError, match='more than the 2 training iterations'):
        runner.train()
    runner = toy_runner(tmp_path / 'b', by_epoch=False, max_=2, val=False,
                        custom_hooks=[ProfilerHook(by_epoch=False, on_trace_ready=dict(type='x'))])
    with pytest.raises(ValueError, match='"log_trace" or "tb_trace"'):
        runner.train()


def test_registered_at_very_low():
    from minimm.registry import HOOKS
    hook = HOOKS.build(dict(type='ProfilerHook', by_epoch=False))
    assert hook.priority == 'VERY_LOW'
    assert hook.get_triggered_stages() == ['before_run', 'after_train_iter', 'after_train_epoch',
                                           'after_run']


def test_check_kineto_matches_torch():
    assert check_kineto() is bool(torch.autograd.kineto_available())


def test_no_activity_flag_means_every_supported_activity(tmp_path):
    """What MMEngine's empty activity list meant: torch records all it supports (the CPU here)."""
    trace = tmp_path / 'trace.json'
    hook = ProfilerHook(by_epoch=False, activity_with_cpu=False, activity_with_cuda=False,
                        json_trace_path=str(trace))
    assert hook.activities == []
    toy_runner(tmp_path, by_epoch=False, max_=1, val=False, custom_hooks=[hook],
               default_hooks=dict(checkpoint=None)).train()
    assert _ops_in_trace(trace).count('aten::addmm') == 1


def test_parse_trace_config():
    runner = MagicMock()
    hook = ProfilerHook()
    assert hook._parse_trace_config(runner) is None
    hook.on_trace_ready = print
    assert hook._parse_trace_config(runner) is print
    hook.on_trace_ready = dict(type='log_trace', row_limit=2)
    assert callable(hook._parse_trace_config(runner))
    for bad, match in ((dict(type='unknown'), 'trace_type should be'), (0, 'should be a handler')):
        hook.on_trace_ready = bad
        with pytest.raises(ValueError, match=match):
            hook._parse_trace_config(runner)


def test_hooks_drive_a_profiler_set_by_hand():
    """MMEngine's shape: the hook is open from construction, so a profiler set on it is stepped
    and closed at the last profiled iteration even without before_run."""
    runner = MagicMock(iter=1)
    hook = ProfilerHook(by_epoch=False, profile_times=2)
    hook.profiler = MagicMock()
    hook.after_train_iter(runner, 1)
    hook.profiler.step.assert_called_once()
    hook.profiler.__exit__.assert_called_once()
    assert hook._closed
    hook.after_train_iter(runner, 2)          # closed: no more steps
    hook.profiler.step.assert_called_once()
