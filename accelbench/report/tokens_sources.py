"""What a token run's prompt source adds to the language models' section: a conversation run's TTFT turn by turn,
the prefix cache's hit rate (sent against what the server says it served), and a trace's offered load.

These tell a source's runs apart from random prompts' (docs/report.md). Every figure is the record's own: a record
without them adds nothing, and a cache that had nothing to serve is left out as noise. They sit in a sub-section
(:func:`section`), so the token runs' table stays the section's one table."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import accelbench.report.charts_tokens as charts_tokens
from accelbench.report.common import MAX_CHARTS, flags, newest_first, system_cells
from accelbench.report.model import Block, Cell, Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.details import source_of, typed
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
    rows = typed(r).get("turns")
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


#: the fewest turns after the first a slope is fitted over: through two points any line fits, and says nothing
SLOPE_TURNS = 3
#: Student's t two-sided 95% quantiles by degrees of freedom (1-10); 2.0 beyond: the slope's interval
T95 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23)


def later_slope(turns: list[charts_tokens.Turn]) -> tuple[float, float, int] | None:
    """The least-squares slope of the median TTFT over the turns after the first (ms a turn), the half-width of
    its 95% interval, and the turns it was fitted over; None under :data:`SLOPE_TURNS` turns. The first turn is
    left out: its requests include every user's first, sent at once, so its TTFT is the burst's, not the
    history's."""
    pts = [(float(t.turn), t.p50) for t in turns[1:] if t.p50 is not None]
    if len(pts) < SLOPE_TURNS:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if not sxx:
        return None
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    dof = len(pts) - 2
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in pts) / dof
    t = T95[dof - 1] if dof <= len(T95) else 2.0
    return slope, t * math.sqrt(residual / sxx), len(pts)


def growth(r: Result, turns: list[charts_tokens.Turn]) -> str:
    """What the turns say of TTFT against the history, and only what they support: the slope of the median over
    the turns after the first (:func:`later_slope`), 'grows' or 'falls' only where its 95% interval leaves out
    zero (the prefix cache named only where it grows: the resent history's prefill is what a cache would save),
    else that the turns show no trend; with too few turns, no trend is stated at all."""
    driver = typed(r).get("driver")
    users = _number(driver.get("users")) if isinstance(driver, dict) else None
    first = turns[0].p50 if turns else None
    burst = (
        f"the {users:,.0f} users' first requests are sent at once"
        if users is not None
        else "every user's first request is sent at once"
    )
    head = f"Turn 1 (median {first:,.3g} ms) is left out of the trend: {burst}. " if first is not None else ""
    fit = later_slope(turns)
    if fit is None:
        after = sum(t.p50 is not None for t in turns[1:])
        return f"{head}No trend is stated: {after} turn(s) after the first, and a slope takes {SLOPE_TURNS}"
    slope, half, n = fit
    later = [t for t in turns[1:] if t.p50 is not None]
    span = f"turns {later[0].turn} to {later[-1].turn}"
    fitted = f"{fmt.number(slope, 3)} ± {fmt.number(half, 2)} ms a turn, least squares over {n} turns, 95%"
    if abs(slope) <= half:
        return f"{head}Over {span} the median TTFT shows no trend ({fitted}: the interval holds zero)"
    verb = "grows" if slope > 0 else "falls"
    words = f"{head}Over {span} the median TTFT {verb} {fmt.number(abs(slope), 3)} ms a turn ({fitted})"
    tokens = [t.prompt_tokens for t in later if t.prompt_tokens is not None]
    if len(tokens) > 1:
        words += f" as the history grows from {_tokens(tokens[0])} to {_tokens(tokens[-1])} tokens"
    if slope > 0:
        words += ": the resent history's prefill, which a prefix cache that holds the history would save"
    return words


def _driver(r: Result) -> str:
    """'4 users, 0 ms think time': how the replay driver held the conversations, where the record says."""
    driver = typed(r).get("driver")
    if not isinstance(driver, dict):
        return ""
    users, think = _number(driver.get("users")), _number(driver.get("think_ms"))
    words = [f"{users:,.0f} users" if users is not None else ""]
    words.append(f"{think:,.4g} ms think time" if think is not None else "")
    return ", ".join(w for w in words if w)


def _words(label: str | Cell) -> tuple[str, str]:
    """A workload's label as shown and whole: a cell that shows a short label carries the whole as its title."""
    text = label.text if isinstance(label, Cell) else label
    return text, str(getattr(label, "title", "") or text)


def turn_charts(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str | Cell]) -> list[Block]:
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
        shown, whole = _words(name(r))
        of = f" ({whole})" if whole != shown else ""
        out.append(
            Chart(
                f"tokens-turns-{i}",
                f"TTFT turn by turn: {shown}{where}{worth}",
                f"The median and p99 time to first token of each of the {len(turns)} turns of this conversation "
                f"run{of} ({answered:,} requests answered{'; ' + held if held else ''}), by accelbench's replay "
                f"driver's clock; under each turn its requests' mean prompt tokens, the history so far plus the new "
                f"message. {growth(r, turns)}.",
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


def prefix_table(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str | Cell]) -> Table | None:
    """One row per run whose record has ``details["prefix_cache"]``: the share of its prompt tokens an ideal prefix
    cache would have served of what was sent, the share the server's usage said it served ('not reported' where
    the engine or server says none), and the difference in points. None where no run sent anything a cache could
    serve and no server reported a count: a table of 0% and 'not reported' rows says nothing."""
    found = []
    for r in recs:
        cache = typed(r).get("prefix_cache")
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
    prompts = typed(r).get("prompts")
    return source_of(r) == "trace" or (isinstance(prompts, dict) and prompts.get("source") == "trace")


def _rate(r: Result, key: str) -> str:
    m = r.metrics.get(key)
    return fmt.number(m.value, fmt.digits_for(m)) if m is not None else ""


def _ms(r: Result, key: str) -> str:
    m = r.metrics.get(key)
    return fmt.seconds(m.value / 1e3) if m is not None else ""


def trace_table(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str | Cell]) -> Table | None:
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
        driver = typed(r).get("driver")
        driver = driver if isinstance(driver, dict) else {}
        late, sent = _number(driver.get("late_requests")), _number(typed(r).get("requests"))
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


def section(recs: list[Result], labels: dict[str, str], name: Callable[[Result], str | Cell]) -> Section | None:
    """What the sources add under the token runs' table, in a sub-section of its own (the token runs' table stays
    the one table of theirs): the prefix-cache table, the trace runs' load, and the conversation runs'
    turn-by-turn charts, each only where some record carries its figures; None where none does."""
    blocks: list[Block] = [t for t in (prefix_table(recs, labels, name), trace_table(recs, labels, name)) if t]
    blocks += turn_charts(recs, labels, name)
    if not blocks:
        return None
    return Section("inference-tokens-sources", "Prompt sources: prefix cache, trace load, conversation turns", blocks)
