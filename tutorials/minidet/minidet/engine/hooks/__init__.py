"""minidet's hooks; importing this package registers them in ``minidet.registry.HOOKS``."""
from .check_invalid_loss_hook import CheckInvalidLossHook

__all__ = ['CheckInvalidLossHook']
