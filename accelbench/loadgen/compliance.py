"""Whether an official-profile run held the MLPerf rules its own logs can show, so that ``compliant`` says only
what the evidence supports: a run whose ``--duration`` cut mlperf.conf's minimum, or that LoadGen's early stopping
did not pass, or an accuracy run not scored on the benchmark's data set, is not for submission, and says why."""

from __future__ import annotations

from typing import Any, Mapping

from accelbench.loadgen.mlcommons import ROUNDS, Model, model_of, round_of

#: MLPerf Inference's minimum test duration for every scenario (mlperf.conf's ``min_duration``; the submission
#: checker's ``TEST_DURATION_MS``; docs/mlperf-rules.md)
MIN_DURATION_MS = 600_000
#: the scenarios whose latency LoadGen judges by early stopping
EARLY_STOPPING = ("Server", "SingleStream", "MultiStream")


def broken_rules(
    detail: Mapping[str, Any] | None, details: Mapping[str, Any], model: str, mode: str, valid: bool | None
) -> list[str]:
    """The rules an official-profile run did not hold, in words (empty: none its logs show broken). ``detail``:
    LoadGen's detail log; ``details``: the record's (an accuracy run's ``accuracy_verified``); ``model``:
    accelbench's name for the served model; ``valid``: the run's verdict."""
    broken = []
    round_name = round_of(detail) if detail else None
    if detail and round_name is None:
        version = detail.get("loadgen_version") or "this LoadGen"
        rounds = ", ".join(ROUNDS)
        broken.append(f"{version} ran with seeds no MLPerf round accelbench knows ({rounds}) uses")
    mlperf = model_of(model, round_name or next(reversed(ROUNDS)))
    if mlperf is None:
        broken.append(f"{model} is not an MLPerf Inference model (the open division only, under a model mapping)")
    if detail and mode == "performance":
        broken += _performance_rules(detail, mlperf)
        if valid is False:
            broken.append("LoadGen's verdict is INVALID")
    if details.get("accuracy_verified") is False:
        broken.append("its accuracy was not scored on the benchmark's data set")
    return broken


def _performance_rules(detail: Mapping[str, Any], mlperf: Model | None) -> list[str]:
    broken = []
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
    if mlperf is None:
        return broken
    count = detail.get("effective_performance_sample_count")
    if isinstance(count, int) and count < mlperf.performance_samples:
        least = mlperf.performance_samples
        broken.append(f"its performance sample count was {count} where the round asks at least {least}")
    per_query = detail.get("effective_samples_per_query")
    if detail.get("effective_scenario") == "Offline" and isinstance(per_query, int):
        if per_query < mlperf.offline_samples:
            least = mlperf.offline_samples
            broken.append(f"its Offline query held {per_query} samples where the round asks at least {least}")
    return broken
