"""Whether two sides of a comparison can be told apart, and on what evidence: the one judge every verdict uses.

``compare``, ``history``, the scaling table, a search's confirmations and a record beside published rows all ask
it, so a record is never fit in one command and unfit in another, nor a difference real in one and chance in
another: :func:`set_aside_by` (what is set aside), :func:`significance` (:data:`ALPHA`), :func:`judge` (the
verdict) and :func:`unlike` (two figures of other things). The rules are in docs/methodology.md."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from accelbench.measure.stats import MIN_CI_SAMPLES, mann_whitney_p, median_ci_ranks
from accelbench.results import details
from accelbench.results.record import Concern, Metric, Result

#: p-value under which the rank test calls two sets of samples different (asv's threshold): the one level of every
#: verdict (compare, history, the scaling table, a search's confirmations). Read at each call, never copied.
ALPHA = 0.002
#: With one run a side, the smallest change called a difference (asv compare's default factor, 1.1).
MIN_EFFECT_SINGLE = 0.10
#: With run-to-run evidence, the smallest change called a difference however steady the runs.
MIN_EFFECT = 0.02
#: Concern kinds that say a figure describes something other than the machine under test (a neighbour's load, its
#: own client, a recompile inside the measured window): such a figure stands in no comparison, however precise.
BIASED = ("contended", "client-limited", "recompiled", "late-issue")
#: Concern kinds that say a figure is too imprecise to tell from noise: unfit for a significance test, yet an
#: unbiased estimate where nothing is tested (a ratio to a published figure, which has no interval to test against).
IMPRECISE = ("noisy", "few-samples")
#: Every concern kind that sets a record aside from a verdict (for readers that name them; :func:`set_aside_by`
#: decides).
SET_ASIDE = BIASED + IMPRECISE
#: Runs a side, at least, on which a figure with no interval of its own is judged (the runs' spread stands in).
MIN_RUNS_BARE = 3
#: runs a run-to-run spread needs before it may lower the bar under one run's (MIN_EFFECT_SINGLE) to MIN_EFFECT
MIN_SPREAD_RUNS = 3
NO_INTERVAL = "no interval"
#: Settings that make another model (another network, another task, or ``--scale tiny``'s shrunk layers and
#: widths): never one workload, whatever ``--ignore`` pairs, and never a setting a comparison is made across.
IDENTITY_PARAMS = ("model", "workload", "scale")
#: a family's own reasons two of its records do not measure one thing (its ``Family.unlike``)
Rules = Callable[[Result, Result], list[str]]


def set_aside_by(r: Result, metric: str | None = None, *, imprecise: bool = True) -> list[Concern]:
    """Why ``r``'s ``metric`` cannot stand in a comparison, as concerns (their text the record's own words): empty
    when it can.

    An INVALID record and the :data:`BIASED` kinds always; with ``imprecise`` (a verdict that tests significance)
    the :data:`IMPRECISE` kinds too and, where ``metric`` is named, a figure with no 95% interval. A ratio to a
    published row passes ``imprecise=False``: an imprecise figure still estimates the same work. The conditions'
    concerns count too, where the record did not copy them."""
    why = "; ".join(details.invalid_reasons(r))
    out = [Concern("invalid", f"INVALID: {why}" if why else "INVALID")] if r.valid is False else []
    own = list(r.concerns)
    seen = [*own, *(c for c in _conditions_concerns(r) if c not in own)]
    kinds = (*BIASED, *IMPRECISE) if imprecise else BIASED
    out += [c for c in seen if c.kind in kinds]
    m = r.metrics.get(metric) if metric is not None and imprecise else None
    if m is not None and m.ci95 is None and not any(c.kind == "few-samples" for c in out):
        out.append(Concern("no-interval", NO_INTERVAL))
    return out


def concerns(r: Result, metric: str | None = None, *, imprecise: bool = True) -> list[str]:
    """The words of :func:`set_aside_by`: why ``r`` is set aside, each reason as the record says it."""
    return [c.text for c in set_aside_by(r, metric, imprecise=imprecise)]


def _conditions_concerns(r: Result) -> list[Concern]:
    found = r.conditions.get("concerns") if isinstance(r.conditions, dict) else None
    return [Concern.from_dict(c) for c in found or [] if isinstance(c, dict) and c.get("kind") and c.get("text")]


def unfit(r: Result, metric: str | None = None, *, imprecise: bool = True) -> str | None:
    """The reason ``r`` is set aside from a verdict (its :func:`concerns`, joined), or None where it may be judged."""
    return "; ".join(concerns(r, metric, imprecise=imprecise)) or None


def kind(reason: str) -> str:
    """A set-aside reason's label, as a table cell names it: 'contended' for 'contended: other processes used...'
    (display only: which reasons set a record aside is :func:`set_aside_by`'s, by kind)."""
    return reason.split(":")[0]


def metric_samples(r: Result, metric: str) -> list[float] | None:
    """The record's raw samples in ``metric``'s units, where the figure was derived from them.

    Samples are seconds per call; a rate is work over the median time, a time is proportional to it, so each
    sample maps to the figure it would have given (scaled so that their median is the figure). Records whose
    figure did not come from those samples (another count, no samples kept) give None.
    """
    m = r.metrics.get(metric)
    s = r.samples
    if m is None or not s or m.n != len(s) or not m.value or any(x <= 0 for x in s):
        return None
    med = statistics.median(s)
    return [m.value * med / x for x in s] if m.higher_is_better else [m.value * x / med for x in s]


def pooled_samples(runs: Sequence[Result], metric: str) -> list[float] | None:
    """Every run's samples in ``metric``'s units, pooled, or None when any run has none to give."""
    out: list[float] = []
    for r in runs:
        s = metric_samples(r, metric)
        if s is None:
            return None
        out += s
    return out


def least_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the rank test can give on ``n1`` and ``n2`` samples (all of one side below the
    other, no ties)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


@dataclass(frozen=True)
class Significance:
    """Whether two sets of runs' figures were told apart beyond chance within the runs, and on what evidence."""

    apart: bool
    #: the test in words ('Mann-Whitney p=0.0003 on 40+40 samples', '95% intervals overlap (no raw samples)')
    evidence: str
    p_value: float | None = None
    #: what the test stood on: "samples" (the rank test), "intervals" (every run's 95% interval), "runs" (the
    #: runs' own figures, some of which have no interval)
    basis: str = "samples"


def significance(base: Sequence[Result], cand: Sequence[Result], metric: str) -> Significance:
    """The one significance rule: are ``cand``'s figures of ``metric`` apart from ``base``'s beyond chance?

    The Mann-Whitney U test on the raw samples pooled per side (p below :data:`ALPHA`) where every run keeps them
    and they are enough for the test ever to reach that level (6+6 cannot: its least p is 0.0022); else the bands
    of the 95% intervals, a run with none standing for its own figure. Whether there is enough evidence to judge
    at all is the caller's."""
    sb, sc = pooled_samples(base, metric), pooled_samples(cand, metric)
    if sb and sc and least_p(len(sb), len(sc)) < ALPHA:
        p = mann_whitney_p(sb, sc)
        shown = f"p={p:.2g}" if p >= 1e-12 else "p<1e-12"
        return Significance(p < ALPHA, f"Mann-Whitney {shown} on {len(sb)}+{len(sc)} samples", p, "samples")
    ib, ic = _band(base, metric), _band(cand, metric)
    apart = ib[0] > ic[1] or ib[1] < ic[0]
    if all(r.metrics[metric].ci95 for r in (*base, *cand)):
        words = "95% intervals " + ("apart" if apart else "overlap") + " (no raw samples)"
        return Significance(apart, words, None, "intervals")
    n = f"{len(base)}+{len(cand)}"
    # what the runs alone weigh: 3+3 runs fall apart by chance once in 10, so a verdict must also ask the change to
    # clear their spread; the evidence says both
    runs_p = mann_whitney_p([r.metrics[metric].value for r in base], [r.metrics[metric].value for r in cand])
    words = (
        f"the {n} runs' figures " + ("apart" if apart else "overlap")
        + f" (no interval within a run; rank test on the runs alone p={runs_p:.2g})"
    )  # fmt: skip
    return Significance(apart, words, None, "runs")


@dataclass(frozen=True)
class Side:
    """One side's figure for one workload: the trustworthy runs, those set aside, and earlier runs."""

    runs: tuple[Result, ...]
    set_aside: tuple[tuple[Result, tuple[str, ...]], ...]
    #: trustworthy earlier runs of the same workload on the same system, from the store (not on either side)
    earlier: tuple[Result, ...] = ()

    @property
    def judgeable(self) -> bool:
        return bool(self.runs)

    def reasons(self) -> list[str]:
        """Each distinct reason a run of this side was set aside."""
        out: list[str] = []
        for _, why in self.set_aside:
            out += [w for w in why if w not in out]
        return out

    def values(self, metric: str) -> list[float]:
        return [r.metrics[metric].value for r in self.runs]

    def samples(self, metric: str) -> list[float] | None:
        """Every run's samples pooled, or None when any run has none to give."""
        return pooled_samples(self.runs, metric)

    def run_to_run(self, metric: str) -> tuple[float, int] | None:
        """How far runs of this workload on this system stray from one another: the highest figure over the lowest,
        less one, and how many runs, of the side's repeats and of the earlier runs, whichever strays further (a
        side's single run is not its own evidence); None where neither has two runs. A ratio between runs, on the
        scale a change is measured on, so a figure equal to one of the runs never clears it."""
        spreads = []
        for group in (self.runs, self.earlier):
            vals = [r.metrics[metric].value for r in group]
            if len(vals) >= 2:
                spreads.append(((max(vals) / min(vals) - 1) if min(vals) > 0 else math.inf, len(vals)))
        return max(spreads) if spreads else None

    def figure(self, metric: str) -> Metric:
        """The latest run's figure, or with repeats the median of the runs, its interval from the pooled samples;
        where every run was set aside, the same of those (a row says '(3 runs)' of the figure it shows)."""
        shown = self.runs or tuple(r for r, _ in self.set_aside)
        latest = shown[-1].metrics[metric]
        if len(shown) < 2:
            return latest
        pooled = sorted(Side(shown, ()).samples(metric) or [])
        ci = None
        if len(pooled) >= MIN_CI_SAMPLES:
            lo, hi = median_ci_ranks(len(pooled))
            ci = (pooled[lo], pooled[hi])
        value = statistics.median(r.metrics[metric].value for r in shown)
        unit, hib = latest.unit, latest.higher_is_better
        return Metric(value=value, unit=unit, higher_is_better=hib, ci95=ci, n=len(pooled) or None)


def side(records: Sequence[Result], metric: str, earlier: Iterable[Result] = ()) -> Side:
    """Split ``records`` (one workload, oldest first) into runs that can be judged and runs set aside.

    With repeats, a run's noise within itself does not set it aside: the pooled samples and the spread between
    the runs carry that noise into the judgement, where dropping the noisy repeats would judge whichever odd
    one was steady. Contention, INVALID and too few samples set a run aside however many there are; a run with
    no interval is kept where :data:`MIN_RUNS_BARE` runs are left to measure the spread it lacks.
    """
    repeated = len(records) > 1
    runs, bare, aside = [], [], []
    for r in records:
        why = [c for c in set_aside_by(r, metric) if not (repeated and c.kind == "noisy")]
        if [c.kind for c in why] == ["no-interval"]:
            bare.append(r)
        elif why:
            aside.append((r, tuple(c.text for c in why)))
        else:
            runs.append(r)
    if bare and len(runs) + len(bare) >= MIN_RUNS_BARE:
        keep = {id(r) for r in (*runs, *bare)}
        runs = [r for r in records if id(r) in keep]  # oldest first, as given
    else:
        aside += [(r, (NO_INTERVAL,)) for r in bare]
    kept = tuple(r for r in earlier if metric in r.metrics and not concerns(r, metric))
    return Side(tuple(runs), tuple(aside), kept)


@dataclass(frozen=True)
class Judgement:
    """A verdict and what it stood on, in words a reader can check."""

    verdict: str
    evidence: str
    p_value: float | None = None
    #: the smallest relative change that would have been called, and where it came from
    threshold: float | None = None

    @property
    def judged(self) -> bool:
        return not self.verdict.startswith("not judged")

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "evidence": self.evidence,
            "p_value": self.p_value,
            "threshold": self.threshold,
        }


def judge(
    base: Side, cand: Side, metric: str, speed: bool, unlike: Sequence[str] = (), min_effect: float = 0.0
) -> Judgement:
    """The verdict between two sides of one workload; ``speed`` names it faster/slower, else better/worse.

    ``unlike``: why the two sides' figures do not measure the same thing (:func:`unlike`): then none is given.
    ``min_effect``: the smallest relative change worth a verdict whatever the evidence, over the run-to-run
    spread's bar (``accelbench history --threshold``: a regression gate fails a pipeline, so a change must matter
    as well as be real); 0 calls any change the evidence carries.
    """
    aside = list(unlike) + [
        f"{name} {'; '.join(s.reasons())}" for name, s in (("baseline", base), ("candidate", cand)) if not s.judgeable
    ]
    if aside:
        return Judgement(f"not judged: {' and '.join(aside)}", "set aside: " + "; ".join(aside))
    b, c = base.figure(metric), cand.figure(metric)
    speedup = _speedup(b, c)
    test = significance(base.runs, cand.runs, metric)
    spreads = [x for x in (base.run_to_run(metric), cand.run_to_run(metric)) if x is not None]
    if spreads:
        spread, runs = max(spreads)
        # two runs that happen to agree say little of how runs vary: below MIN_SPREAD_RUNS they may raise the
        # bar, never lower it under one run's (two membw runs a side 1% apart called 3% "faster" on a VM whose
        # fresh runs range over 42-72 GB/s)
        measured = any(n >= MIN_SPREAD_RUNS for _, n in spreads)
        bar = max(spread, MIN_EFFECT if measured else MIN_EFFECT_SINGLE)
        stood_on = f"run-to-run spread {spread:.1%} over {runs} runs" + (
            "" if measured else f" (fewer than {MIN_SPREAD_RUNS}: a change over {bar:.0%} is called)"
        )
    else:
        bar = MIN_EFFECT_SINGLE
        stood_on = f"one run a side: only a change over {MIN_EFFECT_SINGLE:.0%} is called (repeat to measure less)"
    threshold = max(bar, min_effect)
    if min_effect > bar:
        stood_on += f"; a change over {min_effect:.0%} asked"
    evidence = f"{test.evidence}; {stood_on}"
    # a change equal to the bar (a figure equal to one of the runs) is not over it, whatever the last bit says
    if not test.apart or abs(math.log(speedup)) <= math.log1p(threshold) + 1e-12:
        return Judgement("no difference", evidence, test.p_value, threshold)
    better = speedup > 1
    word = ("faster" if better else "slower") if speed else ("better" if better else "worse")
    return Judgement(word, evidence, test.p_value, threshold)


def _speedup(b: Metric, c: Metric) -> float:
    if not b.value or not c.value:
        return 1.0
    ratio = c.value / b.value
    return ratio if b.higher_is_better else 1 / ratio


def _band(runs: Sequence[Result], metric: str) -> tuple[float, float]:
    """The band the runs' intervals span (a run with none: its figure)."""
    m = [r.metrics[metric] for r in runs]
    bands = [x.ci95 or (x.value, x.value) for x in m]
    return min(b[0] for b in bands), max(b[1] for b in bands)


def no_rules(b: Result, c: Result) -> list[str]:
    """No family's own rules: only the model's identity decides."""
    return []


def unlike(b: Result, c: Result, rules: Rules = no_rules) -> list[str]:
    """Why two records' figures do not measure the same thing although they pair: empty when they do.

    ``rules`` are the records' family's own reasons (its ``Family.unlike``: a serving rate is a figure of its
    latency limits and request lengths). Here, the model's identity: its size (:data:`IDENTITY_PARAMS`), its
    definition (``details.source``: ``ssd`` moved from VGG-16 to ResNet-34 under one name) and a language model's
    parameter count (a ``--checkpoint`` is the model it holds). Records without these details are never unlike."""
    out = []
    for name in IDENTITY_PARAMS:
        vb, vc = b.params.get(name), c.params.get(name)
        if vb is not None and vc is not None and vb != vc:
            out.append(f"unlike models: {name} {vb} vs {vc}")
    mb, mc = details.model_source(b), details.model_source(c)
    if isinstance(mb, str) and isinstance(mc, str) and mb != mc:
        out.append(f"unlike models: {mb} vs {mc}")
    nb, nc = details.model_params(b), details.model_params(c)
    if not out and nb and nc and abs(nb - nc) > 0.01 * max(nb, nc):  # a --checkpoint folder of another size
        out.append(f"unlike models: {nb:,.3g} vs {nc:,.3g} parameters")
    return out + rules(b, c)
