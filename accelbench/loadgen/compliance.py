"""Whether an official-profile run held the MLPerf rules its own logs can show, so that ``compliant`` says only
what the evidence supports: a run whose ``--duration`` cut mlperf.conf's minimum, or that LoadGen's early stopping
did not pass, or an accuracy run not scored on the benchmark's data set, is not for submission, and says why."""

from __future__ import annotations

from typing import Any, Mapping

#: MLPerf Inference's minimum test duration for every scenario (mlperf.conf's ``min_duration``; the submission
#: checker's ``TEST_DURATION_MS``; docs/mlperf-rules.md)
MIN_DURATION_MS = 600_000
#: the scenarios whose latency LoadGen judges by early stopping
EARLY_STOPPING = ("Server", "SingleStream", "MultiStream")


def broken_rules(detail: Mapping[str, Any] | None, details: Mapping[str, Any]) -> list[str]:
    """The rules a run did not hold, in words (empty: none its logs show broken). ``detail``: LoadGen's detail log
    of a performance run; ``details``: the record's details (an accuracy run's ``accuracy_verified``)."""
    broken = []
    if detail:
        ms = detail.get("effective_min_duration_ms")
        if isinstance(ms, (int, float)) and ms < MIN_DURATION_MS:
            broken.append(
                f"its minimum duration was {ms / 1000:g} s where MLPerf's rules ask {MIN_DURATION_MS / 1000:g} s "
                "(--duration shortened it)"
            )
        if detail.get("result_min_duration_met") is False:
            broken.append("it ended before its minimum duration")
        if detail.get("effective_scenario") in EARLY_STOPPING and detail.get("early_stopping_met") is False:
            broken.append("LoadGen's early stopping was not met")
    if details.get("accuracy_verified") is False:
        broken.append("its accuracy was not scored on the benchmark's data set")
    return broken
