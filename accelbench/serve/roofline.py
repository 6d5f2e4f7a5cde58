"""How far a serving figure is from what the hardware allows: decode against memory bandwidth, prefill against FLOPS.

A decode step reads every weight once (the routed experts, for a mixture) and the KV cache of every request in
flight, so it is bound by bandwidth: a run holding ``B`` requests reaches at most ``B x bandwidth / bytes per
step`` tokens/s. Prefill is bound by FLOPS. Both are counted from what the run held (the SUT's clock) against the
device's peaks, each saying where its peak came from; over one run the two shares add up to how much of it the
hardware's limits account for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.kit import metrics as fig
from accelbench.results.details import Roofline
from accelbench.results.record import Metric

if TYPE_CHECKING:
    import torch

    from accelbench.workloads.decoder import Figures

#: the host's bandwidth is measured on arrays this large (far past any last-level cache), best of this many
HOST_ARRAY_BYTES, HOST_ROUNDS = 256 * 2**20, 5


@dataclass(frozen=True)
class Roof:
    """The device's limits for one run: memory bandwidth (GB/s) and dense FLOPS at the served precision."""

    bandwidth_gbs: float
    bandwidth_source: str
    tflops: float | None = None
    tflops_source: str | None = None

    def to_dict(self) -> Roofline:
        return {
            "bandwidth_gbs": self.bandwidth_gbs,
            "bandwidth_source": self.bandwidth_source,
            "tflops": self.tflops,
            "tflops_source": self.tflops_source,
        }


def host_bandwidth(threads: int) -> tuple[float, str]:
    """The host's memory bandwidth, measured: STREAM's copy (read one array, write another) on ``threads``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(threads, 1))
    try:
        a = torch.ones(HOST_ARRAY_BYTES // 4)
        b = torch.empty_like(a)
        b.copy_(a)  # first touch: the pages exist before they are timed
        best = float("inf")
        for _ in range(HOST_ROUNDS):
            start = time.perf_counter()
            b.copy_(a)
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)
    gbs = 2 * HOST_ARRAY_BYTES / best / 1e9
    size = HOST_ARRAY_BYTES // 2**20
    on = f"{threads} thread{'s' * (threads != 1)}"
    return gbs, f"measured here: STREAM copy of {size} MiB on {on} (every usable core), best of {HOST_ROUNDS}"


def roof_for(device: "torch.device", precision: str, threads: int) -> Roof | None:
    """The device's bandwidth (spec table; a CPU's measured) and peak FLOPS at ``precision``, or None where the
    bandwidth is unknown (an accelerator the spec table does not list)."""
    from accelbench.devices.kind import kind_of
    from accelbench.system.specs import bandwidth_peak_for, peak_for

    if kind_of(device).accelerator:
        listed = bandwidth_peak_for(device)
        if listed is None:
            return None
        gbs, source = listed[0], f"spec table: {listed[1]}"
    else:  # the machine's memory bandwidth, not what the engine's threads alone can draw
        from accelbench.system.cpu import usable_cores

        gbs, source = host_bandwidth(usable_cores())
    peak = peak_for(device, precision, threads)  # the FLOPS of the cores the engine computes on, as MFU counts
    if peak is None:
        return Roof(gbs, source)
    said = peak.source if peak.source.startswith("estimate") else f"spec table: {peak.source}"
    return Roof(gbs, source, peak.tflops, said)


def weight_bytes_per_step(model: "Figures", batch: float) -> float:
    """Bytes of weights one decode step of ``batch`` requests reads: every matrix but the embedding lookup (a row
    a token; a tied table is read whole as the output layer); of a mixture's experts, those the step's tokens
    reach under uniform routing (``1 - (1 - k/E)^batch`` of them per layer)."""
    params = model.params - (0 if model.tied_embeddings else model.embedding_params)
    if model.experts:
        reached = 1 - (1 - model.experts_per_token / model.experts) ** max(batch, 1.0)
        params -= model.expert_params * (1 - reached)
    return params * model.element_bytes


def utilization(sut: Any, model: "Figures", roof: Roof) -> tuple[dict[str, Metric], Roofline]:
    """The run's decode bandwidth utilization, its decode limit in tokens/s and, where the peak FLOPS are known,
    its prefill FLOPs utilization; and how each was counted. Empty when the run decoded nothing."""
    span = sut.last_answer - (sut.first_issue if sut.first_issue is not None else sut.last_answer)
    decoded = sut.tokens - sut.samples  # each request's first token comes from its prefill
    if span <= 0 or decoded <= 0 or sut.flight_integral <= 0 or sut.busy_seconds <= 0:
        return {}, {}
    in_flight = sut.flight_integral / sut.busy_seconds  # requests decoding together, while any is
    kv_tokens = sut.kv_integral / sut.busy_seconds
    per_step = weight_bytes_per_step(model, in_flight) + kv_tokens * model.kv_bytes_per_token
    steps = decoded / in_flight
    bandwidth = roof.bandwidth_gbs * 1e9
    share = steps * per_step / span / bandwidth
    limit = in_flight * bandwidth / per_step
    metrics = {
        "decode_bandwidth_utilization": fig.figure(100 * share, "% of peak memory bandwidth", higher_is_better=True),
        "decode_limit_tokens_per_second": fig.figure(
            limit, "output tokens/s at peak bandwidth, this run's batch", higher_is_better=True
        ),
    }
    how: Roofline = {
        "requests_in_flight": in_flight,
        "kv_tokens_in_flight": kv_tokens,
        "bytes_per_decode_step": per_step,
        "decode_steps": steps,
        "span_seconds": span,
        "method": "decode steps (output tokens after each request's first, over the requests in flight while "
        "decoding) x bytes per step (weights read, the embedding lookup excepted; KV cache of the tokens in "
        "flight), over the run's span and the peak bandwidth; the limit is the requests in flight x peak "
        "bandwidth / bytes per step",
    }
    how |= roof.to_dict()
    if roof.tflops:
        flops = sut.input_tokens * model.flops_per_token + model.attention_flops_per_context_token * sut.prompt_pairs
        prefill = flops / span / (roof.tflops * 1e12)
        metrics["prefill_flops_utilization"] = fig.figure(
            100 * prefill, "% of peak FLOPS over the run's span", higher_is_better=True
        )
        how["prefill_flops"] = flops
        how["prefill_method"] = (
            "the prompts' forward FLOPs (2 x non-embedding parameters a token, attention over each prompt's causal "
            "context) over the run's span and the peak FLOPS at the served precision"
        )
    return metrics, how
