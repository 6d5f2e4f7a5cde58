"""Language models served token by token: their own table in the inference section, never mixed into the
samples/s columns (a token run's rate is output tokens/s, its latencies TTFT and TPOT, not a query's).

What a reader of LLM serving results weighs, one row per run: output tokens/s (and per device, where a run
used several), requests/s, p99 time to first token and time per output token, tokens/s per user, the p99
inter-token latency and the KV cache held at peak where recorded, goodput,
the limits LoadGen held the run to (and where they came from) and its verdict, then the cost per million
tokens and the energy per output token where the record carries them. A chart sets throughput per device
against tokens/s per user (the serving trade-off: batching more raises the one and lowers the other), another
each sweep's curve (every sweep its own series: two endpoints, engines or machines swept alike share it), and one
per model and clock each run's TTFT and TPOT percentiles against the limits it was held to. What a prompt source
adds (a conversation's TTFT turn by turn, the prefix cache's hit rate, a trace's offered load) follows, from
:mod:`accelbench.report.tokens_sources`.

A series is one served setup: model, engine, precision, scenario, prompt/output lengths, server and machine
(:func:`series_name`), since runs that differ in any of these measure other work. A contended or INVALID run is
marked as such (:func:`mark`) and sets no axis: the clean runs' span does, and one far off is drawn at its edge.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath
from typing import Callable, Sequence
from urllib.parse import urlsplit

import accelbench.report.charts as charts
import accelbench.report.charts_tokens as charts_tokens
from accelbench.reference import tokens as reference_tokens
from accelbench.report import tokens_sources
from accelbench.report.common import (
    MAX_CHARTS,
    ReportInput,
    flags,
    newest_first,
    sent_lengths,
    status_cell,
    system_cells,
    verdict,
)
from accelbench.report.model import Bullets, Cell, Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.details import (
    Sweep,
    engine_of,
    held_to,
    invalid_reasons,
    limits_of,
    roofline_of,
    served_model,
    sweep_of,
    target_qps,
    typed,
)
from accelbench.results.record import Result

#: the unit of a token run's headline rate: what makes a record a token run's where it has figures
OUTPUT_TOKENS = "output tokens"
#: the scenarios in the order their rows are listed (any other after them)
ORDER = ("offline", "server", "interactive", "singlestream", "concurrency")

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


def limits(r: Result) -> tuple[str, str]:
    """'2,000 / 100 ms' (p99 TTFT / TPOT) and where the limits came from; blank where the run had none."""
    lim, pair = limits_of(r), held_to(r)
    if lim is None or pair is None:
        return "", ""
    words = " / ".join(f"{x:,.4g}" if x is not None else "-" for x in pair)
    return f"{words} ms", str(lim.get("source") or "source not recorded")


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


def _order(r: Result) -> tuple[int, str]:
    scenario = str(r.params.get("scenario", ""))
    return (ORDER.index(scenario) if scenario in ORDER else len(ORDER), str(r.params.get("model", "")))


#: a workload's words that tell a reader nothing: an endpoint's precision is its server's own, not stated
NOISE = frozenset({"unstated"})
#: the words of a workload's or series' name that read only together, each phrase taken out of a label whole or
#: not at all: the machine a series ran on (its last words), a conversation's turns, the lengths, a setting and its
#: value (a served model, a prompt file, a trace, a checkpoint, a shared prefix, a server's URL)
PHRASE = re.compile(
    r" on .+$|conversations of \d+ turns|\d+/\d+ tokens|(?:serving|prompts|trace|checkpoint|prefix|at) \S+|\S+"
)
#: a prompt/output length pair ('128/8'): a word with a slash that is not a path
_PAIR = re.compile(r"\d+/\d+")


def short_word(word: str) -> str:
    """A path as its last part ('/home/me/models/tiny-llama': 'tiny-llama'), a URL as its host and port; any other
    word as it is. A full local path is most of a label's width and tells runs apart by its last part alone."""
    if "://" in word:
        return urlsplit(word).netloc or word
    if "/" in word and not _PAIR.fullmatch(word) and (word.startswith(("/", "~", ".")) or word.count("/") > 1):
        return PurePosixPath(word).name or word
    return word


def shorten(names: Sequence[str]) -> tuple[str, list[str], dict[str, str]]:
    """What every name shares (for a caption to say once), each name's own words, and each path or URL shortened
    (short: whole, for the caption). A phrase (:data:`PHRASE`) is one word here, so that '3 turns' never loses its
    'turns' to a name of 6; words are shortened (:func:`short_word`) and :data:`NOISE` dropped; with one
    name, or where taking the shared words away would make two names read alike, each keeps all its words; a
    name with no word of its own keeps all of them."""
    whole: dict[str, str] = {}
    words: list[list[str]] = []
    for n in names:
        kept = []
        for phrase in (m.group().strip() for m in PHRASE.finditer(n)):
            if phrase in NOISE:
                continue
            parts = []
            for w in phrase.split(" "):
                short = short_word(w)
                if short != w:
                    whole[short] = w
                parts.append(short)
            kept.append(" ".join(parts))
        words.append(kept)
    full = [" ".join(w) for w in words]
    if len(set(full)) < 2:
        return "", full, whole
    shared = set(words[0]).intersection(*words[1:])
    own = [" ".join(w for w in ws if w not in shared) or f for ws, f in zip(words, full, strict=True)]
    if len(set(zip(full, own, strict=True))) != len(set(own)):  # two names would read alike without the shared words
        return "", full, whole
    return " ".join(w for w in words[0] if w in shared), own, whole


def system_tags(labels: dict[str, str]) -> dict[str, str]:
    """Each system's shortest label a chart can tell it apart by: the part before its parenthesis where those
    differ ('4x NVIDIA H100'), else the parenthesis ('vm 1a6a60' of 'AMD EPYC, 2 cores (vm 1a6a60)': the
    report adds it where two machines' labels collide), else the whole label."""
    heads = {fp: label.split(" (")[0] for fp, label in labels.items()}
    tails = {fp: label[label.find("(") + 1 : -1] if label.endswith(")") else label for fp, label in labels.items()}
    for tags in (heads, tails):
        if len(set(tags.values())) == len(labels):
            return tags
    return dict(labels)


def tagged(names: Sequence[str], recs: Sequence[Result], labels: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``names`` (each ending ' on SYSTEM' where the report covers several systems) with each system's label
    replaced by its tag (:func:`system_tags`), and each tag that stands for a longer label (tag: label)."""
    if len(labels) < 2:
        return list(names), {}
    tags = system_tags(labels)
    out = [
        n.replace(f" on {labels[r.fingerprint]}", f" on {tags[r.fingerprint]}")
        for n, r in zip(names, recs, strict=True)
    ]
    return out, {
        tags[r.fingerprint]: labels[r.fingerprint] for r in recs if tags[r.fingerprint] != labels[r.fingerprint]
    }


def shared_words(shared: str, whole: dict[str, str], what: str = "run") -> str:
    """' Every run here: llama3.1-8b quick tiny; tiny-llama is /home/me/models/tiny-llama.': a caption's words
    for what :func:`shorten` took out of the labels."""
    words = f" Every {what} here: {shared}." if shared else ""
    if whole:
        words += " " + "; ".join(f"{short} is {full}" for short, full in whole.items()) + "."
    return words


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
    recs = sorted(newest_first(recs), key=_order)
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
                verdict(r.valid) if ok else status_cell(r),
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
        drawn = sorted(newest_first(runs)[:LATENCY_ROWS], key=_order)
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
