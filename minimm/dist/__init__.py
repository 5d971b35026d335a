"""Distributed helpers: rank queries and rank-0-only execution."""
from .utils import (barrier, get_dist_info, get_rank, get_world_size, is_distributed,
                    is_main_process, master_only)
