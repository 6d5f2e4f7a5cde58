"""How long a language model's serving entry takes: the build, the probe's batches (:mod:`accelbench.serve.probe`),
then the run its scenario plans (:mod:`accelbench.serve.loadgen`'s requests, a closed loop's rounds
(:func:`accelbench.serve.sweep.closed_requests`), a sweep's loops); a request lasts its prefill over the peak and its
decode steps, each reading the weights and KV cache over the bandwidth, never under a step's launch floor."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from accelbench.kit.estimate import Target, summed
from accelbench.loadgen import settings as lg
from accelbench.serve import loadgen as token_loadgen
from accelbench.serve import probe as token_probe
from accelbench.serve.engines.base import engine_class
from accelbench.serve.limits import lengths
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.sweep import closed_requests, points
from accelbench.workloads import workload_class
from accelbench.workloads.decoder import Decoder, Figures, config_of, figures

#: a decoder's prefill, share of the peak: batched prompt tokens are large GEMMs (assumed half of the peak)
PREFILL_EFFICIENCY = 0.5
#: a decode step's share of the memory bandwidth (weights and KV cache read once a step; assumed: continuous
#: batching's gather and Python bookkeeping halve what a fused server reaches)
DECODE_BANDWIDTH_EFFICIENCY = 0.5
#: the probe's batches until two agree (``PROBE_WARMUPS`` at most): assumed the second agrees
WARMUPS = 2
#: SingleStream's queries at least (the quick profile's minimum query count, :func:`accelbench.loadgen.settings.base`)
QUICK_SINGLESTREAM_QUERIES = 64


@functools.lru_cache(maxsize=16)
def _decoder(model: str, scale: str, element: int) -> Figures:
    """The served decoder's parameters, KV bytes and FLOPs per token (:func:`accelbench.workloads.decoder.figures`)."""
    decoder = workload_class(model)
    assert issubclass(decoder, Decoder)  # infer/llm serves language models only (its params validate so)
    return figures(config_of(decoder.preset, scale), element)


@dataclass(frozen=True)
class _Requests:
    """The modelled engine: a prompt's prefill, and ``batch(b)``: ``b`` requests answered together."""

    figs: Figures
    element: int
    prompt: int
    out: int
    peak: float | None
    bw: float | None
    floor: float
    prefill: float

    def step(self, b: int) -> float:
        """One decode step of ``b`` requests: the weights and their KV caches read, or their FLOPs, or the floor."""
        read = self.figs.params * self.element + b * (self.prompt + self.out / 2) * self.figs.kv_bytes_per_token
        compute = b * self.figs.flops_per_token / (self.peak * PREFILL_EFFICIENCY) if self.peak else 0.0
        return max(self.floor, read / (self.bw * DECODE_BANDWIDTH_EFFICIENCY) if self.bw else 0.0, compute)

    def batch(self, b: int) -> float:
        return b * self.prefill + self.out * self.step(b)


def _requests(p: LLMServeParams, target: Target) -> _Requests:
    element = 4 if p.effective_precision == "fp32" else 2
    figs = _decoder(p.model, p.scale, element)
    prompt, out = lengths(p)
    peak, bw = target.flops(p.effective_precision), target.bandwidth()
    prefill = prompt * figs.flops_per_token / (peak * PREFILL_EFFICIENCY) if peak else 0.0
    return _Requests(figs, element, prompt, out, peak, bw, target.costs.decode_floor, prefill)


def llm_serve(p: LLMServeParams, target: Target) -> tuple[float, str]:
    """``infer/llm``: the build, the probe, and the run of its mode and scenario."""
    r = _requests(p, target)
    batch_seconds, single = r.batch(p.batch_size), r.prefill + r.out * r.step(1)
    probe = (1 + WARMUPS) * batch_seconds + single
    run, what = _run(p, r, batch_seconds, single)
    return summed([("build", target.costs.llm_build), ("probe", probe), (what, run)])


def _closed(p: LLMServeParams, r: _Requests, users: int, single: float) -> float:
    """A closed loop of ``users`` (:func:`accelbench.serve.drive.closed_plan`): its rounds, at their rate."""
    at = users / r.batch(users)
    if p.num_requests:  # --num-requests N: those past the warm-up, no minimum duration
        return float((p.num_requests + users) / at + single)
    least = token_loadgen.quick_requests(at, lg.QUICK_TAIL_QUERIES) if p.profile == "quick" else 0
    return max(p.min_duration, (closed_requests(users, least) + users) / at) + single


def _run(p: LLMServeParams, r: _Requests, batch_seconds: float, single: float) -> tuple[float, str]:
    """The run past the probe, and what it is."""
    batch = p.batch_size
    rate = batch / batch_seconds  # requests/s
    duration = p.min_duration
    if p.mode == "sweep" and not p.rates:
        users = [int(c) for c in points(p)]
        run = sum(_closed(p, r, c, single) + (1 + WARMUPS) * batch_seconds for c in users)
        return run, f"{len(users)} closed loops"
    if p.mode != "performance":
        bound = token_probe.PROBE_WARMUPS
        return bound * batch_seconds, f"{p.mode} (a bound of {bound} batches)"
    if p.scenario == "offline":
        planned = lg.loadgen_offline_size(rate * lg.OFFLINE_HEADROOM, int(duration * 1000), 1) + 1
        requests = max(planned, engine_class(p.engine).min_requests(p))
        return math.ceil(requests / batch) * batch_seconds, f"offline {requests} requests"
    if p.scenario == "singlestream":
        return max(duration, QUICK_SINGLESTREAM_QUERIES * single), "singlestream run"
    if p.scenario == "concurrency":
        return _closed(p, r, int(p.concurrency), single), f"closed loop of {p.concurrency} users"
    # server, interactive: the quick minute's requests at the target rate, and the last one's answer
    qps = token_loadgen.server_qps(p, rate)
    requests = token_loadgen.quick_requests(qps, lg.QUICK_TAIL_QUERIES) if p.profile == "quick" else 0
    return max(duration, requests / qps) + single, f"{p.scenario} {requests} requests"
