"""What a token run's prompt source adds to the language models' section: a conversation run's TTFT turn by turn,
the prefix cache's hit rate (what was sent against what the server says it served), and a trace's offered load.

These are the figures that tell a source's runs apart from random prompts': a conversation resends its history
every turn, so its TTFT grows with it unless a prefix cache serves the history (the per-turn chart shows the one,
the hit-rate table the other); a trace sets its own arrivals, so the load offered and how late the driver sent
them say whether the served figures are the trace's or the driver's. Every figure is the record's own
(``details["turns"]``, ``details["prefix_cache"]``, ``details["driver"]`` and the metrics beside them): a record
without them adds nothing here, and a table of runs whose cache had nothing to serve, and whose server reported
nothing, is left out as noise. They sit in a sub-section of their own under the token runs' table
(:func:`section`), so that table stays the one table of the language models' section.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import accelbench.report.charts_tokens as charts_tokens
from accelbench.report.common import MAX_CHARTS, flags, newest_first, system_cells
from accelbench.report.model import Block, Cell, Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.details import source_of
from accelbench.results.record import Result

#: the words a server's hit rate is shown as where the record says the server (or engine) reported none
NOT_REPORTED = "not reported"


def _number(value: Any) -> float | None:
    """A figure as a record holds it (a JSON number, or None where it has none): None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def turns_of(r: Result) -> list[charts_tokens.Turn]:
    """A conversation run's turns as its record keeps them (``details["turns"]``), in turn order; [] where it has
    none (another source, or a record made before turns were kept)."""
    rows = r.details.get("turns")
    if not isinstance(rows, list):
        return []
    out = []
    for t in rows:
        turn = _number(t.get("turn")) if isinstance(t, dict) else None
        if turn is None:
            continue
        out.append(
            charts_tokens.Turn(
                int(turn),
                int(_number(t.get("requests")) or 0),
                _number(t.get("prompt_tokens_mean")),
                _number(t.get("ttft_p50_ms")),
                _number(t.get("ttft_p99_ms")),
            )
        )
    return sorted(out, key=lambda t: t.turn)


def _tokens(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "?"


def growth(r: Result, turns: list[charts_tokens.Turn]) -> str:
    """'TTFT grows 3.1 ms a turn as the history grows from 64 to 280 tokens': the record's
    ``ttft_growth_ms_per_turn`` (the least-squares slope of the median TTFT over the turn number) and the first
    and last turns' mean prompt tokens; what the record lacks is said, never worked out here."""
    m = r.metrics.get("ttft_growth_ms_per_turn")
    if m is None:
        return "no TTFT growth recorded (it takes two turns or more)"
    verb = "grows" if m.value >= 0 else "falls"
    words = f"TTFT {verb} {fmt.number(abs(m.value), 3)} ms a turn"
    if turns and (turns[0].prompt_tokens is not None or turns[-1].prompt_tokens is not None):
        words += f" as the history grows from {_tokens(turns[0].prompt_tokens)} to {_tokens(turns[-1].prompt_tokens)}"
        words += " tokens"
    return words


def _driver(r: Result) -> str:
    """'4 users, 0 ms think time': how the replay driver held the conversations, where the record says."""
    driver = r.details.get("driver")
    if not isinstance(driver, dict):
        return ""
    users, think = _number(driver.get("users")), _number(driver.get("think_ms"))
    words = [f"{users:,.0f} users" if users is not None else ""]
    words.append(f"{think:,.4g} ms think time" if think is not None else "")
    return ", ".join(w for w in words if w)


def turn_charts(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str]) -> list[Block]:
    """One chart per conversation run (the newest :data:`MAX_CHARTS`; a note counts the rest): its median and p99
    TTFT at each turn, each turn's mean prompt tokens under it, and the growth the record states in the caption.
    A chart each rather than a line per run: each run's turns carry their own prompt lengths on the x axis."""
    runs = [r for r in newest_first(recs) if r.status == "ok" and turns_of(r)]
    out: list[Block] = []
    for i, r in enumerate(runs[:MAX_CHARTS]):
        turns = turns_of(r)
        where = f" on {labels[r.fingerprint]}" if len(labels) > 1 else ""
        worth = f" ({', '.join(flags(r))})" if flags(r) else ""
        held = _driver(r)
        answered = sum(t.requests for t in turns)
        out.append(
            Chart(
                f"tokens-turns-{i}",
                f"TTFT turn by turn: {name(r)}{where}{worth}",
                f"The median and p99 time to first token of each of the {len(turns)} turns of this conversation run "
                f"({answered:,} requests answered{'; ' + held if held else ''}), by accelbench's replay driver's "
                f"clock; under each turn its requests' mean prompt tokens, the history so far plus the new message. "
                f"{growth(r, turns)} (the least-squares slope of the median over the turns): a prefix cache that "
                "holds the history keeps it flat",
                partial(charts_tokens.draw_turns, turns=turns),
                size=(7.0, 3.2),
            )
        )
    if len(runs) > MAX_CHARTS:
        out.append(Text(f"{len(runs) - MAX_CHARTS} older conversation run(s) not drawn turn by turn.", "note"))
    return out


def _percent(rate: float | None) -> str:
    return f"{rate:.1%}" if rate is not None else "-"


def _why(words: str) -> str:
    """Why a server's hit rate is missing, without the 'not reported' a caption says once: 'the transformers
    engine reports no cached tokens' of 'not reported: the transformers engine reports no cached tokens'."""
    rest = words.removeprefix(NOT_REPORTED).strip(" :")
    return rest[1:-1] if rest.startswith("(") and rest.endswith(")") else rest or words


def prefix_table(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str]) -> Table | None:
    """One row per run whose record has ``details["prefix_cache"]``: the share of its prompt tokens an ideal prefix
    cache would have served of what was sent, the share the server's usage said it served ('not reported' where
    the engine or server says none), and the difference in points. None where no run sent anything a cache could
    serve and no server reported a count: a table of 0% and 'not reported' rows says nothing."""
    found = []
    for r in recs:
        cache = r.details.get("prefix_cache")
        if isinstance(cache, dict) and isinstance(cache.get("sent"), dict):
            found.append((r, cache["sent"], cache.get("served")))
    if not any((_number(sent.get("hit_rate")) or 0) > 0 or isinstance(served, dict) for _, sent, served in found):
        return None
    multi = len(labels) > 1
    rows: list[list[str | Cell]] = []
    methods: dict[str, None] = {}
    sources: dict[str, None] = {}
    silent: dict[str, None] = {}
    for r, sent, served in found:
        hit = _number(sent.get("hit_rate"))
        if sent.get("method"):
            methods[str(sent["method"])] = None
        if isinstance(served, dict):
            said = _number(served.get("hit_rate"))
            shown = _percent(said)
            if served.get("source"):
                sources[str(served["source"])] = None
        else:
            said, words = None, str(served or NOT_REPORTED)
            shown = NOT_REPORTED if words.startswith(NOT_REPORTED) else words
            silent[words] = None
        diff = f"{(said - hit) * 100:+.1f}" if said is not None and hit is not None else ""
        rows.append(system_cells(labels, r, multi) + [name(r), source_of(r), _percent(hit), shown, diff])
    cols = (["system"] if multi else []) + ["workload", "source", "hit rate sent", "hit rate the server reported"]
    cols.append("reported - sent (points)")
    caption = (
        "Hit rate sent: the share of the prompt tokens sent that an ideal prefix cache would have served"
        + (f" ({'; '.join(methods)})" if methods else "")
        + ". Reported: the share the server's usage said it served from its cache"
        + (f" ({'; '.join(sources)})" if sources else "")
        + ". The difference in percentage points, reported minus sent: below zero, the server served less from its "
        "cache than the prompts sent offered it."
    )
    if silent:
        caption += " Not reported: " + "; ".join(_why(w) for w in silent) + "."
    first = cols.index("hit rate sent")
    return Table(cols, rows, caption=caption, numeric=frozenset(range(first, len(cols))))


def is_trace(r: Result) -> bool:
    """Whether a run replayed a trace's arrivals (its source parameter, or its prompts' summary, says so)."""
    prompts = r.details.get("prompts")
    return source_of(r) == "trace" or (isinstance(prompts, dict) and prompts.get("source") == "trace")


def _rate(r: Result, key: str) -> str:
    m = r.metrics.get(key)
    return fmt.number(m.value, fmt.digits_for(m)) if m is not None else ""


def _ms(r: Result, key: str) -> str:
    m = r.metrics.get(key)
    return fmt.seconds(m.value / 1e3) if m is not None else ""


def trace_table(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str]) -> Table | None:
    """The trace runs' load: the requests/s the trace offered beside those answered, and how late the driver sent
    requests after their timestamps (p99, worst, and how many over its threshold): a driver that fell behind
    offered a load of its own, not the trace's. None where no trace run has figures."""
    runs = [r for r in recs if r.status == "ok" and is_trace(r)]
    if not runs:
        return None
    multi = len(labels) > 1
    rows: list[list[str | Cell]] = []
    thresholds: dict[str, None] = {}
    for r in runs:
        driver = r.details.get("driver")
        driver = driver if isinstance(driver, dict) else {}
        late, sent = _number(driver.get("late_requests")), _number(r.details.get("requests"))
        if _number(driver.get("late_ms")) is not None:
            thresholds[f"{driver['late_ms']:g} ms"] = None
        late_words = "" if late is None else f"{late:,.0f}" + (f" of {sent:,.0f}" if sent is not None else "")
        rows.append(
            system_cells(labels, r, multi)
            + [
                name(r),
                _rate(r, "offered_requests_per_second"),
                _rate(r, "requests_per_second"),
                _ms(r, "issue_late_p99_ms"),
                _ms(r, "issue_late_max_ms"),
                Cell(late_words, "warn") if late else late_words,
            ]
        )
    head = ["offered requests/s", "served requests/s", "issue late p99", "issue late max", "late requests"]
    cols = (["system"] if multi else []) + ["workload"] + head
    over = f" (over {' / '.join(thresholds)})" if thresholds else ""
    caption = (
        "Trace runs, sent at their timestamps by accelbench's replay driver: offered requests/s is the trace's "
        "(its requests over the span of their due times), served the requests answered a second; issue late is how "
        f"long after its due time the driver sent a request, by its own clock, and late requests those sent late{over}."
    )
    first = cols.index("offered requests/s")
    return Table(cols, rows, caption=caption, numeric=frozenset(range(first, len(cols))))


def section(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str]) -> Section | None:
    """What the sources add under the token runs' table, in a sub-section of its own (the token runs' table stays
    the one table of theirs): the prefix-cache table, the trace runs' load, and the conversation runs'
    turn-by-turn charts, each only where some record carries its figures; None where none does."""
    blocks: list[Block] = [t for t in (prefix_table(recs, labels, name), trace_table(recs, labels, name)) if t]
    blocks += turn_charts(recs, labels, name)
    if not blocks:
        return None
    return Section("inference-tokens-sources", "Prompt sources: prefix cache, trace load, conversation turns", blocks)
