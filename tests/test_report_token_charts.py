"""The language-model charts draw what may share a series, and nothing else (issue 45, item 5): one series per
engine, precision, scenario, prompt/output lengths and machine; a contended or INVALID run marked as such and kept
off the axes' scale; tick labels that never run into one another ('20,00050,000'); and the summary's "Read with
care" list saying each reason's advice once, for all the runs it concerns.

The records are built as the runner writes them (tests/test_report_llm.py's builders, on the token runs'
fixture's machine); the charts are drawn as the report draws them (its style, size and layout) and read back from
the drawn figure.
"""

from __future__ import annotations

import io
import re
from typing import Any

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from test_report_llm import INTERACTIVE, MLPERF, NO_LIMITS, TPOT_ONLY, _system, sweep, token_run

from accelbench.registry import describe_params
from accelbench.report import charts
from accelbench.report.common import ReportInput, systems
from accelbench.report.model import Bullets, Chart
from accelbench.report.overview import summary
from accelbench.report.tokens_charts import latency, pareto, series_name, tradeoff
from accelbench.report.tokens_names import system_tags
from accelbench.results.record import Concern, Metric, Result

CONTENDED = "contended: other processes used 64% of the CPUs (pip[19776] 36%, python3.11[20726] 3%)"
TTFT_ADVICE = "lower --target-qps (or --batch-size)"


def rated(r: Result, per_user: float, per_device: float) -> Result:
    """``r`` with the trade-off chart's two figures."""
    r.metrics["tokens_per_second_per_user"] = Metric(value=per_user, unit="tokens/s", higher_is_better=True)
    r.metrics["tokens_per_second_per_device"] = Metric(value=per_device, unit="output tokens/s", higher_is_better=True)
    return r


def invalid(r: Result, *reasons: str) -> Result:
    """``r`` judged INVALID by LoadGen, for ``reasons``, as the runner records it."""
    r.valid = False
    r.details["invalid_reasons"] = list(reasons)
    r.set_concerns([*(Concern("invalid", f"INVALID: {why}") for why in reasons), *r.concerns])
    return r


def contended(r: Result, warning: str = CONTENDED, kind: str = "contended") -> Result:
    r.concern(kind, warning)
    return r


def drawn(chart: Chart) -> Figure:
    """``chart`` drawn as the report draws it (its style, size and constrained layout), saved as a PNG: the figure
    as saved, its text laid out where the file has it."""
    with matplotlib.rc_context(charts.STYLE):
        fig = Figure(figsize=chart.size, layout="constrained")
        FigureCanvasAgg(fig)
        chart.draw(fig)
        fig.savefig(io.BytesIO(), format="png", dpi=charts.PNG_DPI)
    return fig


def legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def tick_boxes(fig: Figure) -> dict[str, list[tuple[str, Any]]]:
    """Each axis' visible, labelled ticks in the saved figure, each its text and its box, by the axis' label."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    out: dict[str, list[tuple[str, Any]]] = {}
    for i, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [*axis.get_majorticklabels(), *axis.get_minorticklabels()]
            name = f"axes {i} {axis.axis_name} ({axis.get_label().get_text()})"
            out[name] = [
                (t.get_text(), t.get_window_extent(renderer)) for t in ticks if t.get_visible() and t.get_text()
            ]
    return out


def overlapping(labels: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """The pairs of tick labels whose boxes overlap: ('20,000', '50,000') where they print as '20,00050,000'."""
    return [(a, b) for i, (a, box) in enumerate(labels) for b, other in labels[i + 1 :] if box.overlaps(other)]


def served(ttft: tuple[float, float, float], when: int, **params: Any) -> Result:
    return token_run("server", MLPERF, (40.0, 70.0, 95.0), ttft, when=when, **params)


def test_each_engine_precision_scenario_length_and_machine_is_its_own_series() -> None:
    """Offline, Server and interactive runs, two precisions, two token shapes and two machines of one engine: six
    setups, six series, each named by what it is (never one colour for the engine)."""
    other = _system("b0b0b0b0b0b0b0b0", "Fixture CPU B")
    recs = [
        rated(token_run("offline", NO_LIMITS, (9.0, 11.0, 14.0), when=1), 90.0, 900.0),
        rated(served((300.0, 1200.0, 1900.0), 2), 30.0, 300.0),
        rated(served((310.0, 1210.0, 1910.0), 3), 32.0, 310.0),  # the same setup again: the same series
        rated(token_run("interactive", INTERACTIVE, (12.0, 20.0, 29.0), (100.0, 300.0, 450.0), when=4), 60.0, 200.0),
        rated(served((300.0, 1200.0, 1900.0), 5, precision="bf16"), 40.0, 400.0),
        rated(served((900.0, 2000.0, 3000.0), 6, input_tokens=1024, output_tokens=128), 20.0, 250.0),
    ]
    elsewhere = rated(served((300.0, 1200.0, 1900.0), 7), 25.0, 260.0)
    elsewhere.system = other
    recs.append(elsewhere)
    labels = systems(recs)
    here, there = labels[recs[0].fingerprint], labels[other["fingerprint"]]
    chart = tradeoff(recs, labels)
    assert chart is not None
    series = dict(chart.draw.keywords["series"])  # type: ignore[attr-defined]
    here, there = system_tags(labels)[recs[0].fingerprint], system_tags(labels)[other["fingerprint"]]
    # what every series shares said once (the caption), each named by what sets it apart, its machine by its tag
    assert sorted(series) == sorted(
        [
            f"fp32 offline 128/8 tokens on {here}",
            f"fp32 server 128/8 tokens on {here}",
            f"fp32 interactive 128/8 tokens on {here}",
            f"bf16 server 128/8 tokens on {here}",
            f"fp32 server 1024/128 tokens on {here}",
            f"fp32 server 128/8 tokens on {there}",
        ]
    )
    assert "Every series here: llama3.1-8b static." in chart.alt
    assert len(series[f"fp32 server 128/8 tokens on {here}"]) == 2
    assert "for 7 runs of 6 series" in chart.alt and "scenario, prompt/output lengths" in chart.alt
    fig = drawn(chart)
    assert set(series) <= set(legend_texts(fig))  # the legend names each series
    colours = {c.get_label(): c.get_color() for c in fig.axes[0].lines if not c.get_label().startswith("_")}
    assert len(set(colours.values())) == 6  # one colour each
    # a sweep's series says its scenario and lengths too
    swept = sweep("s", 1.0, 10)
    [sweeps] = pareto(swept, systems(swept))
    names = [s[0] for s in sweeps.draw.keywords["series"]]  # type: ignore[attr-defined]
    assert names == ["llama3.1-8b static fp32 offline 128/8 tokens"]  # one machine: not named
    assert series_name(recs[0], {recs[0].fingerprint: here}) == "llama3.1-8b static fp32 offline 128/8 tokens"


def test_contended_and_invalid_runs_are_marked_and_the_clean_runs_set_the_axes() -> None:
    clean = [rated(served((300.0, 1200.0, 1900.0), i), 30.0 + i, 300.0 + 10 * i) for i in range(3)]
    busy = contended(rated(served((300.0, 1200.0, 1900.0), 5), 33.0, 280.0))
    wild = invalid(rated(served((300.0, 1200.0, 1900.0), 6), 400.0, 9000.0), "TTFT constraint not met (LoadGen)")
    recs = [*clean, busy, wild]
    chart = tradeoff(recs, systems(recs))
    assert chart is not None
    [(_, points)] = chart.draw.keywords["series"]  # type: ignore[attr-defined]
    assert sorted(p[2] for p in points) == ["", "", "", "INVALID", "contended"]  # one series, each point marked
    fig = drawn(chart)
    ax = fig.axes[0]
    # the axes span the clean runs (30-32 tokens/s per user, 300-320 per device), not the INVALID one far off
    assert ax.get_xlim()[1] < 60 and ax.get_ylim()[1] < 500
    assert {"VALID, uncontended (filled)", "contended (hollow)", "off the scale (at its edge)"} <= set(
        legend_texts(fig)
    )
    scatters = [c for c in ax.collections if len(c.get_offsets())]
    hollow = [c for c in scatters if c.get_facecolors().size == 0 or c.get_facecolors()[0][3] == 0]
    assert any(list(c.get_offsets()[0]) == [33.0, 280.0] for c in hollow)  # the contended run: hollow
    edge = [c for c in hollow if list(c.get_offsets()[0]) == [ax.get_xlim()[1], ax.get_ylim()[1]]]
    assert len(edge) == 1 and not edge[0].get_clip_on()  # the INVALID run: at the corner, pointing out

    # the INVALID run and its cross where it is on the scale
    near = invalid(rated(served((300.0, 1200.0, 1900.0), 7), 31.0, 290.0), "TTFT constraint not met (LoadGen)")
    fig = drawn(tradeoff([*clean, near], systems(clean)))  # type: ignore[arg-type]
    assert "INVALID (cross)" in legend_texts(fig)
    assert "off the scale (at its edge)" not in legend_texts(fig)


def test_a_sweeps_set_aside_and_invalid_points_are_marked_and_set_no_scale() -> None:
    recs = sweep("s", 1.0, 10)
    points = recs[-1].details["sweep"]["points"]
    points[1] |= {"set_aside": [CONTENDED]}
    points[3] |= {"valid": False, "tokens_per_second_per_device": 1e6, "ttft_p90_ms": 5e6}
    recs[-1].details["sweep"]["pareto"] = [4]  # the clean points' front (the runner's: VALID, uncontended)
    [chart] = pareto(recs, systems(recs))
    fig = drawn(chart)
    left, right = fig.axes
    clean = [p for i, p in enumerate(points) if i in (0, 2)]
    assert left.get_ylim()[1] < 2 * max(p["tokens_per_second_per_device"] for p in points[:3])
    assert right.get_ylim()[1] < 2 * max(p["ttft_p90_ms"] for p in clean + [points[1]])
    assert {"contended (hollow)", "off the scale (at its edge)"} <= set(legend_texts(fig))
    assert "VALID, off the front (pale)" in legend_texts(fig)  # concurrency 1: clean, off the front
    assert list(right.lines[0].get_xdata()) == [1, 4]  # the line joins the clean points


def test_the_latency_chart_marks_invalid_and_contended_rows_and_spans_the_clean_ones() -> None:
    recs = [served((20000.0, 30000.0, 50000.0), 1), served((21000.0, 33000.0, 45000.0), 2)]
    recs.append(invalid(served((2e6, 3e6, 4e6), 3), "TTFT constraint not met (LoadGen)"))
    recs.append(contended(served((25000.0, 30000.0, 40000.0), 4)))
    [chart] = latency(recs, systems(recs), lambda r: describe_params(r.benchmark, r.params))
    labels = chart.draw.keywords["labels"]  # type: ignore[attr-defined]
    assert sum(label.endswith("\n(INVALID)") for label in labels) == 1  # on a line of its own
    assert sum(label.endswith("\n(contended)") for label in labels) == 1
    fig = drawn(chart)
    ttft = fig.axes[0]
    lo, hi = ttft.get_xlim()
    assert 1000 < lo < 20000 and 50000 < hi < 200000  # the clean runs' 20,000-50,000 ms, the 2,000 s one not
    assert {"hollow: INVALID or contended run", "off the scale (at its edge)"} <= set(legend_texts(fig))


@pytest.mark.parametrize(
    "ttft",
    [
        ((300.0, 1200.0, 20000.0), (500.0, 9000.0, 50000.0)),  # the trial's: p99s of 20,000 and 50,000 ms
        ((20000.0, 30000.0, 50000.0), (21000.0, 26000.0, 48000.0)),  # 20,000-50,000 ms alone
        ((15.0, 900.0, 80000.0), (20.0, 5000.0, 3e6)),  # six decades
        ((21000.0, 23000.0, 25000.0), (22000.0, 24000.0, 29000.0)),  # no 1, 2, 3 or 5 inside
    ],
)
def test_no_two_tick_labels_overlap_on_the_latency_chart(ttft: tuple[tuple[float, ...], ...]) -> None:
    """The TTFT panel spans what its runs recorded alone (held to a TPOT limit only: no TTFT limit widens it)."""
    recs = [token_run("server", TPOT_ONLY, (30.0, 50.0, 70.0), t, when=i) for i, t in enumerate(ttft)]
    [chart] = latency(recs, systems(recs), lambda r: describe_params(r.benchmark, r.params))
    fig = drawn(chart)
    boxes = tick_boxes(fig)
    assert len(boxes["axes 0 x (ms, log scale)"]) >= 2  # the TTFT axis is labelled, not bare
    for name, found in boxes.items():
        assert not overlapping(found), (name, overlapping(found))


def test_no_two_tick_labels_overlap_on_a_wide_sweep() -> None:
    """A sweep from 1 to 1,024 requests in flight, on a panel half the chart wide: 1, 4, 16..., not all eleven."""
    recs = sweep("wide", 1.0, 10)
    points = recs[-1].details["sweep"]["points"]
    for i, p in enumerate(list(points)):
        p |= {"point": 4**i, "concurrency": 4**i}
    points += [dict(points[-1], point=2 ** (8 + i), concurrency=2 ** (8 + i)) for i in range(3)]
    [chart] = pareto(recs, systems(recs))
    fig = drawn(chart)
    for name, found in tick_boxes(fig).items():
        assert len(found) >= 2 and not overlapping(found), (name, overlapping(found))


def test_read_with_care_says_each_reason_and_its_advice_once() -> None:
    recs = [
        contended(served((300.0, 1200.0, 1900.0), i, model=m), CONTENDED.replace("64%", share))
        for i, (m, share) in enumerate((("a-1b", "64%"), ("b-1b", "50%"), ("c-1b", "40%")))
    ]
    why = f"TTFT constraint not met (LoadGen): p99 TTFT {{}} ms over the 2000 ms limit; {TTFT_ADVICE}"
    recs += [invalid(served((300.0, 1200.0, 1900.0), 5 + i, model=m), why.format(t)) for i, (m, t) in
             enumerate((("d-1b", 3156), ("e-1b", 11510)))]  # fmt: skip
    noisy = served((300.0, 1200.0, 1900.0), 8, model="f-1b")
    recs.append(contended(noisy, "noisy: the middle half spans 20%", "noisy"))
    care = [i for b in summary(ReportInput(recs, describe=describe_params)).blocks if isinstance(b, Bullets)
            for i in b.items]  # fmt: skip
    [busy] = [i for i in care if i.startswith("Contended")]
    assert busy.startswith("Contended (3 runs: infer/llm c-1b server ")  # the newest first
    for m, share in (("a-1b", "64%"), ("b-1b", "50%"), ("c-1b", "40%")):  # each run, and its own figure
        assert re.search(rf"infer/llm {m} server [^;]* \(other processes used {share} of the CPUs\)", busy)
    assert busy.endswith("CPUs)): rerun on a quiet machine: other work shared it, and the figures measure that too")
    assert busy.count("rerun on a quiet machine") == 1 and busy.count("other processes used") == 3
    assert "pip[19776]" not in busy  # each run's itemisation is in its table's notes
    [missed] = [i for i in care if i.startswith("INVALID")]
    assert missed.startswith("INVALID: TTFT constraint not met (LoadGen) (2 runs: infer/llm e-1b server")
    assert "(p99 TTFT 3156 ms over the 2000 ms limit)" in missed and "(p99 TTFT 11510 ms" in missed
    assert missed.endswith(f"): {TTFT_ADVICE}") and missed.count(TTFT_ADVICE) == 1
    # a reason one run alone has: as before, the run named first
    [noisy] = [i for i in care if i.startswith("Noisy")]
    assert noisy.startswith("Noisy: infer/llm f-1b server ") and noisy.endswith(
        ": the middle half spans 20%; rerun on a quieter machine, or measure longer (--min-time)"
    )
    assert sum("measure longer" in i for i in care) == 1
