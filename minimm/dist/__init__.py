"""Distributed helpers: joining the process group, rank queries, rank-0-only execution,
collectives (with packed buffer all-reduce) and gathering evaluation results; the names of
``mmengine.dist``."""
from .collect import collect_results
from .collectives import (all_gather, all_gather_object, all_reduce, all_reduce_dict,
                          all_reduce_params, broadcast, broadcast_object_list, gather,
                          gather_object, sync_random_seed)
from .launch import destroy_dist, free_port, init_dist
from .utils import (barrier, get_dist_info, get_rank, get_world_size, is_distributed,
                    is_main_process, master_only)
