"""What a comparison says: a row per paired workload (both sides' figures, the verdict and what it stood on) and
the comparison's summary (the geometric mean of judged pairs, the reasons pairs were set aside). Built by
:func:`accelbench.results.compare.compare`; read by the CLI's table, the report and ``--json``."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from accelbench.results.judge import Judgement
from accelbench.results.record import Metric

#: the verdicts that say a change was told apart from noise (judge.judge's words)
CHANGED = ("faster", "slower", "better", "worse")


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
    #: per $ and per J (EFFICIENCY): each side's figure, where both records carry it
    efficiency: dict[str, tuple[Metric, Metric]] = field(default_factory=dict)
    #: the verdict and the evidence it stood on (judge.judge); None: judged on the two figures alone
    judgement: Judgement | None = None
    #: how many runs each side pooled, and why any were set aside
    baseline_runs: int = 1
    candidate_runs: int = 1
    baseline_set_aside: tuple[str, ...] = ()
    candidate_set_aside: tuple[str, ...] = ()
    #: the sides with no run left to judge ("baseline", "candidate")
    unjudgeable: tuple[str, ...] = ()
    #: why the two sides' figures measure different things (judge.unlike): the pair is not judged
    unlike: tuple[str, ...] = ()
    #: BESIDE's figures (TTFT, TPOT p99 of a serving run): each side's, where both records carry it
    beside: dict[str, tuple[Metric, Metric]] = field(default_factory=dict)

    def efficiency_speedup(self, label: str) -> float | None:
        """> 1 when the candidate gives more per dollar (or per joule), whichever way the figure runs."""
        return _better(self.efficiency.get(label))

    def beside_speedup(self, label: str) -> float | None:
        """> 1 when the candidate's figure beside the headline is better (a lower TTFT), whichever way it runs."""
        return _better(self.beside.get(label))

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
        return self.judgement.verdict if self.judgement else "not judged: no evidence"

    @property
    def judged(self) -> bool:
        return self.judgement is not None and self.judgement.judged

    @property
    def brief(self) -> str:
        """The verdict in a few words for a table cell: a set-aside side by the kinds of its reasons
        ('not judged: baseline contended, noisy'); the full reasons are in ``verdict`` and the record."""
        if self.judged or self.judgement is None:
            return self.verdict
        sides = list(dict.fromkeys(_kind(w) for w in self.unlike)) + [
            f"{name} {', '.join(dict.fromkeys(_kind(w) for w in why))}"
            for name, why in (("baseline", self.baseline_set_aside), ("candidate", self.candidate_set_aside))
            if name in self.unjudgeable
        ]
        return "not judged: " + "; ".join(sides) if sides else self.verdict

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
            "baseline_runs": self.baseline_runs,
            "candidate_runs": self.candidate_runs,
            "baseline_set_aside": list(self.baseline_set_aside),
            "candidate_set_aside": list(self.candidate_set_aside),
            "unlike": list(self.unlike),
            "ratio": self.ratio,
            "speedup": self.speedup,
            "verdict": self.verdict,
            "judged": self.judged,
            "evidence": self.judgement.evidence if self.judgement else None,
            "p_value": self.judgement.p_value if self.judgement else None,
            "threshold": self.judgement.threshold if self.judgement else None,
            "efficiency": {
                label: {"baseline": b.to_dict(), "candidate": c.to_dict(), "speedup": self.efficiency_speedup(label)}
                for label, (b, c) in self.efficiency.items()
            },
            "beside": {
                label: {"baseline": b.to_dict(), "candidate": c.to_dict(), "speedup": self.beside_speedup(label)}
                for label, (b, c) in self.beside.items()
            },
        }


def _better(pair: tuple[Metric, Metric] | None) -> float | None:
    """candidate over baseline, > 1 when the candidate is better whichever way the figure runs."""
    if pair is None:
        return None
    b, c = pair
    if not b.value or not c.value:
        return None
    return c.value / b.value if b.higher_is_better else b.value / c.value


#: The kinds of reason a pair is not judged, as the footer counts them (the first word of each reason).
def _kind(reason: str) -> str:
    return reason.split(":")[0].split(" (")[0]


@dataclass(frozen=True)
class Comparison:
    """The pairs, and what could not be paired: nothing vanishes without a word."""

    rows: list[Row]
    only_baseline: list[str]
    only_candidate: list[str]
    #: workloads measured more than once on one side: pooled as repeats
    repeated: list[str]

    @property
    def judged(self) -> list[Row]:
        return [r for r in self.rows if r.judged]

    def set_aside(self) -> dict[str, int]:
        """How many pairs were not judged, per kind of reason (a pair with two reasons counts under each)."""
        counts: Counter[str] = Counter()
        for r in self.rows:
            if not r.judged:
                why = (*r.unlike, *r.baseline_set_aside, *r.candidate_set_aside)
                kinds = {_kind(w) for w in why} or {"no evidence"}
                counts.update(kinds)
        return dict(counts)

    def reasons(self) -> list[str]:
        """Each distinct reason a run (or a pair: 'unlike ...') was set aside, with its side and workload
        ('baseline 1024x... fp32: ...')."""
        return list(
            dict.fromkeys(
                f"{name}{r.workload}: {w}"
                for r in self.rows
                for name, why in (
                    ("", r.unlike),
                    ("baseline ", r.baseline_set_aside),
                    ("candidate ", r.candidate_set_aside),
                )
                for w in why
            )
        )

    def runs_set_aside(self) -> dict[str, int]:
        """Every reason a run was set aside, judged pairs included (a repeat left out), counted by kind."""
        counts: Counter[str] = Counter()
        for r in self.rows:
            counts.update(_kind(w) for w in (*r.baseline_set_aside, *r.candidate_set_aside))
        return dict(counts)

    def footer(self) -> str | None:
        """'2 of 9 pairs not judged: 2 contended, 1 INVALID', or None when every pair was judged."""
        n = len(self.rows) - len(self.judged)
        if not n:
            return None
        why = ", ".join(f"{k} {w}" for w, k in sorted(self.set_aside().items(), key=lambda kv: -kv[1]))
        return f"{n} of {len(self.rows)} pairs not judged ({why}): shown, left out of the geometric mean"

    @property
    def separated(self) -> list[Row]:
        """The judged pairs whose change was told apart from noise (faster, slower, better, worse)."""
        return [r for r in self.judged if r.judgement is not None and r.judgement.verdict in CHANGED]

    def geometric_mean(self) -> float | None:
        """Of the judged pairs' speedups only: a set-aside pair's ratio is not evidence."""
        return geometric_mean(r.speedup for r in self.judged)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "repeated": self.repeated,
            "judged": len(self.judged),
            "set_aside": self.set_aside(),
            "runs_set_aside": self.runs_set_aside(),
            "geometric_mean": self.geometric_mean(),
            "separated": len(self.separated),
        }


def geometric_mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))
