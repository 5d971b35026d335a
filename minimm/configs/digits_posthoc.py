# The digits demo with post-hoc EMA (a minimm addition, EDM2's method): instead of one EMA whose
# length is fixed before training, PostHocEMAHook keeps two power-function EMAs (sigma_rel 0.05
# and 0.10: the last ~5 % and ~10 % of the run) in one fused pass, and writes a snapshot of each
# every 9 iterations (40 per width over the 8 epochs' 360 iterations) into
# work_dirs/digits_posthoc/posthoc_ema/. After training, choose the length:
#   minimm posthoc-ema work_dirs/digits_posthoc --sweep 0.02,0.05,0.1,0.2
#   minimm posthoc-ema work_dirs/digits_posthoc --sigma-rel 0.08 --out ema_0.08.pth
# Validation during training sees the raw weights (no EMAHook here).
_base_ = ['./digits_ema.py']
work_dir = 'work_dirs/digits_posthoc'
custom_hooks = [dict(type='PostHocEMAHook', sigma_rels=(0.05, 0.10), snapshot_interval=9)]
