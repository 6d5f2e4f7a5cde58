"""Compare two sets of results: what the articles did by hand ("V100 was 3.6x a T4").

Records pair by benchmark and the parameters that define the workload (not where or how long they ran; ``ignore``
drops more), a workload measured several times on a side pooled as repeats; the verdict is
:mod:`accelbench.results.judge`'s. ``defaults`` (benchmark -> its parameters at their defaults, the registry's)
let a setting added since an older record count at its default, so results never imports the registry."""

from __future__ import annotations

import difflib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from accelbench.errors import UsageError
from accelbench.results.describe import CONTEXT_PARAMS, LENGTH_PARAMS, PLACE_PARAMS, Describe, plain
from accelbench.results.judge import Judgement, Rules, Side, judge, no_rules, side, unlike
from accelbench.results.record import Metric, Result

#: the figures compare and the report put beside performance, by column: per USD/h for a rate or the cost for
#: a time; work per joule for a rate or the energy for a time
#: (:mod:`accelbench.cost.figures` derives them onto a record)
EFFICIENCY = {
    "per $": ("per_usd_hour", "cost_to_target_usd"),
    "per J": ("work_per_joule", "energy_to_target_joules"),
}
#: the figures a serving run's reader weighs beside its headline rate, by column: each side's, where both carry it
BESIDE = {
    "TTFT p99": "ttft_p99_ms",
    "TPOT p99": "tpot_p99_ms",
    "tokens/s per user": "tokens_per_second_per_user",
}

#: benchmark name -> its parameters at their defaults ({} for one it does not know): what a record made before
#: a setting existed is read as having used (the CLI passes :func:`accelbench.registry.default_params`)
Defaults = Callable[[str], dict[str, Any]]


def no_defaults(benchmark: str) -> dict[str, Any]:
    """No benchmark's defaults: each record is read with the settings it stored."""
    return {}


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


def _is_speed(unit: str) -> bool:
    return unit in ("s", "ms", "us") or "/s" in unit or "FLOPS" in unit or unit.endswith("B/s")


def workload_key(
    result: Result, ignore: Iterable[str] = (), keep: Iterable[str] = (), defaults: Defaults = no_defaults
) -> str:
    """The workload a record measured: a setting added since an older record was made counts at its default
    (as ``defaults`` gives it).

    ``compare`` pairs machines, so where and with which budget a figure was measured is dropped; ``keep`` puts
    some of that back (a history on one system keeps the device and the threads, which change its figure).
    """
    drop = (CONTEXT_PARAMS - set(keep)) | set(ignore)
    complete = defaults(result.benchmark) | result.params
    params = {k: v for k, v in complete.items() if k not in drop}
    return json.dumps([result.benchmark, params], sort_keys=True)


def nearest_difference(
    baseline: list[Result], candidate: list[Result], ignore: Iterable[str] = (), defaults: Defaults = no_defaults
) -> list[str]:
    """The fewest settings in which a baseline record differs from a candidate record of the same benchmark (what
    ``--ignore`` would have to drop to pair them); empty where no benchmark is common to the two sides."""
    drop = CONTEXT_PARAMS | set(ignore)
    best: list[str] | None = None
    for b in baseline:
        for c in candidate:
            if b.benchmark != c.benchmark:
                continue
            pb, pc = defaults(b.benchmark) | b.params, defaults(c.benchmark) | c.params
            differ = sorted(k for k in set(pb) | set(pc) if k not in drop and pb.get(k) != pc.get(k))
            if best is None or len(differ) < len(best):
                best = differ
    return best or []


def _check_sides(baseline: list[Result], candidate: list[Result], ignore: tuple[str, ...], defaults: Defaults) -> None:
    """A record on both sides compares it with itself, and an ``ignore`` that names no setting pairs nothing it
    would not pair without: both are mistakes to hear of, not a '1.00x no difference'."""
    both = {r.id for r in baseline} & {r.id for r in candidate}
    if both:
        raise UsageError(
            f"the baseline and the candidate share {len(both)} record(s): compare two runs or two tag sets that "
            "do not overlap"
        )
    names = {k for r in (*baseline, *candidate) for k in defaults(r.benchmark) | r.params}
    for key in ignore:
        if names and key not in names:
            close = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else f" (settings: {', '.join(sorted(names))})"
            raise UsageError(f"--ignore {key}: no record here has a setting of that name{hint}")


def system_key(result: Result, defaults: Defaults = no_defaults) -> tuple[str, str]:
    """One workload on one system: the figure a run-to-run spread is measured on (every setting that changes
    the figure kept, the length of the measurement dropped)."""
    return result.fingerprint, workload_key(result, keep=CONTEXT_PARAMS - LENGTH_PARAMS, defaults=defaults)


def _by_key(results: list[Result], ignore: Iterable[str], defaults: Defaults) -> dict[str, list[Result]]:
    """The ok records per workload, oldest first."""
    out: dict[str, list[Result]] = {}
    for r in sorted(results, key=lambda r: r.started_at):
        if r.status == "ok":
            out.setdefault(workload_key(r, ignore, defaults=defaults), []).append(r)
    return out


def compare(
    baseline: list[Result],
    candidate: list[Result],
    *,
    ignore: Iterable[str] = (),
    metric: str | None = None,
    describe: Describe = plain,
    earlier: Iterable[Result] = (),
    defaults: Defaults = no_defaults,
    rules: Rules = no_rules,
) -> Comparison:
    """One row per workload present on both sides, on its primary metric (or ``metric``).

    ``earlier``: other records (the store's) from which each side's run-to-run variation is read, those of
    the same workload on the same system as the side's latest run. ``defaults``: each benchmark's parameters at
    their defaults, which a record made before a setting existed is paired as having used. ``rules``: the
    families' own reasons two paired records measure different things (the CLI hands over
    :func:`accelbench.families.unlike`).
    """
    ignore = tuple(ignore)
    _check_sides(baseline, candidate, ignore, defaults)
    base, cand = _by_key(baseline, ignore, defaults), _by_key(candidate, ignore, defaults)
    if metric is not None:
        _check_metric(metric, base, cand)
    taken = {r.id for rs in (*base.values(), *cand.values()) for r in rs}
    others = _others(earlier, taken, defaults)

    def name(r: Result) -> str:
        return f"{r.benchmark} {describe(r.benchmark, r.params)}"

    rows = []
    for key, bs in base.items():
        cs = cand.get(key)
        if cs is None:
            continue
        row = _row(bs, cs, metric, ignore, describe, others, defaults, rules)
        if row is not None:
            rows.append(row)
    return Comparison(
        rows,
        only_baseline=[name(rs[-1]) for k, rs in base.items() if k not in cand],
        only_candidate=[name(rs[-1]) for k, rs in cand.items() if k not in base],
        repeated=sorted({name(rs[-1]) for rs in (*base.values(), *cand.values()) if len(rs) > 1}),
    )


def _check_metric(metric: str, base: dict[str, list[Result]], cand: dict[str, list[Result]]) -> None:
    """A ``metric`` no record carries would pair nothing: said, with the nearest names."""
    known = {m for rs in (*base.values(), *cand.values()) for r in rs for m in r.metrics}
    if metric not in known:
        close = difflib.get_close_matches(metric, sorted(known), n=3, cutoff=0.3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"no result here has a metric {metric!r}{hint} (metrics: {', '.join(sorted(known))})")


def _others(earlier: Iterable[Result], taken: set[str], defaults: Defaults) -> dict[tuple[str, str], list[Result]]:
    """The earlier ok records not compared themselves, per workload on one system: each side's run-to-run spread."""
    others: dict[tuple[str, str], list[Result]] = {}
    for r in earlier:
        if r.status == "ok" and r.id not in taken:
            others.setdefault(system_key(r, defaults), []).append(r)
    return others


def _row(
    bs: list[Result],
    cs: list[Result],
    metric: str | None,
    ignore: tuple[str, ...],
    describe: Describe,
    others: dict[tuple[str, str], list[Result]],
    defaults: Defaults,
    rules: Rules,
) -> Row | None:
    """One paired workload judged on its metric; None where a run of either side lacks that metric."""
    b, c = bs[-1], cs[-1]
    m = metric or b.primary_metric or next(iter(b.metrics), None)
    if m is None or any(m not in r.metrics for r in (*bs, *cs)):
        return None
    sb = side(bs, m, others.get(system_key(b, defaults), ()))
    sc = side(cs, m, others.get(system_key(c, defaults), ()))
    bm, cm = sb.figure(m), sc.figure(m)
    eff = _efficiency(_shown(sb), _shown(sc)) if metric is None else {}
    apart = _apart(bs, cs, rules)
    return Row(
        b.benchmark,
        _workload(b, c, ignore, describe),
        m,
        bm.unit,
        bm.higher_is_better,
        bm,
        cm,
        _validity(list(sb.runs) or bs),
        _validity(list(sc.runs) or cs),
        eff,
        judge(sb, sc, m, _is_speed(bm.unit), apart),
        len(sb.runs) or len(bs),
        len(sc.runs) or len(cs),
        tuple(sb.reasons()),
        tuple(sc.reasons()),
        tuple(name for name, x in (("baseline", sb), ("candidate", sc)) if not x.judgeable),
        apart,
        _beside(_shown(sb), _shown(sc), m),
    )


def _workload(b: Result, c: Result, ignore: tuple[str, ...], describe: Describe) -> str:
    """The pair's workload as both sides describe it, and the settings it was not paired on that differ."""
    wb, wc = describe(b.benchmark, b.params), describe(c.benchmark, c.params)
    workload = wb if wb == wc else f"{wb} vs {wc}"
    # where each side ran (never part of the pairing) and what the pairing was told to ignore: said where it
    # differs, so a thread count is not read as the machine, nor an fp16 run as the fp32 one
    moved = [
        f"{k} {b.params.get(k)} -> {c.params.get(k)}"
        for k in sorted(PLACE_PARAMS | set(ignore))
        if b.params.get(k) != c.params.get(k)
    ]
    return workload + (f" ({', '.join(moved)})" if moved else "")


def _apart(bs: list[Result], cs: list[Result], rules: Rules) -> tuple[str, ...]:
    """Why the pooled runs of a pair do not measure one thing: :func:`unlike` between any two of them.

    A side's repeats are pooled, so the latest runs alone do not speak for them: three Server runs that each
    chose their load from their own probe (63, 86 and 131 queries/s) pool three different figures. The latest
    pair's reason is said first; one reason of each kind, those among one side's own runs saying so.
    """
    found: dict[str, str] = {}
    runs = [(r, "baseline") for r in bs] + [(r, "candidate") for r in cs]
    pairs = [((bs[-1], "baseline"), (cs[-1], "candidate"))]
    pairs += [(x, y) for i, x in enumerate(runs) for y in runs[i + 1 :]]
    for (x, side_x), (y, side_y) in pairs:
        for reason in unlike(x, y, rules):
            among = f" (among the {side_x}'s runs)" if side_x == side_y else ""
            found.setdefault(reason.split(":")[0], reason + among)
    return tuple(found.values())


def _shown(s: Side) -> Result:
    """The record whose secondary figures (per $, per J) a side shows: its latest trustworthy run."""
    return (s.runs or tuple(r for r, _ in s.set_aside))[-1]


def _validity(records: list[Result]) -> bool | None:
    """INVALID if any of the runs shown was, VALID if every run with a verdict was, None where none has one."""
    verdicts = [r.valid for r in records if r.valid is not None]
    return None if not verdicts else all(verdicts)


def _efficiency(b: Result, c: Result) -> dict[str, tuple[Metric, Metric]]:
    out = {}
    for label, names in EFFICIENCY.items():
        name = next((n for n in names if n in b.metrics and n in c.metrics), None)
        if name is not None:
            out[label] = (b.metrics[name], c.metrics[name])
    return out


def _beside(b: Result, c: Result, metric: str) -> dict[str, tuple[Metric, Metric]]:
    """BESIDE's figures both records carry, other than the one compared."""
    return {
        label: (b.metrics[name], c.metrics[name])
        for label, name in BESIDE.items()
        if name != metric and name in b.metrics and name in c.metrics
    }
