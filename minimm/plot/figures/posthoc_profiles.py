"""The post-hoc EMA picture: which past weights an EMA averages, and how snapshots rebuild another.

Left: the profiles of three kinds of average at the end of a run of length 1, the weight each
gives the weights seen at time ``tau``: MMEngine's ExponentialMovingAverage (``momentum`` fixed,
so its length is a number of steps: a short run sees mostly its start, a long one only its end)
and two power-function EMAs (EDM2's sigma_rel 0.05 and 0.10, whose length is a share of the run).
Right: the profile of sigma_rel 0.08, and the one :func:`minimm.model.posthoc_ema.combination`
builds from snapshots of the two others every 1/20 of the run: the curves lie on each other.
"""
from typing import Dict, Tuple

import numpy as np

from ...model.averaged_model import power_gamma
from ...model.posthoc_ema import combination

SNAPSHOTS = 20  # per width, at 1/20, 2/20, ... of the run


def power_profile(tau: np.ndarray, gamma: float, t: float) -> np.ndarray:
    """``(gamma + 1) tau**gamma / t**(gamma + 1)`` on [0, t], 0 after."""
    return np.where(tau <= t, (gamma + 1) * tau ** gamma / t ** (gamma + 1), 0.0)


def profile_curves(points: int = 801) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
    """``tau`` on [0, 1] and each curve of the picture by its label."""
    tau = np.linspace(0.0, 1.0, points)
    curves = {}
    for steps in (100, 1000):  # momentum 0.01 after 100 and after 1,000 steps, time scaled to 1
        decay = 0.99 ** ((1 - tau) * steps)
        curves[f'EMA momentum 0.01, {steps} steps'] = 0.01 * steps * decay
    for sigma in (0.05, 0.10):
        curves[f'power EMA sigma_rel {sigma:.2f}'] = power_profile(tau, power_gamma(sigma), 1.0)
    gammas = [power_gamma(s) for s in (0.05, 0.10) for _ in range(SNAPSHOTS)]
    steps = [i / SNAPSHOTS for _ in range(2) for i in range(1, SNAPSHOTS + 1)]
    weights = combination(gammas, steps, power_gamma(0.08), 1.0)
    curves['sigma_rel 0.08, exact'] = power_profile(tau, power_gamma(0.08), 1.0)
    curves['sigma_rel 0.08, from the snapshots'] = sum(
        w * power_profile(tau, g, t) for w, g, t in zip(weights, gammas, steps))
    return tau, curves


def draw_posthoc_profiles(out: str) -> str:
    from .. import require_pyplot, save_figure
    plt = require_pyplot()
    tau, curves = profile_curves()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    for label, curve in list(curves.items())[:4]:
        left.plot(tau, curve, label=label, linestyle='--' if 'momentum' in label else '-')
    left.set(title='whose weights an average holds, at the end of a run',
             xlabel='time tau, as a share of the run', ylabel='weight (density)')
    for label in ('sigma_rel 0.08, exact', 'sigma_rel 0.08, from the snapshots'):
        right.plot(tau, curves[label], label=label,
                   linestyle=':' if 'snapshots' in label else '-', linewidth=2.5)
    right.set(title=f'post-hoc: 0.08 from {SNAPSHOTS} snapshots each of 0.05 and 0.10',
              xlabel='time tau, as a share of the run')
    for ax in (left, right):
        ax.legend(fontsize=8, frameon=False, loc='upper left')
        ax.grid(alpha=0.3)
    return save_figure(fig, out)
