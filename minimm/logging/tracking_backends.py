"""Visualisation backends for experiment-tracking services: W&B, MLflow, Neptune, DVCLive, ClearML.

Each one follows MMEngine 0.10's backend of the same name (``add_config``, ``add_scalar``,
``add_scalars``, ``close``, and ``experiment``: the service's own object, to reach what the backend
does not wrap). MMCV 1.x's logger hooks (``minimm/mmcv/hooks/logger/``) do not use them: they call
the services themselves, as MMCV did. A backend writes only what is its own: ``_init_env``
(which stores the service's object as ``experiment``), ``add_config``, ``add_scalar`` and
``_close``; the rest comes from ``BaseVisBackend``, and the ``init_kwargs`` constructor of W&B,
Neptune, DVCLive and ClearML from ``ServiceVisBackend``.

The services' packages are optional: a backend imports its package on the first write and, when it
is missing, says which ``pip install`` to run (``pip install minimm[loggers]`` installs them all).
Their defaults write locally: W&B and MLflow under ``save_dir``, Neptune in offline mode.

Left out compared with MMEngine: images, W&B's ``log_code_name``/``watch_kwargs``, the artifact
uploads that MLflow/DVCLive/ClearML do in ``close()``, and DVCLive's ``dvc init`` in the current
folder (here ``save_dvc_exp`` defaults to False, so no DVC repository is needed, and its
``dvc.yaml`` goes to ``save_dir``).
"""
import json
import os
import os.path as osp
from typing import Any, Optional

import torch

from ..registry import VISBACKENDS
from .vis_backend import (BaseVisBackend, check_no_step_key, config_pretty_text, force_init_env,
                          import_optional)


def config_dict(config: Any) -> dict:
    """A Config or a dict as a plain dict."""
    return config.to_dict() if hasattr(config, 'to_dict') else dict(config)


def flatten(d: dict, parent_key: str = '', sep: str = '.') -> dict:
    """``{'a': {'b': 1}}`` -> ``{'a.b': 1}``; a list of dicts is flattened with indices."""
    items = {}
    for key, value in d.items():
        new_key = f'{parent_key}{sep}{key}' if parent_key else key
        if isinstance(value, dict):
            items.update(flatten(value, new_key, sep))
        elif isinstance(value, list) and any(isinstance(x, dict) for x in value):
            for i, x in enumerate(value):
                items.update(flatten(x, f'{new_key}{sep}{i}', sep))
        else:
            items[new_key] = value
    return items


class ServiceVisBackend(BaseVisBackend):
    """A backend that starts a service's run with ``init_kwargs`` on the first write.

    Args:
        save_dir: folder for the service's local files (W&B, DVCLive); Neptune and ClearML keep
            their own stores.
        init_kwargs: keyword arguments of the call that starts the run.
    """

    def __init__(self, save_dir: Optional[str] = None, init_kwargs: Optional[dict] = None):
        super().__init__(save_dir)
        self._init_kwargs = dict(init_kwargs or {})


@VISBACKENDS.register_module()
class WandbVisBackend(ServiceVisBackend):
    """Log to Weights & Biases (``wandb.init(**init_kwargs)``, ``dir`` defaulting to
    ``save_dir``; pass ``init_kwargs=dict(mode='offline')`` to stay local). ``wandb.log`` keeps
    its own step counter, so ``step`` is not passed on (as MMEngine).

    Args:
        define_metric_cfg: ``{metric: summary}`` or a list of ``wandb.define_metric`` kwargs.
        commit: passed to every ``wandb.log``.
    """

    def __init__(self, save_dir: str, init_kwargs: Optional[dict] = None,
                 define_metric_cfg=None, commit: bool = True):
        if define_metric_cfg is not None and not isinstance(define_metric_cfg, (dict, list)):
            raise ValueError('define_metric_cfg should be dict or list')
        super().__init__(save_dir, init_kwargs)
        self._define_metric_cfg = define_metric_cfg
        self._commit = commit

    def _init_env(self) -> None:
        wandb = import_optional('wandb', 'WandbVisBackend')
        os.makedirs(self._save_dir, exist_ok=True)
        self._init_kwargs.setdefault('dir', self._save_dir)
        wandb.init(**self._init_kwargs)
        metric_cfgs = self._define_metric_cfg
        if isinstance(metric_cfgs, dict):
            metric_cfgs = [dict(name=name, summary=summary)
                           for name, summary in metric_cfgs.items()]
        for metric_cfg in metric_cfgs or []:
            wandb.define_metric(**metric_cfg)
        self._experiment = wandb

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        self._experiment.config.update(
            config_dict(config), allow_val_change=self._init_kwargs.get('allow_val_change', False))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        self._experiment.log({name: value}, commit=self._commit)

    @force_init_env
    def add_scalars(self, scalar_dict: dict, step: int = 0, file_path: Optional[str] = None,
                    **kwargs) -> None:
        self._experiment.log(scalar_dict, commit=self._commit)

    def _close(self) -> None:
        self._experiment.finish()


@VISBACKENDS.register_module()
class MLflowVisBackend(BaseVisBackend):
    """Log to MLflow: to ``tracking_uri``, or a file store in ``save_dir`` by default.

    Args:
        exp_name: experiment name (created if needed; default ``'Default'``).
        run_name, tags, params: set on the run when the backend starts.
        tracked_config_keys: the top-level config keys ``add_config`` logs (default: all).
        artifact_location: where a newly created experiment stores artifacts.
    """

    def __init__(self, save_dir: str, exp_name: Optional[str] = None,
                 run_name: Optional[str] = None, tags: Optional[dict] = None,
                 params: Optional[dict] = None, tracking_uri: Optional[str] = None,
                 tracked_config_keys=None, artifact_location: Optional[str] = None):
        super().__init__(save_dir)
        self._exp_name, self._run_name = exp_name or 'Default', run_name
        self._tags, self._params, self._tracking_uri = tags, params, tracking_uri
        self._tracked_config_keys = tracked_config_keys
        self._artifact_location = artifact_location

    def _init_env(self) -> None:
        mlflow = import_optional('mlflow', 'MLflowVisBackend', pip_name='mlflow-skinny')
        os.makedirs(self._save_dir, exist_ok=True)
        if self._tracking_uri is None:
            # MLflow 3 refuses file stores unless asked, but they need no server or database.
            os.environ.setdefault('MLFLOW_ALLOW_FILE_STORE', 'true')
        mlflow.set_tracking_uri(self._tracking_uri or f'file://{osp.abspath(self._save_dir)}')
        if mlflow.get_experiment_by_name(self._exp_name) is None:
            mlflow.create_experiment(self._exp_name, artifact_location=self._artifact_location)
        mlflow.set_experiment(self._exp_name)
        if self._run_name is not None:
            mlflow.set_tag('mlflow.runName', self._run_name)
        if self._tags is not None:
            mlflow.set_tags(self._tags)
        if self._params is not None:
            mlflow.log_params(self._params)
        self._experiment = mlflow

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        cfg = config_dict(config)
        if self._tracked_config_keys is not None:
            cfg = {key: cfg[key] for key in self._tracked_config_keys}
        self._experiment.log_params(flatten(cfg))
        self._experiment.log_text(config_pretty_text(config), 'config.py')

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        self._experiment.log_metric(name, value, step)

    @force_init_env
    def add_scalars(self, scalar_dict: dict, step: int = 0, file_path: Optional[str] = None,
                    **kwargs) -> None:
        check_no_step_key(scalar_dict)
        self._experiment.log_metrics(scalar_dict, step)

    def _close(self) -> None:
        self._experiment.end_run()


@VISBACKENDS.register_module()
class NeptuneVisBackend(ServiceVisBackend):
    """Log to a Neptune run (``neptune.init_run(**init_kwargs)``, offline by default)."""

    def _init_env(self) -> None:
        neptune = import_optional('neptune', 'NeptuneVisBackend')
        self._experiment = neptune.init_run(**(self._init_kwargs or {'mode': 'offline'}))

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        from neptune.types import File
        self._experiment['config'].upload(File.from_content(config_pretty_text(config)))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        self._experiment[name].append(value, step=step)

    def _close(self) -> None:
        self._experiment.stop()


@VISBACKENDS.register_module()
class DVCLiveVisBackend(ServiceVisBackend):
    """Log with DVCLive (``dvclive.Live(dir=save_dir, **init_kwargs)``): metrics as TSV/JSON files
    under ``save_dir``, ready for ``dvc plots``."""

    def __init__(self, save_dir: str, init_kwargs: Optional[dict] = None):
        super().__init__(save_dir, init_kwargs)  # unlike Neptune and ClearML, save_dir is required

    def _init_env(self) -> None:
        dvclive = import_optional('dvclive', 'DVCLiveVisBackend')
        self._init_kwargs.setdefault('dir', self._save_dir)
        self._init_kwargs.setdefault('save_dvc_exp', False)
        # DVCLive writes its dvc.yaml (the plots' description) in the current folder by default.
        self._init_kwargs.setdefault('dvcyaml', osp.join(self._save_dir, 'dvc.yaml'))
        self._experiment = dvclive.Live(**self._init_kwargs)

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        # DVCLive takes plain JSON-like params: anything else is written as its text.
        self._experiment.log_params(json.loads(json.dumps(config_dict(config), default=str)))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        self._experiment.step = step
        self._experiment.log_metric(name, value.item() if torch.is_tensor(value) else value)

    def _close(self) -> None:
        self._experiment.end()


@VISBACKENDS.register_module()
class ClearMLVisBackend(ServiceVisBackend):
    """Log to a ClearML task (``clearml.Task.init(**init_kwargs)``); ``experiment`` is the
    ``clearml`` module, as in MMEngine."""

    def _init_env(self) -> None:
        clearml = import_optional('clearml', 'ClearMLVisBackend')
        self._task = clearml.Task.init(**self._init_kwargs)
        self._logger = self._task.get_logger()
        self._experiment = clearml

    @force_init_env
    def add_config(self, config: Any, **kwargs) -> None:
        self._task.connect_configuration(config_dict(config))

    @force_init_env
    def add_scalar(self, name: str, value, step: int = 0, **kwargs) -> None:
        self._logger.report_scalar(title=name, series=name, value=value, iteration=step)

    def _close(self) -> None:
        self._task.close()
