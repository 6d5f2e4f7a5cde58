"""What a run will do before it does it: each entry, its timeout, and how long it took here last time.

An estimate is only as honest as its source, so it is never guessed from parameters: it is the duration
of the same entry (same benchmark and parameters) on this system in the store's latest run of it, and
"unknown" otherwise. Where the parameters themselves ask for a minimum time (LoadGen's --duration), that
floor is checked against the timeout, so a request that cannot finish is said before it starts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

from accelbench import registry
from accelbench.results.store import Store
from accelbench.suite.suites import Entry, Suite


@dataclass(frozen=True)
class Planned:
    entry: Entry
    timeout: float
    #: seconds the same entry took on this system last time, and in which run
    last_seconds: float | None = None
    last_run: str | None = None
    floor_seconds: float | None = None
    #: the worker process it runs in, numbered in the run (consecutive kernels of one benchmark share one)
    process: int = 0

    @property
    def warning(self) -> str | None:
        if self.floor_seconds is not None and self.floor_seconds >= self.timeout:
            return (
                f"asks for at least {self.floor_seconds:g} s, not less than its {self.timeout:g} s timeout: it will be "
                "killed; raise --timeout or shorten it"
            )
        if self.last_seconds is not None and self.last_seconds >= self.timeout:
            return (
                f"took {self.last_seconds:.0f} s here last time, more than its {self.timeout:g} s timeout; raise "
                "--timeout"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        return self.entry.to_dict() | {
            "label": self.entry.label,
            "timeout_seconds": self.timeout,
            "last_seconds": self.last_seconds,
            "last_run": self.last_run,
            "floor_seconds": self.floor_seconds,
            "warning": self.warning,
            "process": self.process,
        }


#: entries at most in one shared worker process (a kernel set expands to dozens): a crash loses none of them (the
#: rest run in a fresh process), and a long group still starts a clean process now and then
MAX_SHARED = 64


def sharing(entries: Sequence[Entry]) -> int:
    """How many entries at the head of ``entries`` run in one worker process: consecutive entries of one benchmark
    that shares its process (the kernels, ``BenchmarkInfo.shares_process``), at most :data:`MAX_SHARED`; else 1."""
    if not entries:
        return 0
    first = entries[0].benchmark
    if not registry.get(first).shares_process:
        return 1
    n = 1
    while n < min(len(entries), MAX_SHARED) and entries[n].benchmark == first:
        n += 1
    return n


def timeout_of(entry: Entry, override: float | None = None) -> float:
    """The command line's --timeout, else the suite file's, else the benchmark's own."""
    return override or entry.timeout or registry.get(entry.benchmark).timeout


def _seconds(start: str, end: str) -> float:
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()


def plan(suite: Suite, store: Store | None, fingerprint: str, timeout: float | None = None) -> list[Planned]:
    last: dict[str, tuple[str, float]] = {}
    if store is not None:
        spans: dict[tuple[str, str], tuple[str, str]] = {}
        for r in store.query():
            if r.fingerprint != fingerprint or not r.spec_key:
                continue
            k = (r.spec_key, r.run_id)
            lo, hi = spans.get(k, (r.started_at, r.ended_at))
            spans[k] = (min(lo, r.started_at), max(hi, r.ended_at))
        for (key, run_id), (lo, hi) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            last[key] = (run_id, _seconds(lo, hi))
    out = []
    process, left = 0, 0
    for i, entry in enumerate(suite.entries):
        if left == 0:
            process, left = process + 1, sharing(suite.entries[i:])
        left -= 1
        floor = registry.get(entry.benchmark).make_params(entry.params).planned_seconds()
        run, secs = last.get(entry.key, (None, None))
        out.append(Planned(entry, timeout_of(entry, timeout), secs, run, floor, process))
    return out


def estimate(planned: list[Planned]) -> tuple[float, int]:
    """Seconds of the entries with an earlier duration, and how many have none."""
    known = [p.last_seconds for p in planned if p.last_seconds is not None]
    return sum(known), len(planned) - len(known)
