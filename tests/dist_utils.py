"""Run a test body in 2 processes joined by a gloo process group on 127.0.0.1.

``run_distributed(fn, tmp_path, *args)`` spawns ``world_size`` processes; each sets the variables
``torchrun`` would set, calls ``minimm.dist.init_dist('pytorch', backend=backend)`` (the code path
a real run takes), runs ``fn(rank, *args)`` and saves its return value; the parent gets the list
of return values, rank by rank. An exception in any rank fails the test with that rank's traceback.
``fn`` must be a module-level function (the children import it by name).

The backend: gloo, unless the test passes another or ``MINIMM_DIST_BACKEND=nccl`` asks for NCCL
(tests/gpu_check.sh does, for the sharded tests, on a machine with two GPUs or more); a test body
that should run under both puts its tensors on ``rank_device(rank)``.
"""
import gc
import glob
import os

import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp

from minimm.dist import free_port


def _worker(rank, world_size, port, out_dir, fn, args, backend):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    torch.set_num_threads(1)  # 2 processes on 2 cores
    from minimm.dist import init_dist
    init_dist('pytorch', backend=backend, timeout=60)
    try:
        result = fn(rank, *args)
        torch.save(result, os.path.join(out_dir, f'rank{rank}.pt'))
        del result
        gc.collect()  # what fn built (a DDP model and its reducer) goes while the group lives
        # The ranks leave together: a rank that tears gloo down while its peer still has a
        # collective in flight makes the peer abort ("terminate called without an active
        # exception"), which failed about one run in four.
        torch_dist.barrier()
    finally:
        torch_dist.destroy_process_group()
    # The result is on disk and the group is gone. The interpreter's own teardown can still
    # abort in gloo's or DDP's threads (SIGABRT, "terminate called without an active
    # exception"; seen once in three full CI runs), so leave without it.
    os._exit(0)


BACKENDS = ('gloo', 'nccl')


def dist_backend() -> str:
    """The backend MINIMM_DIST_BACKEND asks for: gloo when unset."""
    backend = os.environ.get('MINIMM_DIST_BACKEND', 'gloo')
    if backend not in BACKENDS:
        raise ValueError(f'MINIMM_DIST_BACKEND={backend!r}: allowed values are {", ".join(BACKENDS)}')
    return backend


def rank_device(rank: int) -> torch.device:
    """Where rank `rank` keeps its tensors: its own GPU under NCCL (which moves CUDA tensors only,
    one GPU per rank as init_dist sets it), the CPU under gloo."""
    return torch.device('cuda', rank) if dist_backend() == 'nccl' else torch.device('cpu')


def run_distributed(fn, tmp_path, *args, world_size: int = 2, backend: str = None) -> list:
    backend = backend or dist_backend()
    out_dir = os.path.join(str(tmp_path), 'dist_results')
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(_worker, args=(world_size, free_port(), out_dir, fn, args, backend), nprocs=world_size)
    return [torch.load(os.path.join(out_dir, f'rank{r}.pt'), weights_only=False)
            for r in range(world_size)]


def torchrun_train(config: str, work_dir, cfg_options, cwd, nproc: int = 2, env=None):
    """Run ``minimm train CONFIG --launcher pytorch`` under torchrun with ``nproc`` CPU processes
    (``env``: more environment variables); fail with the output tail if it fails."""
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', str(nproc),
               '--master_addr', '127.0.0.1', '--master_port', str(free_port()),
               '-m', 'minimm.cli', 'train', config, '--launcher', 'pytorch',
               '--work-dir', str(work_dir), '--cfg-options', *cfg_options]
    # The reference ops (same numbers): the test is about the launch, not the native build, which
    # fresh processes would otherwise wait for when the extension cache is stale.
    extra = dict(PYTHONPATH=repo)
    extra.update(env or {})
    env = dict(os.environ, OMP_NUM_THREADS='1', MINIMM_NO_EXT='1', **extra)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def audited_train(config, tmp_path, cfg_options):
    """Train under torchrun on 2 processes; return the work dir and ``{rank: [what it wrote]}``."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work_dir, out = tmp_path / 'work', tmp_path / 'audit'
    out.mkdir()
    env = dict(MINIMM_AUDIT_DIR=str(work_dir), MINIMM_AUDIT_OUT=str(out),
               PYTHONPATH=os.pathsep.join([os.path.join(repo, 'tests', 'write_audit'), repo]))
    torchrun_train(config, work_dir, cfg_options, cwd=tmp_path, env=env)
    writes = {}
    for path in glob.glob(str(out / '*.txt')):
        rank = os.path.basename(path).split('-')[0]
        with open(path) as f:
            lines = [line for line in f.read().splitlines() if line]
        if lines:
            writes.setdefault(rank, []).extend(lines)
    return work_dir, writes
