# The demo: a small CNN on the 8x8 handwritten digits (shipped with minimm), trained with EMA.
# Every key below is an MMEngine config key; `minimm train minimm/configs/digits_ema.py` runs it.
model = dict(type='DigitsCNN')
work_dir = 'work_dirs/digits_ema'

train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='DigitsDataset', split='train'))
# Validation reads the same way as training, in larger batches, in order, from the val split.
val_dataloader = dict(train_dataloader, batch_size=120,
                      sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(type='DigitsDataset', split='val'))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy')
test_evaluator = val_evaluator

train_cfg = dict(by_epoch=True, max_epochs=8, val_interval=1)
val_cfg = dict()
test_cfg = dict()

optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4))
param_scheduler = [
    # Warm up over the first 20 iterations, then cosine-anneal per epoch. No `end`: as in MMEngine,
    # it then ends with training, so `--cfg-options train_cfg.max_epochs=2` anneals over 2 epochs.
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0),
]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=15),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2, save_best='auto'))

# EMA of the weights; validation and the saved `state_dict` use the averaged weights.
# momentum is the weight of the *new* value (MMEngine's convention). MomentumAnnealingEMA starts
# it at 1 and lowers it as gamma / (gamma + steps), never below `momentum`: 0.5 after 10
# iterations, 0.1 after 90, 0.027 after the 360 of 8 epochs. A fixed momentum of 0.01 would keep
# 0.99^90 = 40 % of the random initial weights after a 2-epoch run (chance accuracy); annealed,
# the average holds only trained weights, so short runs are worth evaluating too. Priority 49
# runs it before other NORMAL hooks, as MMDetection's configs do.
custom_hooks = [dict(type='EMAHook', ema_type='MomentumAnnealingEMA', momentum=0.01, gamma=10,
                     priority=49)]

randomness = dict(seed=0)
# On several processes (--launcher pytorch|slurm|mpi): NCCL on GPUs (gloo without CUDA). timeout
# (seconds) bounds every collective, so a rank that died or hangs stops the others within 5
# minutes instead of torch's default 30 (gloo) or 10 (NCCL).
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='nccl', timeout=300))
