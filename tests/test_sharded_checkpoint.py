"""Sharded checkpoints (minimm/sharded_checkpoint.py) of a model sharded with FSDP2, on gloo.

One 2-process run trains 4 epochs (global batch 8: 4 per rank) and copies its work dir after the
epoch-2 checkpoint; the copies are resumed by 4 processes (2 per rank) and by 1 (8 at once), and
must reach the uninterrupted run's weights. A step is the same computation on any number of
processes when the global batch is (DefaultSampler gives iteration ``i`` the samples
``perm[8i:8i+8]`` for any world size; each rank's loss is its batch's mean and FSDP averages the
gradients over the ranks), except for the order of the floating-point sums: the resumed weights
agree to ``BOUND``, a few float32 roundings per step carried through 4 Adam steps (measured:
about 1e-7). The same world size resumes bit for bit (the SIGKILL test).
"""
import glob
import os
import os.path as osp
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from dist_utils import run_distributed
from minimm.dist import free_port

pytestmark = pytest.mark.ops_backend  # PostHocEMAHook's averaging (see tests/backend_words.py)

TESTS = osp.dirname(osp.abspath(__file__))
ROOT = osp.dirname(TESTS)
BOUND = 1e-5

CONFIG = textwrap.dedent("""
    custom_imports = dict(imports=['sharded_toy'])
    model = dict(type='ShardedToyModel')
    model_wrapper_cfg = dict(type='MMFullyShardedDataParallel')
    train_dataloader = dict(batch_size=4, sampler=dict(type='DefaultSampler', shuffle=True),
                            collate_fn=dict(type='default_collate'),
                            dataset=dict(type='ShardedToyDataset', n=16))
    val_dataloader = dict(batch_size=4, sampler=dict(type='DefaultSampler', shuffle=False),
                          collate_fn=dict(type='default_collate'),
                          dataset=dict(type='ShardedToyDataset', n=24, seed=1))
    test_dataloader = val_dataloader
    val_evaluator = dict(type='ShardedToyMetric')
    test_evaluator = val_evaluator
    val_cfg = dict()
    test_cfg = dict()
    train_cfg = dict(by_epoch=True, max_epochs=4, val_interval=1)
    optim_wrapper = dict(optimizer=dict(type='Adam', lr=0.05))
    param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, end=4)]
    default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2,
                                         save_best='toy/acc',
                                         published_keys=['meta', 'state_dict']))
    custom_hooks = [dict(type='EMAHook', momentum=0.2), dict(type='EMAOnlyCheckpointHook'),
                    dict(type='PostHocEMAHook', sigma_rels=(0.05, 0.2), snapshot_interval=4)]
    randomness = dict(seed=0)
""")


def _config_file(tmp) -> str:
    path = osp.join(tmp, 'sharded_toy_cfg.py')
    if not osp.exists(path):
        with open(path, 'w') as f:
            f.write(CONFIG)
    return path


def _config(tmp, work_dir, batch_size, launcher):
    from minimm.config import Config
    cfg = Config.fromfile(_config_file(tmp))
    cfg.work_dir, cfg.launcher = str(work_dir), launcher
    cfg.train_dataloader.batch_size = batch_size
    return cfg


def _train(rank, tmp, name, batch_size, resume, max_epochs=4, copy_to=()):
    """Train (``resume``: go on with) the work dir ``tmp/name``; after epoch 2, rank 0 copies
    the work dir to each of ``copy_to``."""
    import sharded_toy  # noqa: F401  (registers the toy model)
    from minimm.dist import barrier
    from minimm.hooks import Hook
    from minimm.runner import Runner

    class CopyWorkDir(Hook):
        priority = 'LOWEST'  # after CheckpointHook's save

        def after_train_epoch(self, runner):
            if runner.epoch + 1 == 2 and rank == 0:
                for dest in copy_to:
                    shutil.copytree(runner.work_dir, osp.join(tmp, dest))
            barrier()
    cfg = _config(tmp, osp.join(tmp, name), batch_size, 'pytorch')
    cfg.resume, cfg.train_cfg.max_epochs = resume, max_epochs
    runner = Runner.from_cfg(cfg)
    runner.register_hook(CopyWorkDir())
    runner.train()
    if copy_to:  # what FSDPStrategy(state_dict_cfg='full') writes: the raw weights, whole
        from minimm.checkpoint import unwrap_model
        from minimm.sharded_checkpoint import save_full_checkpoint
        save_full_checkpoint(dict(state_dict=unwrap_model(runner.model).state_dict()),
                             osp.join(tmp, name, 'full.pth'))
    acc = float(runner.message_hub.get_scalar('val/toy/acc').current())
    return dict(acc=acc, iter=runner.iter, log=runner.logger.log_file)


def _posthoc_snapshots(work_dir, shard=None):
    """PostHocEMAHook's EMAs of a model whose parameters change 6 times, snapshots every 2
    steps; ``shard``: the parameters are DTensors (each rank's snapshots are its shards)."""
    from types import SimpleNamespace

    from minimm.hooks import PostHocEMAHook
    from minimm.logging import MMLogger
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
    for module in model if shard else ():
        for name, p in list(module.named_parameters(recurse=False)):
            module.register_parameter(name, torch.nn.Parameter(shard(p.detach())))
    hook = PostHocEMAHook(sigma_rels=(0.05, 0.2), snapshot_interval=2)
    hook.before_run(SimpleNamespace(model=model, work_dir=work_dir,
                                    logger=MMLogger.get_instance('posthoc_shards')))
    for step in range(1, 7):
        torch.manual_seed(100 + step)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(shard(torch.randn(p.shape)) if shard else torch.randn(p.shape))
        hook._group.update_parameters(model)
        if step % 2 == 0:
            hook.save_snapshots(step)


def _from_whole_file(tmp) -> dict:
    """The sharded model loads the gathered file (load_from: each rank keeps its rows) and
    validates; resuming from it is refused."""
    from minimm.runner import Runner
    cfg = _config(tmp, osp.join(tmp, 'from_file'), 4, 'pytorch')
    cfg.load_from = osp.join(tmp, 'straight', 'full.pth')
    cfg.default_hooks.checkpoint = None  # (saves the best after validating, as in training)
    acc = Runner.from_cfg(cfg).val()['toy/acc']
    cfg.work_dir, cfg.resume = osp.join(tmp, 'resume_file'), True
    try:
        Runner.from_cfg(cfg).train()
    except ValueError as e:
        return dict(acc=acc, refused=str(e))
    return dict(acc=acc, refused=None)


def _whole_files(tmp) -> None:
    """FlexibleRunner with FSDPStrategy(state_dict_cfg='full'): whole files; 1 epoch, then
    resumed from its file for a second."""
    from minimm.runner import FlexibleRunner
    for epochs, resume in ((1, False), (2, True)):
        cfg = _config(tmp, osp.join(tmp, 'whole_files'), 4, 'pytorch')
        cfg.pop('model_wrapper_cfg')
        cfg.strategy = dict(type='FSDPStrategy', state_dict_cfg='full')
        cfg.resume, cfg.train_cfg.max_epochs = resume, epochs
        FlexibleRunner.from_cfg(cfg).train()


def _first_spawn(rank, tmp):
    """The uninterrupted run, then the killed run resumed (``resume=True``, what ``--resume``
    sets), on the same 2 processes; and PostHocEMAHook's snapshots of a sharded model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh('cpu', (2, ))
    _posthoc_snapshots(osp.join(tmp, 'posthoc_sharded'),
                       lambda t: distribute_tensor(t, mesh, [Shard(0)]))
    straight = _train(rank, tmp, 'straight', 4, False, copy_to=['to4', 'to1', 'at2'])
    _whole_files(tmp)
    return dict(straight=straight, killed=_train(rank, tmp, 'killed', 4, True),
                from_file=_from_whole_file(tmp))


def _one_process(tmp, name):
    """Resume the work dir ``tmp/name`` in this process (not distributed: the model is not
    sharded, so the checkpoint is read whole), with one thread, as each rank."""
    from minimm.runner import Runner
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = _config(tmp, osp.join(tmp, name), 8, 'none')
        cfg.resume = True
        runner = Runner.from_cfg(cfg)
        runner.train()
        return dict(iter=runner.iter, log=runner.logger.log_file)
    finally:
        torch.set_num_threads(threads)


def _process_tree(pid: int) -> list:
    """``pid`` and all its descendants (torchrun starts each worker in a session of its own, so
    killing torchrun's process group would leave the workers running)."""
    children = {}
    for entry in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{entry}/stat') as f:
                parent = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def _kill_while_saving(tmp, name, checkpoint):
    """``minimm train`` under torchrun, 2 processes, SIGKILLed (all of them, as in a crash of the
    machine) once ``checkpoint`` is complete in its hidden folder but not yet renamed."""
    command = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2',
               '--master_addr', '127.0.0.1', '--master_port', str(free_port()), '-m',
               'minimm.cli', 'train', _config_file(tmp), '--launcher', 'pytorch',
               '--work-dir', osp.join(tmp, name)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, TESTS]), OMP_NUM_THREADS='1',
               SHARDED_TEST_HOLD_SAVE=checkpoint)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    output = []
    try:
        for line in proc.stdout:
            output.append(line)
            if line.strip() == 'WRITING':
                break
    finally:
        for pid in _process_tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, ''.join(output[-30:])


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp('sharded'))
    _kill_while_saving(tmp, 'killed', 'epoch_3.pth')
    killed = osp.join(tmp, 'killed')
    after_kill = dict(files=sorted(os.listdir(killed)),
                      last=open(osp.join(killed, 'last_checkpoint')).read())
    first = run_distributed(_first_spawn, tmp, tmp)
    # 2 -> 4 -> 1: epoch 3 on 4 processes (2 samples each), then epoch 4 on 1 (8 at once).
    to4 = run_distributed(_train, tmp, tmp, 'to4', 2, True, 3, world_size=4)
    shutil.copytree(osp.join(tmp, 'to4'), osp.join(tmp, 'to4to1'))
    return dict(tmp=tmp, straight=[r['straight'] for r in first], after_kill=after_kill,
                from_file=[r['from_file'] for r in first],
                killed=first[0]['killed'], to4=to4, to1=_one_process(tmp, 'to1'),
                to4to1=_one_process(tmp, 'to4to1'))


def _tensors(path) -> dict:
    """Every tensor of the run's state in the checkpoint at ``path`` (a sharded folder, read
    whole, or a file), by its place in it: the model's (EMA) weights, EMAHook's and
    PostHocEMAHook's states, the optimizer's."""
    from minimm.sharded_checkpoint import read_checkpoint
    found = {}

    def walk(value, key):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f'{key}/{k}')
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f'{key}/{i}')
        elif isinstance(value, torch.Tensor):
            found[key] = value
    parts = ('state_dict', 'ema_state_dict', 'posthoc_ema', 'optimizer')
    walk(read_checkpoint(str(path), keys=parts), '')
    return found


def _max_diff(a: dict, b: dict) -> float:
    assert list(a) == list(b)
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def _world_size_lines(log_file):
    with open(log_file) as f:
        return [line for line in f if 'World size changed' in line]


def test_resume_on_4_then_1_and_on_1_process_reaches_the_uninterrupted_state(runs):
    tmp = runs['tmp']
    straight = {epoch: _tensors(osp.join(tmp, 'straight', f'epoch_{epoch}.pth'))
                for epoch in (3, 4)}
    # the weights, EMAHook's (4 and a counter), PostHocEMAHook's (2 x 5), Adam's (4 x 3)
    assert len(straight[4]) == 4 + 5 + 2 * 5 + 4 * 3
    assert runs['straight'][0]['iter'] == 8 and runs['to4'][0]['iter'] == 6  # 2 per epoch
    steps = [('to4', 3, 'by 2 process(es), this run has 4', runs['to4'][0]),
             ('to4to1', 4, 'by 4 process(es), this run has 1', runs['to4to1']),
             ('to1', 4, 'by 2 process(es), this run has 1', runs['to1'])]
    for name, epoch, words, resumed in steps:
        diff = _max_diff(_tensors(osp.join(tmp, name, f'epoch_{epoch}.pth')), straight[epoch])
        print(f'written {words}: max |diff| at epoch {epoch}: {diff:.2e}')
        assert diff <= BOUND
        (line, ) = _world_size_lines(resumed['log'])
        assert words in line
        # The per-rank batch was scaled to keep 8 samples an iteration: the line says so.
        assert 'still takes 8 samples over all ranks' in line and 'move through' not in line
    # The bound is not loose: the state moved by far more than it in one epoch.
    assert _max_diff(straight[3], straight[4]) > 1000 * BOUND


def test_sigkill_during_a_sharded_save_then_resume_loses_nothing(runs):
    """Killed once epoch_3.pth was complete in its hidden folder, before the rename: the
    previous checkpoint stays the latest, whole; resumed, the run ends bit-equal to the
    uninterrupted one (same world size, same sums)."""
    after = runs['after_kill']
    assert after['last'].endswith('/killed/epoch_2.pth')
    assert 'epoch_3.pth' not in after['files'] and '.epoch_3.pth.sharded.tmp' in after['files']
    killed = osp.join(runs['tmp'], 'killed')
    left = os.listdir(killed)
    assert {'epoch_3.pth', 'epoch_4.pth'} <= set(left) and not [f for f in left if 'tmp' in f]
    resumed = _tensors(osp.join(killed, 'epoch_4.pth'))
    straight = _tensors(osp.join(runs['tmp'], 'straight', 'epoch_4.pth'))
    assert list(resumed) == list(straight)
    assert all(torch.equal(resumed[k], straight[k]) for k in straight)


def _straight_file(tmp, pattern):
    (path, ) = glob.glob(osp.join(tmp, 'straight', pattern))
    return path


def test_minimm_test_reads_a_sharded_checkpoint_in_one_process(runs, capsys):
    from minimm.cli import main
    sharded = _straight_file(runs['tmp'], 'epoch_4.pth')
    assert osp.isdir(sharded)
    main(['test', _config_file(runs['tmp']), '--checkpoint', sharded, '--work-dir',
          osp.join(runs['tmp'], 'tested')])
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed == str({'toy/acc': runs['straight'][0]['acc']})


def test_the_consolidated_files_give_the_sharded_run_s_validation_accuracy(runs):
    """A sharded checkpoint made one whole file on rank 0: gathered by every rank
    (save_full_checkpoint), published (CheckpointHook's published_keys) and EMA-only
    (EMAOnlyCheckpointHook), each read here with
    torch.load(weights_only=True) and validated in one process. EMAHook swaps the EMA weights in
    for validation and into state_dict, so both hold what the run validated."""
    import sharded_toy
    from toy import ToyDataset
    sharded = _tensors(_straight_file(runs['tmp'], 'epoch_4.pth'))
    val = ToyDataset(24, seed=1)
    raw = torch.load(_straight_file(runs['tmp'], 'full.pth'), weights_only=True)['state_dict']
    assert all(torch.equal(v, sharded[f'/ema_state_dict/module.{k}']) for k, v in raw.items())

    def accuracy(state_dict):
        model = sharded_toy.ShardedToyModel()
        model.load_state_dict(state_dict)
        with torch.no_grad():
            return 100.0 * (model(val.x).argmax(1) == val.y).sum().item() / len(val)
    for pattern in ('epoch_4-*.pth', 'epoch_4_ema.pth'):
        whole = torch.load(_straight_file(runs['tmp'], pattern), weights_only=True)
        assert sorted(whole) == ['meta', 'state_dict'] and whole['meta']['world_size'] == 2
        assert all(torch.equal(v, sharded[f'/state_dict/{k}'])
                   for k, v in whole['state_dict'].items())
        assert accuracy(whole['state_dict']) == runs['straight'][0]['acc']
    # And back: the sharded model loads the whole file (load_from) and validates it alike.
    for rank in runs['from_file']:
        assert rank['acc'] == accuracy(raw)
        assert 'cannot resume the sharded model from the file' in rank['refused']


def test_max_keep_ckpts_deletes_old_sharded_checkpoints_and_nothing_else(runs, tmp_path):
    from minimm.hooks.checkpoint_hook import _remove
    names = sorted(os.listdir(osp.join(runs['tmp'], 'straight')))
    # max_keep_ckpts=2: epoch_1 and epoch_2 deleted (and their EMA-only twins with them)
    assert [n for n in names if n.startswith('epoch_') and '-' not in n] == [
        'epoch_3.pth', 'epoch_3_ema.pth', 'epoch_4.pth', 'epoch_4_ema.pth']
    # A folder of that name that is not a sharded checkpoint is not ours to delete.
    (tmp_path / 'epoch_1.pth').mkdir()
    (tmp_path / 'epoch_1.pth' / 'notes.txt').write_text('mine')
    assert not _remove(str(tmp_path / 'epoch_1.pth'))
    assert (tmp_path / 'epoch_1.pth' / 'notes.txt').exists()
    ours = str(tmp_path / 'epoch_2.pth')
    shutil.copytree(osp.join(runs['tmp'], 'at2', 'epoch_2.pth'), ours)
    assert _remove(ours) and not osp.exists(ours)


def test_posthoc_ema_on_sharded_snapshots_equals_the_whole_tensor_run(runs, tmp_path):
    from minimm.posthoc_cli import main as posthoc_main
    from minimm.sharded_checkpoint import is_sharded_checkpoint
    in_training = glob.glob(osp.join(runs['tmp'], 'straight', 'posthoc_ema', '*'))
    assert len(in_training) == 4 and all(map(is_sharded_checkpoint, in_training))  # iter 4, 8
    sharded = osp.join(runs['tmp'], 'posthoc_sharded')
    _posthoc_snapshots(str(tmp_path / 'whole'))
    snapshots = sorted(os.listdir(osp.join(sharded, 'posthoc_ema')))
    assert snapshots == sorted(os.listdir(tmp_path / 'whole' / 'posthoc_ema'))
    assert len(snapshots) == 6 and all(osp.isdir(osp.join(sharded, 'posthoc_ema', name))
                                       for name in snapshots)
    for work_dir, out in ((sharded, tmp_path / 'from_shards.pth'),
                          (str(tmp_path / 'whole'), tmp_path / 'from_files.pth')):
        posthoc_main([work_dir, '--sigma-rel', '0.1', '--out', str(out)])
    from_shards = torch.load(tmp_path / 'from_shards.pth', weights_only=True)['state_dict']
    from_files = torch.load(tmp_path / 'from_files.pth', weights_only=True)['state_dict']
    assert list(from_shards) == list(from_files)
    assert all(torch.equal(from_shards[k], from_files[k]) for k in from_files)


class _Plant:
    """Unpickled, it would create the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, 'w')


def test_reading_a_sharded_checkpoint_runs_no_code_from_its_index(runs, tmp_path):
    import pickle

    from minimm.checkpoint import UntrustedCheckpointError
    from minimm.sharded_checkpoint import read_checkpoint
    planted = tmp_path / 'epoch_4.pth'
    shutil.copytree(_straight_file(runs['tmp'], 'epoch_4.pth'), planted)
    with open(planted / '.metadata', 'wb') as f:
        pickle.dump(_Plant(str(tmp_path / 'ran')), f)
    with pytest.raises(UntrustedCheckpointError, match=r"names io\.open.*trusted=True"):
        read_checkpoint(str(planted))
    assert not (tmp_path / 'ran').exists()


def test_state_dict_cfg_full_writes_whole_files_that_resume_sharded(runs):
    """FSDPStrategy(state_dict_cfg='full'): every checkpoint one whole file on rank 0 (read with
    weights_only=True); resumed, its shards are cut again and the run goes on bit for bit as
    the sharded-checkpoint run."""
    folder = osp.join(runs['tmp'], 'whole_files')
    for epoch in (1, 2):
        path = osp.join(folder, f'epoch_{epoch}.pth')
        assert osp.isfile(path)
        meta = torch.load(path, weights_only=True)['meta']
        assert meta['world_size'] == 2 and meta['shard_layout']['state_dict/layers.0.weight'] == [
            'Shard(0)']
    resumed = _tensors(osp.join(folder, 'epoch_2.pth'))
    straight = _tensors(osp.join(runs['tmp'], 'at2', 'epoch_2.pth'))
    assert list(resumed) == list(straight)
    assert all(torch.equal(resumed[k], straight[k]) for k in straight)
