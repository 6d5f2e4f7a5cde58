"""Records written by older accelbench versions, read as today's.

A store or an exported file outlives the version that wrote it, so every reader
(``Result.from_dict``, ``results import``) passes old records through
:func:`upgrade` first; nothing else in the code needs to know an old layout.

Version 2 (accelbench 0.3): an outcome is no longer a parameter (``params.valid``
moved to the record's ``valid`` field), and one concept has one name across the
families: a rate of samples is ``throughput`` (infer Offline's
``samples_per_second``, tta's ``train_throughput``), a latency percentile has one
key (``latency_p90_seconds``; MultiStream's per-query p99 is
``query_latency_p99_seconds``), the device count of inference is ``nproc`` as in
train and tta, and the kernels' warm-up in seconds is ``warmup_time`` (``warmup``
counts steps everywhere else).
"""

from __future__ import annotations

from typing import Any

from accelbench.errors import UsageError

#: v1 metric names that became another name in v2, per benchmark family.
_METRICS_V2 = {
    "infer/loadgen": {
        "samples_per_second": "throughput",
        "samples_per_second_per_device": "throughput_per_device",
        "p99_latency_seconds": "query_latency_p99_seconds",
        "p90_latency_seconds": "latency_p90_seconds",
    },
    "tta/time_to_target": {"train_throughput": "throughput"},
}
#: v1 parameter names that became another name in v2.
_PARAMS_V2 = {"infer/loadgen": {"devices": "nproc"}}


#: parameter values renamed without a layout change, read as today's in every version: (benchmark, param) -> old
#: value -> new (train's on-device JPEG decoder was "cuda" before the device seam named it "device")
_VALUES = {("train/throughput", "decode"): {"cuda": "device"}}


def upgrade(record: dict[str, Any], current: int) -> dict[str, Any]:
    """``record`` in schema ``current`` (a new dict; the input is not changed)."""
    record = _renamed_values(record)
    version = record.get("schema_version")
    if version == current:
        return record
    if not isinstance(version, int) or version < 1:
        return record  # not a record: the schema check names the problem
    if version > current:
        raise UsageError(
            f"record {record.get('id', '?')} has schema version {version}, newer than this accelbench reads "
            f"({current}): upgrade accelbench (pip install -U accelbench)"
        )
    out = dict(record)
    if version == 1:
        out = _v1_to_v2(out)
    out["schema_version"] = current
    return out


def _renamed_values(record: dict[str, Any]) -> dict[str, Any]:
    params = record.get("params")
    if not isinstance(params, dict):
        return record
    renamed = {
        name: _VALUES[(str(record.get("benchmark")), name)].get(value, value)
        for name, value in params.items()
        if (str(record.get("benchmark")), name) in _VALUES and isinstance(value, str)
    }
    if all(params[k] == v for k, v in renamed.items()):
        return record
    return {**record, "params": {**params, **renamed}}


def _v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
    bench = str(d.get("benchmark", ""))
    params = dict(d.get("params") or {})
    if "valid" in params:
        d["valid"] = params.pop("valid")
    for old, new in _PARAMS_V2.get(bench, {}).items():
        if old in params:
            params[new] = params.pop(old)
    if bench.startswith("kernels/") and "warmup" in params:
        params["warmup_time"] = params.pop("warmup")
    d["params"] = params
    renames = _METRICS_V2.get(bench, {})
    metrics = dict(d.get("metrics") or {})
    for old, new in renames.items():
        if old in metrics:
            value = metrics.pop(old)
            metrics.setdefault(new, value)  # v1 stored SingleStream's p90 twice: keep one
    d["metrics"] = metrics
    if d.get("primary_metric") in renames:
        d["primary_metric"] = renames[d["primary_metric"]]
    return d
