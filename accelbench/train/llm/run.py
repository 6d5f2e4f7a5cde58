"""``train/llm`` (``accelbench train DECODER``): tokens/s, tokens/s per device and MFU of causal-LM training.

One device trains in this process; several ranks under the kit's launcher (:mod:`accelbench.train.llm.rank`),
FSDP2 by default. The record keeps the strategy and what each rank holds, the FLOPs per token with their
convention, and the memory per device; out of memory is a failed record that says what the state alone needed
and what to change.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from typing import TYPE_CHECKING, Any, Iterator

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import PRECISIONS, model_dtype, precision_reason
from accelbench.errors import BenchmarkFailed
from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext, prepare, skip_if
from accelbench.kit.ranks import Nodes, node_gpus, run_ranks
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.results.record import Result
from accelbench.system.specs import peak_for
from accelbench.train.llm import flops as llm_flops
from accelbench.train.llm import model as llm_model
from accelbench.train.llm.body import train
from accelbench.train.llm.model import config_for, step_precision
from accelbench.train.llm.specs import OPTIMIZER, LLMTrainParams, micro_batch, seq_len_of, sharding_of, window_of
from accelbench.train.specs import TrainDetails, devices_used, training_figures, windowed_result
from accelbench.workloads.decoder import preset_of

if TYPE_CHECKING:
    import torch

#: what to change when a run does not fit, in the order worth trying
FIT_HINTS = (
    "--activation-checkpointing full, a smaller --batch-size (with --grad-accum), more ranks with --sharding fsdp"
)


def _benchmark() -> str:
    return benchmark_of(LLMTrainParams)


def missing_library(params: LLMTrainParams) -> str | None:
    """Why a library the run needs is not here (transformers for the model, peft for LoRA, torchao for fp8), or
    None."""
    for wanted, module, extra in ((True, "transformers", "pip install 'accelbench[llm]'"),
                                  (params.lora, "peft", "pip install 'accelbench[llm]'"),
                                  (params.precision == "fp8", "torchao", "pip install torchao")):  # fmt: skip
        if wanted and importlib.util.find_spec(module) is None:
            return f"{module} is not installed ({extra})"
    return None


def state_bytes(model_params: int, trainable: int, params: LLMTrainParams, world: int) -> int:
    """What the weights, gradients and AdamW's two moments take on one rank, before any activation: fp32 (or the
    pure 16-bit type) for what trains, the 16-bit type for LoRA's frozen base; divided over FSDP's ranks."""
    pure = model_dtype(params.precision) is not None  # bf16/fp16: weights, gradients, moments all 2 bytes
    each = 2 if pure else 4
    frozen = model_params - trainable
    total = trainable * 4 * each + frozen * (2 if params.lora and params.precision != "fp32" else each)
    return total // world if sharding_of(params) == "fsdp" else total


def memory_per_device(device: "torch.device", nproc: int) -> int | None:
    """What one rank may hold: its accelerator's memory, or the host's shared by the node's ranks."""
    kind = kind_of(device)
    total = kind.total_memory(device)
    if total is None and not kind.accelerator:
        import psutil

        total = psutil.virtual_memory().total // nproc
    return total


def _count(config: Any, params: LLMTrainParams) -> tuple[int, int, llm_flops.TrainFlops]:
    """Parameters in all, trainable, and the FLOPs per token (counted on the meta device: no memory)."""
    meta = llm_model.build(params, config)
    if params.lora:
        meta = llm_model.add_lora(meta, params)
    total = sum(p.numel() for p in meta.parameters())
    trainable = sum(p.numel() for p in meta.parameters() if p.requires_grad)
    flops = llm_flops.of_config(config, seq_len_of(params), model=meta)
    if params.lora:  # the base's matmuls are frozen, the adapters (all that trains) are matmuls too
        base = flops.matmul_params
        flops = dataclasses.replace(flops, matmul_params=base + trainable, frozen_params=base)
    return total, trainable, flops


def run(params: LLMTrainParams, ctx: RunContext) -> Iterator[Result]:
    # the window is fixed here, so this process, every rank and the record count the same steps per window
    params = dataclasses.replace(params, display_every=window_of(params))
    prep = prepare(params)
    device, world = prep.device, params.world_size
    record = prep.record(params, display_every=params.window)
    micro = micro_batch(params)
    seq = seq_len_of(params)
    record |= {
        "batch_size": micro,
        "batch_size_request": params.batch_size,
        "global_batch_size": micro * world * params.grad_accum,
        "global_batch_tokens": micro * world * params.grad_accum * seq,
        "seq_len": seq,
        "sharding": sharding_of(params),
        "optimizer": OPTIMIZER,  # no flag: stated, as the other training records state theirs
    }
    peak_precision = PRECISIONS[params.precision].peak
    skip_if(precision_reason(device, PRECISIONS[step_precision(params.precision)].peak, params.emulated), record)
    skip_if(missing_library(params), record)
    ctx.progress(f"counting {params.model}'s parameters ({params.scale})")
    config = config_for(params)
    total, trainable, flops = _count(config, params)
    need = state_bytes(total, trainable, params, world)
    capacity = memory_per_device(device, params.nproc)
    if capacity and need > capacity:
        skip_if(
            f"the weights, gradients and AdamW state alone need {need / 2**30:,.1f} GiB per device, more than its "
            f"{capacity / 2**30:,.1f} GiB: train on more ranks with --sharding fsdp, or --layers N, or --lora",
            record,
        )
    details: TrainDetails = {"domain": "generation", "sample_unit": "tokens", "source": config_source(params)}
    details |= {"flops": flops.to_dict(), "state_bytes_per_device": need, "grad_accum": params.grad_accum}
    if world == 1:
        report = _in_process(params, device, prep.threads, record, ctx)
    else:
        report = _on_ranks(params, device, record, ctx, need)
    if "oom" in report:
        yield _oom(record, report["oom"], need, details)
        return
    conditions = report.pop("conditions")
    if not math.isfinite(report["loss"]):
        yield Result.failed(_benchmark(), record, f"the loss is not finite ({report['loss']})", details=details)
        return
    record["threads"] = report.get("threads", prep.threads)
    devices = devices_used(params.nproc, getattr(params, "nnodes", 1), device)
    # the threads the peak is counted on: every rank's on a CPU the ranks share, else one rank's
    threads = record["threads"] * (world // devices if not kind_of(device).accelerator else 1)
    details |= {"world_size": world, "devices": devices}
    yield _result(record, report, flops, device, peak_precision, threads, details, conditions, devices)


def config_source(params: LLMTrainParams) -> str:
    return preset_of(params.model).source


def _in_process(
    params: LLMTrainParams, device: "torch.device", threads: int, record: dict[str, Any], ctx: RunContext
) -> dict[str, Any]:
    ctx.progress(f"building and training {params.model} ({params.scale})")
    tokens = record["global_batch_tokens"]
    with ConditionsMonitor(threads, kind_of(device).monitored(device)) as monitor:
        report = train(
            params,
            device,
            progress=lambda step, sec: ctx.progress(
                f"step {step}/{params.num_batches}: {tokens / sec:,.0f} tokens/s",
                left=(params.num_batches - step) * sec,
            ),
        )
    return report | {"conditions": monitor.conditions.to_dict(), "world_size": 1, "backend": None}


def _on_ranks(
    params: LLMTrainParams, device: "torch.device", record: dict[str, Any], ctx: RunContext, need: int
) -> dict[str, Any]:
    gpus = node_gpus(params.nproc, device.type, record)
    with ConditionsMonitor(record["threads"], gpus=gpus) as monitor:
        try:
            report = run_ranks(
                "accelbench.train.llm.rank",
                {"params": params.to_dict()},
                ctx,
                nproc=params.nproc,
                device_type=device.type,
                budget=300 + 30 * (params.warmup + params.num_batches),
                nodes=Nodes.of(params),
                record=record,
            )
        except BenchmarkFailed as exc:
            if "out of memory" not in str(exc):
                raise
            raise BenchmarkFailed(f"{exc}; {_fit_advice(need)}", record, getattr(exc, "details", None)) from None
    return report | {"conditions": monitor.conditions.to_dict()}


def _fit_advice(need: int) -> str:
    state = f"the weights, gradients and AdamW state take {need / 2**30:,.2f} GiB per device before activations"
    return f"{state}; try {FIT_HINTS}"


def _oom(record: dict[str, Any], error: str, need: int, details: TrainDetails) -> Result:
    return Result.failed(_benchmark(), record, f"out of memory ({error}); {_fit_advice(need)}", details=details)


def _result(
    record: dict[str, Any],
    report: dict[str, Any],
    flops: llm_flops.TrainFlops,
    device: "torch.device",
    precision: str,
    threads: int,
    details: TrainDetails,
    conditions: dict[str, Any],
    devices: int,
) -> Result:
    """tokens/s (the median window, with its interval), per device, step time, memory, model TFLOPS and MFU: per
    device and against the peak of the ``devices`` the ranks ran on (ranks sharing one CPU share its peak)."""
    m = Measurement(
        tuple(report["samples"]),
        calls_per_sample=record["display_every"],
        clock=report["clock"],
        meta=report.get("meta") or {},
    )
    metrics = training_figures(report["tokens_per_step"], m, "tokens/s", devices, report["peak_memory_bytes"])
    throughput = metrics["throughput"]
    if report.get("peak_reserved_bytes"):
        metrics["peak_reserved_bytes"] = fig.figure(report["peak_reserved_bytes"], "B", higher_is_better=False)
    tflops = fig.scaled(throughput, flops.per_token(False) / 1e12, "TFLOPS")
    metrics["tflops"] = tflops
    peak = peak_for(device, precision, threads)
    if peak is not None:  # fp8 without a published fp8 peak: no MFU rather than one against another precision's
        metrics["mfu"] = fig.pct_of_peak(tflops, peak.tflops * devices)
        causal = fig.scaled(throughput, flops.per_token(True) / 1e12, "TFLOPS")
        metrics["mfu_causal"] = fig.pct_of_peak(causal, peak.tflops * devices)
        details["peak"] = fig.peak_details(peak.tflops, "TFLOPS", peak.source, peak.estimated)
    more: TrainDetails = {
        "final_loss": report["loss"],
        "layout": report["layout"],
        "backend": report.get("backend"),
        "peak_memory_method": report.get("memory_method"),
    }
    return windowed_result(_benchmark(), record, m, metrics, details, conditions, more)
