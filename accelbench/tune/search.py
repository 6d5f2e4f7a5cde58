"""The search: screen every candidate briefly, gate the best on accuracy, confirm the few left side by side.

Each trial is an ordinary benchmark entry (``infer/loadgen`` or ``train/throughput``) run by the suite
runner in its own process, so a candidate that crashes, runs out of memory or fails to compile is a
``failed`` record with its cause and the search goes on, and every trial is stored in the run as it ends.
The budget is split by phase (screening to 55% of it, gates to 70%, confirmations the rest); a phase
stops before a trial it does not expect to finish in time, and says so. Confirmations run in interleaved
rounds (A B C, A B C...) so that a slow minute of a shared machine lands on every finalist, and the
default settings are always confirmed beside them: the speed-up is measured side by side, never against
an older figure.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from accelbench.results.record import Result
from accelbench.suite.suites import Entry, make_entry
from accelbench.tune.space import INFER_DEFAULT, TRAIN_DEFAULT, Candidate, runtime_stage, shape_stage
from accelbench.tune.specs import TuneParams

#: share of the budget by the end of each phase
SCREEN_SHARE, GATE_SHARE = 0.55, 0.70
#: runtimes of the first stage whose batch and requests the second stage varies
SHAPE_BEST = 2
#: LoadGen seconds of a screening and of a confirmation trial (quick profile, non-compliant)
SCREEN_SECONDS, CONFIRM_SECONDS = 2.0, 6.0
#: training steps (warm-up, measured, per window) of a screening and of a confirmation trial
TRAIN_SCREEN = {"warmup": 2, "num_batches": 6, "display_every": 2}
TRAIN_CONFIRM = {"warmup": 3, "num_batches": 18, "display_every": 2}

RunTrial = Callable[[Entry], list[Result]]


@dataclass
class Trial:
    """One run of one candidate in one phase, and its record (None when the run was never made)."""

    phase: str  # screen, gate, confirm
    candidate: Candidate
    result: Result | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.status == "ok" and self.result.primary is not None

    @property
    def figure(self) -> float | None:
        return self.result.primary.value if self.ok and self.result and self.result.primary else None

    @property
    def why_not(self) -> str:
        """The record's own reason when the trial gave no figure."""
        if self.result is None:
            return "no record"
        return self.result.error or self.result.reason or f"status {self.result.status}"


@dataclass
class Search:
    """Everything a search did: trials in order, what it left out, where it stopped and why."""

    params: TuneParams
    trials: list[Trial] = field(default_factory=list)
    left_out: list[tuple[Candidate, str]] = field(default_factory=list)
    not_tried: list[tuple[Candidate, str]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def default(self) -> Candidate:
        return Candidate(dict(INFER_DEFAULT if self.params.task == "infer" else TRAIN_DEFAULT))

    def of(self, candidate: Candidate, phase: str) -> list[Trial]:
        return [t for t in self.trials if t.phase == phase and t.candidate.key == candidate.key]

    def gate_of(self, candidate: Candidate) -> Trial | None:
        """The accuracy trial of the candidate's runtime (batch and requests do not change the arithmetic)."""
        runtime = _runtime_key(candidate)
        return next((t for t in self.trials if t.phase == "gate" and _runtime_key(t.candidate) == runtime), None)

    def is_reference(self, candidate: Candidate) -> bool:
        """The FP32 eager model in its default layout is the gate's reference: it needs no gate."""
        s = candidate.settings
        return s.get("backend") == "torch" and s.get("precision") == "fp32" and not s.get("channels_last")

    def passed_gate(self, candidate: Candidate) -> bool | None:
        """True (passed, or the reference, or training: no gate), False (failed), None (not gated yet)."""
        if self.params.task == "train" or self.is_reference(candidate):
            return True
        gate = self.gate_of(candidate)
        if gate is None:
            return None
        return bool(gate.ok and gate.result and gate.result.valid)


def _runtime_key(c: Candidate) -> str:
    return Candidate({k: v for k, v in c.settings.items() if k not in ("batch_size", "nproc")}).key


class Tuner:
    """Runs a search: ``run_trial`` runs one entry (the suite runner in a session; a fake in tests)."""

    def __init__(
        self,
        params: TuneParams,
        run_trial: RunTrial,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[str, float], None] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.params = params
        self.run_trial = run_trial
        self.clock = clock
        self.progress = progress or (lambda message, left: None)
        self.budget = params.budget_seconds
        #: seconds before a trial is killed and recorded as failed (a hang must not eat the whole budget)
        self.timeout = timeout or max(120.0, self.budget / 2)
        self.search = Search(params)
        self.t0 = 0.0

    # -- the phases ------------------------------------------------------------------------------

    def run(self) -> Search:
        self.t0 = self.clock()
        first = runtime_stage(self.params)
        self.search.left_out = first.left_out
        self._screen(first.candidates, "runtimes")
        screened = self._ranked(self._screened())
        tried = {t.candidate.key for t in self.search.trials}
        self._screen(shape_stage(self.params, screened[:SHAPE_BEST], tried), "batch sizes and requests in flight")
        finalists = self._gate(self._ranked(self._screened()))
        self._confirm(finalists)
        self.search.elapsed = self.clock() - self.t0
        return self.search

    def _screen(self, candidates: list[Candidate], what: str) -> None:
        for i, c in enumerate(candidates):
            if not self._fits("screen", SCREEN_SHARE) and self.search.trials:
                self.search.not_tried += [(x, "budget: screening stopped") for x in candidates[i:]]
                self.search.stopped.append(f"screening of {what} stopped at {i} of {len(candidates)}: budget")
                return
            self._trial("screen", c, f"screening {what} {i + 1}/{len(candidates)}")

    def _gate(self, ranked: list[Candidate]) -> list[Candidate]:
        """The best candidates that pass the accuracy gate, ``finalists`` of them, best first."""
        finalists: list[Candidate] = []
        for c in ranked:
            if len(finalists) >= self.params.finalists:
                break
            if self.search.passed_gate(c) is None:
                if not self._fits("gate", GATE_SHARE) and finalists:
                    self.search.stopped.append(f"accuracy gates stopped at {len(finalists)} finalist(s): budget")
                    break
                self._trial("gate", c, f"accuracy gate of {c.label()}")
            if self.search.passed_gate(c):
                finalists.append(c)
        return finalists

    def _confirm(self, finalists: list[Candidate]) -> None:
        default = self.search.default
        screened = {t.candidate.key for t in self.search.trials if t.phase == "screen" and t.ok}
        if default.key in screened and default.key not in {c.key for c in finalists}:
            finalists = [*finalists, default]
        rounds = 1 if self._server() else self.params.repeats
        for r in range(rounds):
            for c in finalists:
                if r > 0 and not self._fits("confirm", 1.0):
                    self.search.stopped.append(f"confirmations stopped in round {r + 1} of {rounds}: budget")
                    return
                self._trial("confirm", c, f"confirming {c.label()} (round {r + 1}/{rounds})")

    # -- one trial ---------------------------------------------------------------------------------

    def _trial(self, phase: str, c: Candidate, message: str) -> Trial:
        left = max(0.0, self.budget - (self.clock() - self.t0))
        self.progress(message, left)
        entry = self.entry(phase, c)
        if phase == "screen":  # a screening (a minutes-long compile) may not outlast the screening phase
            end = self.budget * SCREEN_SHARE - (self.clock() - self.t0)
            entry = replace(entry, timeout=min(entry.timeout or self.timeout, max(60.0, end)))
        t0 = self.clock()
        results = self.run_trial(entry)
        trial = Trial(phase, c, results[-1] if results else None, self.clock() - t0)
        self.search.trials.append(trial)
        return trial

    def entry(self, phase: str, c: Candidate) -> Entry:
        """The benchmark entry of a trial: the candidate's settings, at the phase's length."""
        p = self.params
        if p.task == "train":
            steps = TRAIN_CONFIRM if phase == "confirm" else TRAIN_SCREEN
            return make_entry("train/throughput", p.trial_params(**c.settings, **steps).to_dict(), self.timeout)
        settings = dict(c.settings)
        if phase == "gate":
            extra: dict[str, Any] = {"mode": "accuracy", "scenario": "offline", "dataset": p.dataset}
        elif phase == "confirm" and self._server():
            extra = {"mode": "find-peak", "scenario": "server", "duration": SCREEN_SECONDS}
        else:  # Server is screened on Offline throughput: a find-peak per candidate would spend the budget
            scenario = "offline" if self._server() else p.scenario
            seconds = CONFIRM_SECONDS if phase == "confirm" else SCREEN_SECONDS
            extra = {"scenario": scenario, "duration": seconds}
        return make_entry("infer/loadgen", p.trial_params(**settings, **extra).to_dict(), self.timeout)

    def _server(self) -> bool:
        return self.params.task == "infer" and self.params.scenario == "server"

    def _fits(self, phase: str, share: float) -> bool:
        """Whether the next trial of ``phase`` is expected to end before its share of the budget."""
        spent = self.clock() - self.t0
        same = [t.seconds for t in self.search.trials if t.phase == phase]
        if same:
            expected = statistics.median(same)
        else:  # a first gate or confirmation: the screenings' time, scaled by how much longer it measures
            screens = [t.seconds for t in self.search.trials if t.phase == "screen"] or [0.0]
            expected = statistics.median(screens) * (2.0 if phase == "confirm" else 1.5)
        return spent + expected <= self.budget * share

    # -- ordering ------------------------------------------------------------------------------------

    def _screened(self) -> list[Trial]:
        return [t for t in self.search.trials if t.phase == "screen" and t.ok]

    def _ranked(self, trials: list[Trial]) -> list[Candidate]:
        """Best first by the figure's own direction (samples/s up, latency down)."""
        if not trials:
            return []
        higher = bool(trials[0].result and trials[0].result.primary and trials[0].result.primary.higher_is_better)
        order = sorted(trials, key=lambda t: t.figure or 0.0, reverse=higher)
        return [t.candidate for t in order]
