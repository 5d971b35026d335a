"""Hook priorities: a lower number runs earlier. Both worlds use them: this is the lowest floor.

The nine named levels and ``get_priority`` are exactly MMEngine's (and MMCV's): the one definition
both runners order their hooks by. It imports nothing from minimm, so ``import minimm.mmcv`` does
not load MMEngine's Runner to get it; each world re-exports it where its original has it
(``minimm.runner.priority``, ``minimm.mmcv.priority``). A hook's priority may be given as a
``Priority`` member, its name in any case (``'Lowest'``), or an int in [0, 100]. Hooks of equal
priority run in the order they were registered (see ``Runner.register_hook``).
"""
from enum import Enum
from typing import Union


class Priority(Enum):
    """Named hook priority levels (the nine names and values are the API: configs and hooks name
    them, so this table has MMEngine's shape)."""

    HIGHEST = 0
    VERY_HIGH = 10
    HIGH = 30
    ABOVE_NORMAL = 40
    NORMAL = 50
    BELOW_NORMAL = 60
    LOW = 70
    VERY_LOW = 90
    LOWEST = 100


def get_priority(priority: Union[int, str, Priority]) -> int:
    """Return the int value of a priority given as int, name or ``Priority``.

    Raises ValueError for an int outside [0, 100], KeyError for an unknown name and TypeError for
    anything else.
    """
    if isinstance(priority, Priority):
        return priority.value
    if isinstance(priority, str):
        try:
            return Priority[priority.upper()].value
        except KeyError:
            raise KeyError(f'unknown priority {priority!r}; use one of '
                           f'{[p.name for p in Priority]} or an int in [0, 100]') from None
    if not isinstance(priority, int) or isinstance(priority, bool):  # True is no priority
        raise TypeError('priority must be an integer or Priority enum value')
    if not 0 <= priority <= 100:
        raise ValueError('priority must be between 0 and 100')
    return priority


def priority_name(priority: Union[int, str, Priority]) -> str:
    """How ``get_hooks_info`` shows a priority, as MMEngine shows it: a name as it was written
    (``'lowest'`` stays lowercase), the level's name for a number that is a level (``'NORMAL'``
    for 50), and the number itself between levels (``'49'``)."""
    if isinstance(priority, str):
        return priority
    value = get_priority(priority)
    levels = {level.value: level.name for level in Priority}
    return levels.get(value, str(value))
