"""The search's time: what is spent, what a trial of each phase is expected to take, whether one more fits.

``--budget`` is a budget, not a hint: no trial starts unless it is expected to end inside its phase's limit
(except the default's first screening, and the second of a confirmation round's pair, without which the round
compares nothing), and each trial's timeout is the time left, so the search overruns by at most the part of one
trial its estimate missed. How a trial is estimated is in docs/tune.md (The outcome and the budget)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from accelbench.tune.trials import Trial

#: a first gate's and a first confirmation's expected time where the family gives none: (times a
#: screening's, plus seconds)
FIRST_OF_PHASE: dict[str, tuple[float, float]] = {"gate": (1.5, 0.0), "confirm": (1.5, 0.0)}
#: wall seconds a trial costs for each second more of LoadGen's minimum duration (Offline trials of the LoadGen and
#: serving tasks): a longer run does not hold the probe's rate and may be probed again (measured 1.65-2.25 s a
#: second, and 1.5 planned a first round short: docs/tune.md)
LOADGEN_PACE = 2.5
#: the least time a trial is given before it is killed (a process start and a model load, on a slow host)
MIN_TRIAL_TIMEOUT = 60.0


@dataclass
class Budget:
    """``seconds`` from ``t0`` on ``clock``; trials' times are read from the trials themselves."""

    seconds: float
    clock: Callable[[], float]
    t0: float

    def spent(self) -> float:
        return self.clock() - self.t0

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent())

    def at(self, share: float) -> float:
        """The time, from the start, by which ``share`` of the budget is spent."""
        return self.seconds * share

    def expected(self, phase: str, trials: list[Trial], first: tuple[float, float] | None = None) -> float | None:
        """Seconds a next trial of ``phase`` is expected to take; None before any trial has been timed. ``first``
        is a first trial of the phase as (times a screening, plus seconds), where the family knows better."""
        same = [t.seconds for t in trials if t.phase == phase]
        if same:
            return statistics.median(same)
        screens = [t.seconds for t in trials if t.phase == "screen"]
        if not screens:
            return None
        times, plus = first or FIRST_OF_PHASE.get(phase, (1.0, 0.0))
        return statistics.median(screens) * times + plus

    def fits(self, seconds: float | None, until: float | None = None) -> bool:
        """Whether work of ``seconds`` started now ends by ``until`` (the budget's end by default)."""
        end = self.seconds if until is None else until
        return seconds is not None and self.spent() + seconds <= end

    def timeout(self, until: float | None = None) -> float:
        """A trial's time limit: to ``until`` (the budget's end by default), never below the floor."""
        end = self.seconds if until is None else until
        return max(MIN_TRIAL_TIMEOUT, end - self.spent())
