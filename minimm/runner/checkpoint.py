"""MMEngine's import path for the checkpoint file functions (``mmengine.runner.checkpoint``).

They live on the lowest floor, ``minimm/checkpoint.py``, because hooks, this Runner and the MMCV 1.x
runner all use them and none of those may import another; this module only keeps code written
as ``from mmengine.runner.checkpoint import load_state_dict`` working with ``mmengine`` changed to
``minimm``.
"""
from ..checkpoint import (CheckpointError, CheckpointNotFoundError, find_latest_checkpoint,
                          load_checkpoint_file, load_checkpoint_to_model, load_state_dict,
                          resume_candidates, save_checkpoint, unwrap_model, weights_to_cpu,
                          write_last_checkpoint)

__all__ = ['CheckpointError', 'CheckpointNotFoundError', 'find_latest_checkpoint',
           'load_checkpoint_file', 'load_checkpoint_to_model', 'load_state_dict',
           'resume_candidates', 'save_checkpoint', 'unwrap_model', 'weights_to_cpu',
           'write_last_checkpoint']
