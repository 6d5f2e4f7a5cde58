"""``infer MODEL`` for a decoder: an engine streams tokens to LoadGen in token mode; LoadGen's verdict is recorded.

The engine is started once and warmed up; a probe (batches of requests straight to the engine) gives the
plan LoadGen needs (Offline's expected requests/s, SingleStream's expected latency, a Server target of
``SERVER_FRACTION`` of the probed rate unless ``--target-qps`` is given); then a LoadGen test runs with
``use_token_latencies`` and the TTFT/TPOT limits set. A run that disagrees with its plan (Offline out of queries
before its minimum duration, Server overloaded by the probe's target) is rerun from what it measured, as the
other models' runs are (:mod:`accelbench.infer.replan`); the engine stays warm between runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason, torch_dtype
from accelbench.errors import BenchmarkFailed, BenchmarkSkipped
from accelbench.infer import replan
from accelbench.infer import settings as lgset
from accelbench.infer.driver import Outcome, start_test
from accelbench.infer.loadgen_params import QSL_SAMPLES
from accelbench.infer.sut import SampleLibrary
from accelbench.kit.context import Prepared, RunContext, prepare, skip_if
from accelbench.results.record import Result
from accelbench.serve import accuracy, quality, requests, sweep
from accelbench.serve.engines.base import Engine, EngineSettings, ModelSource, engine_class
from accelbench.serve.limits import (
    Limits,
    lengths,
    limits_for,
    mlperf_name,
    preset_of,
)
from accelbench.serve.probe import Relay, TokenProbe, probe
from accelbench.serve.results import (
    endpoint_accuracy_result,
    prefix_cache,
    reasoning_figures,
    replay_result,
    token_accuracy_result,
    token_result,
)
from accelbench.serve.roofline import Roof, roof_for
from accelbench.serve.sources.base import Work, source_class
from accelbench.serve.sources.prefix import Ledger
from accelbench.serve.specs import SOURCE_PARTS, LLMServeParams
from accelbench.serve.sut import TokenSUT
from accelbench.workloads.decoder import Decoder, config_of, figures, fp32_buffers

if TYPE_CHECKING:
    import torch

    from accelbench.devices.base import DeviceKind
    from accelbench.serve.replay import ClosedLoop
    from accelbench.workloads.decoder import Figures

#: Server (and interactive) without --target-qps: this fraction of the probed requests/s
SERVER_FRACTION = 0.5
#: the most requests/s a run is planned for: the SUT answers each request twice (first token, completion) from
#: Python (the null engine, which probes as infinitely fast, served Offline at 69,000 requests/s on 2 cores);
#: planning LoadGen's one Offline query for the probe's millions only makes a run of minutes
MAX_PLANNED_REQUESTS = 200_000.0
#: the quick profile's Server run lasts about this long at its planned rate, with at least this many requests
QUICK_SECONDS, QUICK_MIN_REQUESTS = 60.0, 16


def build_model(params: LLMServeParams, device: "torch.device", precision: str = "") -> tuple[Any, Any]:
    """The decoder at the served precision (or ``precision``), created on ``device`` in that element type.

    Accuracy mode holds the served weights to FP32's on the same weights, so there the weights are drawn in FP32
    (on the device) and rounded, as the reference's are drawn; elsewhere they are drawn in the served type."""
    import torch

    from accelbench.workloads import workload_class
    from accelbench.workloads.decoder import to_served

    dtype = torch_dtype(precision or params.effective_precision)
    drawn = torch.float32 if params.mode == "accuracy" else dtype
    if params.checkpoint:
        from accelbench.workloads.decoder import load_checkpoint

        model = load_checkpoint(Path(params.checkpoint).expanduser(), device, dtype).eval()
    else:
        decoder = workload_class(params.model)()
        assert isinstance(decoder, Decoder)  # a language model's preset
        model = decoder.build(params.scale, device, drawn).eval()
    to_served(model, device, dtype)  # the parameters rounded; RoPE's frequencies stay FP32, as transformers keeps them
    return model, model.config


#: device memory a run leaves unplanned beside what it counts (weights, KV cache, activations): the kernel modules
#: CUDA loads lazily as each library first runs (cuBLAS, cuDNN, the attention kernels), cuBLAS workspaces (32 MiB a
#: handle and stream on Hopper, torch's CublasHandlePool) and the caching allocator's rounding to its blocks. An
#: allowance, not a measurement; the free memory it is taken from is read after the device's context exists, so the
#: context itself is already out of it.
HEADROOM_BYTES = 2**30
#: vLLM's default share of a GPU's memory (``--gpu-memory-utilization 0.9``): what each device of a tensor-parallel
#: group offers the weights and the KV cache
VLLM_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class MemoryNeed:
    """What a token run holds on its device at once, phase by phase (bytes): serving (the weights at the served
    precision, a full batch's KV cache and the batch's prefill activations), and in accuracy mode FP32's reference
    before it (made and dropped before the served copy is built: :func:`_run`)."""

    weights: int
    cache: int
    prefill: int
    reference: int = 0  # the FP32 reference's phase: two FP32 copies (the reference and its rounded twin), its batch

    @property
    def serving(self) -> int:
        return self.weights + self.cache + self.prefill

    @property
    def peak(self) -> int:
        return max(self.serving, self.reference)


def forward_bytes(config: Any, tokens: int, element: int) -> int:
    """The widest live tensors of one decoder layer's forward over ``tokens`` tokens: the residual stream, its
    normed copy, the queries and the attention's output (4 x hidden), and the MLP's gate, up projection and their
    product (3 x intermediate). Inference keeps no layer's activations for the next, so one layer's is the peak."""
    width: int = 4 * config.hidden_size + 3 * config.intermediate_size
    return tokens * width * element


def memory_need(params: LLMServeParams, model: "Figures", config: Any) -> MemoryNeed:
    """The bytes :func:`too_big` counts. The static and transformers engines prefill a whole batch in one forward
    (the continuous engine less) and keep one position's logits (upcast to FP32 by ``generate``); the FP32
    reference (``accuracy.reference``) generates ``accuracy.greedy``'s batch of prompts with an FP32 KV cache, then
    scores one whole sequence at a time (every position's logits) beside a deep copy of itself rounded."""
    element = torch_dtype(params.effective_precision).itemsize
    prompt_len, out = lengths(params)
    context = prompt_len + out
    weights = model.params * element
    cache = params.batch_size * context * model.kv_bytes_per_token  # counted at the served element
    logits = params.batch_size * config.vocab_size * (element + 4)
    prefill = forward_bytes(config, params.batch_size * prompt_len, element) + logits
    reference = 0
    if params.mode == "accuracy":
        import inspect

        at_once = int(inspect.signature(accuracy.greedy).parameters["batch"].default)  # the prompts it generates
        fp32_cache = model.kv_bytes_per_token * 4 // model.element_bytes
        greedy = at_once * context * fp32_cache + forward_bytes(config, at_once * prompt_len, 4)
        scored = forward_bytes(config, context, 4) + context * config.vocab_size * 4
        reference = 2 * model.params * 4 + max(greedy, scored)
    return MemoryNeed(weights, cache, prefill, reference)


def free_memory(kind: "DeviceKind", device: "torch.device") -> int | None:
    """The device's free memory in bytes, where its kind can read it (CUDA's ``mem_get_info``), else None. Free,
    not total: another process, or this one's own allocations, hold part."""
    return kind.free_memory(device)


def tensor_parallel_size(devices: int, heads: int, kv_heads: int) -> int | None:
    """The smallest tensor-parallel size of at least ``devices`` that vLLM accepts for the model: one that divides
    its attention heads, and its KV heads, or is a multiple of them (vLLM then replicates each KV head); None where
    no size up to the heads does."""
    for size in range(max(devices, 1), heads + 1):
        if heads % size == 0 and (kv_heads % size == 0 if size < kv_heads else size % kv_heads == 0):
            return size
    return None


def too_big(params: LLMServeParams, model: "Figures", device: "torch.device", config: Any = None) -> str | None:
    """Why the preset cannot be served where it would be built, or None: the bytes it holds at its peak
    (:func:`memory_need`) and ``HEADROOM_BYTES`` against the device's free memory (its total where its kind cannot
    read the free; the host's available memory for a CPU). An 8B model in fp32 is 32 GB, and building it on a
    24 GiB machine would swap or be killed rather than say so; a 70B or 405B model needs several GPUs, and
    accelbench serves a language model on one device, so the line says how many and the route across them."""
    import psutil

    config = config if config is not None else config_of(preset_of(params.model), params.scale)
    need = memory_need(params, model, config)
    kind = kind_of(device)
    total = kind.total_memory(device) if kind.accelerator else None
    free = free_memory(kind, device) if kind.accelerator else psutil.virtual_memory().available
    have = free if free is not None else total
    headroom = HEADROOM_BYTES if kind.accelerator else 0
    if have is None or need.peak + headroom <= have:
        return None
    gib = 2**30
    where = kind.record_name(device)
    prompt_len, out = lengths(params)
    what = (
        f"{params.model} ({params.scale}) needs {(need.peak + headroom) / gib:.1f} GiB at its peak: "
        f"{need.weights / gib:.1f} GiB of weights ({params.effective_precision}), {need.cache / gib:.1f} GiB of KV "
        f"cache for {params.batch_size} requests of {prompt_len + out} tokens, {need.prefill / gib:.1f} GiB of "
        "prefill activations"
    )
    if need.reference:
        what += f"; before serving, {need.reference / gib:.1f} GiB for accuracy's FP32 reference and its rounded twin"
    if headroom:
        what += f"; and {headroom / gib:.1f} GiB of headroom (CUDA's lazily loaded kernels, workspaces, the allocator)"
    if not kind.accelerator:
        smaller = "" if params.effective_precision in ("bf16", "fp16") else " or --precision bf16"
        return f"{what}; {where} has {have / gib:.1f} GiB free; use --scale tiny, a smaller preset{smaller}"
    held = f"{where} has {free / gib:.1f} GiB free of {(total or free) / gib:.1f} GiB" if free is not None else (
        f"{where} holds {have / gib:.1f} GiB (its free memory unread)"
    )  # fmt: skip
    if total is not None and need.weights + headroom > total:
        devices = math.ceil((need.weights + need.cache) / (VLLM_MEMORY_SHARE * total))
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        size = tensor_parallel_size(devices, heads, kv_heads)
        route = (
            f"vLLM: --tensor-parallel-size {size}, which divides its {heads} attention heads and {kv_heads} KV heads"
            if size is not None
            else f"no tensor-parallel size divides its {heads} attention heads: add --pipeline-parallel-size"
        )
        return (
            f"{what}; {held}: it needs {size or devices} such devices, and accelbench serves a language model on "
            f"one; serve it across them ({route}) and measure it with --engine endpoint --url URL, or use "
            "--scale tiny or a smaller preset"
        )
    if total is not None and free is not None and need.peak + headroom <= total:
        busy = (total - free) / 2**30
        return f"{what}; {held} ({busy:.1f} GiB in use): free the device, or lower --batch-size or the token lengths"
    if need.reference > need.serving:
        return f"{what}; {held}: accuracy's FP32 reference is the peak; use --scale tiny or a smaller preset"
    return f"{what}; {held}: lower --batch-size or the token lengths"


def leave_a_core(prep: Prepared) -> Prepared:
    """The engine's compute threads when none were asked for on a CPU: every core but one, which LoadGen, the
    SUT's callbacks and the engine's own Python threads need. Measured on a 2-core host (tiny llama3.1-8b, fp32,
    Offline, 3 rounds each): with one thread against two, static 8,400-8,652 output tokens/s against 3,050-3,228,
    transformers 4,661-5,213 against 2,570-2,806."""
    import torch

    from accelbench.system.cpu import usable_cores

    threads = max(1, min(prep.threads, usable_cores() - 1))
    torch.set_num_threads(threads)
    return Prepared(prep.device, threads)


def quick_requests(rate: float, tail: int) -> int:
    """A quick Server run's requests: what ``QUICK_SECONDS`` at ``rate`` holds, between ``QUICK_MIN_REQUESTS``
    and ``tail`` (what LoadGen's early stopping needs to bound the p99 with no late request). Long answers from
    a slow server are a fraction of a request a second: 662 requests of 1024/1024 tokens were an hour."""
    return max(QUICK_MIN_REQUESTS, min(tail, math.ceil(rate * QUICK_SECONDS)))


def settings_for(params: LLMServeParams, limits: Limits, preset_benchmark: str, plan: lgset.Probe, total: int) -> Any:
    """LoadGen's settings in token mode, planned from the probe (``official``: mlperf.conf's rules)."""
    import mlperf_loadgen as lg

    s = lgset.base(params, params.mode, mlperf_name=mlperf_name(preset_benchmark, params.scenario))
    s.use_token_latencies = True
    s.server_target_latency_ns = 0  # as mlperf.conf sets for LLMs: only TTFT and TPOT are judged
    if limits.ttft_ms is not None and limits.tpot_ms is not None:
        s.ttft_latency = int(limits.ttft_ms * 1e6)
        s.tpot_latency = int(limits.tpot_ms * 1e6)
    rate = min(plan.rate, MAX_PLANNED_REQUESTS)
    s.offline_expected_qps = params.expected_qps or rate * lgset.OFFLINE_HEADROOM
    s.single_stream_expected_latency_ns = int(plan.single * 1e9)
    s.server_target_qps = params.target_qps or max(rate * SERVER_FRACTION, 0.1)
    if params.profile == "official":
        s.performance_sample_count_override = total  # the prompts this run holds, not the data set's size
    elif params.scenario == "offline":
        # whole batches: a last partial batch costs nearly a full one's time (see ``offline_samples``)
        floor = max(s.min_query_count, engine_class(params.engine).min_requests(params))
        s.min_query_count = lgset.offline_samples(
            s.offline_expected_qps, s.min_duration_ms, floor, params.batch_size, 1
        )
    elif params.scenario != "singlestream" and params.mode != "find-peak":  # a search sizes its own trials
        # Server, interactive: as many requests as the quick minute holds
        s.min_query_count = quick_requests(s.server_target_qps, s.min_query_count)
    s.scenario = getattr(lg.TestScenario, lgset.SCENARIO_NAMES[params.scenario])
    return s


def closed_plan(params: LLMServeParams, benchmark: str, rate: float) -> "ClosedLoop":
    """How long a closed loop runs: as a Server run of the profile would (LoadGen's settings for the preset's
    benchmark: its minimum duration and requests; the quick profile's requests as :func:`quick_requests` sizes them
    at the probe's rate), past each user's warm-up request."""
    from accelbench.serve.replay import ClosedLoop

    s = lgset.base(replace(params, scenario="server"), params.mode, mlperf_name=mlperf_name(benchmark, "server"))
    requests = int(s.min_query_count)
    if params.profile != "official":
        requests = quick_requests(min(rate, MAX_PLANNED_REQUESTS), requests)
    return ClosedLoop(int(params.concurrency), requests, s.min_duration_ms / 1000)


def run(params: LLMServeParams, ctx: RunContext) -> Iterator[Result]:
    engine = engine_class(params.engine)(params.engine_opts)
    skip_if(engine.unavailable())
    engine.configure(params)
    # what the engine resolved (the model a server says it serves), in the record's label as if it were given
    named = replace(params, engine_options=params.engine_options | engine.resolved())
    try:
        yield from _run(named, ctx, engine)
    except (BenchmarkFailed, BenchmarkSkipped) as exc:
        if exc.record is None and named != params:  # a failed run's label is an ok one's
            exc.record = named.to_dict()
        raise


def _run(params: LLMServeParams, ctx: RunContext, engine: Engine) -> Iterator[Result]:
    prep = prepare(params, autotune=False)
    if not params.threads and engine.runs_model and not engine.remote and not kind_of(prep.device).accelerator:
        prep = leave_a_core(prep)
    device = prep.device
    if engine.runs_model and params.effective_precision != "fp32":
        skip_if(precision_reason(device, params.effective_precision, params.emulated))
    preset = preset_of(params.model)
    limits = limits_for(params.model, preset.mlperf, preset.mlperf_own, params.scenario, params.ttft_ms, params.tpot_ms)
    prompt_len, out = lengths(params)
    element = torch_dtype(params.effective_precision).itemsize
    # what one token costs, counted once (a checkpoint's from its own config once built); no model, no figures
    shaped = config_of(preset, params.scale) if engine.runs_model and not params.checkpoint else None
    planned = figures(shaped, element) if shaped is not None else None
    if planned is not None:
        skip_if(too_big(params, planned, device, shaped))
    # accuracy at a rounding precision: FP32's reference (two FP32 copies at its peak) is made and dropped before
    # the served copy is built, so the three are never on the device at once (``memory_need`` counts so)
    judged = params.mode == "accuracy" and not engine.remote
    reference_first = judged and params.effective_precision != "fp32"
    model, config = _model_for(engine, params, preset, device, ctx, build=not reference_first)
    counted = planned or (figures(config, element) if config is not None else None)
    vocab = config.vocab_size if config is not None else (engine.vocab_size or 32000)
    total = accuracy.SAMPLES if params.mode == "accuracy" and not params.prompts else QSL_SAMPLES[params.profile]
    work = workload(params, vocab, total, prompt_len, out)
    reference = _reference(params, model, device, work, ctx) if judged else None
    if reference_first and model is None and engine.runs_model:
        model, config = _model_for(engine, params, preset, device, ctx)
    roof = None
    if engine.runs_model and not engine.remote and counted is not None and params.mode != "accuracy":
        roof = roof_for(device, params.effective_precision, prep.threads)
    served = Served(engine, model, device, prep.threads, work, limits, preset.mlperf, counted, reference, roof)
    if params.mode != "sweep":
        yield _serve(params, ctx, served)
        return
    import uuid

    from accelbench.serve import sweep

    results: list[Result] = []
    concurrencies, sweep_id = sweep.points(params), uuid.uuid4().hex[:12]
    for i, c in enumerate(concurrencies, 1):
        if sweep.by_rate(params):
            ctx.progress(f"sweep point {i} of {len(concurrencies)}: {c:g} requests/s")
            point = replace(params, target_qps=c, mode="performance")
        else:
            ctx.progress(f"sweep point {i} of {len(concurrencies)}: concurrency {c}")
            point = replace(params, concurrency=str(c), batch_size=c, mode="performance")  # a closed loop of c users
        result = _serve(point, ctx, served, record_mode="sweep")
        results.append(result)
        result.details["sweep"] = sweep.curve(results, len(concurrencies), sweep_id)
        yield result


@dataclass(frozen=True)
class Served:
    """What every run of one ``infer`` call shares: the engine (started per run), the built model, the prompts."""

    engine: Engine
    model: Any
    device: "torch.device"
    threads: int
    work: "Work"
    limits: Limits
    benchmark: str  # the preset's MLPerf benchmark
    counted: "Figures | None"
    reference: Any = None  # accuracy mode: FP32's tokens
    roof: "Roof | None" = None  # the device's bandwidth and FLOPS, where the model runs here


def _serve(params: LLMServeParams, ctx: RunContext, s: Served, record_mode: str = "") -> Result:
    """The engine started with ``params``' settings, probed, LoadGen's test (rerun where it disagreed with its
    plan), the engine stopped; the record (``record_mode``: the mode the record says, a sweep's)."""
    engine, device, work, limits = s.engine, s.device, s.work, s.limits
    prompts, outs = work.prompts, work.outs
    prompt_len, out = lengths(params)
    relay = Relay()
    ledger = Ledger(prompts)
    shape = ledger.shaper(work.salt)
    settings = replace(engine_settings(params, work.longest), shared_prefixes=work.shares_prefixes)
    engine.start(s.model, device, relay, settings)
    try:
        ctx.progress(f"probing the {engine.name} engine")
        if work.replayed:  # the replay's own prompts reach the server only when due: the probe warms it on others
            probed = probe(
                relay, engine, stand_ins(prompts[: params.batch_size], vocab_of(prompts)), outs, params.batch_size
            )
        else:
            probed = probe(relay, engine, prompts, outs, params.batch_size, shape)
        skip_if(unreachable_tpot(limits, probed))
        ledger.reset()  # the probe's prompts stay known, as the server's cache keeps them
        loop = closed_plan(params, s.benchmark, probed.requests_per_second) if sweep.users(params) else None
        if work.replayed or loop is not None:
            replayed = _replay(params, ctx, engine, relay, work, shape, s.threads, device, loop)
        else:
            runs = _measure(
                params, ctx, engine, relay, prompts, outs, limits, s.benchmark, probed, s.threads, device, shape
            )
    finally:
        engine.stop()
    summary = work.summary
    record = params.to_dict() | {
        "precision": params.effective_precision if not engine.remote or params.precision != "auto" else "unstated",
        "device": engine.facts.get("device") or kind_of(device).record_name(device),
        "threads": s.threads,
        "input_tokens": round(sum(map(len, prompts)) / len(prompts)) if summary else prompt_len,
        "output_tokens": round(sum(outs) / len(outs)) if summary else out,
    }
    if record_mode:
        record["mode"] = record_mode
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random (torch seed 0)"
    if engine.loads_weights:  # the engine made its own (vLLM: its dummy initialisation), and says so
        weights = engine.facts.get("weights", weights)
    found: dict[str, Any] | None = None
    if work.replayed or loop is not None:
        sent, conditions = replayed
        result = replay_result(
            params, record, sent, conditions, limits, dict(engine.facts), probed.to_dict(), s.counted
        )
        client = engine.measured(arrivals=True)  # the client's, or an in-process engine's own prefix-cache count
        requests.note(result, sent)
    else:
        outcome, reruns, client, found = runs
        result = _loadgen_result(params, ctx, s, record, outcome, reruns, probed)
        requests.note(result, outcome.sut)
    result.details["weights"] = weights if not engine.remote else "the server's"
    if engine.runs_model and not engine.loads_weights and params.effective_precision != "fp32":
        # the floating buffers served in FP32 beside the rounded weights: RoPE's frequencies, as transformers keeps
        result.details["fp32_buffers"] = fp32_buffers(s.model)
    if not params.threads and engine.runs_model and not engine.remote and not kind_of(device).accelerator:
        result.details["threads_method"] = "no --threads: every usable core but one, left to LoadGen and the SUT"
    if params.mode != "accuracy":  # the server's count of its cache leaves the client's figures
        prefix_cache(result, ledger, client, engine, work)
    if client:  # the engine's own side, measured: a client that limited the run sets the record aside
        result.details["client"] = client
        result.metrics |= reasoning_figures(client.get("reasoning"))
        if client.get("limited_by"):
            result.concern("client-limited", f"client-limited: {client['limited_by']}; the figures describe the client")
    if work.summary:
        result.details["prompts"] = work.summary
    if found is not None:
        peak_found(result, found)
    return result


def _loadgen_result(
    params: LLMServeParams,
    ctx: RunContext,
    s: "Served",
    record: dict[str, Any],
    outcome: Outcome,
    reruns: list[dict[str, Any]],
    probed: TokenProbe,
) -> Result:
    """The record of LoadGen's test: accuracy against the server's answers' references (an endpoint), against
    FP32's tokens (an engine here), or the performance figures."""
    engine, work = s.engine, s.work
    rouge: dict[str, Any] | None  # ROUGE of the answers, where the prompt file has references
    if params.mode == "accuracy" and engine.remote:  # the server's weights: ROUGE on the file's answers only
        served = accuracy.served_tokens(outcome.outdir / "mlperf_log_accuracy.json", len(work.prompts))
        gate = getattr(engine.options, "accuracy_target", "")  # the remote engine's own: a ROUGE target, or none
        target = quality.target(gate, params.model) if gate else None
        rouge = accuracy.served_rouge(work, served, target, ctx.progress)
        return endpoint_accuracy_result(params, record, outcome, dict(engine.facts), rouge)
    if s.reference is not None:
        served = accuracy.served_tokens(outcome.outdir / "mlperf_log_accuracy.json", len(work.prompts))
        verdict = accuracy.judge(served, s.reference, params.effective_precision)
        rouge = accuracy.rouge(work, served, s.reference, ctx.progress) if work.references else None
        return token_accuracy_result(params, record, outcome, verdict, dict(engine.facts), rouge)
    facts = dict(engine.facts)
    return token_result(params, record, outcome, probed.to_dict(), s.limits, facts, s.counted, reruns, s.roof)


#: a TPOT limit this many times under what one request alone took is out of reach at any rate
TPOT_OUT_OF_REACH = 2.0


def unreachable_tpot(limits: Limits, probed: "TokenProbe") -> str | None:
    """Why no run can meet the TPOT limit, or None: one request alone, with the engine to itself, took far longer
    a token (a Server test at any rate would take minutes to say INVALID)."""
    alone = probed.single_tpot_seconds
    if limits.tpot_ms is None or alone is None or alone * 1e3 <= TPOT_OUT_OF_REACH * limits.tpot_ms:
        return None
    return (
        f"the TPOT limit ({limits.tpot_ms:g} ms, {limits.source}) is out of reach: one request alone took "
        f"{alone * 1e3:.3g} ms a token in the probe; raise --tpot-ms"
    )


def peak_found(result: Result, found: dict[str, Any]) -> None:
    """A find-peak record: the confirmed rate as a figure beside the run's own, or no peak (INVALID) with why."""
    from accelbench.kit import metrics as fig

    result.details["find_peak"] = found
    rate = found["peak_requests_per_second"]
    if rate is not None:
        result.metrics["peak_requests_per_second"] = fig.figure(
            rate, "requests/s within the limits", higher_is_better=True
        )
        return
    tried = [t for t in found["trials"] if t["confirmation"]]
    rates = ", ".join(f"{t['requests_per_second']:,.2f}" for t in tried)
    why = f"no peak: {len(tried)} confirmation runs at {rates} requests/s were all INVALID"
    result.valid = False
    result.details["invalid_reasons"] = [why, *(result.details.get("invalid_reasons") or [])]
    result.concern("invalid", f"INVALID: {why}", first=True)


def vocab_of(prompts: list[list[int]]) -> int:
    return max(2, 1 + max((max(p) for p in prompts if p), default=1))


def stand_ins(prompts: list[list[int]], vocab: int) -> list[list[int]]:
    """Prompts of the same lengths, drawn apart from the run's (a probe that sent a trace's own prompts would
    have the server cache them before they are due)."""
    import numpy as np

    rng = np.random.default_rng(12345)
    return [rng.integers(1, vocab, size=len(p)).tolist() for p in prompts]


#: seconds between a replay's progress lines
PROGRESS_EVERY = 2.0


def _replay(
    params: LLMServeParams,
    ctx: RunContext,
    engine: Engine,
    relay: Relay,
    work: Work,
    shape: Callable[[int, list[int]], list[int]],
    threads: int,
    device: "torch.device",
    loop: "ClosedLoop | None" = None,
) -> tuple[Any, dict[str, Any]]:
    """The source's sessions sent by accelbench's driver (``loop``: a closed loop of the source's prompts), under
    the conditions monitor; the requests and the conditions."""
    from accelbench.measure.conditions import ConditionsMonitor, cuda_indices
    from accelbench.measure.heap import frozen_heap
    from accelbench.serve.replay import Driver

    think = float((work.summary or {}).get("think_ms", 0.0)) / 1e3 if loop is None else params.user_think_ms / 1e3
    driver = Driver(engine, work, params.batch_size, think, shape, closed=loop)
    relay.target = driver
    total = len(work.arrivals) if work.arrivals is not None else sum(
        len(c.turns) for c in (work.conversations.conversations if work.conversations else [])
    )  # fmt: skip
    left = work.arrivals[-1] if work.arrivals else None
    if loop is not None:  # at least its requests past the warm-up, for at least its seconds
        total, left = loop.requests + loop.warmup, loop.seconds
        ctx.progress(
            f"closed loop: {loop.users} users, at least {total} requests ({loop.warmup} of them warm-up) and "
            f"{loop.seconds:g} s",
            left=left,
        )
    else:
        ctx.progress(f"replaying {total} requests ({work.summary and work.summary.get('source')})", left=left)
    began, said = time.monotonic(), [time.monotonic()]

    def sent(n: int) -> None:  # on the driver's thread at each send: a line every PROGRESS_EVERY seconds at most
        now = time.monotonic()
        if now - said[0] < PROGRESS_EVERY:
            return
        said[0], elapsed = now, now - began
        # a trace's end is known; conversations' is what the requests sent so far took, scaled to the rest
        rest = work.arrivals[-1] - elapsed if work.arrivals else elapsed * (total - n) / max(n, 1)
        if loop is not None:  # a closed loop ends at its requests and its seconds, whichever comes later
            rest = max(rest, loop.seconds - elapsed)
        what = "closed loop" if loop is not None else "replay"
        ctx.progress(f"{what}: {n} of {'at least ' if loop else ''}{total} requests sent", left=max(rest, 0.0))

    driver.progress = sent
    engine.measured(arrivals=False)
    with (
        frozen_heap(),
        ConditionsMonitor(threads, gpus=cuda_indices([device]), sut_pids=engine.local_processes()) as monitor,
    ):
        replayed = requests.drive(driver, ctx.log_dir)  # driver.run(), its requests kept in the logs
    return replayed, monitor.conditions.to_dict()


def workload(params: LLMServeParams, vocab: int, total: int, prompt_len: int, out: int) -> Work:
    """The requests the run's prompt source makes (random prompts unless another source is chosen)."""
    source = source_class(params.source or SOURCE_PARTS.fallback)
    return source(params.source_opts).work(params, vocab, total, (prompt_len, out))


def _measure(
    params: LLMServeParams,
    ctx: RunContext,
    engine: Engine,
    relay: Relay,
    prompts: list[list[int]],
    outs: list[int],
    limits: Limits,
    benchmark: str,
    probed: TokenProbe,
    threads: int,
    device: "torch.device",
    shape: Callable[[int, list[int]], list[int]] | None = None,
) -> tuple[Outcome, list[dict[str, Any]], dict[str, Any], dict[str, Any] | None]:
    """LoadGen's test, repeated (at most ``replan.MAX_RERUNS`` times) while a performance run disagrees with its
    plan; the last run is the one reported, the earlier ones are listed with why. In find-peak, the search's
    trials instead (:mod:`accelbench.serve.peak`), and the search for the record."""
    total = len(prompts)
    qsl = SampleLibrary(lambda i: prompts[i], total)
    scenario = "server" if params.scenario == "interactive" else params.scenario
    plan = lgset.Probe(probed.requests_per_second, probed.single_seconds)
    clients: list[dict[str, Any]] = []

    def once(settings: Any, what: str) -> Outcome:
        sut = TokenSUT(engine, qsl, outs.__getitem__, shape, log_dir=ctx.log_dir)  # its requests kept in the logs
        relay.target = sut
        ctx.progress(what, left=lgset.planned_seconds(settings, scenario, plan.rate))
        engine.measured(arrivals=False)  # what came before (the probe, a trial) is not this run's
        test = start_test(sut, qsl, settings, params, ctx, threads, [device], engine.local_processes())
        clients.append(engine.measured(arrivals=params.scenario != "offline"))
        return Outcome(*test, sut)

    if params.mode == "find-peak":
        from accelbench.serve import peak

        def run_at(rate: float, size: tuple[int, int] | None) -> Outcome:
            settings = settings_for(replace(params, target_qps=rate), limits, benchmark, plan, total)
            if size is not None:
                settings.min_duration_ms, settings.min_query_count = size
            return once(settings, f"LoadGen {params.scenario} at {rate:,.2f} requests/s")

        start = params.target_qps or plan.rate * SERVER_FRACTION
        _, outcome, found = peak.search(run_at, plan.rate, start, limits, ctx.progress)
        return outcome, [], clients[-1], found
    reruns: list[dict[str, Any]] = []
    while True:
        settings = settings_for(params, limits, benchmark, plan, total)
        again = f" again ({len(reruns)} of at most {replan.MAX_RERUNS} reruns)" if reruns else ""
        outcome = once(settings, f"LoadGen {params.scenario}{again}, token latencies ({params.profile})")
        detail, outdir = outcome.detail, outcome.outdir
        wrong = None
        if params.mode == "performance":
            wrong = replan.disagreement(detail, params, plan, outcome.sut.samples)
            wrong = wrong or replan.below_probe(detail, params, plan)
        if wrong is None or len(reruns) == replan.MAX_RERUNS:
            if wrong is not None and replan.below_probe(detail, params, plan) is not None:
                outcome.disturbed = wrong.why  # its record is INVALID with this cause
            return outcome, reruns, clients[-1], None
        ctx.progress(f"the run disagreed with its plan: {wrong.why}; probing again")
        repeated = probe(relay, engine, prompts, outs, params.batch_size, shape)
        measured = lgset.Probe(repeated.requests_per_second, repeated.single_seconds)
        reruns.append(replan.rerun(wrong, plan, measured, outdir, outcome.conditions))
        plan = replan.replanned(plan, wrong.measured, measured, params.scenario, bool(reruns[-1]["contended"]))


def _reference(params: LLMServeParams, served: Any, device: "torch.device", work: Work, ctx: RunContext) -> Any:
    """FP32's greedy tokens on the served weights (the served model itself when it is FP32), built and dropped
    before the engine starts."""
    import gc

    reuse = params.effective_precision == "fp32" and served is not None and not isinstance(served, ModelSource)
    model = served if reuse else build_model(params, device, "fp32")[0]
    try:
        eos = model.config.eos_token_id if params.allow_eos else None
        return accuracy.reference(model, work.prompts, work.outs, params.effective_precision, device, ctx.progress, eos)
    finally:
        del model
        if not reuse:  # its memory back to the device before the served copy is built, or a server starts
            gc.collect()
            kind_of(device).release_memory(device)


def _model_for(
    engine: Engine, params: LLMServeParams, preset: Any, device: "torch.device", ctx: RunContext, build: bool = True
) -> Any:
    """The built model and its config; for an engine that loads its own weights, where to load them from;
    ``build=False``: the config alone (None for the model) where the model would be built here."""
    if not engine.runs_model:
        return None, None
    if engine.loads_weights or not build:
        if params.checkpoint:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(Path(params.checkpoint).expanduser(), local_files_only=True)
        else:
            config = config_of(preset, params.scale)
        if not engine.loads_weights:
            return None, config
        return ModelSource(config, params.checkpoint or None, params.effective_precision), config
    what = f"checkpoint {params.checkpoint}" if params.checkpoint else f"{params.model} ({params.scale})"
    ctx.progress(f"building {what} on {kind_of(device).record_name(device)}")
    return build_model(params, device)


def engine_settings(params: LLMServeParams, longest: int) -> EngineSettings:
    return EngineSettings(
        max_batch=params.batch_size,
        max_wait=params.max_wait_ms / 1000 if params.scenario in ("server", "interactive") else 0.0,
        longest=longest,
        ignore_eos=not params.allow_eos,
        open_loop=params.scenario in ("server", "interactive"),
    )
