"""An image model's LoadGen settings: the calibration probe of its backend and the hints set from it."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from accelbench.infer.specs import InferParams
from accelbench.loadgen import settings as lgset
from accelbench.loadgen.mlcommons import CONF_NAMES
from accelbench.loadgen.settings import MAX_PLANNED_RATE, OFFLINE_HEADROOM, Probe, offline_samples

if TYPE_CHECKING:
    from accelbench.infer.serving import Serving

#: Without --target-qps, Server is asked for a quarter of the probed throughput (at most 20k QPS), which a
#: batching SUT meets within the bound; --mode find-peak searches for the highest valid rate.
SERVER_FRACTION, SERVER_DEFAULT_MAX = 0.25, 20_000.0
#: SingleStream planning for a backend that does no work: below this LoadGen schedules millions of idle queries
HARNESS_LATENCY = 1e-5
#: The probe times up to this many full batches and single samples, each shape stopping after this many seconds
#: and at least ``PROBE_MIN_CALLS`` calls (one, if one call takes the whole second); the per-call median counts,
#: so one call disturbed by another process does not plan the run 10x off.
PROBE_BATCHES, PROBE_SINGLES, PROBE_SECONDS, PROBE_MIN_CALLS = 5, 7, 1.0, 3
#: calls of each shape every device is warmed up with before the probe times the first
PROBE_WARM_CALLS = 2


def probe(serving: "Serving", params: InferParams, warm: bool = True) -> Probe:
    """The rate and single-sample latency LoadGen plans with, measured on the first device, on the calling thread
    (a probe on a thread of its own reads low beside a busy core). Every device is warmed up first, so none does
    that inside the timed run; a repeated probe (``warm=False``) skips the warm-up."""
    if serving.workers[0].predict is None:  # no model: LoadGen's own round trip (~10 us) is the latency
        return Probe(MAX_PLANNED_RATE, HARNESS_LATENCY)
    n = max(params.batch_size, params.samples_per_query)
    samples = [serving.make_input(i % serving.total) for i in range(n)]
    full, one = serving.collate(samples[: params.batch_size]), serving.collate(samples[:1])
    for worker in serving.workers if warm else []:
        for _ in range(PROBE_WARM_CALLS):
            worker(full)
            worker(one)
    per_batch = median_seconds(serving.workers[0], full, PROBE_BATCHES)
    single = median_seconds(serving.workers[0], one, PROBE_SINGLES)
    rate = params.batch_size / max(per_batch, 1e-9) * len(serving.workers)
    return Probe(min(rate, MAX_PLANNED_RATE), max(single, 1e-7))


def median_seconds(call: Any, inputs: Any, most: int) -> float:
    """The median seconds of up to ``most`` calls (see ``PROBE_SECONDS`` for when it stops sooner)."""
    times: list[float] = []
    t0 = time.perf_counter()
    while len(times) < most:
        start = time.perf_counter()
        call(inputs)
        end = time.perf_counter()
        times.append(end - start)
        if end - t0 >= PROBE_SECONDS and (len(times) >= PROBE_MIN_CALLS or min(times) >= PROBE_SECONDS):
            break
    return statistics.median(times)


def server_qps(params: InferParams, rate: float) -> float:
    """Server's target queries/s: ``--target-qps``, else :data:`SERVER_FRACTION` of the probed ``rate`` (1 to
    :data:`SERVER_DEFAULT_MAX`)."""
    return params.target_qps or max(1.0, min(rate * SERVER_FRACTION, SERVER_DEFAULT_MAX))


def base(params: InferParams, mode: str = "performance") -> Any:
    """LoadGen's settings for the profile, under mlperf.conf's name for the model."""
    return lgset.base(params, mode, CONF_NAMES.get(params.model, params.model))


def performance_settings(
    params: InferParams,
    p: Probe,
    target_qps: float | None = None,
    samples_per_query: int | None = None,
    mode: str = "performance",
    reuse: Any = None,
) -> Any:
    """Settings with the probe's hints; ``reuse`` keeps an already-configured object (FromConfig runs once)."""
    s = reuse if reuse is not None else base(params, mode)
    spq = samples_per_query or params.samples_per_query
    s.offline_expected_qps = params.expected_qps or min(p.rate * OFFLINE_HEADROOM, MAX_PLANNED_RATE)
    s.single_stream_expected_latency_ns = int(p.single * 1e9)
    s.server_target_qps = target_qps or server_qps(params, p.rate)
    s.multi_stream_samples_per_query = spq
    s.multi_stream_expected_latency_ns = int(spq / p.rate * 1e9)
    if params.scenario == "offline" and params.profile != "official" and mode == "performance":
        s.min_query_count = offline_samples(
            s.offline_expected_qps, s.min_duration_ms, s.min_query_count, params.batch_size, max(params.workers, 1)
        )
    return s


def accuracy_settings(params: InferParams, p: Probe) -> Any:
    return performance_settings(params, p, mode="accuracy")
