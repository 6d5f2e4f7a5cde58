"""Compare two sets of results: what the articles did by hand ("V100 was 3.6x a T4").

Records are paired by benchmark and the parameters that define the workload
(device, threads and timing budgets are ignored, and ``ignore`` drops more, e.g.
``precision`` to compare fp16 with fp32). The verdict uses the 95% confidence
intervals: two intervals that overlap are "within noise", however large the ratio.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from accelbench.cost.figures import EFFICIENCY
from accelbench.errors import UsageError
from accelbench.results.describe import CONTEXT_PARAMS, Describe, plain
from accelbench.results.record import Metric, Result
from accelbench.results.store import Store

_TAG_RE = re.compile(r"^tag:([A-Za-z0-9_.-]+)=(.+)$")


@dataclass(frozen=True)
class Row:
    benchmark: str
    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    baseline: Metric
    candidate: Metric
    #: each side's own verdict (LoadGen's VALID, an accuracy gate); None where the benchmark gives none
    baseline_valid: bool | None = None
    candidate_valid: bool | None = None
    #: per $ and per J (cost.figures.EFFICIENCY): each side's figure, where both records carry it
    efficiency: dict[str, tuple[Metric, Metric]] = field(default_factory=dict)

    def efficiency_speedup(self, label: str) -> float | None:
        """> 1 when the candidate gives more per dollar (or per joule), whichever way the figure runs."""
        if label not in self.efficiency:
            return None
        b, c = self.efficiency[label]
        if not b.value or not c.value:
            return None
        return c.value / b.value if b.higher_is_better else b.value / c.value

    @property
    def ratio(self) -> float:
        """candidate / baseline of the metric itself."""
        return self.candidate.value / self.baseline.value if self.baseline.value else math.inf

    @property
    def speedup(self) -> float:
        """> 1 when the candidate is better, whichever direction the metric runs."""
        return self.ratio if self.higher_is_better else (1 / self.ratio if self.ratio else math.inf)

    @property
    def verdict(self) -> str:
        """Judged only on figures that can be: both VALID (where there is a verdict), both with an interval."""
        invalid = [
            side for side, ok in (("baseline", self.baseline_valid), ("candidate", self.candidate_valid)) if ok is False
        ]
        if invalid:
            return f"not judged: {' and '.join(invalid)} INVALID"
        b, c = self.baseline.ci95, self.candidate.ci95
        if b is None or c is None:
            return "not judged: no CI"
        if not (c[0] > b[1] or c[1] < b[0]):
            return "within noise"
        better = self.speedup > 1
        return ("faster" if better else "slower") if _is_speed(self.unit) else ("better" if better else "worse")

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "baseline_valid": self.baseline_valid,
            "candidate_valid": self.candidate_valid,
            "ratio": self.ratio,
            "speedup": self.speedup,
            "verdict": self.verdict,
            "efficiency": {
                label: {"baseline": b.to_dict(), "candidate": c.to_dict(), "speedup": self.efficiency_speedup(label)}
                for label, (b, c) in self.efficiency.items()
            },
        }


@dataclass(frozen=True)
class Comparison:
    """The pairs, and what could not be paired: nothing vanishes without a word."""

    rows: list[Row]
    only_baseline: list[str]
    only_candidate: list[str]
    #: workloads measured more than once on one side: the latest record was used
    repeated: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "repeated": self.repeated,
        }


def _is_speed(unit: str) -> bool:
    return unit in ("s", "ms", "us") or "/s" in unit or "FLOPS" in unit or unit.endswith("B/s")


def select(store: Store, selector: str) -> list[Result]:
    """``tag:KEY=VALUE`` (several joined by commas), or a run id or its unique prefix."""
    m = _TAG_RE.match(selector)
    if m:
        tags = dict(part.split("=", 1) for part in selector[4:].split(",") if "=" in part)
        results = store.query(tags=tags, status="ok")
        if not results:
            raise UsageError(f"no results carry {selector}; see 'accelbench results list' for tags")
        return results
    if selector.startswith("tag:"):
        raise UsageError(f"bad selector {selector!r}: write tag:KEY=VALUE, e.g. tag:gpu=v100")
    run_id = store.resolve_run_id(selector)
    if run_id is None:
        raise UsageError(f"unknown run id {selector!r}; see 'accelbench results runs'")
    return store.query(run_id=run_id, status="ok")


def workload_key(result: Result, ignore: Iterable[str] = ()) -> str:
    """The workload a record measured: a setting added since an older record was made counts at its default."""
    from accelbench.registry import BENCHMARKS

    drop = CONTEXT_PARAMS | set(ignore)
    info = BENCHMARKS.get(result.benchmark)
    complete = (info.params().to_dict() if info else {}) | result.params
    params = {k: v for k, v in complete.items() if k not in drop}
    return json.dumps([result.benchmark, params], sort_keys=True)


def _latest_by_key(results: list[Result], ignore: Iterable[str]) -> tuple[dict[str, Result], set[str]]:
    """The latest ok record per workload, and the workloads that had several."""
    out: dict[str, Result] = {}
    repeated: set[str] = set()
    for r in sorted(results, key=lambda r: r.started_at):
        if r.status == "ok":
            key = workload_key(r, ignore)
            if key in out:
                repeated.add(key)
            out[key] = r
    return out, repeated


def compare(
    baseline: list[Result],
    candidate: list[Result],
    *,
    ignore: Iterable[str] = (),
    metric: str | None = None,
    describe: Describe = plain,
) -> Comparison:
    """One row per workload present on both sides, on its primary metric (or ``metric``)."""
    ignore = tuple(ignore)
    (base, rep_b), (cand, rep_c) = _latest_by_key(baseline, ignore), _latest_by_key(candidate, ignore)
    if metric is not None:
        known = {m for r in (*base.values(), *cand.values()) for m in r.metrics}
        if metric not in known:
            close = difflib.get_close_matches(metric, sorted(known), n=3, cutoff=0.3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"no result here has a metric {metric!r}{hint} (metrics: {', '.join(sorted(known))})")

    def name(r: Result) -> str:
        return f"{r.benchmark} {describe(r.benchmark, r.params)}"

    rows = []
    for key, b in base.items():
        c = cand.get(key)
        if c is None:
            continue
        m = metric or b.primary_metric or next(iter(b.metrics), None)
        if m is None or m not in b.metrics or m not in c.metrics:
            continue
        bm, cm = b.metrics[m], c.metrics[m]
        wb, wc = describe(b.benchmark, b.params), describe(c.benchmark, c.params)
        workload = wb if wb == wc else f"{wb} vs {wc}"
        eff = _efficiency(b, c) if metric is None else {}
        rows.append(Row(b.benchmark, workload, m, bm.unit, bm.higher_is_better, bm, cm, b.valid, c.valid, eff))
    return Comparison(
        rows,
        only_baseline=[name(r) for k, r in base.items() if k not in cand],
        only_candidate=[name(r) for k, r in cand.items() if k not in base],
        repeated=sorted({name((base | cand)[k]) for k in rep_b | rep_c}),
    )


def _efficiency(b: Result, c: Result) -> dict[str, tuple[Metric, Metric]]:
    out = {}
    for label, names in EFFICIENCY.items():
        name = next((n for n in names if n in b.metrics and n in c.metrics), None)
        if name is not None:
            out[label] = (b.metrics[name], c.metrics[name])
    return out


def geometric_mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))
