"""No import cycle among minimm's modules, checked two ways.

* **The module graph**, read with ``ast`` (nothing imported): an arrow from a module to every
  minimm module one of its ``import`` statements names, wherever the statement stands. A
  statement at module level (also inside an ``if``/``try``/class body there) runs while the module
  is imported, so it also points at each package above the named module that the importer is not
  inside (Python runs those packages' ``__init__`` first); a name taken from a package the
  importer sits in (``from . import helper``) points at that package. A statement inside a
  function runs later, once every package is loaded: it points at the named modules only. ``if TYPE_CHECKING:``
  blocks never run and are not read. Any cycle in this graph fails, lazy imports included: an
  import moved into a function to dodge a cycle still leaves it in the graph.
* **At import time**, in a fresh interpreter: every minimm module is imported, and each import
  that asks for a minimm module still being initialised (other than a package the importer sits
  in) is a cycle Python would report as a "partially initialized module" had the name been read.
"""
import ast
import os
import os.path as osp
import subprocess
import sys
from typing import Dict, List, Set

ROOT = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'minimm')


def _modules() -> Dict[str, str]:
    """Dotted module name -> file, for every ``.py`` file of the package."""
    found = {}
    for folder, _, names in os.walk(ROOT):
        for name in names:
            if name.endswith('.py'):
                path = osp.join(folder, name)
                parts = osp.relpath(path, osp.dirname(ROOT))[:-3].split(os.sep)
                if parts[-1] == '__init__':
                    parts = parts[:-1]
                found['.'.join(parts)] = path
    return found


def _import_statements(tree: ast.AST):
    """``(statement, runs_at_import)`` for every import statement, skipping TYPE_CHECKING."""
    def visit(node, at_import):
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                    and child.test.id == 'TYPE_CHECKING'):
                yield from visit(ast.Module(body=child.orelse, type_ignores=[]), at_import)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, at_import
            else:
                inside_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda))
                yield from visit(child, at_import and not inside_function)
    yield from visit(tree, True)


def _named_modules(node, package: List[str], modules) -> Set[str]:
    """The modules an import statement names: ``from p import a, b`` names ``p.a`` and ``p.b``
    where those are modules, and ``p`` itself where one of them is a name defined in ``p``."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module
    if node.level:
        above = package[:len(package) - node.level + 1]
        base = '.'.join(above + ([node.module] if node.module else []))
    submodules = {f'{base}.{alias.name}' for alias in node.names} & set(modules)
    return submodules | ({base} if len(submodules) < len(node.names) else set())


def module_graph(modules: Dict[str, str]) -> Dict[str, Set[str]]:
    graph = {}
    for name, path in modules.items():
        package = name.split('.') if path.endswith('__init__.py') else name.split('.')[:-1]
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        named, above = set(), set()
        for node, at_import in _import_statements(tree):
            for target in _named_modules(node, package, modules) & set(modules):
                named.add(target)
                parts = target.split('.')
                above.update('.'.join(parts[:depth])
                             for depth in (range(1, len(parts)) if at_import else ()))
        # The packages a module sits in are being initialised already when it runs: only a name
        # it takes from one of them (``from . import helper``) makes an arrow to it.
        above = {t for t in above if not name.startswith(t + '.')}
        graph[name] = (named | above) - {name}
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]``: a depth-first search."""
    state: Dict[str, str] = {}  # 'open' while on the current path, 'done' after
    path: List[str] = []

    def visit(node):
        state[node] = 'open'
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 'open':
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 'done'
        return []

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return []


def test_the_module_graph_has_no_cycle():
    cycle = find_cycle(module_graph(_modules()))
    assert not cycle, 'import cycle: ' + ' -> '.join(cycle)


def test_find_cycle_finds_one():
    # The oracle for the test above: a graph with a cycle drawn by hand, and one without.
    assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == ['a', 'b', 'c', 'a']
    assert find_cycle({'a': {'b', 'c'}, 'b': {'c'}, 'c': set()}) == []


def test_the_graph_reads_lazy_and_package_imports():
    # Known arrows, resolved by hand: a function-level import (the registry's logger, without
    # the package above it), a module-level one with the package above it (config/dump.py ->
    # minimm.utils.misc and minimm.utils), no arrow to the package an importer sits in, and none
    # from a TYPE_CHECKING block.
    graph = module_graph(_modules())
    assert 'minimm.logging.logger' in graph['minimm.registry.default_scope']
    assert 'minimm.logging' not in graph['minimm.registry.default_scope']
    assert {'minimm.utils.misc', 'minimm.utils'} <= graph['minimm.config.dump']
    assert 'minimm.config' not in graph['minimm.config.dump']
    # A name taken from the package a module sits in: plot/lr.py's drawing helpers.
    assert 'minimm.plot' in graph['minimm.plot.lr']
    assert 'minimm.registry.registry' not in graph['minimm.registry.build_functions']


_IMPORT_EVERYTHING = r'''
import builtins, importlib, pkgutil, sys
cycles = []
real_import = builtins.__import__

def initialising(name):
    module = sys.modules.get(name)
    return module is not None and getattr(module.__spec__, '_initializing', False)

def watching_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get('__name__', '')
    if level:
        package = (globals or {}).get('__package__') or importer
        base = package.rsplit('.', level - 1)[0] if level > 1 else package
        name = f'{base}.{name}' if name else base
    if importer.startswith('minimm') and name.startswith('minimm'):
        parts = name.split('.')
        wanted = ['.'.join(parts[:i]) for i in range(1, len(parts) + 1)]
        wanted += [f'{name}.{sub}' for sub in fromlist or () if sub != '*']
        for target in wanted:
            inside = importer == target or importer.startswith(target + '.')
            if not inside and initialising(target):
                cycles.append(f'{importer} -> {target}')
    return real_import(name, globals, locals, fromlist, 0)  # the name is absolute now

builtins.__import__ = watching_import
import minimm
for info in pkgutil.walk_packages(minimm.__path__, 'minimm.'):
    if not info.name.endswith('__main__'):  # running the command line is not importing
        importlib.import_module(info.name)
print('\n'.join(cycles) or 'no cycle')
'''


def test_no_cycle_at_import_time():
    env = dict(os.environ, MINIMM_NO_EXT='1')
    done = subprocess.run([sys.executable, '-c', _IMPORT_EVERYTHING], capture_output=True,
                          text=True, env=env, cwd=osp.dirname(ROOT), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == 'no cycle', done.stdout
