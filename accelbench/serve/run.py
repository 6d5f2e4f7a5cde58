"""``infer MODEL`` for a decoder: :func:`run` asks the engine where its model runs, prepares what every run shares
(limits, the model, the prompts, FP32's reference in accuracy mode; a preset too big is refused first), then
serves one run, or one a sweep point: the engine started, warmed up and probed, and handed to the driver its work
needs (LoadGen in token mode, :mod:`accelbench.serve.loadgen`, or accelbench's own, :mod:`accelbench.serve.drive`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason, torch_dtype
from accelbench.errors import BenchmarkFailed, BenchmarkSkipped
from accelbench.kit.context import Prepared, RunContext, prepare, skip_if
from accelbench.loadgen.params import QSL_SAMPLES
from accelbench.results.details import typed
from accelbench.results.record import Result
from accelbench.serve import accuracy, drive, loadgen, sweep
from accelbench.serve.clocks import judge_client
from accelbench.serve.details import UnmeasuredRequests, serving_details
from accelbench.serve.engines.base import Engine, EngineSettings, ModelSource, engine_class
from accelbench.serve.labels import flag_server_lengths
from accelbench.serve.limits import Limits, lengths, limits_for, preset_of
from accelbench.serve.memory import too_big
from accelbench.serve.probe import TokenProbe, probe
from accelbench.serve.results import prefix_cache, reasoning_figures
from accelbench.serve.roofline import roof_for
from accelbench.serve.sources.base import Work, source_class
from accelbench.serve.specs import SOURCE_PARTS, LLMServeParams
from accelbench.serve.stage import Measured, Served, Stage, Where
from accelbench.workloads.decoder import Decoder, config_of, figures, fp32_buffers

if TYPE_CHECKING:
    import torch


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
    served = _prepare(params, ctx, engine)
    if params.mode != "sweep":
        yield _serve(params, ctx, served)
        return
    yield from _sweep(params, ctx, served)


def _prepare(params: LLMServeParams, ctx: RunContext, engine: Engine) -> Served:
    """What every run of this call shares, made once: the device and its threads, the limits, the model built (or
    where an engine that loads its own finds it), the prompts, and FP32's reference in accuracy mode."""
    where = Where.of(engine)
    prep = prepare(params, autotune=False)
    if _leaves_a_core(params, where, prep.device):
        prep = leave_a_core(prep)
    device = prep.device
    if where.model and params.effective_precision != "fp32":
        skip_if(precision_reason(device, params.effective_precision, params.emulated))
    preset = preset_of(params.model)
    limits = limits_for(params.model, preset.mlperf, preset.mlperf_own, params.scenario, params.ttft_ms, params.tpot_ms)
    prompt_len, out = lengths(params)
    element = torch_dtype(params.effective_precision).itemsize
    # what one token costs, counted once (a checkpoint's from its own config once built); no model, no figures
    shaped = config_of(preset, params.scale) if where.model and not params.checkpoint else None
    planned = figures(shaped, element) if shaped is not None else None
    if planned is not None:
        skip_if(too_big(params, planned, device, shaped))
    # accuracy at a rounding precision: FP32's reference (two FP32 copies at its peak) is made and dropped before
    # the served copy is built, so the three are never on the device at once (``memory_need`` counts so)
    judged = params.mode == "accuracy" and not where.server
    reference_first = judged and params.effective_precision != "fp32"
    model, config = _model_for(where, params, preset, device, ctx, build=not reference_first)
    counted = planned or (figures(config, element) if config is not None else None)
    vocab = config.vocab_size if config is not None else (engine.vocab_size or 32000)
    total = accuracy.SAMPLES if params.mode == "accuracy" and not params.prompts else QSL_SAMPLES[params.profile]
    work = workload(params, vocab, total, prompt_len, out)
    reference = _reference(params, model, device, work, ctx) if judged else None
    if reference_first and model is None and where.model:
        model, config = _model_for(where, params, preset, device, ctx)
    roof = None
    if where.local and counted is not None and params.mode != "accuracy":
        roof = roof_for(device, params.effective_precision, prep.threads)
    return Served(engine, model, device, prep.threads, work, limits, preset.mlperf, counted, reference, roof)


def _sweep(params: LLMServeParams, ctx: RunContext, served: Served) -> Iterator[Result]:
    """A run at each of the sweep's rates or user counts, each record carrying the curve so far."""
    import uuid

    results: list[Result] = []
    concurrencies, sweep_id = sweep.points(params), uuid.uuid4().hex[:12]
    for i, c in enumerate(concurrencies, 1):
        if sweep.by_rate(params):
            ctx.progress(f"sweep point {i} of {len(concurrencies)}: {c:g} requests/s")
            point = replace(params, target_qps=c, mode="performance")
        else:
            ctx.progress(f"sweep point {i} of {len(concurrencies)}: concurrency {c}")
            point = replace(params, concurrency=str(c), batch_size=c, mode="performance")  # a closed loop of c users
        result = _serve(point, ctx, served, record_mode="sweep", first=i == 1)
        results.append(result)
        typed(result)["sweep"] = sweep.curve(results, len(concurrencies), sweep_id)
        yield result


def _serve(params: LLMServeParams, ctx: RunContext, s: Served, record_mode: str = "", first: bool = True) -> Result:
    """The engine started with ``params``' settings, probed, measured by the driver its work needs, the engine
    stopped; the record (``record_mode``: the mode the record says, a sweep's; ``first``: the call's first run,
    whose record counts the engine's preflight)."""
    engine, work = s.engine, s.work
    stage = Stage.wired(s)
    settings = replace(engine_settings(params, work.longest), shared_prefixes=work.shares_prefixes)
    engine.start(s.model, s.device, stage.relay, settings)
    try:
        ctx.progress(f"probing the {engine.name} engine")
        probed = _probe(params, stage)
        probe_requests = stage.relay.settled  # the probe waits for every answer: all of its requests
        skip_if(unreachable_tpot(s.limits, probed))
        stage.ledger.reset()  # the probe's prompts stay known, as the server's cache keeps them
        measured = _measure(params, ctx, stage, probed)
    finally:
        engine.stop()
    record = _record(params, s, record_mode)
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random (torch seed 0)"
    if s.where.own_weights:  # the engine made its own (vLLM: its dummy initialisation), and says so
        weights = engine.facts.get("weights", weights)
    result, client = measured.result(params, ctx, record, probed)
    _details(params, stage, result, client, weights)
    _unmeasured(result, stage, probe_requests, engine.preflight_requests() if first else 0)
    if measured.found is not None:
        loadgen.peak_found(result, measured.found)
    return result


def _probe(params: LLMServeParams, stage: Stage) -> TokenProbe:
    """The engine warmed up and timed on batches of the run's prompts, sent as the run sends them; a replay's own
    prompts reach the server only when due, so there the probe warms it on others of the same lengths."""
    s = stage.served
    prompts, outs = s.work.prompts, s.work.outs
    if s.work.replayed:
        stand = stand_ins(prompts[: params.batch_size], vocab_of(prompts))
        return probe(stage.relay, s.engine, stand, outs, params.batch_size)
    return probe(stage.relay, s.engine, prompts, outs, params.batch_size, stage.shape)


def _measure(params: LLMServeParams, ctx: RunContext, stage: Stage, probed: TokenProbe) -> Measured:
    """The driver the run's work needs: accelbench's own for a replayed source or a closed loop of users (sized
    from the probe's rate), else LoadGen."""
    s = stage.served
    loop = drive.closed_plan(params, s.benchmark, probed.requests_per_second) if sweep.users(params) else None
    if s.work.replayed or loop is not None:
        return drive.replay(params, ctx, stage, loop)
    return loadgen.measure(params, ctx, stage, probed)


def _record(params: LLMServeParams, s: Served, record_mode: str) -> dict[str, Any]:
    """The record's settings: the run's, with what was served (the precision a server does not state, the device,
    the requests' mean lengths where a source chose them)."""
    engine, device, prompts, outs = s.engine, s.device, s.work.prompts, s.work.outs
    prompt_len, out = lengths(params)
    chosen = s.work.summary is not None and source_class(params.source or SOURCE_PARTS.fallback).chooses_lengths
    record = params.to_dict() | {
        "precision": params.effective_precision if not s.where.server or params.precision != "auto" else "unstated",
        "device": engine.facts.get("device") or kind_of(device).record_name(device),
        "threads": s.threads,
        "input_tokens": round(sum(map(len, prompts)) / len(prompts)) if chosen else prompt_len,
        "output_tokens": round(sum(outs) / len(outs)) if chosen else out,
    }
    if record_mode:
        record["mode"] = record_mode
    return record


def _details(params: LLMServeParams, stage: Stage, result: Result, client: dict[str, Any], weights: str) -> None:
    """What every record says beside its driver's figures: whose weights, the FP32 buffers served beside rounded
    ones, how the threads were chosen, the prefix cache, the engine's own side, and where the prompts came from."""
    s = stage.served
    engine, work = s.engine, s.work
    details = serving_details(result)
    details["weights"] = weights if not s.where.server else "the server's"
    if s.where.built and params.effective_precision != "fp32":
        # the floating buffers served in FP32 beside the rounded weights: RoPE's frequencies, as transformers keeps
        details["fp32_buffers"] = fp32_buffers(s.model)
    if _leaves_a_core(params, s.where, s.device):
        details["threads_method"] = "no --threads: every usable core but one, left to LoadGen and the SUT"
    if params.mode != "accuracy":  # the server's count of its cache leaves the client's figures
        prefix_cache(result, stage.ledger, client, engine, work)
    if client:  # the engine's own side, measured: a client that limited the run sets the record aside
        details["client"] = client
        flag_server_lengths(result, client)
        result.metrics |= reasoning_figures(client.get("reasoning"))
        if client.get("limited_by"):
            result.concern("client-limited", f"client-limited: {client['limited_by']}; the figures describe the client")
        judge_client(result, client, params.mode)
    if work.summary:
        details["prompts"] = work.summary


def _unmeasured(result: Result, stage: Stage, probe_requests: int, preflight: int) -> None:
    """What the engine was sent that no figure counts (``details.unmeasured_requests``): the preflight, the probe,
    a closed loop's warm-up, and the requests of LoadGen's earlier tests and repeated probes (every request the
    engine settled past the probe and the record's own)."""
    from accelbench.serve.details import UNMEASURED_WHY

    details = serving_details(result)
    steady = details.get("driver", {}).get("steady", {})
    counts: UnmeasuredRequests = {
        "preflight": preflight,
        "probe": probe_requests,
        "warmup": int(steady.get("warmup_requests", 0)),
    }
    own = details.get("requests")
    earlier = stage.relay.settled - probe_requests - own if isinstance(own, int) else 0
    if earlier > 0:
        counts["earlier_tests"] = earlier
    details["unmeasured_requests"] = counts | {"why": UNMEASURED_WHY}


def _leaves_a_core(params: LLMServeParams, where: Where, device: "torch.device") -> bool:
    """No ``--threads`` and the model runs on this host's CPU: the engine gets every core but one
    (:func:`leave_a_core`), and the record says so."""
    return not params.threads and where.local and not kind_of(device).accelerator


# -- what a run checks, sends and asks of its engine -------------------------------------------------------------------


#: a TPOT limit this many times under what one request alone took is out of reach at any rate
TPOT_OUT_OF_REACH = 2.0


def unreachable_tpot(limits: Limits, probed: "TokenProbe") -> str | None:
    """Why no run can meet the TPOT limit, or None: one request alone, with the engine to itself, took far longer
    a token (a Server test at any rate would take minutes to say INVALID). Limits that judge nothing (a closed
    loop's goodput yardstick) are never out of reach."""
    alone = probed.single_tpot_seconds
    if not limits.judged or limits.tpot_p99_ms is None or alone is None:
        return None
    if alone * 1e3 <= TPOT_OUT_OF_REACH * limits.tpot_p99_ms:
        return None
    return (
        f"the TPOT limit ({limits.tpot_p99_ms:g} ms, {limits.source}) is out of reach: one request alone took "
        f"{alone * 1e3:.3g} ms a token in the probe; raise --tpot-ms"
    )


def workload(params: LLMServeParams, vocab: int, total: int, prompt_len: int, out: int) -> Work:
    """The requests the run's prompt source makes (random prompts unless another source is chosen)."""
    source = source_class(params.source or SOURCE_PARTS.fallback)
    return source(params.source_opts).work(params, vocab, total, (prompt_len, out))


def vocab_of(prompts: list[list[int]]) -> int:
    return max(2, 1 + max((max(p) for p in prompts if p), default=1))


def stand_ins(prompts: list[list[int]], vocab: int) -> list[list[int]]:
    """Prompts of the same lengths, drawn apart from the run's (a probe that sent a trace's own prompts would
    have the server cache them before they are due)."""
    import numpy as np

    rng = np.random.default_rng(12345)
    return [rng.integers(1, vocab, size=len(p)).tolist() for p in prompts]


def engine_settings(params: LLMServeParams, longest: int) -> EngineSettings:
    return EngineSettings(
        max_batch=params.batch_size,
        max_wait=params.max_wait_ms / 1000 if params.scenario in ("server", "interactive") else 0.0,
        longest=longest,
        ignore_eos=not params.allow_eos,
        open_loop=params.scenario in ("server", "interactive"),
    )


# -- the model: built here, or located for an engine that loads its own; FP32's reference ------------------------------


def _model_for(
    where: Where, params: LLMServeParams, preset: Any, device: "torch.device", ctx: RunContext, build: bool = True
) -> Any:
    """The built model and its config; for an engine that loads its own weights, where to load them from;
    ``build=False``: the config alone (None for the model) where the model would be built here."""
    if not where.model:
        return None, None
    if where.own_weights or not build:
        if params.checkpoint:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(Path(params.checkpoint).expanduser(), local_files_only=True)
        else:
            config = config_of(preset, params.scale)
        if not where.own_weights:
            return None, config
        return ModelSource(config, params.checkpoint or None, params.effective_precision), config
    what = f"checkpoint {params.checkpoint}" if params.checkpoint else f"{params.model} ({params.scale})"
    ctx.progress(f"building {what} on {kind_of(device).record_name(device)}")
    return build_model(params, device)


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
