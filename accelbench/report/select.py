"""Which records a report covers, read from the store: runs by id, the last N, all, narrowed by tags."""

from __future__ import annotations

from typing import Sequence

from accelbench.errors import UsageError
from accelbench.report.common import ReportInput
from accelbench.results.compare import Defaults, no_defaults, workload_key
from accelbench.results.describe import Describe, plain
from accelbench.results.store import Store


def from_store(
    store: Store,
    run_ids: Sequence[str] = (),
    *,
    tags: dict[str, str] | None = None,
    last: int | None = None,
    everything: bool = False,
    describe: Describe = plain,
    title: str = "accelbench report",
    defaults: Defaults = no_defaults,
) -> ReportInput:
    """With no run, no --last and no --all: the latest run (what a user who just ran a suite wants).

    The history beside the records is every ok record of the same workloads on the same systems, a workload
    as ``compare`` keys it (``defaults``: each benchmark's parameters at their defaults, which an older record
    missing a setting is read as having used; the CLI passes the registry's)."""
    if sum(bool(x) for x in (run_ids, last, everything)) > 1:
        raise UsageError("pick runs one way: RUN_ID ..., --last N or --all")
    runs = store.runs()
    if run_ids:
        chosen = []
        for text in run_ids:
            rid = store.resolve_run_id(text)
            if rid is None:
                raise UsageError(f"unknown run id {text!r}; see 'accelbench results runs'")
            chosen.append(rid)
    elif everything or (tags and not last):
        chosen = None  # every record (narrowed by the tags)
    else:
        if not runs:
            raise UsageError(f"no runs in {store.path}: run 'accelbench run' first")
        chosen = [r.run_id for r in runs[-(last or 1) :]]
    if chosen is None:
        records = store.query(tags=tags or None)
    else:
        records = [r for rid in dict.fromkeys(chosen) for r in store.query(run_id=rid, tags=tags or None)]
    if not records:
        where = f" with {', '.join(f'{k}={v}' for k, v in (tags or {}).items())}" if tags else ""
        raise UsageError(f"no records{where} in the selected runs; see 'accelbench results runs'")
    ids = {r.run_id for r in records}
    keys = {(r.fingerprint, workload_key(r, defaults=defaults)) for r in records if r.status == "ok"}
    history = [r for r in store.query(status="ok") if (r.fingerprint, workload_key(r, defaults=defaults)) in keys]
    return ReportInput(
        records=records,
        history=history,
        runs=[r for r in runs if r.run_id in ids],
        describe=describe,
        title=title,
    )
