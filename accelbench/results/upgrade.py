"""Records written by older accelbench versions, read as today's.

A store or an exported file outlives the version that wrote it, so every reader (``Result.from_dict``,
``results import``) passes old records through :func:`upgrade` first and nothing else needs to know an old
layout. Changes within one schema version are keyed on the content (a field's absence), not the version;
:func:`concerns_from_warnings` is the one place a warning's prose is read. What each step changes is in
docs/record-format.md (Records of older versions)."""

from __future__ import annotations

import re
from typing import Any

from accelbench.errors import UsageError
from accelbench.workloads import DECODERS

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


#: v3's split, as it stood when it was made (a migration is frozen: later fields are not its business):
#: old benchmark -> (the decoders' new benchmark, the parameters only decoders took, those only the others took)
_SPLIT_V3: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "infer/loadgen": (
        "infer/llm",
        frozenset({
            "accuracy_target", "allow_eos", "api", "api_key_env", "chat_template", "concurrency", "engine",
            "engine_compile", "input_jitter", "input_tokens", "kv_blocks", "max_batch_tokens", "output_tokens",
            "page_size", "prompts", "rates", "request_timeout", "served_model", "server_devices", "tokenizer",
            "tpot_ms", "ttft_ms", "url",
        }),
        frozenset({
            "backend", "channels_last", "compile_mode", "dataset", "latency_bound_ms", "nproc", "ort_optimization",
            "samples_per_query", "service_ms", "streams",
        }),
    ),
    "train/throughput": (
        "train/llm",
        frozenset({"seq_len", "grad_accum", "global_batch", "sharding", "activation_checkpointing", "lora", "layers"}),
        frozenset({
            "channels_last", "data", "data_dir", "workers", "decode", "data_only", "max_batch_size", "memory_cap",
        }),
    ),
}  # fmt: skip


#: v3's backend settings, each its backend's own (``Backend.Options``); a user's backend declared none before v3
_BACKEND_OPTIONS_V3: dict[str, tuple[str, ...]] = {
    "torch": ("channels_last",),
    "compile": ("channels_last", "compile_mode"),
    "onnxruntime": ("ort_optimization",),
    "int8": ("ort_optimization",),
    "tensorrt": ("ort_optimization",),
    "sleep": ("service_ms",),
}
_ALL_BACKEND_OPTIONS_V3 = frozenset({"channels_last", "compile_mode", "ort_optimization", "service_ms"})


#: an engine's own settings, as the engines declared them when they came to own them (``Engine.Options``); before,
#: every ``infer/llm`` record carried them all, the endpoint's address on a local engine's record too
_ENGINE_OPTIONS: dict[str, tuple[str, ...]] = {
    "transformers": ("page_size", "kv_blocks", "max_batch_tokens", "engine_compile"),
    "static": ("engine_compile",),
    "vllm": ("page_size", "kv_blocks", "max_batch_tokens", "engine_compile"),
    "endpoint": (
        "url", "served_model", "api", "api_key_env", "tokenizer", "server_devices", "request_timeout",
        "accuracy_target",
    ),
}  # fmt: skip
_ALL_ENGINE_OPTIONS = frozenset(k for names in _ENGINE_OPTIONS.values() for k in names)


def own_engine_options(benchmark: str, params: dict[str, Any]) -> dict[str, Any]:
    """An ``infer/llm`` record's parameters with only its engine's own settings (Engine Options, accelbench 0.4,
    within version 3: keyed on the record's content). A user's engine declared none of these."""
    if benchmark != "infer/llm" or not _ALL_ENGINE_OPTIONS.intersection(params):
        return params
    takes = _ENGINE_OPTIONS.get(str(params.get("engine", "transformers")), ())
    return {k: v for k, v in params.items() if k not in _ALL_ENGINE_OPTIONS or k in takes}


#: the prompt sources' settings when sources came to own them (``Source.Options``); before, every ``infer/llm``
#: record carried the random prompts' jitter and the prompt file's settings
_SOURCE_OPTIONS: dict[str, tuple[str, ...]] = {
    "random": ("input_jitter",),
    "file": ("prompts", "chat_template"),
}
_ALL_SOURCE_OPTIONS = frozenset(k for names in _SOURCE_OPTIONS.values() for k in names)


def own_source_options(benchmark: str, params: dict[str, Any]) -> dict[str, Any]:
    """An ``infer/llm`` record's parameters naming its prompt source, with only that source's settings, and an
    ``infer/*`` record's LoadGen trace log as ``loadgen_trace`` (accelbench 0.4, within version 3: on the content)."""
    if benchmark in ("infer/llm", "infer/loadgen") and isinstance(params.get("trace"), bool):
        params = {k: v for k, v in params.items() if k != "trace"} | {"loadgen_trace": params["trace"]}
    if benchmark != "infer/llm" or "source" in params or not _ALL_SOURCE_OPTIONS.intersection(params):
        return params
    source = "file" if params.get("prompts") else "random"
    takes = _SOURCE_OPTIONS[source]
    return {k: v for k, v in params.items() if k not in _ALL_SOURCE_OPTIONS or k in takes} | {"source": source}


#: ``tune``'s settings of one searched benchmark, as each task declared them when the tasks came to own them (tune's
#: task objects); before, every ``tune/search`` record carried all of them, and a language model was ``--task serve``
_TUNE_OPTIONS: dict[str, tuple[str, ...]] = {
    "infer": ("scenario", "backends", "checkpoint", "dataset"),
    "serve": ("engines", "tpot_ms", "prompts", "checkpoint"),
    "train": (),
}
_ALL_TUNE_OPTIONS = frozenset(k for names in _TUNE_OPTIONS.values() for k in names)
#: ``--task`` words renamed then (the model chooses the benchmark searched): old -> new
_TUNE_TASKS = {"serve": "infer"}


def own_tune_options(benchmark: str, params: dict[str, Any]) -> dict[str, Any]:
    """A ``tune/search`` record's parameters with only its searched benchmark's own settings, and ``--task serve``
    as ``infer`` (tune's task objects, accelbench 0.4, within version 3: keyed on the content)."""
    task = str(params.get("task", "infer"))
    language = task == "serve" or (task == "infer" and params.get("model") in DECODERS)
    takes = _TUNE_OPTIONS.get("serve" if language else task)
    if benchmark != "tune/search" or takes is None:
        return params
    others = [k for k in params if k in _ALL_TUNE_OPTIONS and k not in takes]
    if not others and task not in _TUNE_TASKS:
        return params
    return {k: v for k, v in params.items() if k not in others} | {"task": _TUNE_TASKS.get(task, task)}


def split_entry(benchmark: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A benchmark and its parameters as v3 names them: a decoder's ``infer/loadgen`` or ``train/throughput`` is
    its own benchmark, each keeps only its own parameters. Also what a stored run's suite entries go through (a
    resumed run made before the split)."""
    split = _SPLIT_V3.get(benchmark)
    if split is None:
        return benchmark, own_source_options(benchmark, own_engine_options(benchmark, params))
    new, decoder_only, others_only = split
    if params.get("model") in DECODERS:
        kept = own_engine_options(new, {k: v for k, v in params.items() if k not in others_only})
        return new, own_source_options(new, kept)
    kept = {k: v for k, v in params.items() if k not in decoder_only}
    if benchmark == "infer/loadgen":  # a backend's own settings: only those of the record's backend
        takes = _BACKEND_OPTIONS_V3.get(str(kept.get("backend", "torch")), ())
        kept = {k: v for k, v in kept.items() if k not in _ALL_BACKEND_OPTIONS_V3 or k in takes}
    return benchmark, own_source_options(benchmark, kept)


def split_from(benchmark: str) -> list[str]:
    """The names a stored record of ``benchmark`` may still carry in a store written before v3."""
    return [old for old, (new, _, _) in _SPLIT_V3.items() if new == benchmark]


#: how the words of an older record's warning began, per concern kind, as the versions before concerns wrote them
#: (first match wins); a warning that matches none is kind "other"
_PROSE_KINDS: tuple[tuple[str, str], ...] = (
    (r"INVALID\b", "invalid"),
    (r"contended\b", "contended"),
    (r"client-limited\b", "client-limited"),
    (r"recompiled\b", "recompiled"),
    (r"noisy\b", "noisy"),
    (r"few samples\b", "few-samples"),
    (r"min-reps not met\b", "min-reps"),
    (r"GPU throttled\b", "throttled"),
    (r"non-compliant\b", "non-compliant"),
    (r"rerun:", "rerun"),
    (r"over the latency bound\b", "over-bound"),
    (r"uninformative\b", "uninformative"),
    (r"no verdict\b", "no-verdict"),
    (r"stopped early\b", "stopped-early"),
    (r"cache-resident\b", "cache-resident"),
    (r"CUDA graph capture failed\b", "graph-failed"),
    (r"\d+ runs? did not reach the target\b", "not-converged"),
)


def concerns_from_warnings(warnings: Any) -> list[dict[str, Any]]:
    """An older record's warnings as concerns (serialised), each kind read from how its words begin."""
    out: list[dict[str, Any]] = []
    for w in warnings if isinstance(warnings, list) else []:
        if not isinstance(w, str) or not w:
            continue
        kind = next((k for pattern, k in _PROSE_KINDS if re.match(pattern, w)), "other")
        out.append({"kind": kind, "text": w, "data": {}})
    return out


def _with_concerns(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with concerns derived from its warnings where it has none (its conditions' too)."""
    conditions = record.get("conditions")
    bare = isinstance(conditions, dict) and "concerns" not in conditions and conditions.get("warnings")
    if ("concerns" in record or not record.get("warnings")) and not bare:
        return record  # nothing to derive: the record as it is (a reader adds an empty list)
    out = dict(record)
    if "concerns" not in out:
        out["concerns"] = concerns_from_warnings(out.get("warnings"))
    if bare and isinstance(conditions, dict):  # bare implies a dict; the isinstance tells the type checker
        out["conditions"] = {**conditions, "concerns": concerns_from_warnings(conditions.get("warnings"))}
    return out


def upgrade(record: dict[str, Any], current: int) -> dict[str, Any]:
    """``record`` in schema ``current`` (a new dict; the input is not changed)."""
    record = _with_concerns(_renamed_values(record))
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
    if version <= 2 and isinstance(out.get("params"), dict):
        out["benchmark"], out["params"] = split_entry(str(out.get("benchmark", "")), out["params"])
    out["schema_version"] = current
    return out


def _renamed_values(record: dict[str, Any]) -> dict[str, Any]:
    params = record.get("params")
    if not isinstance(params, dict):
        return record
    benchmark = str(record.get("benchmark"))
    own = own_tune_options(benchmark, own_source_options(benchmark, own_engine_options(benchmark, params)))
    if own is not params:
        record, params = {**record, "params": own}, own
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
