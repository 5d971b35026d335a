# The digits CNN trained the MMCV 1.x way: `minimm train minimm/configs/digits_mmcv1.py`.
# Every key below is an MMCV 1.x / MMDetection 2.x config key; compare with digits_ema.py, the
# same training written for MMEngine.
model = dict(type='MMCVDigitsClassifier')
work_dir = 'work_dirs/digits_mmcv1'

data = dict(
    samples_per_gpu=32,
    workers_per_gpu=0,
    val_samples_per_gpu=120,
    train=dict(type='MMCVDigitsDataset', split='train'),
    val=dict(type='MMCVDigitsDataset', split='val'))

optimizer = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4)
optimizer_config = dict(grad_clip=dict(max_norm=10, norm_type=2))  # OptimizerHook
# 'step' becomes StepLrUpdaterHook: x0.1 after epochs 5 and 7; linear warm-up over 20 iterations.
lr_config = dict(policy='step', step=[5, 7], warmup='linear', warmup_iters=20, warmup_ratio=0.1)
runner = dict(type='EpochBasedRunner', max_epochs=8)

checkpoint_config = dict(interval=1, max_keep_ckpts=2)
# With `pip install -e ".[tensorboard]"`, add dict(type='TensorboardLoggerHook') for TensorBoard.
log_config = dict(interval=15, hooks=[dict(type='TextLoggerHook')])
# EvalHook after every epoch; keeps best_accuracy_epoch_N.pth.
evaluation = dict(interval=1, save_best='auto')
# MMCV's EMAHook: EMA buffers on the model, swapped in after each train epoch, so the checkpoint
# and the evaluation (priorities 50 and 70) see the averaged weights. momentum is the weight of
# the new value, as in MMEngine.
custom_hooks = [dict(type='EMAHook', momentum=0.02, priority=49)]

workflow = [('train', 1)]
# On several processes (--launcher pytorch|slurm|mpi): timeout (seconds, a minimm convenience;
# MMCV 1.7.2 passes it to torch as is, which wants a datetime.timedelta) stops the run when a rank
# died or hangs, instead of torch's default 30 minutes (gloo) or 10 (NCCL).
dist_params = dict(backend='nccl', timeout=300)
seed = 0
resume_from = None
load_from = None
