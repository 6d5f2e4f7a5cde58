"""The LoadGen part of a record: LoadGen's latency percentiles and MLPerf's early-stopping headline, the details
every LoadGen run keeps, and the one record of a run with its INVALID reasons and whether it may be submitted."""

from __future__ import annotations

from typing import Any

from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.loadgen.compliance import broken_rules
from accelbench.loadgen.mlcommons import round_of
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


#: MLPerf's headline of the stream scenarios: LoadGen's early-stopping estimate of the scenario's percentile (what
#: the submission checker reads: ``early_stopping_latency_ss`` / ``_ms``), by scenario: (key, metric)
EARLY_STOPPING_HEADLINES = {
    "singlestream": ("early_stopping_latency_ss", "latency_p90_early_stopping_seconds"),
    "multistream": ("early_stopping_latency_ms", "query_latency_p99_early_stopping_seconds"),
}
#: the detail log's keys that say how LoadGen was set (``effective_*``: what it ran; ``requested_*``: what it was
#: asked) and the conf files it read, kept in a record's ``loadgen_settings``
SETTING_PREFIXES = ("effective_", "requested_")


def early_stopping_headline(scenario: str, d: dict[str, Any]) -> tuple[str, float] | None:
    """The stream scenario's MLPerf headline (metric name, seconds), where LoadGen made its early-stopping estimate
    (None: another scenario, or too few queries for one: LoadGen logs 0)."""
    key, name = EARLY_STOPPING_HEADLINES.get(scenario, ("", ""))
    ns = d.get(key) if key else None
    return (name, ns / 1e9) if isinstance(ns, (int, float)) and ns > 0 else None


def loadgen_settings(d: dict[str, Any]) -> dict[str, Any]:
    """How LoadGen was set for a test, from its detail log: every effective and requested setting."""
    return {k: v for k, v in sorted(d.items()) if k.startswith(SETTING_PREFIXES)}


class LoadGenDetails(Details, total=False):
    """What every record of a LoadGen run keeps beside its figures, images and language models alike: LoadGen's log
    folder, version, verdict and settings, the MLPerf round its seeds belong to, the compliance test it ran (if
    one), the profile's compliance, the probe the run was planned with, the earlier runs a rerun replaced, and an
    accuracy run's gate (what it judged, on which labels, whether the accuracy was verified; ``uninformative``
    where no verdict could be given) and whose weights were served."""

    loadgen_log_dir: str
    loadgen_version: str | None
    loadgen_validity: str | None
    #: every effective and requested LoadGen setting of the test (its detail log's)
    loadgen_settings: dict[str, Any]
    #: the MLPerf Inference round whose seeds LoadGen used (``v6.0``, ``v6.1``), or None
    mlperf_round: str | None
    #: the MLPerf compliance test this run is (TEST01, TEST04, TEST06), where it is one
    audit: str
    #: how each answer in LoadGen's accuracy log decodes (a numpy dtype's name)
    answer_dtype: str
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
    """The one record of a LoadGen run (performance, accuracy, token mode, a compliance test): conditions'
    warnings, the INVALID reasons first, LoadGen's settings and round (``detail``: the test's detail log), whether
    it may be submitted (the quick profile never; an official run where every rule its logs show held), the
    benchmark's registered name."""
    concerns = fig.concerns_of(None, conditions)
    if reasons:
        details["invalid_reasons"] = reasons
        concerns = [Concern("invalid", f"INVALID: {r}") for r in reasons] + concerns
    if detail:
        details["loadgen_settings"] = loadgen_settings(detail)
        details["mlperf_round"] = round_of(detail)
    if params.audit:
        details["audit"] = params.audit
        text = (
            f"compliance test {params.audit}: a performance run under its audit.config, verified against the "
            "accuracy and performance runs when a submission is written (accelbench mlperf inference)"
        )
        concerns.append(Concern("audit", text))
        details["compliant"] = False
    elif params.profile == "quick":
        details["compliant"] = False
        concerns.append(Concern("non-compliant", "non-compliant: the quick profile is shorter than MLPerf's rules"))
    elif broken := broken_rules(detail, details, params.model, params.mode, valid):
        details["compliant"], details["not_compliant"] = False, broken
        concerns.insert(0, Concern("non-compliant", f"not for submission: {'; '.join(broken)}"))
    else:
        details["compliant"] = True
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
