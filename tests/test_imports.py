"""One-way imports: no package-level cycle among accelbench's parts, and no family imports another.

Every module under accelbench/ is read with ast (nothing is imported), so an import inside a function counts
the same as one at the top of the file. A node is a subpackage (accelbench/train/...) or a top-level module
(accelbench/registry.py); accelbench/__init__.py and __main__.py are the entry points and are left out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import accelbench

ROOT = Path(accelbench.__file__).resolve().parent
FAMILIES = ("train", "tta", "infer", "serve", "kernels")
#: what stands on a family: a floor below the families (loadgen) imports none of these either
ABOVE_FAMILIES = ("suite", "registry", "cli", "tune", "report", "selftest", "reference")
ENTRY_POINTS = {"__init__", "__main__"}


def _node(path: Path, root: Path) -> str:
    """The graph node a file belongs to: its subpackage, or the top-level module itself."""
    first = path.relative_to(root).parts[0]
    return first.removesuffix(".py")


def _is_module(name: str, root: Path) -> bool:
    return (root / name).is_dir() or (root / f"{name}.py").is_file()


def _targets(node: ast.AST, path: Path, root: Path) -> list[str]:
    """The accelbench modules an import statement names, as dotted paths."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: resolve against the file's package
        package = ["accelbench", *path.relative_to(root).parts[:-1]]
        base = package[: len(package) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    if module == "accelbench":  # from accelbench import registry (a module) or __version__ (the package's own)
        return [f"accelbench.{a.name}" for a in node.names if _is_module(a.name, root)] or ["accelbench.__init__"]
    return [module]


def import_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> the file:line of every import that makes the edge."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        source = _node(path, root)
        if source in ENTRY_POINTS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for module in _targets(node, path, root):
                parts = module.split(".")
                if parts[0] != "accelbench" or len(parts) < 2:
                    continue
                target = parts[1]
                if target != source and target not in ENTRY_POINTS:
                    edges[(source, target)].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return dict(edges)


def strongly_connected(edges) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one node (each one holds a cycle)."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        graph[a].append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(component: list[str], edges) -> str:
    lines = [f"cycle among {', '.join(component)}:"]
    for (a, b), where in sorted(edges.items()):
        if a in component and b in component:
            lines.append(f"  {a} -> {b}: {', '.join(where)}")
    return "\n".join(lines)


def test_the_walk_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "accelbench"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "__init__.py").write_text("__version__ = '0'\n")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from accelbench.high import b\n")
    (pkg / "high" / "__init__.py").write_text("from accelbench import __version__\n")
    (pkg / "high" / "b.py").write_text("from ..low import a\nimport accelbench.top\n")
    (pkg / "top.py").write_text("from . import low\n")
    edges = import_edges(pkg)
    assert edges == {
        ("low", "high"): ["accelbench/low/a.py:2"],
        ("high", "low"): ["accelbench/high/b.py:1"],
        ("high", "top"): ["accelbench/high/b.py:2"],
        ("top", "low"): ["accelbench/top.py:1"],
    }
    assert strongly_connected(edges) == [["high", "low", "top"]]
    assert "accelbench/low/a.py:2" in _describe(["high", "low", "top"], edges)


def test_no_package_import_cycle():
    edges = import_edges()
    cycles = strongly_connected(edges)
    assert not cycles, "\n\n".join(_describe(c, edges) for c in cycles)


def test_families_do_not_import_each_other():
    edges = import_edges()
    crossing = {(a, b): where for (a, b), where in edges.items() if a in FAMILIES and b in FAMILIES}
    assert not crossing, "\n".join(f"{a} -> {b}: {', '.join(w)}" for (a, b), w in sorted(crossing.items()))


def test_the_loadgen_floor_knows_no_benchmark():
    """infer (image models) and serve (language models) both stand on the LoadGen floor; it imports neither."""
    edges = import_edges()
    assert any(a == "loadgen" for a, _ in edges), "the floor is gone: accelbench/loadgen imports nothing of the package"
    up = {(a, b): w for (a, b), w in edges.items() if a == "loadgen" and b in FAMILIES + ABOVE_FAMILIES}
    assert not up, "\n".join(f"{a} -> {b}: {', '.join(w)}" for (a, b), w in sorted(up.items()))


def _imported_by(statement: str) -> set[str]:
    """The accelbench modules a fresh interpreter has loaded after ``statement``."""
    code = f"import sys\n{statement}\nprint(' '.join(m for m in sys.modules if m.startswith('accelbench')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(done.stdout.split())


def test_compare_imports_no_registry():
    """results (and the report) never import the registry: a benchmark's defaults reach compare as an argument
    its caller passes."""
    statements = (
        "import accelbench.results.compare",
        "import accelbench.results.history",
        "accelbench.compare",
        "import accelbench.report.build, accelbench.report.select",
    )
    for statement in statements:
        loaded = _imported_by(f"import accelbench\n{statement}")
        assert "accelbench.registry" not in loaded, statement


def test_no_import_time_registration():
    """Neither the registry nor the families package wires anything into another module when imported: the
    families' package adds no family (the shipped ones are a tuple read as it is)."""
    code = (
        "import accelbench.registry\n"
        "from accelbench.families import known\n"
        "from accelbench.results import compare\n"
        "assert not known._REGISTERED, known._REGISTERED\n"
        "assert not hasattr(compare, 'use_defaults') and not hasattr(compare, '_defaults')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
