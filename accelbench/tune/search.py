"""The search: screen every candidate briefly, gate the best on accuracy, confirm the few left side by side.

Each trial is an ordinary benchmark entry in its own process, so a crash, an OOM or a failed compile is a
``failed`` record and the search goes on. The budget is split by phase (``SCREEN_SHARE``, ``GATE_SHARE``) and
every trial must be expected to fit (:mod:`accelbench.tune.budget`). Confirmations run in interleaved rounds, the
default beside the finalists, until the best separates from every other (:mod:`accelbench.tune.verdict`),
``MAX_ROUNDS`` pass or the budget ends (docs/tune.md)."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from typing import Callable

from accelbench.tune.budget import Budget
from accelbench.tune.candidate import Candidate
from accelbench.tune.space import runtime_stage, shape_stage
from accelbench.tune.specs import TuneParams
from accelbench.tune.trials import RunTrial, Search, Trial, TrialEntry, trial_entry
from accelbench.tune.verdict import MIN_RUNS_RANGES, MIN_RUNS_SAMPLES, decide

#: share of the budget by the end of each phase
SCREEN_SHARE, GATE_SHARE = 0.55, 0.70
#: confirmation rounds at most (or --repeats, if more): candidates still not separated then are equivalent
MAX_ROUNDS = 8
#: runtimes of the first stage whose batch and requests the second stage varies
SHAPE_BEST = 2
#: the time limit of a confirmation pair's second trial, as a share of a confirmation's expected time: the pair
#: runs while any budget is left, so a search overruns its budget by at most about this much of one trial
PAIR_TIMEOUT_SHARE = 1.5


class Tuner:
    """Runs a search: ``run_trial`` runs one entry (the suite runner in a session; a fake in tests).

    ``started`` is when the budget began on ``clock`` (the command's start, so that collecting the system
    profile counts too); the search's own start by default.
    """

    def __init__(
        self,
        params: TuneParams,
        run_trial: RunTrial,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[str, float], None] | None = None,
        timeout: float | None = None,
        started: float | None = None,
    ) -> None:
        self.params = params
        self.run_trial = run_trial
        self.clock = clock
        self.progress = progress or (lambda message, left: None)
        self.budget = params.budget_seconds
        #: seconds before a trial is killed and recorded as failed (a hang must not eat the whole budget)
        self.timeout = timeout or max(120.0, self.budget / 2)
        self.search = Search(params)
        self.task = self.search.task
        self.started = started
        self.t0 = 0.0
        self.time = Budget(self.budget, clock, 0.0)

    # -- the phases ------------------------------------------------------------------------------

    def run(self) -> Search:
        self.t0 = self.started if self.started is not None else self.clock()
        self.time = Budget(self.budget, self.clock, self.t0)
        first = runtime_stage(self.params)
        self.search.left_out = first.left_out
        self._screen(first.candidates, "runtimes")
        if not self.search.not_tried:  # a first stage cut by the budget leaves no time for a second
            screened = self._ranked(self._screened())
            tried = {t.candidate.key for t in self.search.trials}
            shapes = shape_stage(self.params, screened[:SHAPE_BEST], tried)
            self._screen(shapes, "batch sizes and requests in flight")
        self.search.no_search = self._no_search(len(first.candidates))
        if self.search.no_search is None:
            self._confirm(self._gate(self._ranked(self._screened())))
        self.search.elapsed = self.time.spent()
        return self.search

    def _screen(self, candidates: list[Candidate], what: str) -> None:
        for i, c in enumerate(candidates):
            expected = self._screen_expected(c)
            if self.search.trials and not self.time.fits(expected, self._screen_end()):
                self.search.not_tried += [(x, "budget: screening stopped") for x in candidates[i:]]
                self.search.stopped.append(
                    f"screening of {what} stopped at {i} of {len(candidates)}: budget "
                    f"({self.time.left():.0f} s left, kept for the accuracy gates and confirmations)"
                )
                return
            self._trial("screen", c, f"screening {what} {i + 1}/{len(candidates)}")

    def _gate(self, ranked: list[Candidate]) -> list[Candidate]:
        """The best candidates that pass the accuracy gate, ``finalists`` of them besides the default (confirmed in
        any case: where it screened best, a round of it alone would compare nothing), best first.

        A gate that does not fit is not run: its candidate cannot be a finalist, and one that needs no gate
        (the FP32 reference, or a runtime already gated) is taken in its place."""
        finalists: list[Candidate] = []
        cut: list[str] = []
        default = self.search.default.key
        for c in ranked:
            if sum(f.key != default for f in finalists) >= self.params.finalists:
                break
            if self.search.passed_gate(c) is None:
                if not self.time.fits(self._expected("gate"), self._gate_end()):
                    cut.append(c.label())
                    continue
                self._trial("gate", c, f"accuracy gate of {c.label()}")
            if self.search.passed_gate(c):
                finalists.append(c)
        if cut:
            shown = ", ".join(cut[:3]) + (f" and {len(cut) - 3} more" if len(cut) > 3 else "")
            self.search.stopped.append(
                f"accuracy gates not run: budget ({self.time.left():.0f} s left, kept for the confirmations); "
                f"not confirmed: {shown}"
            )
        return finalists

    def _confirm(self, finalists: list[Candidate]) -> None:
        """Interleaved rounds: every finalist and the default for ``--repeats`` rounds, then only the best and
        the candidates it is not yet separated from, until it is separated from all, or the rounds or the
        budget end."""
        default = self.search.default
        pool = list(finalists)
        if default.key in {t.candidate.key for t in self._screened()} and default.key not in {c.key for c in pool}:
            pool.append(default)
        active, last = pool, max(MAX_ROUNDS, self.params.repeats)
        for r in range(1, last + 1):
            if r > 1:
                decision = decide(self.search)
                still = decision.ranked
                if r > self.params.repeats:
                    if not decision.open:
                        return
                    still = decision.equivalent
                keys = {c.key for c in still}
                if r <= self.params.repeats and self._baseline_holds():
                    keys.add(default.key)  # the baseline of the speed-up, contender or not (an ungated default)
                active = [c for c in active if c.key in keys]
                if not active:
                    return
            active = self._fit_round(active, r)
            if not active:
                return
            paired = default.key in {a.key for a in active[:2]}  # _fit_round put the best and the default first
            for i, c in enumerate(active):
                # the best and the default are the round's comparison: the round was planned to hold them, so the
                # second runs while any budget is left, even where the first ran longer than expected, and is given
                # the time a confirmation takes (killed early, it would read as the candidate's failure)
                pair = paired and i < 2
                if not (self.time.left() > 0 if pair else self.time.fits(self._expected("confirm"))):
                    self.search.stopped.append(
                        f"confirmations stopped in round {r} after {i} of {len(active)}: budget "
                        f"({self.time.left():.0f} s left)"
                    )
                    return
                floor = PAIR_TIMEOUT_SHARE * (self._expected("confirm") or 0.0) if pair else 0.0
                self._trial("confirm", c, f"confirming {c.label()} (round {r}, {len(active)} side by side)", floor)
        if decide(self.search).open:
            self.search.stopped.append(f"confirmations ended after {last} rounds without separating the best")

    def _baseline_holds(self) -> bool:
        """Whether the default's confirmations so far all gave a VALID figure: a baseline worth more rounds."""
        confirms = self.search.of(self.search.default, "confirm")
        return all(t.ok and t.result is not None and t.result.valid is not False for t in confirms)

    def _fit_round(self, active: list[Candidate], r: int) -> list[Candidate]:
        """The candidates of round ``r`` that the budget allows, with the rounds any claim still needs, in the order
        they run: the best and the default first (the speed-up is the claim a search is run for), so a round cut
        short still compares them. None where not even two fit."""
        default = self.search.default.key
        first = active[:1] + [c for c in active[1:] if c.key == default]
        ordered = list({c.key: c for c in first + active}.values())  # the best and the default once each, first
        per = self._expected("confirm") or 0.0
        rounds = max(1, self._runs_needed() - (r - 1))
        fit = math.floor(self.time.left() / (per * rounds)) if per > 0 else len(active)
        if fit >= len(active):
            return ordered
        least = min(2, len(active))
        if fit < least:
            self.search.stopped.append(
                f"confirmations stopped before round {r}: budget ({self.time.left():.0f} s left; "
                f"{rounds} round(s) of {least} take about {per * rounds * least:.0f} s)"
                + (": raise --budget" if r == 1 else "")
            )
            return []
        kept = ordered[:fit]
        out = ", ".join(c.label() for c in ordered[fit:])
        self.search.stopped.append(
            f"confirmation round {r} holds {fit} of {len(active)} candidates: budget (not confirmed: {out})"
        )
        return kept

    def _expected(self, phase: str) -> float | None:
        """A next trial's seconds in ``phase``: the median of the phase's trials so far; before its first, the
        screenings' scaled as the task says its phase measures longer (:meth:`TuneTask.first_expected`)."""
        first = self.task.first_expected(phase, self._reference_seconds_per_sample)
        return self.time.expected(phase, self.search.trials, first)

    def _reference_seconds_per_sample(self) -> float | None:
        """Seconds per sample of the default settings (the gate's FP32 reference) by its screening."""
        t = next((t for t in self._screened() if t.candidate.key == self.search.default.key), None)
        primary = t.result.primary if t and t.result else None
        if primary is None or primary.value <= 0:
            return None
        return 1 / primary.value if primary.higher_is_better else primary.value

    def _runs_needed(self) -> int:
        """Confirmations per candidate before two can be separated: fewer where the trials keep raw samples."""
        screens = self._screened()
        samples = bool(screens) and all(t.result is not None and t.result.samples for t in screens)
        return MIN_RUNS_SAMPLES if samples else MIN_RUNS_RANGES

    def _claim_seconds(self) -> float:
        """The confirmations of the smallest claim: the rounds needed, of the best and the default."""
        per = self._expected("confirm") or 0.0
        return 2 * self._runs_needed() * per

    def _screen_expected(self, c: Candidate) -> float | None:
        """A screening's seconds: a compiled candidate's by the compiled ones screened so far, else twice an
        eager one's: compiling costs about as much again, and an overrun costs the gate a claim needs (docs/tune.md)."""
        expected = self.time.expected("screen", self.search.trials)
        if not c.compiles or expected is None:
            return expected
        compiled = [t.seconds for t in self.search.trials if t.phase == "screen" and t.candidate.compiles]
        return statistics.median(compiled) if compiled else 2 * expected

    def _screen_end(self) -> float:
        """Screening stops at its share of the budget, and early enough that one gate still ends inside the
        gates' phase: on a small budget the best screened must be gated and confirmed, or nothing is claimed (a
        4-minute search screened 14 runtimes, then had 90 s left and no gate fitting before the gates' end)."""
        gate = (self._expected("gate") or 0.0) if self.task.gated else 0.0
        return min(self.time.at(SCREEN_SHARE), self.budget - gate - self._claim_seconds())

    def _gate_end(self) -> float:
        """Gates end at their share of the budget, leaving the smallest claim its time; the first gate (of the
        best screened) may run past the share: without it the search can claim nothing but the default."""
        gated = any(t.phase == "gate" for t in self.search.trials)
        share = self.time.at(GATE_SHARE) if gated else self.budget
        return min(share, self.budget - self._claim_seconds())

    def _no_search(self, runtimes: int) -> str | None:
        """Why the search compared nothing, where fewer than two candidates were screened with a figure."""
        ok = self._screened()
        if len(ok) >= 2:
            return None
        screened = {t.candidate.key for t in self.search.trials if t.phase == "screen"}
        only = ok[0].candidate.label() if ok else "no candidate"
        if self.search.not_tried:
            s = self.time.expected("screen", self.search.trials) or 0.0
            g = (self._expected("gate") or 0.0) if self.task.gated else 0.0
            least = 2 * s + g + self._claim_seconds()
            suggest = f"{math.ceil(least / 60)}m"
            return (
                f"no search: raise --budget (screened {len(screened)} of {runtimes} runtimes in "
                f"{self.time.spent():.0f} s; comparing two needs about {least:.0f} s here: try --budget {suggest})"
            )
        if len(screened) < 2:
            return (
                f"no search: the settings asked for leave one candidate, {only}, and nothing to compare it with; "
                "widen --precisions, --batch-sizes or --backends"
            )
        return f"no search: only {only} gave a figure; the other {len(screened) - len(ok)} failed (see the ranking)"

    # -- one trial ---------------------------------------------------------------------------------

    def _trial(self, phase: str, c: Candidate, message: str, floor: float = 0.0) -> Trial:
        """One trial, killed at its phase's end (a minutes-long compile, a hang), but not before ``floor`` seconds
        (the second of a confirmation pair, given what a confirmation takes)."""
        self.progress(message, self.budget - self.time.spent())
        entry = self.entry(phase, c)
        end = self._screen_end() if phase == "screen" else None
        limit = min(entry.timeout or self.timeout, max(self.time.timeout(end), floor))
        entry = replace(entry, timeout=limit)
        t0 = self.clock()
        results = self.run_trial(entry)
        trial = Trial(phase, c, results[-1] if results else None, self.clock() - t0)
        self.search.trials.append(trial)
        return trial

    def entry(self, phase: str, c: Candidate) -> TrialEntry:
        """The benchmark entry of a trial: the candidate's settings, at the phase's length."""
        return trial_entry(self.task.trial_of(phase, dict(c.settings)), self.timeout)

    # -- ordering ------------------------------------------------------------------------------------

    def _screened(self) -> list[Trial]:
        """Screenings with a figure; where the task holds its trials to a limit, only those within it (a served
        language model's INVALID screening served more tokens/s by making each user wait longer than asked)."""
        held = self.task.held_to_limit
        return [
            t for t in self.search.trials
            if t.phase == "screen" and t.ok and (not held or (t.result is not None and t.result.valid is not False))
        ]  # fmt: skip

    def _ranked(self, trials: list[Trial]) -> list[Candidate]:
        """Best first by the figure's own direction (samples/s up, latency down)."""
        if not trials:
            return []
        higher = bool(trials[0].result and trials[0].result.primary and trials[0].result.primary.higher_is_better)
        order = sorted(trials, key=lambda t: t.figure or 0.0, reverse=higher)
        return [t.candidate for t in order]
