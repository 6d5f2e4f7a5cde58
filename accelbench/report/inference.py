"""Inference under LoadGen: per scenario the metric with its verdict, latency percentiles, find-peak trials."""

from __future__ import annotations

from functools import partial

import accelbench.report.charts as charts
from accelbench.families import Family
from accelbench.families.builtin import INFER, SERVE
from accelbench.report.common import (
    MAX_CHARTS,
    MLPERF_COLUMNS,
    ReportInput,
    caveat,
    efficiency_columns,
    family_section,
    figure,
    mlperf_cells,
    newest_first,
    of_runs,
    on_system,
    sent_lengths,
    standing,
    status_cell,
    system_cells,
    verdict,
)
from accelbench.report.model import Chart, Section, Table
from accelbench.report.tokens import headline, is_token_run
from accelbench.report.tokens import section as token_section
from accelbench.results import format as fmt
from accelbench.results.details import find_peak_of, invalid_reasons
from accelbench.results.record import Result

SCENARIOS = ("offline", "server", "singlestream", "multistream")
PERCENTILES = (("p50", "latency_p50_seconds"), ("p90", "latency_p90_seconds"), ("p99", "latency_p99_seconds"))


def _latency(r: Result, key: str) -> str:
    m = r.metrics.get(key)
    return fmt.seconds(m.value) if m else ""


def headlines(inp: ReportInput, recs: list[Result], what: str = "Inference") -> list[str]:
    """The summary's lines on inference: each VALID result (an INVALID one is under "Read with care")."""
    return [
        f"{what}, {inp.name(r)}{sent_lengths(r)}: {figure(r.primary)}, VALID{headline(r)}{on_system(inp, r)}"
        f"{caveat(r)}{of_runs(n)}."
        for r, n in standing(inp, [r for r in recs if r.valid])
    ]


def serving_headlines(inp: ReportInput, recs: list[Result]) -> list[str]:
    """The summary's lines on language-model serving, said as such."""
    return headlines(inp, recs, "Language-model serving")


def inference(inp: ReportInput, family: Family = INFER) -> Section | None:
    """Image models served under LoadGen: one table a scenario, find-peak's trials drawn."""
    opened = family_section(
        inp,
        family,
        "inference",
        "Inference",
        "Served under the MLPerf LoadGen. VALID and INVALID are LoadGen's verdicts (or the accuracy gate's); "
        "the quick profile is shorter than MLPerf's rules, so its results are marked non-compliant. "
        "Latencies are per sample as LoadGen reports them.",
    )
    if opened is None:
        return None
    recs, labels, section = opened
    section.blocks += scenario_tables(inp, recs, labels, "inference")
    return section


def serving(inp: ReportInput, family: Family = SERVE) -> Section | None:
    """Language models served token by token: the token runs' tables and charts, then any accuracy run in a
    table of its scenario (its figure is a quality, not a rate)."""
    opened = family_section(
        inp,
        family,
        "serving",
        "Language-model serving",
        "Served token by token under LoadGen's token mode (or accelbench's own driver, for a trace, conversations "
        "or a closed loop of users). VALID and INVALID are LoadGen's verdicts (or the accuracy gate's); the quick "
        "profile is shorter than MLPerf's rules, so its results are marked non-compliant.",
    )
    if opened is None:
        return None
    recs, labels, section = opened
    tokens = [r for r in recs if is_token_run(r)]
    if tokens:
        section.blocks.append(token_section(inp, tokens, labels))
    section.blocks += scenario_tables(inp, [r for r in recs if not is_token_run(r)], labels, "serving")
    return section


def scenario_tables(inp: ReportInput, recs: list[Result], labels: dict[str, str], sid: str) -> list[Section]:
    """A sub-section a scenario (``SID-offline``...): each record's figure, latencies, cost, energy and notes,
    with find-peak's trials drawn where a run searched."""
    out: list[Section] = []
    multi = len(labels) > 1
    drawn = 0
    seen: set[tuple[str, str]] = set()
    for scenario in SCENARIOS + ("other",):
        mine = [
            r
            for r in recs
            if (r.params.get("scenario") if r.params.get("scenario") in SCENARIOS else "other") == scenario
        ]
        if not mine:
            continue
        sub = Section(f"{sid}-{scenario}", scenario.capitalize() if scenario != "singlestream" else "SingleStream")
        if scenario == "multistream":
            sub.title = "MultiStream"
        rows = []
        extra = efficiency_columns(mine)
        for r in newest_first(mine):
            why = "; ".join(invalid_reasons(r))
            rows.append(
                system_cells(labels, r, multi)
                + [
                    inp.name(r),
                    status_cell(r),
                    verdict(r.valid, r),
                    figure(r.primary) if r.status == "ok" else (r.error or r.reason or ""),
                    (r.primary_metric or "").replace("_", " ") if r.status == "ok" else "",
                ]
                + [_latency(r, key) for _, key in PERCENTILES]
                + mlperf_cells(r)
                + [cell(r) for _, cell in extra]
                + [why or "; ".join(c.text for c in r.concerns if c.kind not in ("invalid", "non-compliant"))]
            )
            peak = find_peak_of(r)
            held = peak.get("peak")
            trials = [
                (
                    float(t["value"]),
                    float(t.get("p99_latency_seconds", 0)) * 1e3,
                    bool(t.get("valid")),
                    bool(t.get("confirmation")),
                )
                for t in peak.get("trials") or []
            ]
            if trials and drawn < MAX_CHARTS and (r.fingerprint, inp.name(r)) not in seen:
                seen.add((r.fingerprint, inp.name(r)))
                xlabel = "target QPS" if scenario == "server" else "samples per query"
                outcome = f"peak {fmt.number(float(held), 4)}" if held is not None else "no peak held"
                sub.blocks.append(
                    Chart(
                        f"find-peak-{drawn}" if sid == "inference" else f"{sid}-find-peak-{drawn}",
                        f"find-peak: {inp.name(r)}" + (f" on {labels[r.fingerprint]}" if multi else ""),
                        f"{len(trials)} find-peak trials, {xlabel} against 99th-percentile latency; {outcome}",
                        partial(
                            charts.draw_trials, trials=trials, bound_ms=peak.get("latency_bound_ms"), xlabel=xlabel
                        ),
                    )
                )
                drawn += 1
        cols = (
            (["system"] if multi else [])
            + ["workload", "status", "verdict", "result", "metric"]
            + [p for p, _ in PERCENTILES]
            + list(MLPERF_COLUMNS)
            + [name for name, _ in extra]
            + ["notes"]
        )
        numeric = frozenset(cols.index(name) for name in ("result", *(p for p, _ in PERCENTILES)))
        sub.blocks.insert(0, Table(cols, rows, numeric=numeric))
        out.append(sub)
    return out
