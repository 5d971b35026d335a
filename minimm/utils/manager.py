"""ManagerMixin: named global instances of a class (one MessageHub, logger, visualizer per run).

Hooks need the run's MessageHub, logger and visualizer without having them passed around, and
code far from the runner (a metric, a dataset) wants to log to "the current logger". MMEngine's
answer, kept here: each of these classes keeps a table of instances by name.
``get_instance(name, **kwargs)`` creates the instance on first use and returns the same object
afterwards; ``get_current_instance()`` returns the one most recently created (fetching an older
one by name does not change it, as in MMEngine).

Left out compared with MMEngine's ``mmengine.utils.ManagerMixin``: the thread lock around the table.
"""
import warnings
from collections import OrderedDict


class ManagerMixin:
    """Give a class ``get_instance``/``get_current_instance``; subclasses get their own table.

    Args:
        name: the instance's name; must be a non-empty string.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # One table per class, so MessageHub names never collide with logger names.
        cls._instance_dict = OrderedDict()

    def __init__(self, name: str = '', **kwargs):
        if not isinstance(name, str) or not name:
            raise ValueError(f'{type(self).__name__} needs a non-empty string name, got {name!r}')
        self._instance_name = name

    @classmethod
    def get_instance(cls, name: str, **kwargs):
        """Return the instance called ``name``, creating it with ``kwargs`` on first use.

        A new instance becomes the current one; an existing one is returned without becoming
        current. Passing ``kwargs`` for an existing name warns, because they are ignored.
        """
        if not isinstance(name, str):
            raise TypeError(f'name must be a str, got {type(name)}')
        if name not in cls._instance_dict:
            cls._instance_dict[name] = cls(name=name, **kwargs)
        elif kwargs:
            warnings.warn(f'{cls.__name__} instance {name!r} already exists; '
                          f'the arguments {sorted(kwargs)} are ignored')
        return cls._instance_dict[name]

    @classmethod
    def create_instance(cls, name: str, **kwargs):
        """Create a new instance called ``name`` (replacing any older one) and make it current.

        The Runner uses this so that two runs that happen to share a name (the timestamp of the
        same second) never share a MessageHub, logger or visualizer.
        """
        cls._instance_dict.pop(name, None)
        return cls.get_instance(name, **kwargs)

    @classmethod
    def get_current_instance(cls):
        """The instance most recently created."""
        if not cls._instance_dict:
            raise RuntimeError(f'Before calling {cls.__name__}.get_current_instance(), '
                               'call get_instance(name=...) at least once.')
        return next(reversed(cls._instance_dict.values()))

    @classmethod
    def check_instance_created(cls, name: str) -> bool:
        """Whether ``get_instance(name)`` has run."""
        return name in cls._instance_dict

    @property
    def instance_name(self) -> str:
        return self._instance_name
