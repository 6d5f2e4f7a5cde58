"""An image model's LoadGen records: the scenario's metric, latency percentiles, validity in plain words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from accelbench.infer.specs import InferParams
from accelbench.kit import metrics as fig
from accelbench.loadgen.logs import invalid_rules
from accelbench.loadgen.record import PERCENTILES, LoadGenDetails, early_stopping_headline, loadgen_record
from accelbench.loadgen.replan import true_cause
from accelbench.loadgen.settings import bound_ms
from accelbench.results.record import Metric, Result

if TYPE_CHECKING:
    from accelbench.loadgen.settings import Probe
    from accelbench.loadgen.start import Outcome


class ImageDetails(LoadGenDetails, total=False):
    """An image model's serving run: the SUT's batches and samples (per serving worker: a device's, or one of the
    requests in flight on it with ``--streams``), accelbench's own MultiStream bound check, and what the backend's
    runtime chose (OpenVINO's precision, streams and requests)."""

    sut_batches: int
    sut_samples: int
    samples_per_worker: list[int]
    accelbench_check: dict[str, Any]
    backend: dict[str, Any]


def image_details(result: Result) -> ImageDetails:
    """An image model's serving record's details as this module wrote them (the same dict)."""
    return cast(ImageDetails, result.details)


def _metric(value: float, unit: str, higher: bool) -> Metric:
    return fig.figure(value, unit, higher_is_better=higher)


def scenario_metric(scenario: str, d: dict[str, Any]) -> tuple[str, Metric]:
    """MLPerf's headline of the scenario, as its submission checker reads it: Offline's samples/s, Server's completed
    queries/s, the streams' early-stopping estimate of their percentile (the raw percentile where LoadGen made no
    estimate: too few queries)."""
    if scenario == "offline":
        return "throughput", _metric(float(d.get("result_samples_per_second", 0.0)), "samples/s", True)
    if scenario == "server":
        value = d.get("result_completed_samples_per_sec") or d.get("result_scheduled_samples_per_sec") or 0.0
        return "queries_per_second", _metric(float(value), "queries/s", True)
    estimate = early_stopping_headline(scenario, d)
    if estimate is not None:
        return estimate[0], _metric(estimate[1], "s", False)
    if scenario == "singlestream":
        return "latency_p90_seconds", _metric(d.get("result_90.00_percentile_latency_ns", 0) / 1e9, "s", False)
    ns = d.get("result_99.00_percentile_per_query_latency_ns") or d.get("result_99.00_percentile_latency_ns", 0)
    return "query_latency_p99_seconds", _metric(ns / 1e9, "s", False)


def p99_ms(d: dict[str, Any]) -> float:
    """A MultiStream run's 99th-percentile query latency in milliseconds (LoadGen's raw percentile)."""
    ns: float = d.get("result_99.00_percentile_per_query_latency_ns") or d.get("result_99.00_percentile_latency_ns", 0)
    return ns / 1e6


def multistream_within_bound(d: dict[str, Any], bound_ms: float) -> bool:
    """LoadGen >= 2.0 has no MultiStream bound (its metric is the p99 query latency); accelbench holds it to one."""
    return p99_ms(d) <= bound_ms


def performance_result(
    params: InferParams, record: dict[str, Any], outcome: "Outcome", probe: "Probe", extra: ImageDetails | None = None
) -> Result:
    d = outcome.detail
    name, primary = scenario_metric(params.scenario, d)
    metrics = {name: primary}
    if params.scenario == "server" and d.get("result_scheduled_samples_per_sec") is not None:
        # what LoadGen scheduled, beside what was completed (an INVALID run may have completed far fewer)
        metrics["scheduled_queries_per_second"] = _metric(
            float(d["result_scheduled_samples_per_sec"]), "queries/s LoadGen scheduled", True
        )
    if params.scenario == "multistream":
        ns = d.get("result_99.00_percentile_per_query_latency_ns")
        if ns and name != "query_latency_p99_seconds":  # the raw percentile beside the estimate
            metrics["query_latency_p99_seconds"] = _metric(ns / 1e9, "s", False)
    if primary.higher_is_better and params.nproc > 1:
        metrics[f"{name}_per_device"] = _metric(primary.value / params.nproc, primary.unit + " per device", True)
    for key, label in PERCENTILES:
        if key in d and label not in metrics:
            metrics[label] = _metric(d[key] / 1e9, "s", False)
    valid = d.get("result_validity") == "VALID"
    if params.scenario == "server":
        # the bound LoadGen enforced (mlperf.conf's for the model in the official profile), else the one set
        enforced = d.get("effective_target_latency_ns")
        bound: float | None = enforced / 1e6 if enforced else bound_ms(params)
    elif params.scenario == "multistream":  # LoadGen >= 2.0 has none; only one the user (or find-peak) set
        bound = params.latency_bound_ms or ((extra or {}).get("find_peak") or {}).get("latency_bound_ms")
    else:
        bound = None
    details: ImageDetails = {
        "loadgen_log_dir": str(outcome.outdir),
        "probe": probe.to_dict(),
        "latency_bound_ms": bound,
        "sut_batches": outcome.sut.batches,
        "sut_samples": outcome.sut.samples,
        # per serving worker: a device's, or one of the requests in flight on it (--streams)
        "samples_per_worker": outcome.sut.per_worker,
        "loadgen_version": d.get("loadgen_version"),
        "target_qps": d.get("requested_server_target_qps") if params.scenario == "server" else None,
    } | (extra or {})
    if params.scenario in ("singlestream", "multistream"):  # what the run's energy is divided by, per query
        spq = (
            int(record.get("samples_per_query") or params.samples_per_query) if params.scenario == "multistream" else 1
        )
        details["queries"] = outcome.sut.samples // max(spq, 1)
    reasons = (
        [] if valid else true_cause(invalid_rules(d, params.scenario), details.get("reruns") or [], outcome.conditions)
    )
    over = ""
    if params.scenario == "multistream" and bound:
        # accelbench's own check, labelled as such: the verdict (valid) stays LoadGen's
        met = multistream_within_bound(d, bound)
        details["accelbench_check"] = {"multistream_latency_bound_ms": bound, "met": met}
        if not met:
            over = (
                f"over the latency bound: the 99th-percentile query latency is {p99_ms(d):.3g} ms against "
                f"the {bound:g} ms set for this run (accelbench's check, not LoadGen's verdict); lower "
                "--samples-per-query"
            )
    result = loadgen_record(params, record, metrics, name, details, reasons, outcome.conditions, valid, d)
    if over:
        result.concern("over-bound", over, first=True, bound_ms=bound)
    return result
