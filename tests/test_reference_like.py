"""Reference comparisons only like with like: no ratio and no bar where the work differs, legible charts and
tables (issue 26, point 2 and the small items of point 10)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import Browser, chromium
from matplotlib.backends.backend_agg import FigureCanvasAgg
from rich.console import Console

from accelbench.cli.commands_reference import NOTES_BELOW, beside_table
from accelbench.cli.main import main
from accelbench.reference.match import beside, closest, matches
from accelbench.reference.table import select
from accelbench.report import charts
from accelbench.report.common import ReportInput
from accelbench.report.perf import training
from accelbench.report.published import published
from accelbench.results.record import Metric, Result
from accelbench.results.store import RunInfo, Store

TORCH = {"fingerprint": "f00d", "profile": {"torch": {"version": "2.5.1+cpu"}, "cpu": {"model": "Test CPU"}}}


def _ci(value: float) -> tuple[float, float]:
    return (value * 0.98, value * 1.02)


def trained(value: float, scale: str = "full", precision: str = "fp32", run_id: str = "run-a", **params) -> Result:
    """A resnet50 training record as train/throughput writes it (images/s, one device)."""
    return Result(
        "train/throughput",
        {"model": "resnet50", "scale": scale, "precision": precision, "batch_size": 32, "nproc": 1} | params,
        metrics={"throughput": Metric(value=value, unit="images/s", higher_is_better=True, ci95=_ci(value), n=5)},
        primary_metric="throughput",
        system=json.loads(json.dumps(TORCH)),
        run_id=run_id,
    )  # fmt: skip


def served(scenario: str, value: float, precision: str = "int8", valid: bool | None = True, **details) -> Result:
    metric = "throughput" if scenario == "offline" else "queries_per_second"
    unit = "samples/s" if scenario == "offline" else "queries/s"
    return Result(
        "infer/loadgen",
        {"model": "resnet50", "scenario": scenario, "backend": "torch", "precision": precision, "nproc": 1,
         "scale": "full", "profile": "quick", "batch_size": 8},
        metrics={metric: Metric(value=value, unit=unit, higher_is_better=True)},
        primary_metric=metric,
        valid=valid,
        details=details,
        system=json.loads(json.dumps(TORCH)),
    )  # fmt: skip


def _lambda_fp32(ms):
    return next(m for m in ms if m.reference.source.startswith("Lambda") and m.reference.accelerator == "A10")


def test_a_tiny_model_beside_published_systems_has_no_ratio() -> None:
    tiny = matches(trained(12.0, scale="tiny"))
    assert tiny and all(m.ratio is None and m.ratio_per_device is None for m in tiny)
    assert all("tiny model" in m.unlike and m.ratio_text.startswith("n/a: tiny model") for m in tiny)
    assert all(not m.like and m.per_device_text == "n/a" for m in tiny)
    # the same figure at full scale: a ratio against the row that did the same work (Lambda's fp32/tf32 A10)
    full = matches(trained(150.0))
    a10 = _lambda_fp32([m for m in full if m.reference.precision == "fp32/tf32"])
    assert a10.like and a10.ratio == pytest.approx(150.0 / a10.reference.value) and a10.ratio_text.endswith("x")
    # fp16 published against fp32 here is not the same arithmetic: no ratio, the reason in words
    fp16 = next(m for m in full if m.reference.precision == "amp_fp16" and m.reference.accelerator == "A10")
    assert fp16.ratio is None and fp16.unlike == ("precision differs (amp_fp16 published, fp32 here)",)
    assert closest(full)[0].like  # like rows first


def test_an_invalid_run_or_a_failed_accuracy_gate_has_no_ratio() -> None:
    xeon = [r for r in select(model="resnet50", task="inference_offline") if "Xeon" in r.accelerator][0]
    ok = beside(served("offline", 252.896), xeon)
    assert ok is not None and ok.like and ok.ratio == pytest.approx(0.01)
    invalid = beside(served("offline", 252.896, valid=False), xeon)
    assert invalid is not None and invalid.ratio is None and invalid.ratio_text == "n/a: INVALID run"
    gate = beside(served("offline", 252.896, valid=False, accuracy_gates={"99%": False, "99.9%": False}), xeon)
    assert gate is not None and gate.ratio is None and gate.unlike == ("failed accuracy gate",)
    assert json.loads(json.dumps(invalid.to_dict()))["ratio"] is None  # the JSON carries no number either
    # a figure a neighbour held down says nothing of the machine against a published one
    busy = served("offline", 252.896)
    busy.concern("contended", "contended: other processes used 50% of the CPUs (stress-ng[7] 48%)")
    held = beside(busy, xeon)
    assert held is not None and held.ratio is None and held.unlike == ("contended run",)


def test_a_tpu_tensorcore_is_not_ratioed_per_device_against_chips(monkeypatch) -> None:
    """On TPU v2/v3 each TensorCore is an XLA device (half a chip) and the study's rows count chips: the per-device
    ratio would read half the truth, so there is none, and what differs says why; a whole chip keeps its ratio.
    The device's facts are XlaKind's own, with the runtime's answers (a TPU cannot run here) faked."""
    import torch

    from accelbench.devices import xla

    tpu = [r for r in select(model="resnet50", task="train_throughput") if r.accelerator == "Cloud TPU v2"][0]

    def on(device_kind: str) -> Result:
        monkeypatch.setattr(xla.XlaKind, "runtime_type", lambda self: "TPU")
        monkeypatch.setattr(xla.XlaKind, "total_memory", lambda self, device: None)
        monkeypatch.setattr(
            xla, "_xm", lambda: type("Xm", (), {"xla_device_kind": staticmethod(lambda d: device_kind)})
        )
        r = trained(400.0, precision="amp_bf16", batch_size=256)
        r.system["profile"]["accelerators"] = [xla.KIND.properties(torch.device("cpu")) | {"kind": "xla"}]
        return r

    core = beside(on("TPU v2"), tpu)
    assert core is not None and core.ratio_per_device is None
    assert any("1/2 of a chip (a TensorCore)" in d for d in core.differences)
    chip = beside(on("TPU v4"), tpu)
    assert chip is not None and chip.ratio_per_device == pytest.approx(400.0 / tpu.per_device)
    assert not any("TensorCore" in d for d in chip.differences)


def test_the_published_precision_is_filled_in_only_where_its_source_states_it() -> None:
    rows = select(model="resnet50", task="infer/loadgen")
    intel = [r for r in rows if r.source_ref.split(":")[1].startswith("closed/Intel/")]
    nvidia = [r for r in rows if r.source_ref.split(":")[1].startswith("closed/NVIDIA/")]
    assert len(intel) == 2 and all(r.precision == "int8" and "DEV.md" in r.notes for r in intel)
    assert len(nvidia) == 2 and all(r.precision == "not stated" for r in nvidia)  # no readable source: not invented
    fp32 = {m.reference.accelerator: m for m in matches(served("offline", 100.0, precision="fp32"))}
    assert fp32[intel[0].accelerator].unlike == ("precision differs (int8 published, fp32 here)",)
    assert fp32[nvidia[0].accelerator].unlike == ("published precision not stated (here fp32)",)


def test_a_served_rate_meets_only_its_scenario_and_its_latency_bound() -> None:
    server_row = [r for r in select(model="resnet50", task="inference_server") if "Xeon" in r.accelerator][0]
    offline_row = [r for r in select(model="resnet50", task="inference_offline") if "Xeon" in r.accelerator][0]
    assert server_row.latency_bound_ms == 15.0 and offline_row.latency_bound_ms is None
    same = beside(served("server", 198.0722, latency_bound_ms=15.0), server_row)
    assert same is not None and same.ratio == pytest.approx(0.01)
    looser = beside(served("server", 198.0722, latency_bound_ms=2000.0), server_row)
    assert looser is not None and looser.unlike == ("latency bound differs (15 ms published, 2000 ms here)",)
    other = beside(served("offline", 252.896), server_row)
    assert other is None  # an Offline record has no queries/s to set beside a Server figure
    crossed_record = served("server", 252.896)  # a Server record that also carries a samples/s figure
    crossed_record.metrics["throughput"] = Metric(value=252.896, unit="samples/s", higher_is_better=True)
    crossed = beside(crossed_record, offline_row)
    assert crossed is not None and crossed.unlike == ("scenario differs (offline published, server here)",)


@pytest.mark.parametrize("task", ["inference_offline", "inference_server", "train_throughput", "time_to_accuracy"])
def test_reference_task_accepts_every_task_whose_rows_it_ships(task: str, capsys) -> None:
    assert main(["reference", "--task", task, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["task"] for r in rows} == {task}


def test_compare_reference_of_a_tiny_stored_run_prints_no_ratio(tmp_path: Path, capsys) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.add_run(RunInfo("run-tiny", "2026-01-01T00:00:00", "fixture", {}, "f00d", {}))
        store.add_many([trained(12.0, scale="tiny", run_id="run-tiny")])
    assert main(["compare", "run-tiny", "--reference", "--json", "--db", str(db)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and all(m["ratio"] is None and "tiny model" in m["unlike"] for m in found)
    assert main(["compare", "run-tiny", "--reference", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    rows = "\n".join(line for line in out.splitlines() if "│" in line)  # the tables' cells, not their captions
    assert "n/a: tiny model" in rows and not re.search(r"\b\d+(\.\d+)?x\b", rows)  # no ratio in any row


@pytest.mark.parametrize("width", [80, 120])
def test_what_differs_is_a_sentence_in_the_terminal_not_a_word_per_line(width: int) -> None:
    ms = closest([m for m in matches(trained(12.0, scale="tiny")) if m.reference.source == "tf_cnn_benchmarks"])
    console = Console(width=width, record=True)
    console.print(beside_table(ms, width))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= width  # nothing cropped at the edge
    assert any("TensorFlow 1.x + XLA vs PyTorch 2.5.1 eager" in line for line in lines)
    assert any("n/a: tiny model" in line for line in lines)
    assert ("what differs:" in lines) is (width < NOTES_BELOW)  # narrow: the sentences go under the table


def test_bars_start_at_zero_on_a_linear_axis_and_never_share_a_label() -> None:
    from matplotlib.figure import Figure

    fig = Figure()
    bars = [charts.Bar("this machine", 58.0), charts.Bar("H100 x1", 88714.0), charts.Bar("H100 x1", 1197.0)]
    charts.draw_bar_panels(fig, [("", "images/s", bars)], highlight_first=True, values=True)
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(set(labels)) == 3 and labels[1] != labels[2]
    assert {"58", "8.871e+04", "1,197"} & {t.get_text() for t in ax.texts}  # each bar's figure written
    assert charts.distinct(["a", "a", "b"], ["run 1", "run 2", "run 3"]) == ["a (run 1)", "a (run 2)", "b"]
    assert charts.distinct(["a", "a"], ["run 1", "run 1"], ["10:00", "10:01"]) == [
        "a (run 1) (10:00)",
        "a (run 1) (10:01)",
    ]
    assert charts.distinct(["a", "a"]) == ["a #1", "a #2"]


def test_two_runs_of_one_workload_get_two_labels_in_the_training_chart() -> None:
    recs = [trained(61.5, run_id="20261010-100000-aaaa"), trained(58.2, run_id="20261011-100000-bbbb")]
    section = training(ReportInput(recs))
    assert section is not None
    chart = next(b for b in section.blocks if getattr(b, "name", "") == "train-throughput")
    from matplotlib.figure import Figure

    fig = Figure()
    chart.draw(fig)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 2 and len(set(labels)) == 2
    assert any("20261010-100000-aaaa" in x for x in labels) and any("20261011-100000-bbbb" in x for x in labels)


def _overlaps(boxes) -> bool:
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_the_roofline_labels_do_not_overlap_and_its_legend_covers_no_point() -> None:
    from matplotlib.figure import Figure

    points = [
        ("gemm fp32", 160.0, 0.21), ("gemm fp32", 42.0, 0.16), ("conv fp32", 130.0, 0.17),
        ("attention fp32", 120.0, 0.12), ("sparse fp32", 9.5, 0.022), ("rnn fp32", 170.0, 0.15),
    ]  # fmt: skip
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    charts.draw_roofline(fig, points, [("fp32 peak 0.157 TFLOPS (estimate)", 0.157)], ("memory 32.5 GB/s", 32.5))
    canvas.draw()
    ax = fig.axes[0]
    renderer = canvas.get_renderer()
    for axis in (ax.xaxis, ax.yaxis):
        ticks = [*axis.get_majorticklabels(), *axis.get_minorticklabels()]
        boxes = [t.get_window_extent(renderer) for t in ticks if t.get_visible() and t.get_text()]
        assert len(boxes) >= 2 and not _overlaps(boxes)
    legend = fig.legends[0].get_window_extent(renderer) if fig.legends else ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))  # outside the axes: no point beneath it


def _report_store(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.add_run(RunInfo("run-a", "2026-01-01T00:00:00", "fixture", {}, "f00d", {}))
        store.add_many([trained(12.0, scale="tiny", run_id="run-a", warmup=1), trained(150.0, run_id="run-a")])
    return db


def test_the_report_shows_unlike_rows_without_a_ratio_or_a_bar(tmp_path: Path) -> None:
    recs = [trained(12.0, scale="tiny"), trained(150.0)]
    section = published(ReportInput(recs))
    assert section is not None
    subs = [b for b in section.blocks if getattr(b, "id", "").startswith("published-")]
    tiny = next(s for s in subs if "tiny" in s.title)
    full = next(s for s in subs if "tiny" not in s.title)
    tiny_table = next(b for b in tiny.blocks if hasattr(b, "rows"))
    ratio = tiny_table.columns.index("this / published")
    assert all(row[ratio].startswith("n/a: tiny model") for row in tiny_table.rows)
    assert not any(hasattr(b, "draw") for b in tiny.blocks)  # no chart of a tiny model beside full systems
    assert any("No ratio and no chart" in getattr(b, "text", "") for b in tiny.blocks)
    chart = next(b for b in full.blocks if hasattr(b, "draw"))
    from matplotlib.figure import Figure

    fig = Figure()
    chart.draw(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(set(labels)) and all("fp16" not in x for x in labels)  # like rows only


@pytest.mark.skipif(chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_what_differs_reads_as_a_sentence_in_the_browser(tmp_path: Path) -> None:
    db = _report_store(tmp_path)
    assert main(["report", "--all", "--db", str(db), "-o", str(tmp_path / "r"), "--format", "html"]) == 0
    script = """(() => {
      const out = [];
      for (const t of document.querySelectorAll('#published table')) {
        const col = [...t.querySelectorAll('th')].findIndex(th => th.textContent === 'what differs');
        for (const tr of t.querySelectorAll('tbody tr')) {
          const td = tr.children[col];
          const words = td.textContent.trim().split(/\\s+/).length;
          out.push([words, td.getBoundingClientRect().width, td.textContent]);
        }
      }
      return out;
    })()"""
    with Browser(chromium(), width=1280) as browser:  # type: ignore[arg-type]
        tab = browser.open((tmp_path / "r" / "report.html").as_uri())
        cells = browser.evaluate(tab, script)
        heights = browser.evaluate(
            tab,
            "[...document.querySelectorAll('#published td')].filter(td => td.textContent.includes('published batch'))"
            ".map(td => { const r = document.createRange(); r.selectNodeContents(td); "
            "return r.getClientRects().length; })",
        )
        assert browser.errors() == []
    assert cells and all(width >= 200 for _, width, _ in cells), cells  # room for a phrase, not a word
    sentences = [words for words, _, _ in cells if words >= 6]
    assert sentences and heights and max(heights) < min(sentences)  # fewer lines than words: never one per line
