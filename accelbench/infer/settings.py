"""LoadGen's TestSettings from accelbench's parameters and a calibration probe of the system under test.

``quick`` sets a short duration and just enough queries for LoadGen's tail
estimate (non-compliant). ``official`` loads LoadGen's own ``mlperf.conf``
rules (600 s minimum, the official RNG seeds, per-model bounds) through
``TestSettings.FromConfig``; accelbench then sets only the hints it measured.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.infer.loadgen_params import LoadGenParams
from accelbench.infer.specs import InferParams

if TYPE_CHECKING:
    from accelbench.infer.serving import Serving

#: A Python SUT answers at most a few hundred thousand samples/s, whatever the backend; planning
#: LoadGen's queries for more (a null backend probes as infinitely fast) would only waste memory.
MAX_PLANNED_RATE = 1_000_000.0
#: Without --target-qps, Server is asked for a quarter of the probed throughput (at most 20k QPS), which a
#: batching SUT meets within the bound; --mode find-peak searches for the highest valid rate.
SERVER_FRACTION, SERVER_DEFAULT_MAX = 0.25, 20_000.0
#: Server and MultiStream judge the 99th percentile; with no late query, early stopping needs about this many.
QUICK_TAIL_QUERIES = 662
DEFAULT_BOUND_MS = 100.0
#: Offline plans for this multiple of the probed throughput: a probe disturbed by other load must not end the run
#: before its minimum duration (too low a plan is INVALID; too high only makes the run longer)
OFFLINE_HEADROOM = 1.5
#: LoadGen sizes the one Offline query as max(min_query_count, floor(OFFLINE_SLACK * expected_qps * min_duration))
OFFLINE_SLACK = 1.1
#: SingleStream planning for a backend that does no work: below this LoadGen schedules millions of idle queries
HARNESS_LATENCY = 1e-5
#: accelbench model -> the name mlperf.conf uses for it (others get mlperf.conf's "*" rules)
MLPERF_NAMES = {
    "resnet50": "resnet50",
    "bert": "bert-99",
    "bert-large": "bert-99",
    "dlrm": "dlrm-v2-99",
    "rnnt": "rnnt",
    "unet3d": "3d-unet-99",
}
SCENARIO_NAMES = {
    "offline": "Offline",
    "server": "Server",
    "singlestream": "SingleStream",
    "multistream": "MultiStream",
    "interactive": "Server",  # MLPerf's interactive LLM category: a Server run under tighter TTFT/TPOT limits
}


#: The probe times up to this many full batches and single samples, each shape stopping once this many seconds
#: have passed and at least ``PROBE_MIN_CALLS`` calls are timed (one, if a single call takes the whole second: a
#: configuration that takes seconds a batch, an emulated precision, is planned from one timed call, not minutes of
#: probing before a shorter run). The per-call median is what counts: one call disturbed by another process (a
#: scheduler slice lost on a shared core) must not plan the run 10x off, as a mean of a few calls did.
PROBE_BATCHES, PROBE_SINGLES, PROBE_SECONDS, PROBE_MIN_CALLS = 5, 7, 1.0, 3


@dataclass(frozen=True)
class Probe:
    """What a short timing of the backend says: the hints LoadGen needs so a run is not INVALID for want of queries."""

    rate: float  # samples/s at the full batch, over all serving devices
    single: float  # seconds for one sample

    def to_dict(self) -> dict[str, float]:
        return {"samples_per_second": self.rate, "single_sample_seconds": self.single}


def probe(serving: "Serving", params: InferParams, warm: bool = True) -> Probe:
    """The rate and single-sample latency LoadGen plans with, measured on the first device.

    Every device is warmed up first (its cuBLAS/cuDNN handles, torch.compile's two shapes), so that no
    device does that inside the timed run; a repeated probe (``warm=False``, after a run that disagreed with
    the first) skips the warm-up. The probe runs on the calling (main) thread, not on a thread of its own as the
    SUT serves: with one of this VM's 2 cores saturated, ResNet-18 tiny (two threads) then served at 88-107
    samples/s against 196-210 with the probe on the main thread (alternating runs, one process each). Under
    such load the main thread's own figure can be 5-20x slow (9 samples/s probed, 168 served); the rerun in
    :mod:`accelbench.infer.replan` corrects the plan from the run's own measurement.
    """
    if serving.workers[0].predict is None:  # no model: LoadGen's own round trip (~10 us) is the latency
        return Probe(MAX_PLANNED_RATE, HARNESS_LATENCY)
    n = max(params.batch_size, params.samples_per_query)
    samples = [serving.make_input(i % serving.total) for i in range(n)]
    full, one = serving.collate(samples[: params.batch_size]), serving.collate(samples[:1])
    for worker in serving.workers if warm else []:
        for _ in range(2):
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


def bound_ms(params: LoadGenParams) -> float:
    """The Server/MultiStream latency bound: the flag, or the model's MLPerf bound."""
    if params.latency_bound:
        return params.latency_bound
    try:
        from accelbench.infer.served import ADAPTERS
        from accelbench.workloads import model_info

        adapter = ADAPTERS.get(model_info(params.model).domain)
    except Exception:  # noqa: BLE001 - a harness-only backend may name no servable model
        adapter = None
    return (adapter.server_bound_ms if adapter else None) or DEFAULT_BOUND_MS


def base(params: LoadGenParams, mode: str = "performance", mlperf_name: str | None = None) -> Any:
    """Settings for the profile; ``official`` loads mlperf.conf's rules for ``mlperf_name`` (default: the model's)."""
    import mlperf_loadgen as lg

    s = lg.TestSettings()
    if params.profile == "official":
        import tempfile
        from pathlib import Path

        name = mlperf_name or MLPERF_NAMES.get(params.model, params.model)
        with tempfile.TemporaryDirectory(prefix="accelbench-lg-") as tmp:  # read at once: nothing left behind
            user_conf = Path(tmp) / "user.conf"
            user_conf.write_text("# accelbench sets its measured hints on the settings object\n")
            loaded = s.FromConfig(str(user_conf), name, SCENARIO_NAMES[params.scenario], 1)
        if loaded != 0:
            raise RuntimeError(f"LoadGen could not load mlperf.conf for {name} {SCENARIO_NAMES[params.scenario]}")
    s.scenario = getattr(lg.TestScenario, SCENARIO_NAMES[params.scenario])
    s.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly
    if params.profile == "quick" or params.duration:
        s.min_duration_ms = int((params.duration or 2.0) * 1000)
    if params.profile == "quick":
        # enough queries for LoadGen's early-stopping estimate of the tail percentile, and no more
        s.min_query_count = {"offline": 1, "singlestream": 64}.get(params.scenario, QUICK_TAIL_QUERIES)
    if params.latency_bound or params.profile == "quick":
        s.server_target_latency_ns = int(bound_ms(params) * 1e6)
    return s


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
    s.server_target_qps = target_qps or params.target_qps or max(1.0, min(p.rate * SERVER_FRACTION, SERVER_DEFAULT_MAX))
    s.multi_stream_samples_per_query = spq
    s.multi_stream_expected_latency_ns = int(spq / p.rate * 1e9)
    if params.scenario == "offline" and params.profile != "official" and mode == "performance":
        s.min_query_count = offline_samples(
            s.offline_expected_qps, s.min_duration_ms, s.min_query_count, params.batch_size, max(params.workers, 1)
        )
    return s


class Planned(Protocol):
    """What a LoadGen ``TestSettings`` says of a test's plan: the fields ``planned_seconds`` and ``planned_samples``
    read (mlperf_loadgen ships no types)."""

    offline_expected_qps: float
    server_target_qps: float
    single_stream_expected_latency_ns: int
    multi_stream_expected_latency_ns: int
    multi_stream_samples_per_query: int
    min_duration_ms: int
    min_query_count: int


def planned_seconds(s: Planned, scenario: str, rate: float) -> float:
    """How long a LoadGen run should last by its own plan, for the progress line's ETA.

    Offline issues one query and lasts until the SUT answers it at the probed ``rate``; the others last their
    minimum duration or until their minimum queries are issued, whichever is later.
    """
    if scenario == "offline":
        return loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, s.min_query_count) / max(rate, 1e-9)
    per_query = {
        "server": 1 / max(s.server_target_qps, 1e-9),
        "singlestream": s.single_stream_expected_latency_ns / 1e9,
        "multistream": s.multi_stream_expected_latency_ns / 1e9,
    }[scenario]
    return max(s.min_duration_ms / 1000, s.min_query_count * per_query)


def planned_samples(s: Planned, scenario: str, accuracy_total: int | None = None) -> int:
    """The samples a LoadGen test will issue by its own plan (``s``: its TestSettings): in accuracy mode the
    whole sample set; Offline its one query; Server its target rate over its minimum duration, at least its
    minimum queries; SingleStream and MultiStream their queries at the expected latency, times the samples a
    query holds (MultiStream)."""
    if accuracy_total is not None:
        return accuracy_total
    if scenario == "offline":
        return loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, s.min_query_count)
    seconds = s.min_duration_ms / 1000
    if scenario in ("server", "interactive"):
        return max(int(s.min_query_count), math.ceil(s.server_target_qps * seconds))
    latency = s.single_stream_expected_latency_ns if scenario == "singlestream" else s.multi_stream_expected_latency_ns
    queries = max(int(s.min_query_count), math.ceil(seconds / max(latency / 1e9, 1e-9)))
    return queries * (int(s.multi_stream_samples_per_query) if scenario == "multistream" else 1)


def loadgen_offline_size(expected_qps: float, min_duration_ms: int, min_query_count: int) -> int:
    """The samples LoadGen puts in its one Offline query (its own rule, checked against it in the tests)."""
    return max(min_query_count, int(OFFLINE_SLACK * expected_qps * min_duration_ms / 1000))


def offline_samples(expected_qps: float, min_duration_ms: int, min_query_count: int, batch: int, workers: int) -> int:
    """The Offline query's size: what LoadGen would plan, rounded up to the same number of full batches per worker.

    Left to LoadGen, a slow configuration's query can be smaller than one batch (0.6 samples/s over 2 s plans a
    single sample), so ``bs<=8`` would be measured at batch 1, and a last partial batch costs nearly a full
    one's time: both understate the throughput of the batch the user asked for. Set as ``min_query_count``
    (Offline's minimum sample count) just above LoadGen's own plan, it is the exact size LoadGen issues.
    The official profile keeps mlperf.conf's rules untouched.
    """
    # one over LoadGen's own plan: its float arithmetic may round the product the other way
    planned = max(min_query_count, loadgen_offline_size(expected_qps, min_duration_ms, 0) + 1)
    unit = batch * workers
    return max(unit, math.ceil(planned / unit) * unit)


def accuracy_settings(params: InferParams, p: Probe) -> Any:
    return performance_settings(params, p, mode="accuracy")
