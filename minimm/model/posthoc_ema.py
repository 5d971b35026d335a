"""Post-hoc EMA: build the EMA of any length after training from a few snapshots (EDM2).

A power-function EMA with exponent ``gamma`` (:class:`~minimm.model.PowerFunctionEMA`), after
``t`` averaging calls, is a weighted average of the weights seen at the calls ``tau`` in
``(0, t]``, with weights that follow its *profile* (for large ``t``, as a density)::

    p(tau) = (gamma + 1) * tau**gamma / t**(gamma + 1)        on [0, t], 0 after t

PostHocEMAHook stores snapshots of two such EMAs (two exponents) at many times ``t_i``. Any
linear combination ``sum_i x_i * snapshot_i`` is then a weighted average of the training
weights with profile ``sum_i x_i * p_i``. To get the EMA of another width ``sigma_rel`` at step
``t``, :func:`synthesize` chooses the ``x`` whose profile is closest, in L2, to that EMA's own
profile ``q``: the normal equations ``A x = b`` with ``A_ij = <p_i, p_j>`` and
``b_i = <p_i, q>``, solved in float64 (Karras et al., "Analyzing and Improving the Training
Dynamics of Diffusion Models", CVPR 2024, section 3).

The inner product of two profiles has a closed form: both are ``c * tau**gamma`` up to the
shorter end ``m = min(t_a, t_b)``, so

    <p_a, p_b> = (g_a + 1) (g_b + 1) m**(g_a + g_b + 1)
                 / ((g_a + g_b + 1) t_a**(g_a + 1) t_b**(g_b + 1))

(:func:`profile_dot`). Snapshots taken after ``t`` are not used: they have seen later weights.
"""
import glob
import os.path as osp
from typing import Dict, List, Optional

import numpy as np
import torch

from ..checkpoint import CheckpointError
from ..sharded_checkpoint import read_checkpoint
from .averaged_model import SIGMA_REL_MAX, power_gamma


def profile_dot(gamma_a, t_a, gamma_b, t_b):
    """``<p_a, p_b>``, the integral of the product of two power-function profiles (numpy arrays
    broadcast), computed in float64 through logarithms so that large steps do not overflow."""
    gamma_a, t_a, gamma_b, t_b = (np.asarray(v, dtype=np.float64)
                                  for v in (gamma_a, t_a, gamma_b, t_b))
    m = np.minimum(t_a, t_b)
    s = gamma_a + gamma_b + 1
    log = s * np.log(m) - (gamma_a + 1) * np.log(t_a) - (gamma_b + 1) * np.log(t_b)
    return (gamma_a + 1) * (gamma_b + 1) / s * np.exp(log)


def combination(gammas, steps, gamma: float, step: float) -> np.ndarray:
    """The least-squares weights ``x`` of the profiles ``(gammas[i], steps[i])`` for the profile
    ``(gamma, step)`` (float64; ``lstsq``, since nearby snapshots make ``A`` ill-conditioned)."""
    g, t = np.asarray(gammas, dtype=np.float64), np.asarray(steps, dtype=np.float64)
    a = profile_dot(g[:, None], t[:, None], g[None, :], t[None, :])
    b = profile_dot(g, t, gamma, step)
    return np.linalg.lstsq(a, b, rcond=None)[0]


def read_snapshots(snapshot_dir: str) -> List[dict]:
    """Every snapshot's ``path``, ``gamma``, ``step``, ``sigma_rel`` and ``iter``, by step (the
    files are mapped, not read: only the weights :func:`synthesize` combines are read)."""
    paths = sorted(glob.glob(osp.join(glob.escape(snapshot_dir), '*.pth')))
    if not paths:
        raise FileNotFoundError(f'synthesize: no snapshots (*.pth) in {snapshot_dir!r}; '
                                'PostHocEMAHook writes them into <work_dir>/posthoc_ema')
    found = []
    for path in paths:
        # The small entries only (a file is mapped, a sharded snapshot's shards are not read).
        snapshot = read_checkpoint(path, mmap=True, keys=('gamma', 'step', 'sigma_rel', 'iter'))
        if not {'gamma', 'step'} <= set(snapshot):
            raise CheckpointError(f'{path} is not a PostHocEMAHook snapshot (no gamma/step)')
        found.append(dict(path=path, gamma=float(snapshot['gamma']), step=int(snapshot['step']),
                          sigma_rel=snapshot.get('sigma_rel'), iter=snapshot.get('iter')))
    return sorted(found, key=lambda s: (s['step'], s['gamma']))


def synthesize(snapshot_dir: str, sigma_rel: float,
               step: Optional[int] = None) -> Dict[str, torch.Tensor]:
    """The state dict of the power-function EMA of width ``sigma_rel`` at averaging step ``step``
    (default: the last snapshot's), combined from the snapshots in ``snapshot_dir``.

    The averaged entries (the snapshots' ``averaged`` names) are the least-squares combination
    (summed in float64, returned in the snapshots' dtype); the others (buffers mirrored from the
    model, counters) are the latest used snapshot's.
    """
    if not 0 < sigma_rel < SIGMA_REL_MAX:
        raise ValueError(f'synthesize: sigma_rel={sigma_rel!r} must be in (0, {SIGMA_REL_MAX})')
    gamma = power_gamma(sigma_rel)
    snapshots = read_snapshots(snapshot_dir)
    last = snapshots[-1]['step']
    step = last if step is None else step
    if not 1 <= step <= last:
        raise ValueError(f'synthesize: step={step!r} must be in [1, {last}] (the last snapshot)')
    used = [s for s in snapshots if s['step'] <= step]
    weights = combination([s['gamma'] for s in used], [s['step'] for s in used], gamma, step)
    total: Dict[str, torch.Tensor] = {}
    for snapshot, weight in zip(used, weights):
        loaded = read_checkpoint(snapshot['path'])  # a file, or a sharded snapshot's folder
        state, averaged = loaded['state_dict'], set(loaded.get('averaged', loaded['state_dict']))
        for name, value in state.items():
            if name in averaged and value.is_floating_point():
                term = value.double() * float(weight)
                total[name] = term if name not in total else total[name] + term
            else:
                total[name] = value
        dtypes = {name: value.dtype for name, value in state.items()}
    return {name: value.to(dtypes[name]) for name, value in total.items()}
