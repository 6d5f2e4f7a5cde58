"""This machine beside published systems: the closest reference rows, per device and per USD/h.

The articles' question ("how does this machine compare with others?") answered from the rows shipped in
``accelbench.reference``, each with its source. A ratio (and a bar) only between like and like: a row whose
work differs (a tiny model against the full one, int8 published against fp32 here, an INVALID run) is
still listed, with "n/a" and the reason in place of the ratio; what else differs is said beside each row.
"""

from __future__ import annotations

from functools import partial
from typing import cast

import accelbench.report.charts as charts
from accelbench.reference.match import Match, closest, matches
from accelbench.report.common import MAX_CHARTS, ReportInput, caveat, figure, newest_first, systems
from accelbench.report.model import Chart, Section, Table, Text
from accelbench.report.tokens_names import short_word, shorten
from accelbench.results.details import engine_of
from accelbench.results.record import Result

#: the engine whose model runs behind a server of its own (``--engine endpoint``)
ENDPOINT = "endpoint"
#: reference rows shown per result: the closest setups (like rows first, then the fewest differences)
CLOSEST = 8


def published(inp: ReportInput) -> Section | None:
    labels = systems(inp.records)
    found: dict[str, list[Match]] = {}
    # the newest record fit to compare stands for its workload (a contended one only where it is all there is)
    for r in sorted(newest_first(inp.ok()), key=lambda r: bool(caveat(r))):
        ms = matches(r)
        if ms and r.id not in found:
            found[r.id] = closest(ms, CLOSEST)
    if not found:
        return None
    section = Section("published", "Beside published systems")
    section.blocks.append(
        Text(
            f"Each result beside the {CLOSEST} closest published figures of the same task and model (rows "
            "that did the same work first, then the fewest differences in setup), from the rows shipped with "
            "accelbench ('accelbench reference'). A ratio above 1 means this machine is faster; 'per device' "
            "divides both sides by their device counts; per USD/h appears where both sides have a price. No "
            "ratio and no bar where the work differs (a tiny model against the full one, another precision, "
            "scenario or latency bound, an INVALID run or a failed accuracy gate): such a row reads 'n/a' "
            "with the reason. What else differs (framework, batch, data) is said beside each ratio: read it "
            "as an indication, not a verdict.",
            "note",
        )
    )
    seen: set[str] = set()
    for n, ms in enumerate(found.values()):
        r = ms[0].result
        key = f"{r.fingerprint} {r.benchmark} {inp.name(r)}"
        if key in seen:  # the first record of a workload on a system (above) stands for the others
            continue
        seen.add(key)
        server = serving_system(r)
        named = shorten([inp.name(r)])[1][0] if server else inp.name(r)
        where = f"served by {server}, client on {labels[r.fingerprint]}" if server else f"on {labels[r.fingerprint]}"
        sub = Section(f"published-{n}", f"{named} {where}")
        price = r.system.get("price") or {}
        if price:
            sub.blocks.append(Text(f"Priced at ${price['usd_per_hour']:,.4g}/h: {price.get('source', '')}.", "note"))
        sub.blocks.append(_table(r, ms))
        like = [m for m in ms if m.like]
        if not like:
            reasons = sorted({u for m in ms for u in m.unlike})
            sub.blocks.append(
                Text(f"No ratio and no chart: no published row did the same work ({'; '.join(reasons)}).", "note")
            )
        elif n < MAX_CHARTS and (chart := _chart(like, n)) is not None:
            sub.blocks.append(chart)
        section.blocks.append(sub)
    return section


def serving_system(r: Result) -> str:
    """What served an endpoint run, named as the system measured: 'transformers serve at 127.0.0.1:8000' where the
    record names the server (its engine facts' ``server``), else 'the server at 127.0.0.1:8000'; '' for a run whose
    model accelbench ran itself. An endpoint's figures are its server's, whatever framework this side runs."""
    facts = engine_of(r)
    if (r.params.get("engine") or facts.get("engine")) != ENDPOINT:
        return ""
    url = short_word(str(r.params.get("url") or facts.get("url") or "")) or "an unrecorded URL"
    server = str(cast("dict[str, object]", facts).get("server") or "the server")
    return f"{server} at {url}"


def differs(m: Match) -> str:
    """What else differs, in the reader's words: for an endpoint run the published framework is set beside the
    server that served it (:func:`serving_system`), not beside this side's harness."""
    server = serving_system(m.result)
    said = list(m.differences)
    vs = f"{m.reference.framework} vs "
    if server and said and said[0].startswith(vs):
        said[0] = vs + server
        return "; ".join(said)
    return m.comparable


def _table(r: Result, ms: list[Match]) -> Table:
    """The rows, each source numbered and its full reference in the caption: a long unbreakable reference
    in a cell would take the width that 'what differs' needs and fold that sentence one word per line. A
    column that no row fills (no price on either side) is left out for the same reason."""
    refs = list(dict.fromkeys(m.reference.source_ref for m in ms))
    when = {m.reference.source_ref: m.reference.published or "date not given" for m in ms}
    columns: list[tuple[str, list[str], bool]] = [
        ("published", [f"{m.reference.accelerator} x{m.reference.count}" for m in ms], False),
        ("figure", [m.reference.figure for m in ms], True),
        # an 'n/a: ...' reason is a phrase: that column is set as text (it wraps) unless every row has a ratio
        ("this / published", [m.ratio_text for m in ms], all(m.like for m in ms)),
        ("per device", [m.per_device_text for m in ms], True),
        ("per USD/h: this vs published", [m.per_dollar for m in ms], True),
        ("what differs", [differs(m) for m in ms], False),
        ("source", [f"[{refs.index(m.reference.source_ref) + 1}]" for m in ms], False),
    ]
    columns = [c for c in columns if any(cell and cell != "n/a" for cell in c[1])]
    names = {m.reference.source_ref: m.reference.source for m in ms}
    sources = "; ".join(f"[{i}] {names[s]}: {s} ({when[s]})" for i, s in enumerate(refs, 1))
    return Table(
        [name for name, _, _ in columns],
        [list(row) for row in zip(*(cells for _, cells, _ in columns), strict=True)],
        caption=f"This result: {figure(r.metrics.get('throughput') or r.primary)}. Sources: {sources}.",
        numeric=frozenset(i for i, (_, _, numeric) in enumerate(columns) if numeric),
    )


def _chart(like: list[Match], n: int) -> Chart | None:
    """Per-device throughput of this machine and of the published rows that did the same work, on a linear
    axis from zero (a bar's length is its figure), each figure written at its bar's end."""
    own = like[0].result
    m = own.metrics.get("throughput")
    if m is None:
        return None
    devices = int(own.params.get("nproc", 1) or 1) * int(own.params.get("nnodes", 1) or 1)
    refs = [x.reference for x in like if x.reference.per_device]
    if not refs:
        return None
    names = [f"{x.accelerator} x{x.count} ({x.precision})" for x in refs]
    # two rows of one accelerator (Lambda's and an article's, synthetic and real data) must not share a label
    names = charts.distinct(names, [f"{x.source}, {x.data}" for x in refs])
    bars = [charts.Bar("this server" if serving_system(own) else "this machine", m.value / devices)]
    bars += [charts.Bar(name, x.per_device or 0.0) for name, x in zip(names, refs, strict=True)]
    unit = f"{m.unit} per device"
    return Chart(
        f"published-{n}",
        "Per device, beside published systems",
        f"{unit} of this machine and of {len(bars) - 1} published systems that did the same work",
        partial(charts.draw_bar_panels, panels=[("", unit, bars)], highlight_first=True, values=True),
        size=(7.0, 1.2 + 0.3 * len(bars)),
    )
