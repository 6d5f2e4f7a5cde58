"""Language models served token by token: their own table in the inference section, never mixed into the
samples/s columns (a token run's rate is output tokens/s, its latencies TTFT and TPOT, not a query's).

One row per run of what a reader of LLM serving weighs, then the charts (:mod:`~accelbench.report.tokens_charts`)
and what a prompt source adds (:mod:`~accelbench.report.tokens_sources`), runs named alike throughout
(:mod:`~accelbench.report.tokens_names`); docs/report.md lists what each holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import accelbench.report.charts as charts
from accelbench.reference import tokens as reference_tokens
from accelbench.report import tokens_sources
from accelbench.report.common import (
    MLPERF_COLUMNS,
    ReportInput,
    mlperf_cells,
    newest_first,
    status_cell,
    system_cells,
    verdict,
)
from accelbench.report.model import Bullets, Cell, Section, Table, Text
from accelbench.report.tokens_charts import latency, pareto, tradeoff
from accelbench.report.tokens_names import limits, order, shared_words, shorten, system_tags
from accelbench.results import format as fmt
from accelbench.results.details import held_to, invalid_reasons, limits_of, roofline_of
from accelbench.results.record import Result

#: the unit of a token run's headline rate: what makes a record a token run's where it has figures
OUTPUT_TOKENS = "output tokens"

NOTE = (
    "Language models served token by token under LoadGen's token mode. Output tokens/s is LoadGen's (Offline: "
    "its tokens/s; Server and interactive: the completed tokens/s); TTFT (time to first token) and TPOT (time "
    "per output token) p99 are LoadGen's, held to the limits shown for a VALID Server or interactive run; "
    "tokens/s per user is 1000 / the median TPOT in ms; goodput counts the requests that met both limits, by "
    "the serving harness's clock. Cost per 1M tokens is the machine's price per hour over the rate (for input "
    "tokens the same hour over the prompt tokens read, not a split of it between prefill and decode); J per "
    "output token is the metered window's average power over the rate."
)


def is_token_run(r: Result) -> bool:
    """Whether a record of the serving family (its family chose it) has a rate to read. An accuracy run's figure
    is a quality, not a rate: it goes to a table of its scenario."""
    return r.params.get("mode", "performance") in ("performance", "sweep")


def _ms(r: Result, name: str) -> str:
    """A latency in milliseconds as a person reads it: '46.7 ms', '11.5 s'."""
    m = r.metrics.get(name)
    return fmt.seconds(m.value / 1e3) if m is not None else ""


def _rate(r: Result, name: str) -> str:
    """The figure without its unit (the column names it), with the digits its interval supports."""
    m = r.metrics.get(name)
    return f"{fmt.number(m.value, fmt.digits_for(m))} {fmt.ci_percent(m)}".strip() if m is not None else ""


def _usd(r: Result, name: str) -> str:
    m = r.metrics.get(name)
    return f"${fmt.number(m.value, 3)}" if m is not None else ""


def _kv(r: Result) -> str:
    """'45% (1.20 GiB)': the share of the engine's KV cache the requests held at peak, and its size."""
    share, gib = r.metrics.get("kv_cache_peak_occupancy"), r.metrics.get("kv_cache_peak_gib")
    words = [f"{share.value:.0%}" if share else "", f"{fmt.number(gib.value, 3)} GiB" if gib else ""]
    return f"{words[0]} ({words[1]})" if all(words) else "".join(words)


def _joules(r: Result) -> str:
    """'0.205 at 40.0 W': J per output token and the average power of the window it was metered over."""
    m, watts = r.metrics.get("joules_per_output_token"), r.metrics.get("average_watts")
    if m is None:
        return ""
    return fmt.number(m.value, 3) + (f" at {fmt.number(watts.value, 3)} W" if watts else "")


def prices(recs: list[Result]) -> list[str]:
    """Each distinct price the priced records carry, with its source and what it leaves out: a caption's words."""
    out: dict[str, None] = {}
    for r in recs:
        stated = r.system.get("price") or {}
        if "usd_per_million" not in r.metrics or not stated.get("usd_per_hour"):
            continue
        text = f"${stated['usd_per_hour']:,.4g}/h ({stated.get('source') or 'source not recorded'})"
        if stated.get("power_cost_kwh") is not None and "energy" not in (stated.get("parts") or {}):
            text += ", electricity not included (no power measured, no --board-watts)"
        if stated.get("mismatch"):
            text += f", priced with --price-mismatch-ok: {stated['mismatch']}"
        out[text] = None
    return list(out)


def headline(r: Result) -> str:
    """', TTFT p99 53.9 ms, TPOT p99 3.54 ms': what a summary line adds to a token run's rate."""
    words = [f"{label} {_ms(r, name)}" for label, name in (("TTFT p99", "ttft_p99_ms"), ("TPOT p99", "tpot_p99_ms"))]
    return "".join(f", {w}" for w in words if not w.endswith(" "))


@dataclass(frozen=True)
class Labelled(Cell):
    """A table cell whose whole text is a tooltip (the HTML's title attribute) over the short one it shows."""

    title: str = ""


def _against(r: Result, name: str, limit: float | None) -> str | Cell:
    """'11.5 s / 2,000 ms': a p99 beside the limit it was held to, marked bad where it is over it; '(2,000 ms)'
    where the limit only counted goodput and judged nothing (a closed loop given no limit)."""
    shown, m = _ms(r, name), r.metrics.get(name)
    if m is None or limit is None:
        return shown
    if (limits_of(r) or {}).get("judged") is False:
        return f"{shown} / ({limit:,.4g} ms)"
    words = f"{shown} / {limit:,.4g} ms"
    return Cell(words, "bad") if m.value > limit else words


def devices_of(r: Result) -> int:
    """The devices a run's per-device figure divides by (an endpoint's server devices, or ``--nproc``)."""
    return reference_tokens.devices(r)


def section(inp: ReportInput, recs: list[Result], labels: dict[str, str]) -> Section:
    """The token runs' sub-section: a compact table a reader takes in at a glance (the rate, per device where runs
    used several, the p99 TTFT and TPOT against their limits, the verdict; what else each run says a numbered
    note under it), a second table of the figures behind them (requests, per user, ITL, goodput, cache, roofline,
    cost, energy), the limits' and prices' sources, and the charts. Workloads are named by what sets each apart,
    what every run shares said once, the whole name a tooltip: at 1,280 px every figure shows without scrolling."""
    multi = len(labels) > 1
    recs = sorted(newest_first(recs), key=order)
    names = [inp.name(r) for r in recs]
    shared, own, whole = shorten(names)
    own = charts.distinct(own, [r.started_at[:16].replace("T", " ") for r in recs])
    per_device = any(devices_of(r) > 1 for r in recs)
    rows: list[list[str | Cell]] = []
    sources: dict[str, str] = {}
    notes: dict[str, int] = {}
    for r, name, label in zip(recs, names, own, strict=True):
        ok = r.status == "ok"
        bound, source = limits(r)
        if bound:
            sources.setdefault(f"{bound} ({source})", "")
        pair = held_to(r) or (None, None)
        said = [r.error or r.reason or ""] if not ok else []
        said += invalid_reasons(r) or [c.text for c in r.concerns if c.kind != "invalid"]
        note = " ".join(f"[{notes.setdefault(why, len(notes) + 1)}]" for why in dict.fromkeys(said) if why)
        rows.append(
            system_cells(labels, r, multi)
            + [
                Labelled(label, title=name),
                verdict(r.valid, r) if ok else status_cell(r),
                _rate(r, "tokens_per_second"),
            ]
            + ([_rate(r, "tokens_per_second_per_device")] if per_device else [])
            + [_against(r, "ttft_p99_ms", pair[0]), _against(r, "tpot_p99_ms", pair[1]), note]
        )
    head = ["output tokens/s"] + (["per device"] if per_device else []) + ["TTFT p99 / limit", "TPOT p99 / limit"]
    cols = (["system"] if multi else []) + ["workload", "verdict"] + head + ["note"]
    first = cols.index("output tokens/s")
    caption = "Limits: " + "; ".join(sources) + "." if sources else "No run here was held to latency limits."
    caption += shared_words(shared, whole)
    sub = Section("inference-tokens", "Language models", [Text(NOTE, "note")])
    sub.blocks.append(Table(cols, rows, caption=caption, numeric=frozenset(range(first, first + len(head)))))
    if notes:
        sub.blocks.append(Bullets([f"[{n}] {why}" for why, n in notes.items()], "note"))
    for group in FIGURES:
        more = figures_table(recs, labels, own, names, group)
        sub.blocks += [more] if more is not None else []
    submitted = [
        (label, name, r) for r, label, name in zip(recs, own, names, strict=True) if r.details.get("loadgen_version")
    ]
    if submitted:
        machine = ["system"] if multi else []
        tags = system_tags(labels)
        mlperf_rows: list[list[str | Cell]] = []
        for label, name, r in submitted:
            row: list[str | Cell] = [Labelled(tags[r.fingerprint], title=labels[r.fingerprint])] if multi else []
            mlperf_rows.append(row + [Labelled(label, title=name), *mlperf_cells(r)])
        caption = "Whether each LoadGen run may be submitted to MLPerf: its profile, round, LoadGen and the rules."
        sub.blocks.append(Table(machine + ["workload", *MLPERF_COLUMNS], mlperf_rows, caption=caption))
    tradeoff_chart = tradeoff(recs, labels)
    sub.blocks += [tradeoff_chart] if tradeoff_chart is not None else []
    sub.blocks += pareto(recs, labels)
    sub.blocks += latency(recs, labels, inp.name)
    shown = {id(r): Labelled(label, title=name) for r, label, name in zip(recs, own, names, strict=True)}
    added = tokens_sources.section(recs, labels, lambda r: shown[id(r)])
    sub.blocks += [added] if added is not None else []
    return sub


def _usd_column(name: str) -> Callable[[Result], str]:
    return lambda r: _usd(r, name)


def _rate_column(name: str) -> Callable[[Result], str]:
    return lambda r: _rate(r, name)


def _ms_column(name: str) -> Callable[[Result], str]:
    return lambda r: _ms(r, name)


#: the figures behind the headline table's, in two tables (one would scroll sideways at 1,280 px), each figure a
#: column where some run has it: (column, metric, cell). Serving: how the rate and latencies came about; the
#: machine: how much of the hardware's limits the run used, and what a token cost in money and energy.
FIGURES: tuple[tuple[tuple[str, str, Callable[[Result], str]], ...], ...] = (
    (
        ("requests/s", "requests_per_second", _rate_column("requests_per_second")),
        ("tokens/s per user", "tokens_per_second_per_user", _rate_column("tokens_per_second_per_user")),
        ("ITL p99", "itl_p99_ms", _ms_column("itl_p99_ms")),
        ("goodput tokens/s", "goodput_tokens_per_second", _rate_column("goodput_tokens_per_second")),
        ("KV cache at peak", "kv_cache_peak_occupancy", lambda r: _kv(r)),
        ("KV cache at peak", "kv_cache_peak_gib", lambda r: _kv(r)),
    ),
    (
        (
            "decode: % of peak bandwidth",
            "decode_bandwidth_utilization",
            lambda r: _pct(r, "decode_bandwidth_utilization"),
        ),
        ("decode limit tokens/s", "decode_limit_tokens_per_second", _rate_column("decode_limit_tokens_per_second")),
        ("prefill: % of peak FLOPs", "prefill_flops_utilization", lambda r: _pct(r, "prefill_flops_utilization")),
        ("USD per 1M output tokens", "usd_per_million", _usd_column("usd_per_million")),
        ("USD per 1M input tokens", "usd_per_million_input_tokens", _usd_column("usd_per_million_input_tokens")),
        ("J per output token", "joules_per_output_token", lambda r: _joules(r)),
    ),
)


def _pct(r: Result, name: str) -> str:
    m = r.metrics.get(name)
    return f"{fmt.number(m.value, 3)}%" if m is not None else ""


def figures_table(
    recs: list[Result],
    labels: dict[str, str],
    own: list[str],
    names: list[str],
    group: Sequence[tuple[str, str, Callable[[Result], str]]],
) -> Table | None:
    """The figures behind the headline table's, one row per run that has any (its label the headline table's,
    the whole name its tooltip), a column per figure some run has; the caption says how each was worked out.
    None where no run has one."""
    multi = len(labels) > 1
    columns: dict[str, Callable[[Result], str]] = {}
    for col, metric, cell in group:
        if any(metric in r.metrics for r in recs):
            columns.setdefault(col, cell)
    rows: list[list[str | Cell]] = []
    tags = system_tags(labels)  # the table above names each system whole: its tag here, the whole a tooltip
    for r, label, name in zip(recs, own, names, strict=True):
        cells = [cell(r) for cell in columns.values()] if r.status == "ok" else []
        if any(cells):
            machine: list[str | Cell] = [Labelled(tags[r.fingerprint], title=labels[r.fingerprint])] if multi else []
            rows.append(machine + [Labelled(label, title=name)] + list(cells))
    if not rows:
        return None
    cols = (["system"] if multi else []) + ["workload"] + list(columns)
    first = cols.index("workload") + 1
    numeric = frozenset(range(first, len(cols)))
    if group is FIGURES[0]:
        caption = (
            "The figures behind each run's rate and latencies (workloads named as in the table above): "
            "requests answered a second, tokens/s per user, the p99 inter-token latency, goodput and the share of "
            "the KV cache held at peak, where the runs record them."
        )
        return Table(cols, rows, caption=caption, numeric=numeric)
    caption = "How much of the machine's limits each run used, and what its tokens cost, where the runs record it."
    priced = prices(recs)
    if priced:
        caption += " Priced at " + "; ".join(priced) + ": the machine's hour over the rate."
    roofs = {
        str(roof.get("bandwidth_source")): None
        for r in recs
        if (roof := roofline_of(r)) is not None and "decode_bandwidth_utilization" in r.metrics
    }
    if roofs:
        caption += (
            " Decode bandwidth: the weights and KV cache each decode step reads, times the steps, over the run's span "
            "and the device's peak (" + "; ".join(roofs) + "); the limit is the tokens/s the run's batch would reach "
            "at that peak. Prefill FLOPs: the prompts' forward FLOPs over the same span and the peak FLOPS: the two "
            "shares add up to how much of the run the hardware's limits account for."
        )
    if any("joules_per_output_token" in r.metrics for r in recs):
        caption += (
            " J per output token: the average power of the metered window (board/package counters, not wall "
            "power) over the rate."
        )
    return Table(cols, rows, caption=caption, numeric=numeric)
