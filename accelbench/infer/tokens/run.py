"""``infer MODEL`` for a decoder: an engine streams tokens to LoadGen in token mode; LoadGen's verdict is recorded.

The engine is started once and warmed up; a probe (one batch of requests straight to the engine) gives the
plan LoadGen needs (Offline's expected requests/s, SingleStream's expected latency, a Server target of
``SERVER_FRACTION`` of the probed rate unless ``--target-qps`` is given); then one LoadGen test runs with
``use_token_latencies`` and the TTFT/TPOT limits set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason, torch_dtype
from accelbench.errors import BenchmarkFailed
from accelbench.infer import settings as lgset
from accelbench.infer.driver import QSL_SAMPLES, start_test
from accelbench.infer.specs import InferParams
from accelbench.infer.sut import SampleLibrary
from accelbench.infer.tokens import accuracy
from accelbench.infer.tokens.engines import (
    Engine,
    EngineSettings,
    ModelSource,
    Sink,
    Timeline,
    TokenRequest,
    engine_class,
)
from accelbench.infer.tokens.limits import DEFAULT_LENGTHS, Limits, draw_prompts, limits_for, mlperf_name
from accelbench.infer.tokens.results import token_accuracy_result, token_result
from accelbench.infer.tokens.sut import TokenSUT
from accelbench.kit.context import RunContext, prepare, skip_if
from accelbench.results.record import Result
from accelbench.workloads.decoder import config_of, figures

if TYPE_CHECKING:
    import torch

    from accelbench.workloads.decoder import Figures

#: Server (and interactive) without --target-qps: this fraction of the probed requests/s
SERVER_FRACTION = 0.5
#: seconds the probe waits for its batch before calling the engine stuck
PROBE_TIMEOUT = 600.0
#: warm-up batches at most: an engine warms over several batches (transformers' continuous batching took
#: 1.7 s for its first batches of 8 on a 2-core CPU, 0.1 s later), so the probe times a batch only once
#: two consecutive ones agree within ``PROBE_AGREE``
PROBE_WARMUPS, PROBE_AGREE = 6, 1.3


class Relay:
    """The engine's one sink, pointed at the probe first and at the LoadGen SUT for the run."""

    def __init__(self) -> None:
        self.target: Sink | None = None

    def first(self, request: TokenRequest, token: int) -> None:
        self.target.first(request, token)  # type: ignore[union-attr]

    def step(self, request: TokenRequest, count: int) -> None:
        self.target.step(request, count)  # type: ignore[union-attr]

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        self.target.done(request, tokens)  # type: ignore[union-attr]

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        self.target.failed(request, error)  # type: ignore[union-attr]


@dataclass(frozen=True)
class TokenProbe:
    requests_per_second: float
    tokens_per_second: float
    single_seconds: float  # one request alone, start to last token

    def to_dict(self) -> dict[str, float]:
        return {
            "requests_per_second": self.requests_per_second,
            "tokens_per_second": self.tokens_per_second,
            "single_request_seconds": self.single_seconds,
        }


def lengths(params: InferParams) -> tuple[int, int]:
    """Prompt and output tokens: the flags, or the scale's defaults."""
    default_in, default_out = DEFAULT_LENGTHS["tiny" if params.scale == "tiny" else "full"]
    return params.input_tokens or default_in, params.output_tokens or default_out


def build_model(params: InferParams, device: "torch.device", precision: str = "") -> tuple[Any, Any]:
    """The decoder at the served precision (or ``precision``) on ``device``, and its config."""
    from accelbench.workloads import workload_class

    if params.checkpoint:
        from pathlib import Path

        from accelbench.workloads.decoder import load_checkpoint

        model = load_checkpoint(Path(params.checkpoint).expanduser()).eval()
    else:
        model = workload_class(params.model)().build(params.scale).eval()
    dtype = torch_dtype(precision or params.effective_precision)
    return model.to(device=device, dtype=dtype), model.config


def _timed(engine_sink: Relay, engine: Engine, requests: list[TokenRequest]) -> tuple[float, Timeline]:
    timeline = Timeline(expected=len(requests))
    engine_sink.target = timeline
    start = time.perf_counter()
    engine.submit(requests)
    if not timeline.finished.wait(PROBE_TIMEOUT):
        raise BenchmarkFailed(
            f"the {engine.name} engine answered {len(timeline.dones)} of {len(requests)} requests "
            f"in {PROBE_TIMEOUT:g} s"
        )
    if timeline.error is not None:
        raise timeline.error
    return time.perf_counter() - start, timeline


def probe(relay: Relay, engine: Engine, prompts: list[list[int]], out: int, batch: int) -> TokenProbe:
    """Warm-up batches until two agree (at most ``PROBE_WARMUPS``), then the last one's rate and one timed single
    request, straight to the engine."""
    make = lambda ids: [TokenRequest(-1 - i, i % len(prompts), prompts[i % len(prompts)], out) for i in ids]  # noqa: E731
    seconds, timeline = _timed(relay, engine, make(range(batch)))
    for _ in range(PROBE_WARMUPS):
        previous = seconds
        seconds, timeline = _timed(relay, engine, make(range(batch)))
        if max(seconds, previous) <= PROBE_AGREE * min(seconds, previous):
            break
    tokens = sum(n for _, n in timeline.dones.values())
    single, _ = _timed(relay, engine, make(range(1)))
    return TokenProbe(batch / max(seconds, 1e-9), tokens / max(seconds, 1e-9), single)


def too_big(params: InferParams, model: "Figures", device: "torch.device") -> str | None:
    """Why the preset's weights cannot fit where they would be built (the device's memory, or the host's free
    memory for a CPU), or None: an 8B model in fp32 is 32 GB, and building it on a 24 GiB machine would swap
    or be killed rather than say so."""
    import psutil

    need = model.params * torch_dtype(params.effective_precision).itemsize
    if params.mode == "accuracy":  # the FP32 reference and its rounded twin beside the served weights
        need += 2 * model.params * 4
    kind = kind_of(device)
    have = kind.total_memory(device) if kind.accelerator else psutil.virtual_memory().available
    if have is None or need <= have:
        return None
    return (
        f"{params.model} ({params.scale}) needs {need / 2**30:.1f} GiB of weights "
        f"({params.effective_precision}{', and two FP32 copies for accuracy' if params.mode == 'accuracy' else ''}); "
        f"{kind.record_name(device)} has {have / 2**30:.1f} GiB {'free' if not kind.accelerator else ''}; "
        "use --scale tiny, a smaller preset or --precision bf16"
    ).replace("  ", " ")


def settings_for(params: InferParams, limits: Limits, preset_benchmark: str, probe_: TokenProbe, total: int) -> Any:
    """LoadGen's settings in token mode, planned from the probe (``official``: mlperf.conf's rules)."""
    import mlperf_loadgen as lg

    s = lgset.base(params, params.mode, mlperf_name=mlperf_name(preset_benchmark, params.scenario))
    s.use_token_latencies = True
    s.server_target_latency_ns = 0  # as mlperf.conf sets for LLMs: only TTFT and TPOT are judged
    if limits.ttft_ms is not None and limits.tpot_ms is not None:
        s.ttft_latency = int(limits.ttft_ms * 1e6)
        s.tpot_latency = int(limits.tpot_ms * 1e6)
    rate = probe_.requests_per_second
    s.offline_expected_qps = params.expected_qps or rate * lgset.OFFLINE_HEADROOM
    s.single_stream_expected_latency_ns = int(probe_.single_seconds * 1e9)
    s.server_target_qps = params.target_qps or max(rate * SERVER_FRACTION, 0.1)
    if params.profile == "official":
        s.performance_sample_count_override = total  # the prompts this run holds, not the data set's size
    elif params.scenario == "offline":
        s.min_query_count = lgset.loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, 1) + 1
    s.scenario = getattr(lg.TestScenario, lgset.SCENARIO_NAMES[params.scenario])
    return s


def run(params: InferParams, ctx: RunContext) -> Iterator[Result]:
    from accelbench.workloads import workload_class

    engine = engine_class(params.engine)()
    skip_if(engine.unavailable())
    prep = prepare(params, autotune=False)
    device = prep.device
    if engine.runs_model and params.effective_precision != "fp32":
        skip_if(precision_reason(device, params.effective_precision, params.emulated))
    preset = workload_class(params.model).preset
    limits = limits_for(params.model, preset.mlperf, preset.mlperf_own, params.scenario, params.ttft_ms, params.tpot_ms)
    prompt_len, out = lengths(params)
    element = torch_dtype(params.effective_precision).itemsize
    # what one token costs, counted once (a checkpoint's from its own config once built); no model, no figures
    planned = figures(config_of(preset, params.scale), element) if engine.runs_model and not params.checkpoint else None
    if planned is not None:
        skip_if(too_big(params, planned, device))
    model, config = _model_for(engine, params, preset, device, ctx)
    counted = planned or (figures(config, element) if config is not None else None)
    vocab = config.vocab_size if config is not None else 32000
    total = accuracy.SAMPLES if params.mode == "accuracy" else QSL_SAMPLES[params.profile]
    prompts = draw_prompts(total, prompt_len, params.input_jitter, vocab)
    reference = _reference(params, model, device, prompts, out, ctx) if params.mode == "accuracy" else None
    relay = Relay()
    longest = prompt_len + out
    engine.start(model, device, relay, engine_settings(params, longest))
    sut: TokenSUT | None = None
    try:
        ctx.progress(f"probing the {engine.name} engine")
        probed = probe(relay, engine, prompts, out, params.batch_size)
        settings = settings_for(params, limits, preset.mlperf, probed, total)
        qsl = SampleLibrary(lambda i: prompts[i], total)
        sut = TokenSUT(engine, qsl, lambda i: out)
        relay.target = sut
        left = lgset.planned_seconds(
            settings, "server" if params.scenario == "interactive" else params.scenario, probed.requests_per_second
        )
        ctx.progress(f"LoadGen {params.scenario}, token latencies ({params.profile})", left=left)
        detail, conditions, outdir = start_test(sut, qsl, settings, params, ctx, prep.threads, [device])
    except BaseException:
        if sut is None or not sut.stopped:  # LoadGen's test stops the engine through the SUT, once
            engine.stop()
        raise
    record = params.to_dict() | {
        "precision": params.effective_precision,
        "device": kind_of(device).record_name(device),
        "threads": prep.threads,
        "input_tokens": prompt_len,
        "output_tokens": out,
    }
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random (torch seed 0)"
    if reference is not None:
        served = accuracy.served_tokens(outdir / "mlperf_log_accuracy.json", total)
        verdict = accuracy.judge(served, reference, params.effective_precision)
        result = token_accuracy_result(params, record, detail, conditions, outdir, verdict, engine.facts)
    else:
        result = token_result(
            params, record, detail, conditions, outdir, sut, probed.to_dict(), limits, engine.facts, counted
        )
    result.details["weights"] = weights
    yield result


def _reference(
    params: InferParams, served: Any, device: "torch.device", prompts: list[list[int]], out: int, ctx: RunContext
) -> "accuracy.Reference":
    """FP32's greedy tokens on the served weights (the served model itself when it is FP32), built and dropped
    before the engine starts."""
    model = served if params.effective_precision == "fp32" else build_model(params, device, "fp32")[0]
    try:
        return accuracy.reference(model, prompts, out, params.effective_precision, device, ctx.progress)
    finally:
        del model


def _model_for(engine: Engine, params: InferParams, preset: Any, device: "torch.device", ctx: RunContext) -> Any:
    """The built model and its config; for an engine that loads its own weights, where to load them from."""
    if not engine.runs_model:
        return None, None
    if engine.loads_weights:
        if params.checkpoint:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(params.checkpoint, local_files_only=True)
        else:
            config = config_of(preset, params.scale)
        return ModelSource(config, params.checkpoint or None, params.effective_precision), config
    ctx.progress(f"building {params.model} ({params.scale}) on {kind_of(device).record_name(device)}")
    return build_model(params, device)


def engine_settings(params: InferParams, longest: int) -> EngineSettings:
    return EngineSettings(
        max_batch=params.batch_size,
        max_wait=params.max_wait_ms / 1000 if params.scenario in ("server", "interactive") else 0.0,
        page_size=params.page_size,
        kv_blocks=params.kv_blocks,
        max_batch_tokens=params.max_batch_tokens,
        longest=longest,
    )
