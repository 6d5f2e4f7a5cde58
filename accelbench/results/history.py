"""A figure across runs on one system, with regressions and improvements flagged by the one judge.

A series is one workload on one system fingerprint, oldest first, keeping every setting that changes its figure.
A point is judged against the last ``WINDOW`` earlier points since the last change exactly as ``compare`` judges
a candidate against its baseline's repeats, so a history never flags what ``compare`` calls no difference;
``threshold`` keeps a real but tiny shift from failing a pipeline (docs/history.md)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from accelbench.results.compare import Defaults, no_defaults, system_key
from accelbench.results.describe import Describe, plain
from accelbench.results.judge import Side, concerns
from accelbench.results.judge import judge as judge_sides
from accelbench.results.record import Metric, Result

#: the smallest change flagged by default (``--threshold``): a floor over the judge's own bar
THRESHOLD = 0.05
MIN_HISTORY = 3
MAX_SPREAD = 0.10
#: At most this many earlier points form the baseline (a slow drift then shows as a change).
WINDOW = 5


@dataclass(frozen=True)
class Point:
    run_id: str
    started_at: str
    metric: Metric
    valid: bool | None
    #: why this point is not judged (judge.concerns): empty when it is
    set_aside: tuple[str, ...] = ()
    #: the record the point was read from, whose raw samples the judge tests (None: the figure alone)
    record: Result | None = field(default=None, compare=False, repr=False)

    @property
    def judgeable(self) -> bool:
        return not self.set_aside and self.metric.ci95 is not None


@dataclass(frozen=True)
class Change:
    """A point that left the earlier points' band: ``ratio`` is its value over their median."""

    index: int
    kind: str  # "regression" or "improvement"
    ratio: float


@dataclass
class Series:
    benchmark: str
    workload: str
    metric: str
    fingerprint: str
    points: list[Point]
    changes: list[Change] = field(default_factory=list)
    unstable: str | None = None
    #: the parameters that define the series (the history key's)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "regression"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "workload": self.workload,
            "metric": self.metric,
            "fingerprint": self.fingerprint,
            "points": [
                {"run_id": p.run_id, "started_at": p.started_at, "valid": p.valid, "set_aside": list(p.set_aside)}
                | p.metric.to_dict()
                for p in self.points
            ],
            "changes": [
                {"run_id": self.points[c.index].run_id, "kind": c.kind, "ratio": c.ratio} for c in self.changes
            ],
            "unstable": self.unstable,
            "settings": self.settings,
        }


def _spread(values: list[float]) -> float:
    """Relative spread: half the range over the median (robust enough for a handful of runs)."""
    med = statistics.median(values)
    return (max(values) - min(values)) / 2 / med if med else 0.0


def judge(
    series: Series, threshold: float = THRESHOLD, min_history: int = MIN_HISTORY, max_spread: float = MAX_SPREAD
) -> Series:
    """Fill ``changes`` and ``unstable`` of a series, oldest point first."""
    pts = series.points
    judged = [i for i, p in enumerate(pts) if p.judgeable]
    segment = 0  # after a change, the baseline is the new level: the points since it (asv's steps)
    for pos, i in enumerate(judged):
        earlier = [pts[j] for j in judged[max(segment, pos - WINDOW) : pos]]
        if len(earlier) < min_history:
            continue
        values = [p.metric.value for p in earlier]
        widths = [(p.metric.ci95[1] - p.metric.ci95[0]) / 2 / p.metric.value for p in earlier if p.metric.value]  # type: ignore[index]
        noise = max(_spread(values), statistics.median(widths) if widths else 0.0)
        if noise > max_spread:
            series.unstable = (
                f"the earlier runs scatter by {noise:.0%} (> {max_spread:.0%}): a change could not be told from noise"
            )
            continue
        base = Side(tuple(_record(p, series) for p in earlier), ())
        verdict = judge_sides(base, Side((_record(pts[i], series),), ()), series.metric, True, min_effect=threshold)
        if verdict.verdict in ("faster", "slower"):
            ratio = pts[i].metric.value / statistics.median(values)
            kind = "improvement" if verdict.verdict == "faster" else "regression"
            series.changes.append(Change(i, kind, ratio))
            segment = pos
    return series


def _record(p: Point, series: Series) -> Result:
    """The point's record as the judge reads it: its own, or one holding just its figure."""
    if p.record is not None:
        return p.record
    return Result(series.benchmark, {}, metrics={series.metric: p.metric}, primary_metric=series.metric)


def histories(
    results: Iterable[Result],
    *,
    metric: str | None = None,
    describe: Describe = plain,
    threshold: float = THRESHOLD,
    min_history: int = MIN_HISTORY,
    max_spread: float = MAX_SPREAD,
    defaults: Defaults = no_defaults,
) -> list[Series]:
    """One judged series per (system fingerprint, workload), from ok records, oldest first (``defaults``: each
    benchmark's parameters at their defaults, which an older record missing a setting is read as having used,
    as ``compare`` pairs it)."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in sorted((r for r in results if r.status == "ok"), key=lambda r: r.started_at):
        groups.setdefault(system_key(r, defaults), []).append(r)
    out = []
    for (fingerprint, _), rs in groups.items():
        name = metric or rs[-1].primary_metric
        pts = [
            Point(r.run_id, r.started_at, r.metrics[name], r.valid, tuple(concerns(r, name)), r)
            for r in rs
            if name and name in r.metrics
        ]
        if not pts:
            continue
        first = rs[-1]
        s = Series(first.benchmark, describe(first.benchmark, first.params), str(name), fingerprint, pts)
        s.settings = json.loads(system_key(first, defaults)[1])[1]
        out.append(judge(s, threshold, min_history, max_spread))
    _name_differences(out)
    return out


def _name_differences(series: list[Series]) -> None:
    """Series that would read alike (the threads, the device differ) get the settings that tell them apart."""
    alike: dict[tuple[str, str, str, str], list[Series]] = {}
    for s in series:
        alike.setdefault((s.benchmark, s.workload, s.metric, s.fingerprint), []).append(s)
    for group in alike.values():
        if len(group) < 2:
            continue
        keys = sorted({k for s in group for k in s.settings})
        differ = [k for k in keys if len({json.dumps(s.settings.get(k), sort_keys=True) for s in group}) > 1]
        for s in group:
            s.workload += " (" + ", ".join(f"{k}={s.settings.get(k)}" for k in differ) + ")"
