"""Records in, a Document out: every section that has data, in the order a reader wants them."""

from __future__ import annotations

from functools import partial
from typing import Callable

from accelbench.errors import UsageError
from accelbench.families import Family, families
from accelbench.report.common import ReportInput, hook
from accelbench.report.model import Document, Section
from accelbench.report.overview import machines, summary
from accelbench.report.published import published
from accelbench.report.trends import comparisons, history
from accelbench.results.compare import Defaults, no_defaults
from accelbench.results.record import now_iso

#: section builders before the families' own sections, each returning None when the records hold nothing for it
FIRST = (summary, machines)

__all__ = ["ReportInput", "build"]


def build(inp: ReportInput, defaults: Defaults = no_defaults) -> Document:
    """The report of ``inp``'s records; ``defaults`` (each benchmark's parameters at their defaults: the CLI
    passes the registry's) pairs an older record missing a setting, in the comparisons and the history, as
    having used its default."""
    if not inp.records:
        raise UsageError("no records to report on: pick runs with 'accelbench results runs'")
    runs = sorted({r.run_id for r in inp.records})
    first = min(r.started_at for r in inp.records)[:16].replace("T", " ")
    last = max(r.ended_at for r in inp.records)[:16].replace("T", " ")
    subtitle = f"{len(inp.records)} records from {len(runs)} run{'s' * (len(runs) != 1)}, {first} to {last} UTC"
    sections = [s for s in (build_one(inp) for build_one in sections_of(defaults)) if s is not None]
    return Document(inp.title, subtitle, now_iso()[:19].replace("T", " ") + " UTC", sections)


def sections_of(defaults: Defaults = no_defaults) -> list[Callable[[ReportInput], Section | None]]:
    """Every section builder in the report's order: the summary and the machines, then each family's section as
    its description names it (in the order of :func:`accelbench.families.families`), then the published
    results, the comparisons and the history."""
    own = [partial(_family_section, hook(f.report), family=f) for f in families() if f.report is not None]
    last: list[Callable[[ReportInput], Section | None]] = [
        published,
        partial(comparisons, defaults=defaults),
        partial(history, defaults=defaults),
    ]
    return [*FIRST, *own, *last]


def _family_section(build: Callable[..., Section | None], inp: ReportInput, family: Family) -> Section | None:
    return build(inp, family)
