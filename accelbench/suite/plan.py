"""What a run will do before it does it: each entry, its timeout, and how long it should take.

An estimate is only as honest as its source, so each says which it has: the duration of the same entry (same
benchmark and parameters) on this system in the store's latest run of it, else the stated cost model of
:mod:`accelbench.suite.estimate` (never a figure without its origin). Where the parameters themselves ask for a
minimum time (LoadGen's --duration), that floor is checked against the timeout, so a request that cannot finish
is said before it starts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

from accelbench import registry
from accelbench.results.store import Store
from accelbench.suite.estimate import MEASURED, MODEL, Estimate, Target, modelled
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
    #: the cost model's seconds where the store has none (:mod:`accelbench.suite.estimate`)
    model: Estimate | None = None

    @property
    def estimate(self) -> Estimate | None:
        """Its last time here where there is one (:data:`MEASURED`), else the cost model's (:data:`MODEL`)."""
        if self.last_seconds is not None:
            return Estimate(self.last_seconds, MEASURED, f"run {self.last_run}" if self.last_run else "stored")
        return self.model

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
            "estimate": self.estimate.to_dict() if self.estimate else None,
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


def plan(
    suite: Suite, store: Store | None, fingerprint: str, timeout: float | None = None, target: Target | None = None
) -> list[Planned]:
    """Each entry with its timeout, worker process and estimate on ``target`` (None: the device ``auto`` picks)."""
    target = target or Target.of(None)
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
        first = left == 0
        if first:
            process, left = process + 1, sharing(suite.entries[i:])
        left -= 1
        floor = registry.get(entry.benchmark).make_params(entry.params).planned_seconds()
        run, secs = last.get(entry.key, (None, None))
        model = None if secs is not None else modelled(entry, target, starts_process=first)
        out.append(Planned(entry, timeout_of(entry, timeout), secs, run, floor, process, model))
    return out


@dataclass(frozen=True)
class Total:
    """A plan's length, split by where its entries' estimates came from."""

    measured: float
    measured_entries: int
    modelled: float
    modelled_entries: int
    #: entries with no estimate at all (a plan built by hand, without the model)
    unknown: int

    @property
    def seconds(self) -> float:
        return self.measured + self.modelled


def estimate(planned: list[Planned]) -> Total:
    """Seconds of the entries measured here before and of those the cost model estimates, each counted."""
    measured = [e.seconds for p in planned if (e := p.estimate) is not None and e.source == MEASURED]
    model = [e.seconds for p in planned if (e := p.estimate) is not None and e.source == MODEL]
    unknown = len(planned) - len(measured) - len(model)
    return Total(sum(measured), len(measured), sum(model), len(model), unknown)
