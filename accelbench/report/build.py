"""Records in, a Document out: every section that has data, in the order a reader wants them."""

from __future__ import annotations

from accelbench.errors import UsageError
from accelbench.report.common import ReportInput
from accelbench.report.inference import inference
from accelbench.report.model import Document
from accelbench.report.overview import machines, summary
from accelbench.report.perf import kernels, training
from accelbench.report.published import published
from accelbench.report.trends import comparisons, history
from accelbench.report.tta import tta
from accelbench.report.tuning import tuning
from accelbench.results.record import now_iso

#: section builders, each returning None when the records hold nothing for it
SECTIONS = (summary, machines, tuning, kernels, training, tta, inference, published, comparisons, history)

__all__ = ["ReportInput", "build"]


def build(inp: ReportInput) -> Document:
    if not inp.records:
        raise UsageError("no records to report on: pick runs with 'accelbench results runs'")
    runs = sorted({r.run_id for r in inp.records})
    first = min(r.started_at for r in inp.records)[:16].replace("T", " ")
    last = max(r.ended_at for r in inp.records)[:16].replace("T", " ")
    subtitle = f"{len(inp.records)} records from {len(runs)} run{'s' * (len(runs) != 1)}, {first} to {last} UTC"
    sections = [s for s in (build_one(inp) for build_one in SECTIONS) if s is not None]
    return Document(inp.title, subtitle, now_iso()[:19].replace("T", " ") + " UTC", sections)
