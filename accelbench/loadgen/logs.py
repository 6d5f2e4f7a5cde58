"""Read LoadGen's verdict from ``mlperf_log_detail.txt`` (its structured MLLOG lines, not the summary).

Each line ``:::MLLOG {json}`` carries a key and a value; the result keys say
whether the run is VALID and, when it is not, which rule failed. Those rules are
turned into plain words with the fix a user would apply.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PREFIX = ":::MLLOG "
TRACE = "mlperf_log_trace.json"


def drop_empty_trace(outdir: Path) -> bool:
    """Remove LoadGen's trace file from ``outdir`` when it is empty; True when one was removed.

    LoadGen creates the trace file whether or not tracing is on, and with tracing off it stays at 0 bytes: an
    empty file in every log folder reads as a trace that failed to write. A trace with content is kept.
    """
    path = Path(outdir) / TRACE
    try:
        if path.stat().st_size == 0:
            path.unlink()
            return True
    except FileNotFoundError:
        pass
    return False


def read_detail(path: Path) -> dict[str, Any]:
    """Every key's last value (later lines override earlier ones)."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith(PREFIX):
                continue
            try:
                item = json.loads(line[len(PREFIX) :])
            except json.JSONDecodeError:
                continue
            values[item["key"]] = item.get("value")
            meta = item.get("metadata") or {}
            if meta.get("is_error"):
                errors.append(f"{item['key']}: {item.get('value')}")
    values["_errors"] = errors
    return values


#: Which of LoadGen's rules an INVALID reason is about: what :func:`accelbench.loadgen.replan.true_cause` decides by
#: (the words are the reader's). A reason is (rule, words).
#: (A token run's TTFT/TPOT constraints are TOKEN_LIMITS: a rerun's overload is not said to be their cause.)
MIN_DURATION, MIN_QUERIES, LATENCY_BOUND, TOKEN_LIMITS, EARLY_STOPPING, LOADGEN_ERROR, UNSAID = (
    "min-duration", "min-queries", "latency-bound", "token-limits", "early-stopping", "loadgen-error", "unsaid",
)  # fmt: skip


def invalid_reasons(d: dict[str, Any], scenario: str) -> list[str]:
    """Why LoadGen called the run INVALID, each with the fix."""
    return [words for _, words in invalid_rules(d, scenario)]


def invalid_rules(d: dict[str, Any], scenario: str) -> list[tuple[str, str]]:
    """Why LoadGen called the run INVALID, each as (the rule broken, the words with the fix)."""
    reasons: list[tuple[str, str]] = []
    if d.get("result_min_duration_met") is False:
        measured = d.get("result_samples_per_second") or d.get("result_completed_samples_per_sec")
        hint = {
            "offline": f"raise --expected-qps to {float(measured) * 1.1:.0f} (10% over the measured throughput)"
            if measured
            else "raise --expected-qps",
            "server": "raise --target-qps or --duration",
            "singlestream": "lower the expected latency or raise --duration",
            "multistream": "lower the expected latency or raise --duration",
        }[scenario]
        words = f"min duration not met: LoadGen ran out of planned queries before the minimum duration; {hint}"
        reasons.append((MIN_DURATION, words))
    if d.get("result_min_queries_met") is False:
        reasons.append((MIN_QUERIES, "min queries not met: LoadGen issued fewer queries than required; run longer"))
    if d.get("result_perf_constraints_met") is False:
        bound = d.get("requested_server_target_latency_ns") or d.get("requested_multi_stream_target_latency_ns")
        where = f" of {int(bound) / 1e6:g} ms" if bound else ""
        fix = "lower --target-qps" if scenario == "server" else "lower --samples-per-query"
        reasons.append((LATENCY_BOUND, f"latency bound{where} violated at the target percentile; {fix}"))
    if d.get("early_stopping_met") is False:
        words = "early stopping criterion not met: too few queries for the latency percentile; run longer"
        reasons.append((EARLY_STOPPING, words))
    reasons += [(LOADGEN_ERROR, f"LoadGen error: {e}") for e in d.get("_errors", [])]
    return reasons or [(UNSAID, "LoadGen reported INVALID (see mlperf_log_detail.txt)")]
