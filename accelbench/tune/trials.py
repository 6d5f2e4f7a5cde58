"""What a search is made of: its trials and their records, independent of how the search schedules them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from accelbench.families import benchmark_of
from accelbench.params import build_params
from accelbench.results.record import Result
from accelbench.tune.candidate import Candidate
from accelbench.tune.specs import TuneParams
from accelbench.tune.task import TuneTask


@dataclass(frozen=True)
class TrialEntry:
    """The benchmark entry of one trial, its parameters validated and complete: ``run_trial`` runs it (the
    command makes it a suite entry; the search never imports the suite, which imports the registry)."""

    benchmark: str
    params: dict[str, Any]
    timeout: float | None = None


def trial_entry(params: Any, timeout: float | None) -> TrialEntry:
    """A trial's parameters as a suite entry holds them: coerced, validated and complete, under the benchmark
    they are the parameters of."""
    benchmark = benchmark_of(params)
    checked = build_params(type(params), params.to_dict(), benchmark)
    return TrialEntry(benchmark, checked.to_dict(), float(timeout) if timeout else None)


RunTrial = Callable[[TrialEntry], list[Result]]


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
    #: why the search compared nothing (fewer than two candidates screened with a figure), else None
    no_search: str | None = None

    def __post_init__(self) -> None:
        #: the searched benchmark's side of the search (its space, its trials, its gate)
        self.task: TuneTask = self.params.tuned()

    @property
    def default(self) -> Candidate:
        return self.task.default()

    def of(self, candidate: Candidate, phase: str) -> list[Trial]:
        return [t for t in self.trials if t.phase == phase and t.candidate.key == candidate.key]

    def gate_of(self, candidate: Candidate) -> Trial | None:
        """The accuracy trial of the candidate's runtime (batch and requests do not change the arithmetic)."""
        runtime = _runtime_key(candidate)
        return next((t for t in self.trials if t.phase == "gate" and _runtime_key(t.candidate) == runtime), None)

    def is_reference(self, candidate: Candidate) -> bool:
        """Whether the candidate is the gate's reference, which needs no gate (the FP32 eager image model; a served
        language model has none among the candidates: its reference is FP32 ``generate`` one prompt at a time)."""
        return self.task.is_reference(candidate)

    def passed_gate(self, candidate: Candidate) -> bool | None:
        """True (passed, or the reference, or a task with no gate), False (failed), None (not gated yet)."""
        if not self.task.gated or self.is_reference(candidate):
            return True
        gate = self.gate_of(candidate)
        if gate is None:
            return None
        return bool(gate.ok and gate.result and gate.result.valid)


def _runtime_key(c: Candidate) -> str:
    shape = ("batch_size", "streams", "max_batch_tokens")  # how much work at once, not which arithmetic
    return Candidate({k: v for k, v in c.settings.items() if k not in shape}).key
