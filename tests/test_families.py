"""A family is described once: a new one, registered here at test time, is in the results table and the report
without an edit to render, the report, reference matching or the runner; and those layers name no family."""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from rich.console import Console

import accelbench
from accelbench import families, registry
from accelbench.cli.render import results_table
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext
from accelbench.measure.stats import Measurement
from accelbench.params import CommonParams
from accelbench.reference.match import matches
from accelbench.report.build import build
from accelbench.report.common import ReportInput
from accelbench.report.markdown import render
from accelbench.report.model import Section, Table
from accelbench.results.record import Result

ROOT = Path(accelbench.__file__).resolve().parent


@dataclass(frozen=True)
class DemoParams(CommonParams):
    """A tiny benchmark of a family that ships with no accelbench: it counts widgets."""

    widgets: int = 2000


def run_widgets(params: DemoParams, ctx: RunContext) -> Iterator[Result]:
    """Times a pure-Python loop (for real), and reports widgets per second with a figure no family knows."""
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        sum(range(params.widgets))
        samples.append(time.perf_counter() - t0)
    m = Measurement(tuple(samples))
    rate = fig.rate(params.widgets, m, "widgets/s")
    yield Result(
        families.benchmark_of(params),  # the name the registry gave it: this module holds no copy
        params.to_dict(),
        metrics={
            "widgets_per_s": rate,
            "wobble_ratio": fig.figure(0.125, "fraction", higher_is_better=False),
            "gizmo_p99_ms": fig.figure(3.5, "ms", higher_is_better=False),
            "gizmo_p50_ms": fig.figure(1.5, "ms", higher_is_better=False),
        },
        primary_metric="widgets_per_s",
    )


@pytest.fixture
def widgets() -> Iterator[registry.BenchmarkInfo]:
    """The family 'demo' and its benchmark 'demo/widgets', known for one test."""
    families.register(
        families.Family(
            "demo",
            "widget counting",
            hint="accelbench run demo/widgets",
            metrics={
                "wobble_ratio": "wobble {value:.1%}",
                "gizmo_p99_ms": "gizmo tail {value:sig3} ms",
                "gizmo_*": None,  # the rest of the gizmo percentiles stay in the record
            },
            report_note="Widgets counted in a pure-Python loop.",
        )
    )
    info = registry.register(
        registry.BenchmarkInfo(
            "demo/widgets", "widgets per second", DemoParams, f"{__name__}:run_widgets", primary_metric="widgets_per_s"
        )
    )
    try:
        yield info
    finally:
        registry.unregister("demo/widgets")
        families.unregister("demo")


def _measured(info: registry.BenchmarkInfo, tmp_path: Path) -> Result:
    (result,) = list(info.load()(info.make_params({"widgets": 3000}), RunContext(log_dir=tmp_path)))
    result.system = {"fingerprint": "f" * 16, "profile": {"cpu": {"model": "test CPU"}}}
    return result


def test_a_new_family_is_read_through_its_description(widgets, tmp_path: Path) -> None:
    r = _measured(widgets, tmp_path)
    assert r.benchmark == "demo/widgets" and widgets.family.name == "demo"

    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(results_table([r]))
    table = console.export_text()
    assert "widgets/s" in table  # the primary figure, as the result
    assert "wobble 12.5%" in table  # its own label and format
    assert "gizmo tail 3.50 ms" in table  # an exact name wins over the pattern that hides the others
    assert "gizmo_p50" not in table and "gizmo p50" not in table

    doc = build(ReportInput([r], describe=registry.describe_params))
    section = next(s for s in doc.sections if s.id == "demo")
    assert section.title == "Widget counting"
    rows = [row for b in section.blocks if isinstance(b, Table) for row in b.rows]
    assert any("wobble 12.5%" in str(cell) for row in rows for cell in row)
    summary = next(s for s in doc.sections if s.id == "summary")
    assert isinstance(summary, Section)
    text = render(doc, lambda chart: chart.name)
    assert "## Widget counting" in text and "Widgets counted in a pure-Python loop." in text
    # the other families' hints still name what the report lacks; the new family is not among them
    assert "widget counting (accelbench run demo/widgets)" not in text
    assert "training throughput (accelbench train MODEL)" in text

    assert matches(r) == []  # a family that describes no published results meets none


def test_a_new_family_missing_from_a_report_is_named_by_its_hint(widgets, tmp_path: Path) -> None:
    other = Result(
        "selftest/ok", {"iterations": 10}, metrics={"seconds": fig.figure(1e-5, "s", higher_is_better=False)}
    )
    other.primary_metric = "seconds"
    other.system = {"fingerprint": "f" * 16, "profile": {}}
    text = render(build(ReportInput([other])), lambda chart: chart.name)
    assert "widget counting (accelbench run demo/widgets)" in text


def test_a_benchmark_of_no_known_family_is_refused() -> None:
    with pytest.raises(LookupError):
        registry.register(registry.BenchmarkInfo("nofamily/x", "x", DemoParams, f"{__name__}:run_widgets"))
    assert "nofamily/x" not in registry.BENCHMARKS


def test_infer_metric_labels_are_one_table() -> None:
    """The serving metrics read through one table a contributor extends by a line per metric."""
    from accelbench.families.builtin import INFER, INFER_METRICS

    assert INFER.metrics is INFER_METRICS
    assert families.find_label("latency_p99_9_seconds", INFER) is None  # the record keeps the full set
    label, stem = families.find_label("query_latency_p99_seconds", INFER)  # type: ignore[misc]
    assert label.text == "{stem} per query {metric}" and stem == "p99_seconds"


def test_the_shipped_families_are_read_not_registered() -> None:
    """Importing the package registers nothing: the shipped families are a tuple, read as it is; a family
    registered under a shipped name stands in its place (same position) until it is unregistered."""
    from accelbench.families import builtin, known

    assert not known._REGISTERED  # nothing registered by importing accelbench, its registry or its report
    assert families.families() == list(builtin.BUILTIN)
    assert families.family_of("kernels/gemm") is builtin.KERNELS and families.family_of("nofamily/x") is None
    mine = families.Family("kernels", "my kernels")
    families.register(mine)
    try:
        assert families.family_of("kernels/gemm") is mine
        assert [f.name for f in families.families()] == [f.name for f in builtin.BUILTIN]
    finally:
        families.unregister("kernels")
    assert families.family_of("kernels/gemm") is builtin.KERNELS


def test_every_benchmark_has_a_family_and_its_module_no_name() -> None:
    for info in registry.BENCHMARKS.values():
        assert families.owns(info.family, info.name)
        assert families.benchmark_of(info.params) == info.name


#: the layers that show, match and run records of any family
GENERIC = ("cli/render.py", "cli/render_trends.py", "report", "reference", "suite")
#: where family and benchmark names may be written: their descriptions, and the reader of old records
ALLOWED = ("registry.py", "families", "results/upgrade.py")


def _files(parts: tuple[str, ...]) -> list[Path]:
    out: list[Path] = []
    for part in parts:
        path = ROOT / part
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every string constant but docstrings (an example in prose names no family for the code to branch on)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_no_generic_layer_names_a_family() -> None:
    names = "|".join(re.escape(f.name) for f in families.families())
    pattern = re.compile(rf"(^|[^\w/])({names})/")  # 'kernels/', 'train/throughput', 'tta/...'
    benchmarks = set(registry.BENCHMARKS)
    found = []
    for path in _files(GENERIC):
        for node in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if pattern.search(node.value) or node.value in benchmarks:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r}")
    assert not found, "a generic layer branches on a family's name:\n" + "\n".join(found)


def test_no_module_keeps_its_own_copy_of_a_benchmark_name() -> None:
    """The per-module NAME constants are gone: a benchmark's name is written in the registry only."""
    benchmarks = set(registry.BENCHMARKS)
    skip = {ROOT / p for p in ALLOWED}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(path == s or s in path.parents for s in skip):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in benchmarks:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not found, "\n".join(found)


def test_the_scan_sees_a_family_name_in_code_but_not_in_a_docstring() -> None:
    tree = ast.parse('"""Run kernels/gemm."""\nif name.startswith("kernels/"):\n    pass\nx = f"{a} train/x"\n')
    values = [n.value for n in _strings(tree)]
    assert "kernels/" in values and "Run kernels/gemm." not in values and " train/x" in values
