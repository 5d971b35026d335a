"""minidet's models; importing this package registers them in ``minidet.registry.MODELS``."""
from .digits_mlp import DigitsMLP

__all__ = ['DigitsMLP']
