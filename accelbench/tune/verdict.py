"""Which confirmed differences are real: whether two candidates are separated, and which one is best.

A search's claims ("X is best", "Nx the default settings") rest on the confirmations alone, and only on
differences that outlast the noise between runs. One run's interval says nothing about run-to-run
variation (a neighbour holding a core for a minute slows every sample of that run alike), so two
candidates are *separated* only across repeated, interleaved confirmations:

- where each confirmation carries its raw samples (training windows), by the Mann-Whitney U test on the
  per-sample figures of at least two runs each, pooled, so the variation between runs is in the test;
- otherwise (LoadGen gives one figure per run) when the ranges of at least three runs each do not
  overlap: two candidates that are in truth equal fall apart that way by chance once in ten.

The search confirms in rounds until the best separates from every other contender (see
:mod:`accelbench.tune.search`); what is left unseparated is reported as equivalent, not ranked.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.measure.stats import mann_whitney_p
from accelbench.tune.space import Candidate

if TYPE_CHECKING:
    from accelbench.results.record import Result
    from accelbench.tune.trials import Search, Trial

#: the Mann-Whitney test's level: p below it separates two candidates' samples
ALPHA = 0.05
#: confirmations each side needs: with raw samples (pooled for the test), and with one figure per run
MIN_RUNS_SAMPLES, MIN_RUNS_RANGES = 2, 3


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
    figure times median/sample. None where the record keeps no samples (LoadGen)."""
    primary = result.primary
    samples = [s for s in (result.samples or []) if s > 0]
    if primary is None or not samples:
        return None
    mid = statistics.median(samples)
    if primary.higher_is_better:
        return [primary.value * mid / s for s in samples]
    return [primary.value * s / mid for s in samples]


def runs(search: Search, c: Candidate) -> list[Trial]:
    """The candidate's confirmations that gave a figure."""
    return [t for t in search.of(c, "confirm") if t.ok]


def apart(search: Search, a: Candidate, b: Candidate) -> Apart:
    """Whether ``a`` and ``b`` differ beyond the variation between their confirmations (either direction)."""
    ra, rb = runs(search, a), runs(search, b)
    pooled = [sample_figures(t.result) for t in ra + rb if t.result is not None]
    if ra and rb and all(p for p in pooled):
        if min(len(ra), len(rb)) < MIN_RUNS_SAMPLES:
            return Apart(False, f"{len(ra)} and {len(rb)} run(s): {MIN_RUNS_SAMPLES} each are needed to separate")
        sa = [x for p in pooled[: len(ra)] for x in p or []]
        sb = [x for p in pooled[len(ra) :] for x in p or []]
        p = mann_whitney_p(sa, sb)
        words = f"Mann-Whitney p = {p:.2g} on {len(sa)} and {len(sb)} samples of {len(ra)} and {len(rb)} runs"
        return Apart(p < ALPHA, words)
    va, vb = [t.figure for t in ra], [t.figure for t in rb]
    if min(len(va), len(vb)) < MIN_RUNS_RANGES:
        return Apart(False, f"{len(va)} and {len(vb)} run(s): {MIN_RUNS_RANGES} each are needed to separate")
    lo_a, hi_a = min(x for x in va if x is not None), max(x for x in va if x is not None)
    lo_b, hi_b = min(x for x in vb if x is not None), max(x for x in vb if x is not None)
    if hi_a < lo_b or hi_b < lo_a:
        return Apart(True, f"ranges of {len(va)} and {len(vb)} runs apart")
    return Apart(False, f"ranges of {len(va)} and {len(vb)} runs overlap")


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
