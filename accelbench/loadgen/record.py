"""The LoadGen part of a record: LoadGen's latency percentiles, the details every LoadGen run keeps, and the one
record of a run with its INVALID reasons and the quick profile's non-compliance."""

from __future__ import annotations

from typing import Any

from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.loadgen.compliance import broken_rules
from accelbench.loadgen.params import LoadGenParams
from accelbench.results.details import Details
from accelbench.results.record import Concern, Metric, Result

PERCENTILES = (
    ("result_50.00_percentile_latency_ns", "latency_p50_seconds"),
    ("result_90.00_percentile_latency_ns", "latency_p90_seconds"),
    ("result_95.00_percentile_latency_ns", "latency_p95_seconds"),
    ("result_99.00_percentile_latency_ns", "latency_p99_seconds"),
    ("result_99.90_percentile_latency_ns", "latency_p99_9_seconds"),
    ("result_mean_latency_ns", "latency_mean_seconds"),
    ("result_min_latency_ns", "latency_min_seconds"),
    ("result_max_latency_ns", "latency_max_seconds"),
)


class LoadGenDetails(Details, total=False):
    """What every record of a LoadGen run keeps beside its figures, images and language models alike: LoadGen's log
    folder, version and verdict, the profile's compliance, the probe the run was planned with, the earlier runs a
    rerun replaced, and an accuracy run's gate (what it judged, on which labels, whether the accuracy was verified;
    ``uninformative`` where no verdict could be given) and whose weights were served."""

    loadgen_log_dir: str
    loadgen_version: str | None
    loadgen_validity: str | None
    compliant: bool
    #: the MLPerf rules an official-profile run did not hold, in words (:mod:`accelbench.loadgen.compliance`)
    not_compliant: list[str]
    probe: dict[str, Any]
    reruns: list[dict[str, Any]]
    gate: str
    labels: str
    accuracy_verified: bool
    verified: str | None
    samples: int
    uninformative: str
    weights: str


def loadgen_record(
    params: LoadGenParams,
    record: dict[str, Any],
    metrics: dict[str, Metric],
    primary: str,
    details: LoadGenDetails,
    reasons: list[str],
    conditions: dict[str, Any],
    valid: bool | None,
    detail: dict[str, Any] | None = None,
) -> Result:
    """The one record of a LoadGen run (performance, accuracy, token mode): conditions' warnings, the INVALID
    reasons first, its non-compliance (the quick profile's, or the rules an official run did not hold:
    ``detail`` is a performance run's detail log), the benchmark's registered name."""
    concerns = fig.concerns_of(None, conditions)
    if reasons:
        details["invalid_reasons"] = reasons
        concerns = [Concern("invalid", f"INVALID: {r}") for r in reasons] + concerns
    if params.profile == "quick":
        concerns.append(Concern("non-compliant", "non-compliant: the quick profile is shorter than MLPerf's rules"))
    elif broken := broken_rules(detail, details):
        details["compliant"], details["not_compliant"] = False, broken
        concerns.append(Concern("non-compliant", f"non-compliant, not for submission: {'; '.join(broken)}"))
    return Result(
        benchmark_of(params),
        record,
        metrics=metrics,
        primary_metric=primary,
        valid=valid,
        concerns=concerns,
        conditions=conditions,
        details=details,
    )
