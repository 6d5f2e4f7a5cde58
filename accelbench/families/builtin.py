"""The shipped families, each described once: what render, the report, reference matching and the runner read.

Descriptions only: importing this module registers nothing (:data:`BUILTIN` is read by
:mod:`accelbench.families.known`). The order of :data:`BUILTIN` is the report's order of sections (a search's
best settings first, then kernels, training, time to accuracy, inference). A family's ``metrics`` table is where
a new metric of it gets its words in the results table: one line per metric (see
:class:`accelbench.families.base.Label` for the template's fields).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from accelbench.families import serving
from accelbench.families.base import Family, LabelSpec, Published
from accelbench.results.details import typed
from accelbench.results.record import Result

TUNE = Family(
    "tune",
    "best settings",
    report="accelbench.report.tuning:tuning",
)

KERNELS = Family(
    "kernels",
    "kernels",
    longer="--min-time",
    hint="accelbench kernels gemm (or any kernel set)",
    report="accelbench.report.perf:kernels",
    headline="accelbench.report.perf:kernel_headlines",
    grouped=True,
)

#: training's own figures beyond the common ones: a decoder's MFU (both conventions) and reserved memory
TRAIN_METRICS: dict[str, LabelSpec] = {
    "mfu": "MFU {value:sig3}%{est}",
    "mfu_causal": "MFU {value:sig3}% causal-halved",
    "peak_reserved_bytes": "{value:bytes} reserved",
}

TRAIN = Family(
    "train",
    "training throughput",
    longer="--num-batches",
    hint="accelbench train MODEL",
    metrics=TRAIN_METRICS,
    report="accelbench.report.perf:training",
    headline="accelbench.report.perf:training_headlines",
    published=Published(tasks=("train_throughput",), task="train_throughput"),
)

#: time to accuracy's own figures (the time itself is the primary figure; its cost is a common metric)
TTA_METRICS: dict[str, LabelSpec] = {
    "epochs_to_target": "{value:sig3} epochs",
    "samples_to_target": "{value:sig4} samples",
    "time_to_target_spread": "spread {value:.0%}",
}

TTA = Family(
    "tta",
    "time to accuracy",
    hint="accelbench tta WORKLOAD",
    metrics=TTA_METRICS,
    report="accelbench.report.tta:tta",
    headline="accelbench.report.tta:headlines",
    published=Published(tasks=("time_to_accuracy",), task="time_to_accuracy", data="real"),
)

#: what LoadGen reports of any served model, in a results table (the scenario's own figure is the primary one and
#: is shown as the result); a name ending in * is a prefix, exact names win over it
LOADGEN_METRICS: dict[str, LabelSpec] = {
    "query_latency_*": "{stem} per query {metric}",
    "latency_p50_seconds": "p50 {metric}",
    "latency_p99_seconds": "p99 {metric}",
    "latency_*": None,  # the full set is in the record; the table shows the median and the tail
}

#: image models' inference: LoadGen's figures and the served model's quality against FP32's
INFER_METRICS: dict[str, LabelSpec] = {
    "quality_ratio": "{value:.2%} of FP32",
    "fp32_agreement": "FP32's answer on {value:.2%} of samples",  # beside a fidelity figure
    "reference_*": "FP32 reference {value:sig4}",
    **LOADGEN_METRICS,
}

#: language-model serving: LoadGen's token figures (or accelbench's driver's), the prefix cache, the roofline
SERVE_METRICS: dict[str, LabelSpec] = {
    "requests_per_second": "{value:sig3} requests/s",
    "ttft_p99_ms": "TTFT p99 {value:sig3} ms",
    "tpot_p99_ms": "TPOT p99 {value:sig3} ms",
    "itl_p99_ms": "ITL p99 {value:sig3} ms",
    "itl_*": None,
    "ttft_*": None,
    "tpot_*": None,
    "tokens_per_second_per_user": "{value:sig3} tokens/s per user",
    "goodput_tokens_per_second": "goodput {value:sig3} tokens/s",
    "goodput_*": None,
    "tokens_per_second_per_device": None,  # one engine on one device: the same figure
    "peak_requests_per_second": "peak {value:sig3} requests/s within the limits",
    "prefix_reuse_sent": "prefix reuse {value:.1%} sent",
    "first_answer_p99_ms": "first answer p99 {value:sig3} ms",
    "first_answer_*": None,
    "reasoning_share": "{value:.0%} of tokens reasoning",
    "prefix_cache_hit_rate": "prefix cache hit {value:.1%} (server)",
    # a replayed source (a trace, conversations): what the driver offered and how late it sent
    "offered_requests_per_second": "offered {value:sig3} requests/s",
    "issue_late_max_ms": "sent at most {value:sig3} ms late",
    "issue_late_*": None,
    "ttft_growth_ms_per_turn": "TTFT {value:+.3g} ms a turn",
    "total_tokens_per_second": None,
    "completed_requests_per_second": None,
    "scheduled_requests_per_second": "scheduled {value:sig3} requests/s",
    "kv_cache_peak_occupancy": "KV cache {value:.0%} full at peak",
    "usd_per_million_input_tokens": "${value:sig3} per 1M input tokens",
    "joules_per_output_token": "{value:sig3} J per output token",
    "kv_cache_*": None,
    "decode_bandwidth_utilization": "decode {value:sig3}% of peak bandwidth",
    "decode_limit_tokens_per_second": "decode limit {value:sig3} tokens/s",
    "prefill_flops_utilization": "prefill FLOPs {value:sig3}% of peak over the run",
    # language models, accuracy mode: greedy tokens against FP32's, ROUGE against a reference (whose: its unit)
    "reference_*": "reference {value:sig4}",
    "decided_token_agreement": "{value:.2%} of decided tokens kept",
    "sequence_agreement": "FP32's exact answer on {value:.0%} of prompts",
    "position_agreement": None,
    **LOADGEN_METRICS,
}


def _serving_framework(r: Result, torch: str) -> str:
    """What served the run, set beside a published system's framework: an endpoint's server (its figures are the
    server's, whatever this side runs), a language model's engine, or an image model's backend."""
    engine = r.params.get("engine")
    if engine == "endpoint":
        url = str(r.params.get("url") or (typed(r).get("engine") or {}).get("url") or "")
        return f"the server at {urlsplit(url).netloc or url or 'an unrecorded URL'}"
    if engine == "vllm":  # the engine in process is vLLM's own
        return f"vLLM in process (PyTorch {torch})"
    if engine:
        return f"accelbench's {engine} engine (PyTorch {torch})"
    return f"accelbench's {r.params.get('backend', 'torch')} backend (PyTorch {torch})"


def _loadgen_caveats(r: Result, ref: Any) -> list[str]:
    """A quick LoadGen profile is not MLPerf's run; a served rate is a figure of its latency bound."""
    out = []
    if r.params.get("profile", "quick") != "official":
        out.append("accelbench's quick LoadGen profile (seconds), not MLPerf's 600 s official run")
    if ref.latency_bound_ms is not None and not typed(r).get("latency_bound_ms"):
        out.append(f"latency bound not recorded here (published: {ref.latency_bound_ms:g} ms)")
    return out


INFER = Family(
    "infer",
    "inference under LoadGen",
    longer="--duration",
    hint="accelbench infer MODEL --scenario offline",
    metrics=INFER_METRICS,
    report="accelbench.report.inference:inference",
    headline="accelbench.report.inference:headlines",
    unlike=serving.unlike,
    published=Published(
        tasks=("inference_offline", "inference_server", "inference_interactive"),
        task="inference_{scenario}",
        framework=_serving_framework,
        own_harness=True,
        caveats=_loadgen_caveats,
    ),
)

SERVE = Family(
    "serve",
    "language-model serving",
    longer="--duration",
    hint="accelbench infer llama3.1-8b",
    metrics=SERVE_METRICS,
    report="accelbench.report.inference:serving",
    headline="accelbench.report.inference:serving_headlines",
    unlike=serving.unlike,
    published=INFER.published,
    benchmarks=("infer/llm",),
)

SELFTEST = Family(
    "selftest",
    "harness checks",
    report=None,
    harness=True,
)

#: the shipped families, in the report's order: read as they are by :mod:`accelbench.families.known` (nothing
#: registers them), a family registered under one of their names standing in its place
BUILTIN: tuple[Family, ...] = (TUNE, KERNELS, TRAIN, TTA, INFER, SERVE, SELFTEST)
