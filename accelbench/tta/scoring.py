"""MLPerf's scoring of several seeds: the olympic mean of the times to target, and when a set is invalid."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelbench.results.details import TtaScore


@dataclass(frozen=True)
class Score:
    time_to_target: float | None  # the olympic mean (None when the set is invalid)
    fastest: float | None
    slowest: float | None  # None when a run did not converge (it counts as the slowest)
    spread: float | None  # (slowest - fastest) / mean of the converged runs
    converged: int
    runs: int
    valid: bool
    reason: str = ""
    #: the runs (indices into the times given) the mean counts: every other figure of the set is theirs too (of
    #: runs with equal times, the later seed is the one dropped as the slowest, the earlier as the fastest)
    kept: tuple[int, ...] = ()

    def record(self) -> TtaScore:
        """The score as the record keeps it (``details.score``)."""
        return {
            "time_to_target": self.time_to_target,
            "fastest": self.fastest,
            "slowest": self.slowest,
            "spread": self.spread,
            "converged": self.converged,
            "runs": self.runs,
            "valid": self.valid,
            "reason": self.reason,
            "kept": list(self.kept),
        }


def olympic(times: list[float | None]) -> Score:
    """Drop the fastest and the slowest run (with 3 or more) and average the rest.

    A run that did not reach the target (``None``) counts as the slowest; more
    than one such run makes the result invalid, as MLPerf Training's rules say.
    With fewer than three runs nothing is dropped, so one non-converged run
    already leaves no valid mean.
    """
    if not times:
        raise ValueError("no runs to score")
    done = sorted(t for t in times if t is not None)
    order = sorted(range(len(times)), key=lambda i: (times[i] is None, times[i] or 0.0))  # fastest first
    failed = len(times) - len(done)
    fastest = done[0] if done else None
    slowest = None if failed else done[-1]
    spread = (done[-1] - done[0]) / statistics.fmean(done) if len(done) > 1 else None  # one run: no spread

    def score(time_to_target: float | None, valid: bool, reason: str = "", kept: tuple[int, ...] = ()) -> Score:
        return Score(time_to_target, fastest, slowest, spread, len(done), len(times), valid, reason, kept)

    if failed > 1:
        return score(None, valid=False, reason=f"{failed} of {len(times)} runs did not reach the target")
    if len(times) >= 3:
        kept = order[1:-1]  # a run that did not converge sorts last: dropped as the slowest
        mean = statistics.fmean(t for i in kept if (t := times[i]) is not None)
        return score(mean, valid=True, kept=tuple(sorted(kept)))
    if failed:
        why = "the run did not reach the target" if len(times) == 1 else "a run did not reach the target"
        return score(None, valid=False, reason=f"{why}; with fewer than 3 seeds none is dropped")
    return score(statistics.fmean(done), valid=True, kept=tuple(range(len(times))))
