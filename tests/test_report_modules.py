"""The report's modules import one way, and its drawing modules never see a record.

tests/test_imports.py holds the package-level graph (report/ as one node); inside report/ the language models'
serving section is four modules (its tables, its charts, what a prompt source adds, how a run is named), which
stay one concept each only while no two of them import each other. The modules that draw (charts.py,
charts_tokens.py) take plain numbers: a record reaches them only through a module that reads it. Every file is
read with ast (nothing imported), so an import inside a function or under TYPE_CHECKING counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_imports import strongly_connected

import accelbench.report

REPORT = Path(accelbench.report.__file__).resolve().parent
#: the modules that draw charts from plain numbers
DRAWING = ("charts", "charts_tokens")
#: what of report/ a drawing module may import: the other one's helpers, and the document a chart is part of
DOCUMENT = {"accelbench.report.charts", "accelbench.report.model"}


def _imports(path: Path) -> dict[str, list[int]]:
    """Every accelbench module a file of report/ imports (a dotted name; ``from accelbench.report import x`` and
    ``from . import x`` as ``accelbench.report.x``), with the lines that import it."""
    found: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            package = "accelbench" if node.level == 2 else "accelbench.report"
            module = f"{package}.{node.module}" if node.level and node.module else node.module or package
            names = [module, *(f"{module}.{a.name}" for a in node.names if module == "accelbench.report")]
        else:
            continue
        for name in names:
            if name.startswith("accelbench."):
                found.setdefault(name, []).append(node.lineno)
    return found


def report_edges(root: Path = REPORT) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> 'file:line' of each import, between the modules of report/ (``root``)."""
    modules = {p.stem for p in root.glob("*.py")} - {"__init__"}
    edges: dict[tuple[str, str], list[str]] = {}
    for stem in sorted(modules):
        for name, lines in _imports(root / f"{stem}.py").items():
            parts = name.split(".")
            if parts[:2] == ["accelbench", "report"] and len(parts) > 2 and parts[2] in modules - {stem}:
                edges.setdefault((stem, parts[2]), []).extend(f"{stem}.py:{n}" for n in lines)
    return edges


def test_the_walk_sees_both_spellings_of_an_import_between_report_modules(tmp_path: Path) -> None:
    (tmp_path / "tables.py").write_text("from accelbench.report import names\nimport accelbench.report.plots\n")
    (tmp_path / "plots.py").write_text("def f():\n    from accelbench.report.names import shorten\n")
    (tmp_path / "names.py").write_text("from accelbench.report.tables import section\n")
    edges = report_edges(tmp_path)
    assert edges == {
        ("tables", "names"): ["tables.py:1"],
        ("tables", "plots"): ["tables.py:2"],
        ("plots", "names"): ["plots.py:2"],
        ("names", "tables"): ["names.py:1"],
    }
    assert strongly_connected(edges) == [["names", "plots", "tables"]]


def test_no_report_module_imports_one_that_imports_it_back() -> None:
    edges = report_edges()
    assert ("tokens", "tokens_charts") in edges  # the section draws its charts: the walk sees the split
    cycles = strongly_connected(edges)
    tied = [f"{a} -> {b}: {w}" for (a, b), w in sorted(edges.items()) if any({a, b} <= set(c) for c in cycles)]
    assert not cycles, "\n".join(tied)


def test_the_drawing_modules_take_plain_numbers_never_a_record() -> None:
    for stem in DRAWING:
        imported = _imports(REPORT / f"{stem}.py")
        records = [n for n in imported if n.startswith("accelbench.results.record")]
        readers = [n for n in imported if n.startswith("accelbench.report.") and n not in DOCUMENT]
        assert not records and not readers, (stem, records, readers)
