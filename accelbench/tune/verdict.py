"""Which confirmed differences are real: whether two candidates are separated, and which one is best.

A search's claims rest on the confirmations alone, and one run's interval says nothing of run-to-run variation,
so two candidates are *separated* only across repeated, interleaved confirmations, by the one significance rule
(:func:`accelbench.results.judge.significance`) at the judge's :data:`~accelbench.results.judge.ALPHA`: tested
after every round, a looser level would compound into false winners. What is left unseparated is equivalent, not
ranked (docs/tune.md)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.results.judge import MIN_RUNS_BARE, metric_samples, pooled_samples, significance
from accelbench.tune.candidate import Candidate

if TYPE_CHECKING:
    from accelbench.results.record import Result
    from accelbench.tune.trials import Search, Trial

#: confirmations each side needs: with raw samples (pooled for the test, so at least two runs bring their
#: variation into it), and with one figure per run (the judge's least for a figure with no interval)
MIN_RUNS_SAMPLES, MIN_RUNS_RANGES = 2, MIN_RUNS_BARE


@dataclass(frozen=True)
class Apart:
    """Whether two candidates are separated, and the evidence in words."""

    separated: bool
    evidence: str


@dataclass
class Decision:
    """The contenders (confirmed, every confirmation VALID, through the gate), best first, and which of them
    the best is not yet separated from (``open``); ``evidence`` says, for each other contender, why."""

    ranked: list[Candidate] = field(default_factory=list)
    open: list[Candidate] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)

    @property
    def top(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    @property
    def equivalent(self) -> list[Candidate]:
        """The best and every contender it is not separated from, in rank order."""
        keys = {c.key for c in self.open}
        return [c for c in self.ranked if c is self.top or c.key in keys]


def figure_of(search: Search) -> tuple[str, str, bool]:
    """(metric name, unit, higher is better) of the ranked figure: the confirmations', else the screenings'."""
    for phase in ("confirm", "screen"):
        for t in search.trials:
            if t.phase == phase and t.ok and t.result and t.result.primary:
                return t.result.primary_metric or "", t.result.primary.unit, t.result.primary.higher_is_better
    return "", "", True


def sample_figures(result: Result) -> list[float] | None:
    """The record's raw samples (seconds per window) as figures in its primary metric's unit, so candidates of
    different batch sizes compare: a rate is work over the median sample, hence each sample's rate is the
    figure times median/sample (:func:`accelbench.results.judge.metric_samples`). None where the record keeps
    no samples (LoadGen) or its figure was not derived from them."""
    return metric_samples(result, result.primary_metric) if result.primary_metric else None


def runs(search: Search, c: Candidate) -> list[Trial]:
    """The candidate's confirmations that gave a figure."""
    return [t for t in search.of(c, "confirm") if t.ok]


def apart(search: Search, a: Candidate, b: Candidate) -> Apart:
    """Whether ``a`` and ``b`` differ beyond the variation between their confirmations (either direction)."""
    ra, rb = runs(search, a), runs(search, b)
    metric = figure_of(search)[0]
    xa = [t.result for t in ra if t.result is not None and metric in t.result.metrics]
    xb = [t.result for t in rb if t.result is not None and metric in t.result.metrics]
    if len(xa) < len(ra) or len(xb) < len(rb):
        return Apart(False, f"a confirmation gave no {metric or 'figure'}: the runs cannot be compared")
    if xa and xb and pooled_samples(xa + xb, metric) is not None:
        if min(len(xa), len(xb)) < MIN_RUNS_SAMPLES:
            return Apart(False, f"{len(xa)} and {len(xb)} run(s): {MIN_RUNS_SAMPLES} each are needed to separate")
        test = significance(xa, xb, metric)
        if test.p_value is None:  # too few samples for the rank test: the intervals decided
            return Apart(test.apart, f"{len(xa)} and {len(xb)} runs: {test.evidence}")
        na, nb = (len(pooled_samples(x, metric) or []) for x in (xa, xb))
        words = f"Mann-Whitney p = {test.p_value:.2g} on {na} and {nb} samples of {len(xa)} and {len(xb)} runs"
        return Apart(test.apart, words)
    if min(len(xa), len(xb)) < MIN_RUNS_RANGES:
        return Apart(False, f"{len(xa)} and {len(xb)} run(s): {MIN_RUNS_RANGES} each are needed to separate")
    test = significance(xa, xb, metric)
    if test.basis == "runs":
        return Apart(test.apart, f"ranges of {len(xa)} and {len(xb)} runs " + ("apart" if test.apart else "overlap"))
    return Apart(test.apart, f"{len(xa)} and {len(xb)} runs: {test.evidence}")


def median_of(search: Search, c: Candidate) -> float | None:
    values = [t.figure for t in runs(search, c) if t.figure is not None]
    return statistics.median(values) if values else None


def is_contender(search: Search, c: Candidate) -> bool:
    """Confirmed, with no confirmation INVALID or crashed, and through the accuracy gate: it may win."""
    confirms = search.of(c, "confirm")
    if not confirms or search.passed_gate(c) is not True:
        return False
    return all(t.ok and t.result is not None and t.result.valid is not False for t in confirms)


def decide(search: Search) -> Decision:
    """The contenders best first by their confirmations' median, and those the best is not separated from."""
    _, _, higher = figure_of(search)
    seen: dict[str, Candidate] = {}
    for t in search.trials:
        if t.phase == "confirm":
            seen.setdefault(t.candidate.key, t.candidate)
    contenders = [c for c in seen.values() if is_contender(search, c)]
    contenders.sort(key=lambda c: median_of(search, c) or 0.0, reverse=higher)
    decision = Decision(ranked=contenders)
    for c in contenders[1:]:
        verdict = apart(search, contenders[0], c)
        decision.evidence[c.key] = verdict.evidence
        if not verdict.separated:
            decision.open.append(c)
    return decision
