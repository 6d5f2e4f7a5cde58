"""The section of a family that has no report module of its own: each record's figure and its other metrics in
the words its family's labels give them, so that a new family is in the report the day it is registered."""

from __future__ import annotations

from accelbench.families import Family, metric_texts
from accelbench.report.common import (
    ReportInput,
    efficiency_columns,
    family_section,
    figure,
    newest_first,
    status_cell,
    system_cells,
    verdict,
)
from accelbench.report.model import Section, Table


def section(inp: ReportInput, family: Family) -> Section | None:
    """One table of the family's records, newest first: workload, status, verdict, figure, the other figures."""
    title = family.title[:1].upper() + family.title[1:]
    opened = family_section(inp, family, family.name, title, family.report_note or f"Records of {family.name}/.")
    if opened is None:
        return None
    recs, labels, sect = opened
    multi = len(labels) > 1
    extra = efficiency_columns(recs)
    rows = [
        system_cells(labels, r, multi)
        + [
            family.short(r.benchmark),
            inp.name(r),
            status_cell(r),
            verdict(r.valid, r),
            figure(r.primary) if r.status == "ok" else (r.error or r.reason or ""),
            ", ".join(metric_texts(r)) if r.status == "ok" else "",
            *(cell(r) for _, cell in extra),
            "; ".join(r.warnings),
        ]
        for r in newest_first(recs)
    ]
    cols = (["system"] if multi else []) + [
        "benchmark",
        "workload",
        "status",
        "verdict",
        "result",
        "details",
        *(name for name, _ in extra),
        "notes",
    ]
    result = cols.index("result")
    sect.blocks.append(Table(cols, rows, numeric=frozenset({result})))
    return sect
