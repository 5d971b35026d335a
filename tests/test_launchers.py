"""``init_dist('slurm')`` and ``init_dist('mpi')`` on 2 CPU processes (gloo), each started the way
``srun`` or ``mpirun`` would start it: with only that launcher's environment variables (and, for
Slurm, a fake ``scontrol`` on PATH that expands the node list to this machine first)."""
import os
import stat
import subprocess
import sys

from minimm.dist import free_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Joins the group, sums the ranks, reports what it saw; MMEngine's dist_cfg passes port= for slurm.
BODY = """
import os, sys, torch
from minimm import dist
kwargs = dict(backend='gloo', timeout=60)
if sys.argv[1] == 'slurm':
    kwargs['port'] = int(sys.argv[2])
dist.init_dist(sys.argv[1], **kwargs)
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
print(dist.get_rank(), dist.get_world_size(), int(total.item()), os.environ['MASTER_ADDR'],
      os.environ['MASTER_PORT'], os.environ['LOCAL_RANK'])
dist.destroy_dist()
"""
_TORCHRUN = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')


def _launch(launcher, envs, port, path_dir=None):
    base = {k: v for k, v in os.environ.items() if k not in _TORCHRUN and
            not k.startswith(('SLURM_', 'OMPI_'))}
    base.update(PYTHONPATH=REPO, OMP_NUM_THREADS='1', MINIMM_NO_EXT='1')
    if path_dir is not None:
        base['PATH'] = path_dir + os.pathsep + base['PATH']
    procs = [subprocess.Popen([sys.executable, '-c', BODY, launcher, str(port)],
                              env=dict(base, **env), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for env in envs]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    return sorted(out.split() for out, _ in outs)


def test_slurm_launch_finds_the_master_with_scontrol(tmp_path):
    scontrol = tmp_path / 'scontrol'
    # `scontrol show hostname node[1-2]` prints one host a line; the first is the master.
    scontrol.write_text('#!/bin/sh\n[ "$1 $2 $3" = "show hostname node[1-2]" ] || exit 1\n'
                        'printf "127.0.0.1\\nnode2\\n"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    port = free_port()
    envs = [dict(SLURM_PROCID=str(r), SLURM_NTASKS='2', SLURM_NODELIST='node[1-2]',
                 SLURM_LOCALID=str(r)) for r in range(2)]
    seen = _launch('slurm', envs, port, str(tmp_path))
    assert seen == [['0', '2', '3', '127.0.0.1', str(port), '0'],
                    ['1', '2', '3', '127.0.0.1', str(port), '1']]


def test_mpi_launch_reads_open_mpi_variables():
    port = free_port()
    envs = [dict(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE='2',
                 OMPI_COMM_WORLD_LOCAL_RANK=str(r), MASTER_ADDR='127.0.0.1',
                 MASTER_PORT=str(port)) for r in range(2)]
    seen = _launch('mpi', envs, port)
    assert seen == [['0', '2', '3', '127.0.0.1', str(port), '0'],
                    ['1', '2', '3', '127.0.0.1', str(port), '1']]


def test_a_launcher_missing_its_variables_is_named():
    import pytest
    from minimm.dist import init_dist
    with pytest.raises(RuntimeError, match='SLURM_PROCID'):
        init_dist('slurm', backend='gloo')
    with pytest.raises(ValueError, match="launcher must be one of"):
        init_dist('mpich', backend='gloo')
