"""The files of a submission a person would otherwise write by hand, made from what the records say and nothing
they do not: measurements.json, user.conf, src/README.md, documentation/calibration.md, and the command that makes
each record again (which every README quotes).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Mapping

from accelbench import __version__
from accelbench.submission.output import redact, write_text
from accelbench.submission.plan import Pick, Plan
from accelbench.submission.runs import Source, record_weights


def weights_of(pick: Pick) -> str:
    """The weights a result served: its checkpoint's file name, else what its records say of them (a performance
    record may say nothing where its accuracy run, on the same weights, says how they were made)."""
    said = record_weights(pick.performance)
    if pick.performance.details.get("weights") or pick.performance.params.get("checkpoint") or pick.accuracy is None:
        return said
    same = pick.accuracy.params.get("checkpoint") == pick.performance.params.get("checkpoint")
    return record_weights(pick.accuracy) if same else said


#: accelbench's ``--precision`` -> (input data types, weight data types, how the weights were changed)
_PRECISION = {
    "fp32": ("fp32", "fp32", "none"),
    "bf16": ("bf16", "bf16", "weights cast from fp32 to bf16"),
    "fp16": ("fp16", "fp16", "weights cast from fp32 to fp16"),
    "amp_bf16": ("fp32", "fp32", "none (torch.autocast computes in bf16 at run time)"),
    "amp_fp16": ("fp32", "fp32", "none (torch.autocast computes in fp16 at run time)"),
    "int8": ("fp32", "int8", "weights quantised to int8 by accelbench's int8 backend"),
}


def measurements(pick: Pick) -> dict[str, Any]:
    """measurements.json's five required fields (SYSTEM_IMP_REQUIRED_FILES), from the performance record."""
    s = pick.performance
    precision = str(s.params.get("precision") or "fp32")
    inputs, weights, transform = _PRECISION.get(precision, (precision, precision, f"as --precision {precision}"))
    if s.record.benchmark == "infer/llm":
        inputs = "int32 (token ids)"
    start = weights_of(pick)
    if start.startswith("random"):
        transform = f"{transform}; the weights are random (no checkpoint), not MLPerf's reference weights"
    return {
        "input_data_types": inputs,
        "retraining": "no",
        "starting_weights_filename": start,
        "weight_data_types": weights,
        "weight_transformations": transform,
    }


#: user.conf lines from the detail log's requested settings: (scenario or "*", conf key, log key, scale)
_USER_CONF = (
    ("Offline", "target_qps", "requested_offline_expected_qps", 1.0),
    ("Server", "target_qps", "requested_server_target_qps", 1.0),
    ("Server", "target_latency", "requested_server_target_latency_ns", 1e6),
    ("Server", "target_latency_percentile", "requested_server_target_latency_percentile", 0.01),
    ("SingleStream", "target_latency", "requested_single_stream_expected_latency_ns", 1e6),
    ("SingleStream", "target_latency_percentile", "requested_single_stream_target_latency_percentile", 0.01),
    ("MultiStream", "target_latency", "requested_multi_stream_expected_latency_ns", 1e6),
    ("MultiStream", "target_latency_percentile", "requested_multi_stream_target_latency_percentile", 0.01),
    ("MultiStream", "samples_per_query", "requested_multi_stream_samples_per_query", 1.0),
    ("*", "min_duration", "requested_min_duration_ms", 1.0),
    ("*", "max_duration", "requested_max_duration_ms", 1.0),
    ("*", "min_query_count", "requested_min_query_count", 1.0),
    ("*", "max_query_count", "requested_max_query_count", 1.0),
    ("*", "performance_sample_count_override", "requested_performance_sample_count_override", 1.0),
)


def user_conf(pick: Pick, detail: Mapping[str, Any]) -> str:
    """The settings the run gave LoadGen, as user.conf lines (the seeds are mlperf.conf's alone)."""
    scen = "Server" if pick.scenario == "Interactive" else pick.scenario
    lines = [
        "# The settings accelbench gave LoadGen for this result, read back from its detail log (requested_*).",
        f"# accelbench {__version__}; the official profile loads LoadGen's own mlperf.conf under these.",
    ]
    for where, key, logged, scale in _USER_CONF:
        if where not in ("*", scen):
            continue
        value = detail.get(logged)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.endswith("max_duration") or key.startswith("max_") or key.endswith("override"):
            if not value:
                continue
        lines.append(f"{pick.model.conf}.{scen}.{key} = {_num(value / scale)}")
    return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def command_of(s: Source, **change: Any) -> str:
    """The command that makes this record again: ``accelbench <command> MODEL`` and each setting asked (the suite
    entry of the run folder, else the record's resolved settings) that differs from the benchmark's default;
    ``change``: settings to give otherwise (``audit="TEST01"``: the same run as that compliance test)."""
    from accelbench.registry import BENCHMARKS, route

    params = (_asked(s) or dict(s.params)) | change
    info = BENCHMARKS.get(route(s.record.benchmark, params)) or BENCHMARKS.get(s.record.benchmark)
    if info is None or info.command is None:
        return redact(s.run_command) or f"(no command: {s.record.benchmark} {json.dumps(params, sort_keys=True)})"
    cmd = info.command
    words = ["accelbench", cmd.name, str(params.get(cmd.positional, ""))]
    defaults = info.params().to_dict()
    for f, _ in info.params.flags():
        if f.name == cmd.positional or f.name not in params:
            continue
        value, default = params[f.name], defaults.get(f.name)
        if value is None or value == default:
            continue
        flag = str(f.metadata.get("flag") or "--" + f.name.replace("_", "-"))
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, float):
            words += [flag, _num(value)]
        elif isinstance(value, (int, str)):
            words += [flag, redact(str(value))]
    return shlex.join(words)


def _asked(s: Source) -> dict[str, Any] | None:
    """The suite entry that asked for this record: the one entry of its benchmark with its model, scenario, mode
    and audit (None where the run folder is gone or several entries match)."""
    keys = ("model", "scenario", "mode")
    found = []
    for entry in s.asked:
        params = entry.get("params")
        if not isinstance(params, dict):
            continue
        if all(params.get(k) == s.params.get(k) for k in keys) and str(params.get("audit") or "") == s.audit:
            found.append(params)
    return dict(found[0]) if len(found) == 1 else None


def write_src(root: Path, plan_: Plan) -> None:
    """src/README.md: the code that made the results (accelbench and LoadGen, by version) and each one's commands."""
    from importlib import metadata

    try:
        loadgen = metadata.version("mlcommons-loadgen")
    except metadata.PackageNotFoundError:
        loadgen = "the version in each detail log's loadgen_version"
    lines = [
        "# How these results were made",
        "",
        f"With accelbench {__version__}, a benchmark suite that drives MLCommons' LoadGen (mlcommons-loadgen "
        f"{loadgen}) with its own system under test. The code is accelbench itself:",
        "",
        "```",
        f"pip install accelbench=={__version__}   # or, from its source tree at that version: pip install .",
        f"pip install mlcommons-loadgen=={loadgen}",
        "```",
        "",
        "Each result was made by one command (LoadGen writes its logs into the run folder, accelbench-runs/RUN/):",
        "",
    ]
    for p in plan_.picks:
        lines += [f"## {p.model.name} {p.scenario}", "", "```", command_of(p.performance)]
        if p.accuracy is not None:
            lines.append(command_of(p.accuracy))
        lines += [command_of(s) for s in p.audits.values()]
        lines += ["```", ""]
    write_text(root / "src" / "README.md", "\n".join(lines))


def write_calibration(root: Path, plan_: Plan) -> None:
    """documentation/calibration.md: what was done to each model's weights (its precision, any calibration set)."""
    lines = [
        "# Calibration and weights",
        "",
        "What accelbench did to each model's weights before serving it, as its records say. Nothing else was done: "
        "no quantisation calibration set was used unless a model's entry below names one.",
        "",
    ]
    seen: set[tuple[str, str, str]] = set()
    for p in plan_.picks:
        s = p.performance
        precision = str(s.params.get("precision") or "fp32")
        key = (p.accelbench_model, weights_of(p), precision)
        if key in seen:
            continue
        seen.add(key)
        transform = measurements(p)["weight_transformations"]
        calibration = s.details.get("calibration")
        cal = f"quantisation calibration: {calibration}" if calibration else "quantisation calibration: none recorded"
        lines += [
            f"## {p.model.name} ({p.accelbench_model}, --precision {precision})",
            "",
            f"* weights: {weights_of(p)}",
            f"* transformations: {transform}",
            f"* {cal}",
            "",
        ]
    write_text(root / "documentation" / "calibration.md", "\n".join(lines))
