"""This machine beside published systems: the closest reference rows, per device and per USD/h.

The articles' question ("how does this machine compare with others?") answered from the rows shipped in
``accelbench.reference``, each with its source; what differs in the setup is said beside every ratio.
"""

from __future__ import annotations

from functools import partial

import accelbench.report.charts as charts
from accelbench.reference.match import Match, matches
from accelbench.report.common import MAX_CHARTS, ReportInput, figure, newest_first, systems
from accelbench.report.model import Chart, Section, Table, Text

#: reference rows shown per result: the closest setups (fewest differences)
CLOSEST = 8


def published(inp: ReportInput) -> Section | None:
    labels = systems(inp.records)
    found: dict[str, list[Match]] = {}
    for r in newest_first(inp.ok()):
        ms = matches(r)
        if ms and r.id not in found:
            found[r.id] = sorted(ms, key=lambda m: len(m.differences))[:CLOSEST]
    if not found:
        return None
    section = Section("published", "Beside published systems")
    section.blocks.append(
        Text(
            f"Each result beside the {CLOSEST} closest published figures of the same task and model (fewest "
            "differences in setup first), from the rows shipped with accelbench ('accelbench reference'). A "
            "ratio above 1 means this machine is faster; 'per device' divides both sides by their device "
            "counts; per USD/h appears where both sides have a price. What differs is said beside each ratio: "
            "read a ratio across frameworks, precisions or model sizes as an indication, not a verdict.",
            "note",
        )
    )
    seen: set[str] = set()
    for n, ms in enumerate(found.values()):
        r = ms[0].result
        key = f"{r.fingerprint} {r.benchmark} {inp.name(r)}"
        if key in seen:  # the newest record of a workload on a system stands for the others
            continue
        seen.add(key)
        sub = Section(f"published-{n}", f"{inp.name(r)} on {labels[r.fingerprint]}")
        price = r.system.get("price") or {}
        if price:
            sub.blocks.append(Text(f"Priced at ${price['usd_per_hour']:,.4g}/h: {price.get('source', '')}.", "note"))
        rows = []
        for m in ms:
            ref = m.reference
            rows.append(
                [
                    f"{ref.accelerator} x{ref.count}",
                    ref.figure,
                    f"{m.ratio:.3g}x",
                    f"{m.ratio_per_device:.3g}x" if m.ratio_per_device is not None else "",
                    m.per_dollar,
                    m.comparable,
                    f"{ref.source_ref} ({ref.published or 'date not given'})",
                ]
            )
        sub.blocks.append(
            Table(
                ["published", "figure", "this / published", "per device", "per USD/h: this vs published",
                 "what differs", "source"],
                rows,
                caption=f"This result: {figure(r.metrics.get('throughput') or r.primary)}.",
                numeric=frozenset({1, 2, 3, 4}),
            )
        )  # fmt: skip
        chart = _chart(ms, n) if n < MAX_CHARTS else None
        if chart is not None:
            sub.blocks.append(chart)
        section.blocks.append(sub)
    return section


def _chart(ms: list[Match], n: int) -> Chart | None:
    """Per-device throughput of this machine and the published rows on one log axis."""
    own = ms[0].result
    m = own.metrics.get("throughput")
    if m is None:
        return None
    devices = int(own.params.get("nproc", 1) or 1) * int(own.params.get("nnodes", 1) or 1)
    bars = [charts.Bar("this machine", m.value / devices)]
    bars += [
        charts.Bar(f"{x.reference.accelerator} ({x.reference.precision})", x.reference.per_device or 0.0)
        for x in ms
        if x.reference.per_device
    ]
    if len(bars) < 2:
        return None
    unit = f"{m.unit} per device"
    return Chart(
        f"published-{n}",
        "Per device, beside published systems",
        f"{unit} of this machine and of {len(bars) - 1} published systems, on a log axis",
        partial(charts.draw_bar_panels, panels=[("", unit, bars)], log=True, highlight_first=True),
        size=(7.0, 1.2 + 0.3 * len(bars)),
    )
