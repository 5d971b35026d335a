"""Repeat the post-hoc EMA race: ``python tests/repeat_posthoc_race.py [RUNS] [EPOCHS]``.

Trains ``minimm/configs/digits_posthoc.py`` under torchrun on 2 CPU processes (gloo) RUNS times
(default 10) for EPOCHS epochs (default 1: snapshots at iterations 9, 18 and 23, two widths each)
and counts the runs that exit 0 with every snapshot in place and no temporary file left. When
every rank wrote every snapshot, and the atomic write's clean-up deleted the other rank's
temporary file, most runs died at a snapshot (issue 40). Too slow for CI (a run takes tens of
seconds on 2 cores); the suite runs it once (tests/test_dist_writes.py).
"""
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from minimm.dist import free_port  # noqa: E402


def one_run(work_dir: str, epochs: int) -> str:
    """'ok', or what went wrong."""
    command = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2',
               '--master_addr', '127.0.0.1', '--master_port', str(free_port()), '-m',
               'minimm.cli', 'train', os.path.join(REPO, 'minimm', 'configs', 'digits_posthoc.py'),
               '--launcher', 'pytorch', '--work-dir', work_dir,
               '--cfg-options', f'train_cfg.max_epochs={epochs}']
    env = dict(os.environ, OMP_NUM_THREADS='1', MINIMM_NO_EXT='1', PYTHONPATH=REPO)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if 'minimm: error' in line]
        return f'exit {done.returncode}: {errors[:1]}'
    names = os.listdir(os.path.join(work_dir, 'posthoc_ema'))
    iters = sorted({9 * k for k in range(1, 23 * epochs // 9 + 1)} | {23 * epochs})
    if sorted(names) != sorted(f'sigma_{s:.3f}_iter_{i:07d}.pth' for s in (0.05, 0.1)
                               for i in iters):
        return f'snapshots: {sorted(names)}'
    return 'ok'


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(runs):
            start = time.perf_counter()
            results.append(one_run(os.path.join(tmp, f'run{index}'), epochs))
            print(f'run {index + 1}/{runs}: {results[-1]} ({time.perf_counter() - start:.0f} s)',
                  flush=True)
    print(f'{results.count("ok")}/{runs} runs green')
    sys.exit(0 if results.count('ok') == runs else 1)


if __name__ == '__main__':
    main()
