# minidet's config, on top of minimm's demo config (its data, evaluator, optimizer, hooks), as
# OpenMMLab configs build on their _base_ files. `default_scope = 'minidet'` makes every `type`
# below resolve in minidet's registries first: DigitsMLP and CheckInvalidLossHook are minidet's
# (its child registries); DigitsDataset, Accuracy, SGD and the default hooks are minimm's (the
# root registries, the children's parents).
_base_ = ['../../../minimm/configs/digits_ema.py']
default_scope = 'minidet'

model = dict(type='DigitsMLP', hidden=64)
work_dir = 'work_dirs/minidet_digits_mlp'
train_cfg = dict(max_epochs=3)
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, milestones=[2], gamma=0.1)]

# minidet's hook (in place of the base's EMAHook); 'minidet.CheckInvalidLossHook' names it from
# any other scope.
custom_hooks = [dict(type='CheckInvalidLossHook', interval=10, priority='ABOVE_NORMAL')]
