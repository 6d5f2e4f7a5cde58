"""The report's LLM charts: each run's TTFT and TPOT percentiles against the limits it was held to, and the sweeps
of two endpoints (engines, machines) as labelled series of one Pareto chart.

The records are built here as the runner writes them (a token run's percentiles, limits and clock; a sweep's
curve on each of its records); the machine is the token runs' fixture's. A report is rendered once, through
``accelbench report`` on a store, and its HTML read: the charts' captions, and the text matplotlib drew (an
inlined SVG keeps each drawn string as a comment beside its glyphs).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from accelbench.cli.main import main
from accelbench.registry import describe_params
from accelbench.report import charts_tokens
from accelbench.report.build import build
from accelbench.report.common import MAX_CHARTS, ReportInput, systems
from accelbench.report.model import Chart, Section
from accelbench.report.tokens_charts import LATENCY_ROWS, latency, pareto
from accelbench.report.tokens_names import system_tags
from accelbench.results.record import Metric, Result, new_id
from accelbench.results.store import RunInfo, Store

FIXTURE = json.loads((Path(__file__).parent / "data" / "tokens_runs.json").read_text())["records"]["server"]
MODEL = "llama3.1-8b"
MLPERF = {"ttft_p99_ms": 2000, "tpot_p99_ms": 100, "source": "mlperf.conf llama3_1-8b Server"}
INTERACTIVE = {"ttft_p99_ms": 500, "tpot_p99_ms": 30, "source": "mlperf.conf llama3_1-8b-interactive Server"}
FLAGS = {"ttft_p99_ms": 750.0, "tpot_p99_ms": 40.0, "source": "--ttft-ms and --tpot-ms"}
TPOT_ONLY = {"ttft_p99_ms": None, "tpot_p99_ms": 80.0, "source": "--tpot-ms"}
NO_LIMITS = {"ttft_p99_ms": None, "tpot_p99_ms": None, "source": "none: LoadGen judges no token latency in offline"}
SUT_CLOCK = "the SUT's clock (LoadGen gives no token latency in Offline)"
URLS = ("http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
SERVED = "meta-llama/Llama-3.1-8B-Instruct"


def _system(fingerprint: str = "", cpu: str = "") -> dict[str, Any]:
    """The fixture's machine, or (a fingerprint and a CPU) another one."""
    system = copy.deepcopy({k: v for k, v in FIXTURE["system"].items() if k != "price"})
    if fingerprint:
        system["fingerprint"] = fingerprint
        system["profile"] |= {"fingerprint": fingerprint, "hostname": f"host-{fingerprint[:4]}"}
        system["profile"]["cpu"] = system["profile"]["cpu"] | {"model": cpu}
    return system


def _metric(value: float, unit: str = "ms") -> Metric:
    return Metric(value=value, unit=unit, higher_is_better=unit != "ms")


def token_run(
    scenario: str,
    limits: dict[str, Any],
    tpot: tuple[float, float, float],
    ttft: tuple[float, float, float] | None = None,
    when: int = 0,
    **params: Any,
) -> Result:
    """One ok token run: its tokens/s, its TTFT (Server, interactive) and TPOT percentiles, its limits and clock."""
    metrics = {"tokens_per_second": _metric(100.0 + when, "output tokens/s")}
    for kind, values in (("ttft", ttft), ("tpot", tpot)):
        for q, v in zip((50, 90, 99), values or (), strict=False):
            metrics[f"{kind}_p{q}_ms"] = _metric(v)
    run = f"20261201-{when:06d}-{new_id()[:4]}"
    return Result(
        benchmark="infer/llm",
        params=FIXTURE["params"] | {"model": MODEL, "scenario": scenario, "mode": "performance"} | params,
        metrics=metrics,
        primary_metric="tokens_per_second",
        valid=True,
        details={
            "limits": limits,
            "tpot_method": SUT_CLOCK if scenario == "offline" else "LoadGen's",
            "engine": {"engine": params.get("engine", FIXTURE["params"]["engine"])},
        },
        started_at=f"2026-12-01T{when // 60:02d}:{when % 60:02d}:00.000+00:00",
        ended_at=f"2026-12-01T{when // 60:02d}:{when % 60:02d}:30.000+00:00",
        run_id=run,
        system=_system(),
    )


def sweep(sweep_id: str, scale: float, when: int, system: dict[str, Any] | None = None, **params: Any) -> list[Result]:
    """A ``--mode sweep`` at concurrency 1, 2, 4, 8: one Offline record per point, each carrying the curve so far
    (the last one the whole curve), as the runner stores them; ``scale`` sets the system's throughput."""
    records, points = [], []
    run = f"20261202-{when:06d}-{sweep_id[:4]}"
    for i, c in enumerate((1, 2, 4, 8)):
        per_user, per_device = 50.0 * scale / (1 + 0.4 * i), 40.0 * scale * c**0.7
        points.append(
            {"point": c, "concurrency": c, "rate": None, "tokens_per_second_per_device": per_device,
             "tokens_per_second_per_user": per_user, "ttft_p90_ms": 20.0 * c / scale, "tpot_p50_ms": 1000 / per_user,
             "valid": True, "set_aside": []}
        )  # fmt: skip
        r = token_run("offline", NO_LIMITS, (1000 / per_user, 1100 / per_user, 1200 / per_user), None, when + i)
        r.params |= {"mode": "sweep", "batch_size": c} | params
        r.details["engine"] = {"engine": r.params["engine"]} | ({"served_model": SERVED} if "url" in params else {})
        r.metrics |= {
            "tokens_per_second_per_device": _metric(per_device, "output tokens/s"),
            "tokens_per_second_per_user": _metric(per_user, "tokens/s"),
        }
        r.details["sweep"] = {
            "id": sweep_id, "axis": "concurrency", "points": copy.deepcopy(points),
            "pareto": [p["concurrency"] for p in points], "planned_points": 4, "method": "one Offline run per point",
        }  # fmt: skip
        r.run_id, r.system = run, system or r.system
        records.append(r)
    return records


def endpoint(url: str) -> dict[str, Any]:
    """The params of an ``--engine endpoint --url URL`` run."""
    return {"engine": "endpoint", "url": url, "served_model": SERVED, "precision": "unstated", "device": "server"}


def served_runs() -> list[Result]:
    """Server and interactive runs under three sets of limits, and one held to a TPOT limit alone."""
    return [
        token_run("server", MLPERF, (40.0, 70.0, 95.0), (300.0, 1200.0, 1900.0), when=1),
        token_run("server", FLAGS, (20.0, 45.0, 61.0), (500.0, 900.0, 1300.0), when=2),
        token_run("interactive", INTERACTIVE, (12.0, 20.0, 29.0), (100.0, 300.0, 450.0), when=3),
        token_run("server", TPOT_ONLY, (30.0, 50.0, 70.0), (200.0, 400.0, 600.0), when=4),
    ]


def offline_runs() -> list[Result]:
    return [token_run("offline", NO_LIMITS, (9.0, 11.0, 14.0), when=5)]


def endpoint_sweeps() -> list[Result]:
    """Two endpoints swept alike: same model, same settings, two servers."""
    return sweep("sweep-a", 1.0, 10, **endpoint(URLS[0])) + sweep("sweep-b", 1.6, 20, **endpoint(URLS[1]))


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``accelbench report --all`` on a store of the token runs and the two endpoints' sweeps."""
    tmp = tmp_path_factory.mktemp("llm")
    recs = served_runs() + offline_runs() + endpoint_sweeps()
    with Store(tmp / "store.db") as store:
        for run in sorted({r.run_id for r in recs}):
            first = next(r for r in recs if r.run_id == run)
            store.add_run(RunInfo(run, first.started_at[:19], "fixture", {}, first.fingerprint, {}))
        store.add_many(recs)
    out = tmp / "r"
    assert main(["report", "--all", "--db", str(tmp / "store.db"), "-o", str(out)]) == 0
    assert re.search(
        r"!\[[^\]]*\]\(report_files/tokens-latency-served-llama3\.1-8b\.png\)", (out / "report.md").read_text()
    )
    return (out / "report.html").read_text()


def _figure(html: str, name: str) -> tuple[str, list[str]]:
    """A chart's caption in the page, and the strings matplotlib drew in it (its SVG's text comments)."""
    found = re.findall(rf'<figure id="chart-{re.escape(name)}"><img src="data:image/svg\+xml;base64,([^"]+)".*?'
                       r"<figcaption>(.*?)</figcaption>", html)  # fmt: skip
    assert len(found) == 1, f"{name}: {len(found)} figures"
    svg = base64.b64decode(found[0][0]).decode()
    return unescape(found[0][1]), [unescape(t.strip()) for t in re.findall(r"<!-- (.*?) -->", svg)]


def _charts(recs: list[Result]) -> list[Chart]:
    doc = build(ReportInput(recs, describe=describe_params))
    tokens = next(b for s in doc.sections for b in s.blocks if isinstance(b, Section) and b.id == "inference-tokens")
    return tokens.charts()


def test_ttft_and_tpot_percentiles_are_drawn_against_each_runs_own_limits(report_html: str) -> None:
    caption, drawn = _figure(report_html, "tokens-latency-served-llama3.1-8b")
    assert "TTFT and TPOT percentiles against their limits" in caption and "Server and interactive runs" in caption
    assert "percentiles by LoadGen" in caption and "no distribution" in caption and "histogram" not in caption.lower()
    for limits in ("2,000 / 100 ms (mlperf.conf llama3_1-8b Server)", "750 / 40 ms (--ttft-ms and --tpot-ms)",
                   "500 / 30 ms (mlperf.conf llama3_1-8b-interactive Server)", "- / 80 ms (--tpot-ms)"):  # fmt: skip
        assert limits in caption, limits
    # short panel titles (two long ones meet over narrow panels), spelled out in the caption
    assert {"TTFT", "TPOT", "p50", "p90", "p99", "p99 limit"} <= set(drawn)
    assert "TTFT (time to first token) and TPOT (time per output token)" in caption
    # each run's limit drawn with its figure: three TTFT limits (one run has none), four TPOT limits
    assert {"2,000", "750", "500", "100", "40", "30", "80"} <= set(drawn)
    assert "interactive" in drawn and sum(t.startswith("server (2026-12-01 ") for t in drawn) == 3  # a row per run


def test_offline_tpot_by_the_suts_clock_has_its_own_chart_without_a_limit(report_html: str) -> None:
    caption, drawn = _figure(report_html, "tokens-latency-offline-llama3.1-8b")
    assert "TPOT percentiles against their limits, Offline runs" in caption and "TTFT" not in caption
    assert f"percentiles by {SUT_CLOCK}" in caption and "no run here was held to a limit" in caption
    assert "TPOT" in drawn and "TTFT" not in drawn
    assert "of 1 run(s)" in caption  # the sweeps' points are on their own chart
    assert "p99 limit" not in drawn  # no limit, no line


def test_the_latency_chart_carries_the_recorded_percentiles_and_limits() -> None:
    [chart] = [c for c in _charts(served_runs()) if c.name.startswith("tokens-latency")]
    labels, panels = chart.draw.keywords["labels"], dict(chart.draw.keywords["panels"])  # type: ignore[attr-defined]
    # the Server runs newest first, then the interactive one; alike but for when they ran
    assert labels == [f"server (2026-12-01 00:0{i})" for i in (4, 2, 1)] + ["interactive"]
    ttft, tpot = panels["TTFT"], panels["TPOT"]
    assert ttft[2] == charts_tokens.Spread(300.0, 1200.0, 1900.0, 2000)
    assert [s.limit for s in ttft] == [None, 750.0, 2000, 500]  # the run held to a TPOT limit alone: no TTFT line
    assert [s.limit for s in tpot] == [80.0, 40.0, 100, 30] and tpot[3] == charts_tokens.Spread(12.0, 20.0, 29.0, 30)


def test_latency_charts_are_bounded() -> None:
    models = [token_run("server", MLPERF, (1.0, 2.0, 3.0), (4.0, 5.0, 6.0), when=i, model=f"m{i}") for i in range(8)]
    many = [token_run("server", MLPERF, (1.0, 2.0, 3.0), (4.0, 5.0, 6.0), when=10 + i) for i in range(15)]
    recs = models + many
    drawn = latency(recs, systems(recs), lambda r: describe_params(r.benchmark, r.params))
    assert len(drawn) == MAX_CHARTS
    ours = next(c for c in drawn if c.name == "tokens-latency-served-llama3.1-8b")
    assert len(ours.draw.keywords["labels"]) == LATENCY_ROWS  # type: ignore[attr-defined]
    assert f"{15 - LATENCY_ROWS} older run(s) not drawn" in ours.alt


def test_two_endpoints_swept_alike_are_two_labelled_series_on_one_chart(report_html: str) -> None:
    caption, drawn = _figure(report_html, "tokens-pareto")
    # each named by what sets it apart (its server's host and port), what both share said once
    names = [f"at {url.split('/')[2]}" for url in URLS]
    assert "2 sweep(s)" in caption and all(n in caption for n in names), caption
    assert f"Every sweep here: {MODEL} endpoint offline 128/8 tokens {SERVED}." in caption
    assert all(f"{url.split('/')[2]} is {url}" in caption for url in URLS)
    assert set(names) <= set(drawn)  # the legend: one entry per sweep
    assert "tokens-pareto-rate" not in report_html
    assert "for 8 runs of 2 series" in _figure(report_html, "tokens-tradeoff")[0]  # the servers apart there too


def test_two_engines_and_two_machines_swept_alike_are_told_apart() -> None:
    other = _system("b0b0b0b0b0b0b0b0", "Fixture CPU B")
    recs = sweep("static", 1.0, 10, engine="static") + sweep("transformers", 1.3, 20, engine="transformers")
    recs += sweep("elsewhere", 0.7, 30, other, engine="static") + sweep("again", 1.1, 40, engine="static")
    labels = systems(recs)
    [chart] = pareto(recs, labels)
    names = [s[0] for s in chart.draw.keywords["series"]]  # type: ignore[attr-defined]
    here, there = labels[recs[0].fingerprint], labels["b0b0b0b0b0b0b0b0"]
    assert here != there and len(names) == len(set(names)) == 4
    tags = system_tags(labels)
    here, there = tags[recs[0].fingerprint], tags["b0b0b0b0b0b0b0b0"]
    # what sets each apart: the engine and the machine (its tag), what all share said once in the caption
    assert f"transformers on {here}" in names and f"static on {there}" in names
    assert f"Every sweep here: {MODEL} fp32 offline 128/8 tokens." in chart.alt
    # the same engine swept twice on one machine: told apart by its run
    assert sorted(n for n in names if n.startswith(f"static on {here}")) == [
        f"static on {here} (run {recs[0].run_id})",
        f"static on {here} (run {recs[-1].run_id})",
    ]
    assert all(n in chart.alt for n in names)


def test_a_rate_sweep_draws_its_front_and_ttft_against_the_rate() -> None:
    from matplotlib.figure import Figure

    recs = sweep("by-concurrency", 1.0, 10)
    rated = sweep("by-rate", 1.2, 20, scenario="server")
    for r in rated:  # a Server sweep at request rates 2, 4, 8, 16: its points and front are rates
        for p in r.details["sweep"]["points"]:
            p |= {"rate": 2.0 * p["concurrency"], "point": 2.0 * p["concurrency"], "concurrency": None}
        r.details["sweep"] |= {"axis": "rate", "pareto": [p["point"] for p in r.details["sweep"]["points"]]}
    charts = {c.name: c for c in pareto(recs + rated, systems(recs))}
    assert set(charts) == {"tokens-pareto", "tokens-pareto-rate"}
    chart = charts["tokens-pareto-rate"]
    assert "request rate" in chart.title and "Server runs at fixed request rates" in chart.alt
    fig = Figure()
    chart.draw(fig)
    left, right = fig.axes
    assert len(left.lines[0].get_xdata()) == 4  # the front joined
    assert list(right.lines[0].get_xdata()) == [2.0, 4.0, 8.0, 16.0] and "request rate" in right.get_xlabel()
