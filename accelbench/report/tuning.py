"""Best settings: each ``accelbench tune`` search, its ranking, the winner against the defaults, its command."""

from __future__ import annotations

from functools import partial

import accelbench.report.charts as charts
from accelbench.families import Family
from accelbench.families.builtin import TUNE
from accelbench.report.common import ReportInput, figure, newest_first
from accelbench.report.model import Block, Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.record import Result
from accelbench.tune.outcome import NO_CLAIM, details_of

#: searches drawn in full (the newest); older ones are summarised in one line each
MAX_SEARCHES = 4


def tuning(inp: ReportInput, family: Family = TUNE) -> Section | None:
    recs = newest_first(inp.of_family(family))
    if not recs:
        return None
    section = Section(
        "tuning",
        "Best settings (accelbench tune)",
        [
            Text(
                "Each search screened every runtime this device runs natively at the default batch, then batch "
                "sizes (and requests in flight) around the best two; for serving, candidates had to pass the "
                "accuracy gate; the finalists and the default settings were then confirmed side by side in "
                "interleaved rounds until the best separated from the runner-up. Only a confirmed candidate can win, "
                "and only where it separated; a speed-up is stated only against a default confirmed VALID more "
                "than once. A screening figure (2 s of LoadGen or 6 training steps) is shown for orientation.",
                "note",
            )
        ],
    )
    for n, r in enumerate(recs):
        if n < MAX_SEARCHES:
            section.blocks += _search(r, n)
        else:
            section.blocks.append(Text(f"{inp.name(r)}: {_headline(r)}", "note"))
    return section


def _headline(r: Result) -> str:
    """The search's outcome in the words its evidence allows (see accelbench.tune.outcome.summary)."""
    d = details_of(r)
    if d.get("outcome") in NO_CLAIM:
        return r.reason or str(d.get("outcome"))
    if r.status != "ok":
        return f"no winner ({r.error})"
    accuracy = f"; {d['accuracy']}" if d.get("accuracy") else ""
    if d.get("headline"):  # the search's own line (accelbench.tune.outcome.headline)
        return f"{d['headline']}{accuracy}"
    if d.get("outcome") == "equivalent":
        return f"{d['verdict']}: " + "; ".join(e["label"] for e in d.get("equivalent", [])) + accuracy
    speed = r.metrics.get("speedup_over_default")
    versus = f", {speed.value:.2f}x the default settings" if speed else ""
    withheld = f" ({d['speedup_withheld']})" if d.get("speedup_withheld") else ""
    winner = next((row["label"] for row in d.get("ranking", []) if row["status"] == "winner"), "?")
    return f"best {winner}: {figure(r.primary)}{versus}{withheld}{accuracy}"


def _search(r: Result, n: int) -> list[Block]:
    d = details_of(r)
    p = r.params
    title = f"{p.get('model')} {p.get('task')}" + (f" {p['scenario']}" if p.get("scenario") else "")
    blocks: list[Block] = [
        Text(f"{title} (budget {p.get('budget')}, {d.get('elapsed_seconds', 0):.0f} s): {_headline(r)}")
    ]
    if d.get("verdict"):
        blocks.append(Text(d["verdict"] + ".", "note"))
    if d.get("reproduce"):
        blocks.append(Text(f"Reproduce: {d['reproduce']}", "pre"))
    for e in d.get("equivalent", []):
        blocks.append(Text(f"Reproduce {e['label']}: {e['reproduce']}", "pre"))
    rows = d.get("ranking", [])
    unit = d.get("unit", "")
    bars = [charts.Bar(row["label"], got) for row in rows if (got := row.get("figure")) is not None]
    if bars:
        blocks.append(
            Chart(
                f"tune-{n}",
                f"{title}: each candidate's figure",
                f"{d.get('figure_words') or d.get('figure')} per candidate ({len(bars)}), the winner first: confirmed "
                "medians, else screening",
                partial(charts.draw_bar_panels, panels=[("", unit, bars)], highlight_first="winner" in d),
                size=(7.0, 1.2 + 0.3 * len(bars)),
            )
        )
    table_rows = []
    for i, row in enumerate(rows, 1):
        conf = row.get("confirmations") or []
        value, screen = row.get("figure"), row.get("screen")
        spread = f"{len(conf)}: {fmt.number(min(conf))} to {fmt.number(max(conf))}" if conf else ""
        table_rows.append(
            [
                str(i),
                row["label"],
                f"{fmt.number(value)} {unit}".strip() if value is not None else "",
                spread,
                fmt.number(screen) if screen is not None else "",
                row.get("accuracy", ""),
                {True: "VALID", False: "INVALID", None: ""}[row.get("valid")],
                row["status"],
            ]
        )
    caption = f"Accuracy gate: {d.get('gate', '')}."
    stopped = d.get("stopped") or []
    if stopped:
        caption += " Stopped: " + "; ".join(stopped) + "."
    left = d.get("left_out") or []
    if left:
        reasons = sorted({x["reason"] for x in left})
        caption += f" Left out ({len(left)}): " + "; ".join(reasons) + "."
    blocks.append(
        Table(
            [
                "#",
                "settings",
                str(d.get("figure_words") or d.get("figure", "")),
                "confirmations",
                "screening",
                "accuracy",
                "valid",
                "status",
            ],  # fmt: skip
            table_rows,
            caption=caption,
            numeric=frozenset({0, 2, 4}),
        )
    )
    return blocks
