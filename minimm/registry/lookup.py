"""What ``registry.py`` does when a name is not in a registry's own table: import the registries
of a package (``{scope}.registry``), walk the registry tree, and say what went wrong."""
import difflib
import importlib

CUSTOM_IMPORT_HINT = ("If it is a custom module, make sure the file that registers it is "
                      "imported: add `custom_imports = dict(imports=['my_package.my_module'])` "
                      "to the config, or import it before building the runner.")


def walk(registry) -> list:
    """``registry`` and every registry below it, parents before children."""
    return [registry] + [r for child in registry.children.values() for r in walk(child)]


def did_you_mean(name: str, known) -> str:
    """`` Did you mean 'A', 'B'?`` for the (at most three) names of ``known`` closest to ``name``,
    or ''. Case does not count ('Sgd' finds 'SGD'); when no name is close in spelling, the names
    that contain ``name`` are offered ('acc' finds 'accuracy_top-1')."""
    by_lower = {}
    for key in known:
        by_lower.setdefault(str(key).lower(), key)
    query = name.lower()
    close = difflib.get_close_matches(query, list(by_lower), n=3, cutoff=0.6)
    if not close and len(query) >= 3:
        close = [key for key in by_lower if query in key][:3]
    return f' Did you mean {", ".join(repr(by_lower[key]) for key in close)}?' if close else ''


def not_found_message(registry, type_name: str) -> str:
    """MMEngine's "X is not in the scope::name registry" message, with the close matches among
    the names ``registry`` can see and the other scopes where ``type_name`` *is* registered."""
    lineage = registry._lineage()
    known = [key for node in lineage for key in node.module_dict]
    hint = did_you_mean(type_name, known)
    elsewhere = [node.scope for node in walk(registry._get_root_registry())
                 if type_name in node.module_dict and node not in lineage]
    if elsewhere:
        hint += (f' It is registered in the scope {" and ".join(map(repr, elsewhere))}: '
                 f"write type='{elsewhere[0]}.{type_name}', or build with "
                 f"default_scope='{elsewhere[0]}'.")
    return (f'{type_name} is not in the {registry.scope}::{registry.name} registry. Please check '
            f'whether the value of `{type_name}` is correct or it was registered as '
            f'expected.{hint} {CUSTOM_IMPORT_HINT}')


def import_scope_registry(scope: str) -> bool:
    """Import ``{scope}.registry``, where a package declares its child registries (OpenMMLab's
    convention). True when it imported."""
    if not scope.isidentifier():
        return False
    try:
        importlib.import_module(f'{scope}.registry')
    except ImportError:
        return False
    return True
