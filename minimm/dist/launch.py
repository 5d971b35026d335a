"""Starting a distributed run: join the process group that ``torchrun`` prepared.

``torchrun --nproc_per_node N script.py`` starts N copies of the script and tells each one who it
is through environment variables: ``RANK`` (its number among all processes), ``LOCAL_RANK`` (its
number on this machine, i.e. which GPU it should use), ``WORLD_SIZE``, ``MASTER_ADDR`` and
``MASTER_PORT`` (where rank 0 listens). :func:`init_dist` reads them, pins the process to its GPU
and calls ``torch.distributed.init_process_group``; after that the helpers in ``utils.py`` and
``collectives.py`` see the real rank and world size.

The backend follows the hardware: NCCL when CUDA is available, gloo otherwise. A configured
``'nccl'`` on a machine without CUDA (MMEngine's default ``env_cfg`` asks for NCCL) falls back to
gloo with a warning, so one config trains on a GPU cluster and on a laptop.
Two other launchers start the processes their own way and describe them in their own variables;
:func:`init_dist` translates those into torchrun's, as MMEngine does, and goes on the same way:

* ``'slurm'`` (``srun python -m minimm.cli train ... --launcher slurm``, one task per GPU):
  ``SLURM_PROCID`` is the rank, ``SLURM_NTASKS`` the world size, ``SLURM_LOCALID`` the local rank;
  the master is the first host of ``SLURM_NODELIST`` as ``scontrol show hostname`` expands it
  (unless ``MASTER_ADDR`` is set), and the port is ``port=`` (``dist_cfg``), else ``MASTER_PORT``,
  else 29500.
* ``'mpi'`` (``mpirun -np N ... --launcher mpi``, Open MPI): ``OMPI_COMM_WORLD_RANK``,
  ``OMPI_COMM_WORLD_SIZE`` and ``OMPI_COMM_WORLD_LOCAL_RANK``; ``MASTER_ADDR`` must be set (Open
  MPI does not say where rank 0 runs), ``MASTER_PORT`` defaults to 29500.

``timeout`` (seconds, in ``dist_cfg``) bounds every collective: a rank that died or hangs makes
the others fail after that long instead of waiting for ever (torch's defaults: 30 minutes for
gloo, 10 for NCCL). Left out compared with MMEngine: NPU/MLU/MUSA devices, SageMaker's ``smddp``
and DeepSpeed initialisation.
"""
import datetime
import os
import socket
import subprocess
import warnings
from typing import Optional

import torch
import torch.distributed as torch_dist

LAUNCHERS = ('pytorch', 'slurm', 'mpi')
_TORCHRUN_VARIABLES = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')


def _pick_backend(backend: Optional[str]) -> str:
    if backend is None:
        return 'nccl' if torch.cuda.is_available() else 'gloo'
    if backend == 'nccl' and not torch.cuda.is_available():
        # A warning, not a log line: the logger stands on this package (it asks for the rank).
        warnings.warn("dist backend 'nccl' needs CUDA, which is not available: using 'gloo'")
        return 'gloo'
    return backend


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, for ``MASTER_PORT`` of a run on one machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _slurm_to_torchrun(port: Optional[int]) -> None:
    """Set torchrun's variables from Slurm's (see the module docstring)."""
    missing = [name for name in ('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_NODELIST')
               if name not in os.environ]
    if missing:
        raise RuntimeError(f"launcher='slurm' needs the environment variables srun sets; missing: "
                           f"{', '.join(missing)}. Start the run with `srun ...`")
    rank = int(os.environ['SLURM_PROCID'])
    local_rank = os.environ.get('SLURM_LOCALID')
    if local_rank is None:  # one task per GPU, tasks dealt to the GPUs in turn
        local_rank = rank % max(torch.cuda.device_count(), 1)
    if port is not None:
        os.environ['MASTER_PORT'] = str(port)
    os.environ.setdefault('MASTER_PORT', '29500')
    if 'MASTER_ADDR' not in os.environ:
        hosts = subprocess.run(['scontrol', 'show', 'hostname', os.environ['SLURM_NODELIST']],
                               capture_output=True, text=True, check=True).stdout.split()
        os.environ['MASTER_ADDR'] = hosts[0]
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(local_rank),
                      WORLD_SIZE=os.environ['SLURM_NTASKS'])


def _mpi_to_torchrun() -> None:
    """Set torchrun's variables from Open MPI's (see the module docstring)."""
    missing = [name for name in ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE',
                                 'OMPI_COMM_WORLD_LOCAL_RANK', 'MASTER_ADDR')
               if name not in os.environ]
    if missing:
        raise RuntimeError(f"launcher='mpi' needs the environment variables mpirun (Open MPI) "
                           f"sets, and MASTER_ADDR; missing: {', '.join(missing)}")
    os.environ.setdefault('MASTER_PORT', '29500')
    os.environ.update(RANK=os.environ['OMPI_COMM_WORLD_RANK'],
                      LOCAL_RANK=os.environ['OMPI_COMM_WORLD_LOCAL_RANK'],
                      WORLD_SIZE=os.environ['OMPI_COMM_WORLD_SIZE'])


def init_dist(launcher: str, backend: Optional[str] = None, **kwargs) -> None:
    """Initialise the default process group for a run started by ``launcher``.

    Args:
        launcher: ``'pytorch'`` — the process was started by ``torchrun`` (or sets the same
            environment variables itself, as the tests do); ``'slurm'`` — by ``srun``;
            ``'mpi'`` — by Open MPI's ``mpirun``.
        backend: ``'nccl'``, ``'gloo'``, or None for NCCL with CUDA and gloo without.
        **kwargs: passed to ``torch.distributed.init_process_group``; ``timeout`` may be given in
            seconds (as in MMEngine configs: ``dist_cfg=dict(backend='nccl', timeout=1800)``);
            ``port`` (slurm only) is the master's port.
    """
    if launcher not in LAUNCHERS:
        raise ValueError(f'launcher must be one of {LAUNCHERS}, but got {launcher!r}')
    port = kwargs.pop('port', None)
    if launcher == 'slurm':
        _slurm_to_torchrun(port)
    elif launcher == 'mpi':
        _mpi_to_torchrun()
    missing = [name for name in _TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise RuntimeError(f"launcher='pytorch' needs the environment variables that torchrun "
                           f"sets; missing: {', '.join(missing)}. Start the run with "
                           '`torchrun --nproc_per_node N ...`')
    timeout = kwargs.get('timeout')
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f'timeout must be a number of seconds, but got {timeout!r}')
        kwargs['timeout'] = datetime.timedelta(seconds=timeout)
    backend = _pick_backend(backend)
    if torch.cuda.is_available():
        # One GPU per process: LOCAL_RANK k uses GPU k of its machine.
        torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
    torch_dist.init_process_group(backend=backend, rank=int(os.environ['RANK']),
                                  world_size=int(os.environ['WORLD_SIZE']), **kwargs)


def destroy_dist() -> None:
    """Leave the process group once every rank is done (call at the end of a distributed run).

    Without it a rank that finishes first exits while its communication threads are still alive,
    and the process aborts ("terminate called without an active exception").
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()
