"""The language models' charts, drawn from their records: the throughput/interactivity trade-off (:func:`tradeoff`),
each sweep's curve (:func:`pareto`) and each run's TTFT and TPOT percentiles against its limits (:func:`latency`).

A series is one served setup (:func:`series_name`), since runs that differ in any of its settings measure other
work. A contended or INVALID run is marked (:func:`mark`) and sets no axis. This module picks each chart's points,
names and words out of the records; :mod:`accelbench.report.charts_tokens` draws plain numbers, never a record."""

from __future__ import annotations

import re
import textwrap
from functools import partial
from typing import Callable

import accelbench.report.charts as charts
import accelbench.report.charts_tokens as charts_tokens
from accelbench.report.common import MAX_CHARTS, flags, newest_first, sent_lengths
from accelbench.report.model import Chart
from accelbench.report.tokens_names import limits, order, shared_words, shorten, tagged
from accelbench.results.details import Sweep, engine_of, held_to, served_model, sweep_of, target_qps, typed
from accelbench.results.record import Result


def lengths(r: Result) -> str:
    """'128/8 tokens': the prompt and output lengths a run was asked to serve ('' where its record states neither),
    with what it sent where that differs ('128/32 tokens (sent 113/30.2 tokens a request)'): runs of other lengths
    do other work per request, and never share a series."""
    p = r.params
    stated = p.get("input_tokens") or p.get("output_tokens")
    asked = f"{p['input_tokens']}/{p['output_tokens']} tokens" if stated else ""
    return f"{asked}{sent_lengths(r)}".strip()


def series_name(r: Result, labels: dict[str, str]) -> str:
    """'llama3.1-8b static fp32 server 128/8 tokens on box-b': the model, the engine, the precision, the scenario,
    the prompt/output lengths, the server (an endpoint run: its URL and the model it serves) and the machine
    where the report has several: the words that tell one served setup from another, so Offline, Server and
    interactive runs, runs of other lengths or precisions, two endpoints, engines or machines never share a
    series (nor one colour)."""
    p = r.params
    words = [p.get("model"), p.get("engine") or engine_of(r).get("engine"), p.get("precision"), p.get("scenario")]
    words.append(lengths(r))
    name = " ".join(str(w) for w in words if w and w != "unstated")  # an endpoint's precision: the server's own
    if p.get("url"):
        served = served_model(r)
        name += f" {served} at {p['url']}" if served else f" at {p['url']}"
    return name + (f" on {labels[r.fingerprint]}" if len(labels) > 1 else "")


def mark(r: Result) -> str:
    """A run's point's mark on a chart (:func:`accelbench.report.charts.mark_style`): 'INVALID' (a cross, contended
    or not), 'contended' (hollow), '' (filled): the one that says most about what its figures are worth."""
    return next(iter(flags(r)), "")


#: what a chart's marks mean, as a caption says it
MARKS = (
    "VALID, uncontended runs filled, contended ones hollow, INVALID ones a cross; the axes span the clean runs, "
    "and a run beyond them is a triangle at the edge"
)


def pareto(recs: list[Result], labels: dict[str, str]) -> list[Chart]:
    """Each ``--mode sweep``'s curve (its most complete record's): tokens/s per device against tokens/s per user,
    the Pareto front joined, and the TTFT p90 at each point; one series per sweep (its id), labelled by what sets
    it apart (:func:`series_name`, then its run), so two endpoints (two engines, two machines) swept alike share
    the chart. Concurrency sweeps and rate sweeps each get their own chart (their TTFT panels' x axes differ);
    none without a sweep of two points or more."""
    newest: dict[str, Result] = {}
    swept: dict[int, Sweep] = {}  # each record's sweep, by the record
    for r in recs:
        sweep = sweep_of(r)
        if r.status != "ok" or sweep is None:
            continue
        swept[id(r)] = sweep
        kept = newest.get(sweep["id"])
        if kept is None or len(sweep["points"]) > len(swept[id(kept)]["points"]):
            newest[sweep["id"]] = r
    by_axis: dict[str, list[Result]] = {}
    for r in newest_first(newest.values()):
        by_axis.setdefault(str(swept[id(r)].get("axis") or "concurrency"), []).append(r)
    out = []
    for axis, sweeps in sorted(by_axis.items()):
        drawn = sweeps[:MAX_CHARTS]  # the newest: the rest are in the table
        if max(len(swept[id(r)]["points"]) for r in drawn) < 2:
            continue
        names = charts.distinct([series_name(r, labels) for r in drawn], [f"run {r.run_id}" for r in drawn])
        names, machines = tagged(names, drawn, labels)
        shared, names, whole = shorten(names)
        whole |= machines
        curves = [(n, swept[id(r)]["points"], swept[id(r)]["pareto"]) for n, r in zip(names, drawn, strict=True)]
        series = sorted(curves, key=lambda s: s[0])
        rated = axis == "rate"
        each = "Server runs at fixed request rates" if rated else concurrency_points(drawn)
        left = f"; {len(sweeps) - len(drawn)} older sweep(s) not drawn" if len(sweeps) > len(drawn) else ""
        out.append(
            Chart(
                "tokens-pareto-rate" if rated else "tokens-pareto",
                "Sweep: throughput against interactivity, and time to first token"
                + (" against the request rate" if rated else ""),
                f"{len(drawn)} sweep(s) of {each}: output tokens/s per device against tokens/s per user, the "
                f"Pareto front joined (VALID, uncontended points; a clean point off it pale), and the TTFT p90 at "
                f"each {'request rate' if rated else 'concurrency'}; {MARKS}; series: "
                f"{'; '.join(n for n, _, _ in series)}{left}.{shared_words(shared, whole, 'sweep')}",
                partial(charts_tokens.draw_pareto, series=series, axis=axis),
                size=(7.0, 3.6 + 0.15 * len(series)),  # the legend's lines under the panels
            )
        )
    return out


def tradeoff(recs: list[Result], labels: dict[str, str]) -> Chart | None:
    """Output tokens/s per device against tokens/s per user, one series per served setup (:func:`series_name`:
    model, engine, precision, scenario, lengths, server, machine), each run marked by what it is worth
    (:func:`mark`), the axes set by the clean runs; None where fewer than two runs have both figures."""
    series: dict[str, list[tuple[float, float, str]]] = {}
    first: dict[str, Result] = {}  # each series' first run: its machine
    for r in recs:
        per_user = r.metrics.get("tokens_per_second_per_user")
        rate = r.metrics.get("tokens_per_second_per_device") or r.metrics.get("tokens_per_second")
        if r.status != "ok" or per_user is None or rate is None:
            continue
        series.setdefault(series_name(r, labels), []).append((per_user.value, rate.value, mark(r)))
        first.setdefault(series_name(r, labels), r)
    points = sum(len(v) for v in series.values())
    if points < 2:
        return None
    drawn = sorted(series.items())[:MAX_CHARTS]
    rest = sorted(series.items())[MAX_CHARTS:]
    left = f"; {len(rest)} series not drawn ({sum(len(v) for _, v in rest)} runs)" if rest else ""
    names, machines = tagged([n for n, _ in drawn], [first[n] for n, _ in drawn], labels)
    shared, short, whole = shorten(names)
    whole |= machines
    drawn = [(name, points) for name, (_, points) in zip(short, drawn, strict=True)]
    return Chart(
        "tokens-tradeoff",
        "Throughput against interactivity",
        f"Output tokens/s per device against tokens/s per user for {points} runs of {len(series)} series (one per "
        f"model, engine, precision, scenario, prompt/output lengths, server and machine); {MARKS}{left}."
        + shared_words(shared, whole, "series"),
        partial(charts.draw_tradeoff, series=drawn),
        size=(7.0, 3.6 + 0.15 * (len(drawn) + 3)),  # the legend's lines under the axes, the marks' included
    )


#: the runs one latency chart draws at most (the newest of its group; the others are in the table)
LATENCY_ROWS = 12
#: the latencies a token run records percentiles of, each in its own panel: (title, metric prefix)
LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"))
#: what each latency's short name stands for, as a caption says it
LATENCY_WORDS = {"ttft": "TTFT (time to first token)", "tpot": "TPOT (time per output token)"}
#: a latency chart's row label is wrapped to lines of at most this many characters (what makes the run unfit on a
#: line of its own): one long line would squeeze the panels until their titles meet
ROW_LABEL = 36


def concurrency_points(sweeps: list[Result]) -> str:
    """What a concurrency sweep's points are: closed loops, or (a sweep recorded before the closed loop) Offline
    runs."""
    closed = {r.params.get("scenario") == "concurrency" for r in sweeps}
    if closed == {True}:
        return "closed loops at fixed concurrencies"
    if closed == {False}:
        return "Offline runs at fixed concurrencies"
    return "closed loops (and older sweeps' Offline runs) at fixed concurrencies"


#: the runs each clock's latency chart draws, as its title names them
CLOCK_RUNS = {
    "served": "Server and interactive runs",
    "driver": "closed loops and replays (accelbench's driver)",
    "offline": "Offline runs",
}


def _clock(r: Result) -> str:
    """'driver' where accelbench's own driver sent the requests and timed them (a closed loop, a trace, a
    conversation), 'offline' where the run's TPOT was timed by the SUT's clock (LoadGen times no token in Offline),
    else 'served' (LoadGen's TTFT and TPOT): the three are drawn apart, never on one axis."""
    if typed(r).get("driver"):
        return "driver"
    method = str(typed(r).get("tpot_method") or "")
    sut = method.startswith("the SUT's clock") or (not method and r.params.get("scenario") == "offline")
    return "offline" if sut else "served"


def _recorded(r: Result, kind: str) -> bool:
    """Whether the record holds any percentile of ``kind`` ('ttft', 'tpot')."""
    return any(f"{kind}_p{q}_ms" in r.metrics for q in (50, 90, 99))


def _spread(r: Result, kind: str) -> charts_tokens.Spread:
    """The p50/p90/p99 of ``kind`` the record holds (None where not), the p99 limit it was held to and what the
    run is worth (:func:`flags`: an INVALID or contended run is drawn hollow and sets no scale)."""
    found = [r.metrics.get(f"{kind}_p{q}_ms") for q in (50, 90, 99)]
    pair = held_to(r)
    p50, p90, p99 = (m.value if m else None for m in found)
    limit = pair[0 if kind == "ttft" else 1] if pair is not None else None
    return charts_tokens.Spread(p50, p90, p99, limit=limit, mark=", ".join(flags(r)))


def _rows_named(
    runs: list[Result], labels: dict[str, str], name: Callable[[Result], str]
) -> tuple[str, list[str], dict[str, str]]:
    """The words every run's workload shares ('llama3.1-8b static 128/8 tokens ...': the chart's caption says them
    once) and each run's row label: its scenario and the words it does not share (engine, lengths, precision where
    the rows differ in them; a path by its last part, :func:`shorten`), its system where the rows ran on several,
    then the request rate asked for and the time it started where two rows would read alike, and last what makes
    it unfit ('(INVALID, contended)'); a label wraps to a second line rather than crowd the panels."""
    several = len({r.fingerprint for r in runs}) > 1
    full, machines = tagged([name(r) + (f" on {labels[r.fingerprint]}" if several else "") for r in runs], runs, labels)
    common, own, whole = shorten(full)
    whole |= machines if several else {}
    rows = []
    for r, words in zip(runs, own, strict=True):
        scenario = str(r.params.get("scenario") or "")
        rest = [w for w in words.split() if w != scenario]
        rows.append(" ".join([scenario, *rest]).strip() or words)
    rate = [f"{qps:,.4g} queries/s" if (qps := target_qps(r)) else "" for r in runs]
    started = [r.started_at[:16].replace("T", " ") for r in runs]
    rows = charts.distinct(rows, rate, started)
    wrapped = [textwrap.fill(row, ROW_LABEL) for row in rows]
    marked = [f"{row}\n({', '.join(flags(r))})" if flags(r) else row for row, r in zip(wrapped, runs, strict=True)]
    shared = common + ("" if several or len(labels) < 2 else f" on {labels[runs[0].fingerprint]}")
    return shared.strip(), marked, whole


def latency(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str]) -> list[Chart]:
    """Per model and clock (LoadGen's Server and interactive runs; Offline runs timed by the SUT's clock), each
    run's recorded p50/p90/p99 TTFT and TPOT against its own limits: the table gives the p99 alone, and whether
    a run missed its limit by its tail or throughout reads off the spread. Percentiles as recorded (a record keeps
    no distribution); at most MAX_CHARTS charts, the newest LATENCY_ROWS runs each. A sweep's points are left to
    its own chart (:func:`pareto`): its seven rows would crowd out the runs held to limits."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in recs:
        if r.status == "ok" and "sweep" not in r.details and any(_recorded(r, kind) for _, kind in LATENCIES):
            groups.setdefault((_clock(r), str(r.params.get("model", ""))), []).append(r)
    out = []
    clocks = ("served", "driver", "offline")
    for (clock, model), runs in sorted(groups.items(), key=lambda g: (clocks.index(g[0][0]), g[0][1]))[:MAX_CHARTS]:
        drawn = sorted(newest_first(runs)[:LATENCY_ROWS], key=order)
        panels = [(title, kind) for title, kind in LATENCIES if any(_recorded(r, kind) for r in drawn)]
        common, rows, whole = _rows_named(drawn, labels, name)
        bounds = {f"{b} ({source})": None for b, source in map(limits, drawn) if b}
        held = (
            "each run's p99 limit a red bar across its row: " + "; ".join(bounds)
            if bounds
            else "no run here was held to a limit, so none is drawn"
        )
        by = {"served": "LoadGen", "driver": "accelbench's driver, each from its request's send"}.get(clock) or str(
            typed(drawn[0]).get("tpot_method") or "the SUT's clock"
        )
        what = " and ".join(kind.upper() for _, kind in panels)
        spelled = " and ".join(LATENCY_WORDS[kind] for _, kind in panels)
        left = f"; {len(runs) - len(drawn)} older run(s) not drawn" if len(runs) > len(drawn) else ""
        slug = re.sub(r"[^a-z0-9.]+", "-", model.lower()).strip("-") or "model"
        of_common = f" of {common}" if common else ""
        out.append(
            Chart(
                f"tokens-latency-{clock}-{slug}",
                f"{model}: {what} percentiles against their limits, " + CLOCK_RUNS[clock],
                f"The p50, p90 and p99 {spelled} of {len(drawn)} run(s){of_common} as recorded (percentiles by {by}; "
                f"a record keeps no distribution), log axis spanning the VALID, uncontended runs; an INVALID or "
                f"contended run's marks hollow (its row says which), a figure beyond the axis a triangle at its "
                f"edge; {held}{left}." + shared_words("", whole),
                partial(
                    charts_tokens.draw_latency,
                    labels=rows,
                    panels=[(t, [_spread(r, k) for r in drawn]) for t, k in panels],
                ),
                size=(7.0, 1.7 + 0.3 * len(rows) + 0.13 * sum(row.count("\n") for row in rows)),
            )
        )
    return out
