# minidet's config: every name below is found through `default_scope = 'minidet'`.
# DigitsMLP and CheckInvalidLossHook are minidet's (its child registries); DigitsDataset,
# Accuracy, SGD and the default hooks are minimm's (the root registries, the children's parents).
default_scope = 'minidet'

model = dict(type='DigitsMLP', hidden=64)
work_dir = 'work_dirs/minidet_digits_mlp'

train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='DigitsDataset', split='train'))
val_dataloader = dict(train_dataloader, batch_size=120,
                      sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(type='DigitsDataset', split='val'))
val_evaluator = dict(type='Accuracy')

train_cfg = dict(by_epoch=True, max_epochs=3, val_interval=1)
val_cfg = dict()

optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9))
param_scheduler = dict(type='MultiStepLR', by_epoch=True, milestones=[2], gamma=0.1)

default_hooks = dict(logger=dict(type='LoggerHook', interval=15),
                     checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=1))
# minidet's hook; 'minidet.CheckInvalidLossHook' names it from any other scope.
custom_hooks = [dict(type='CheckInvalidLossHook', interval=10, priority='ABOVE_NORMAL')]

randomness = dict(seed=0)
