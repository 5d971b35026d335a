"""digit_version: compare version strings as tuples, as MMEngine 0.10's ``digit_version``."""
import re
from typing import Tuple


def digit_version(version_str: str, length: int = 4) -> Tuple[int, ...]:
    """``'1.13.0rc1'`` -> a tuple that orders versions correctly: the release parts padded to
    ``length``, then a pre-release marker (a: -3, b: -2, rc: -1, none: 0) and its number, then the
    post-release number. ``torch.__version__`` suffixes such as ``+cu130`` are ignored."""
    release, _, _ = version_str.partition('+')
    match = re.fullmatch(r'v?(\d+(?:\.\d+)*)(?:\.?(a|b|rc)(\d*))?(?:\.?post(\d*))?(?:\.dev\d*)?',
                         release.strip())
    if match is None:
        raise ValueError(f'failed to parse version {version_str!r}')
    numbers = [int(part) for part in match.group(1).split('.')]
    if len(numbers) > length:
        raise ValueError(f'version {version_str!r} has more than {length} parts')
    numbers += [0] * (length - len(numbers))
    if match.group(2):
        numbers += [{'a': -3, 'b': -2, 'rc': -1}[match.group(2)], int(match.group(3) or 0)]
    elif match.group(4) is not None:
        numbers += [1, int(match.group(4) or 0)]
    else:
        numbers += [0, 0]
    return tuple(numbers)
