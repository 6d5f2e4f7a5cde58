"""LoadGen's TestSettings for a profile, and what a test will issue by its own plan.

``quick`` sets a short duration and just enough queries for LoadGen's tail estimate (non-compliant);
``official`` loads LoadGen's ``mlperf.conf`` rules through ``TestSettings.FromConfig`` and the benchmark sets
only the hints it measured.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Protocol

from accelbench.loadgen.params import LoadGenParams

#: A Python SUT answers at most a few hundred thousand samples/s; planning for more (a null backend probes as
#: infinitely fast) would only waste memory.
MAX_PLANNED_RATE = 1_000_000.0
#: Server and MultiStream judge the 99th percentile; with no late query, early stopping needs about this many.
QUICK_TAIL_QUERIES = 662
DEFAULT_BOUND_MS = 100.0
#: Offline plans for this multiple of the probed throughput: too low a plan is INVALID, too high only longer
OFFLINE_HEADROOM = 1.5
#: LoadGen sizes the one Offline query as max(min_query_count, floor(OFFLINE_SLACK * expected_qps * min_duration))
OFFLINE_SLACK = 1.1
SCENARIO_NAMES = {
    "offline": "Offline",
    "server": "Server",
    "singlestream": "SingleStream",
    "multistream": "MultiStream",
    "interactive": "Server",  # MLPerf's interactive LLM category: a Server run under tighter TTFT/TPOT limits
}


@dataclass(frozen=True)
class Probe:
    """What a short timing of the system says: the hints LoadGen needs so a run is not INVALID for want of queries."""

    rate: float  # samples/s at the full batch, over all serving devices
    single: float  # seconds for one sample

    def to_dict(self) -> dict[str, float]:
        return {"samples_per_second": self.rate, "single_sample_seconds": self.single}


def bound_ms(params: LoadGenParams) -> float:
    """The Server/MultiStream latency bound: the flag, the benchmark's own for its model, or 100 ms."""
    return params.latency_bound or params.model_bound_ms() or DEFAULT_BOUND_MS


def from_conf(mlperf_name: str, scenario: str) -> Any:
    """LoadGen settings holding mlperf.conf's rules for ``mlperf_name`` in LoadGen's ``scenario``, read from
    LoadGen's own embedded copy (``FromConfig`` of type 0). Type 1, a user.conf, would load mlperf.conf only at its
    first call in a process (a static count in LoadGen) and log "Multiple conf files are used" at every later one:
    a second official run in a worker would silently run without mlperf.conf's rules."""
    import mlperf_loadgen as lg

    s = lg.TestSettings()
    if s.FromConfig("", mlperf_name, scenario, 0) != 0:
        raise RuntimeError(f"LoadGen could not load mlperf.conf for {mlperf_name} {scenario}")
    return s


def base(params: LoadGenParams, mode: str, mlperf_name: str) -> Any:
    """Settings for the profile; ``official`` loads mlperf.conf's rules for ``mlperf_name``."""
    import mlperf_loadgen as lg

    scenario = SCENARIO_NAMES[params.scenario]
    s = from_conf(mlperf_name, scenario) if params.profile == "official" else lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, scenario)
    s.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly
    if params.profile == "quick" or params.duration:
        s.min_duration_ms = int((params.duration or 2.0) * 1000)
    if params.profile == "quick":
        # enough queries for LoadGen's early-stopping estimate of the tail percentile, and no more
        s.min_query_count = {"offline": 1, "singlestream": 64}.get(params.scenario, QUICK_TAIL_QUERIES)
    if params.latency_bound or params.profile == "quick":
        s.server_target_latency_ns = int(bound_ms(params) * 1e6)
    return s


@functools.cache
def conf_server_bound_ms(mlperf_name: str) -> float | None:
    """mlperf.conf's Server target latency for the model it names ``mlperf_name``, in ms (LoadGen's own copy);
    None where it is 0 (a language model: TTFT and TPOT are judged instead)."""
    ns = int(from_conf(mlperf_name, "Server").server_target_latency_ns)
    return ns / 1e6 if ns else None


class Planned(Protocol):
    """The fields of a LoadGen ``TestSettings`` a plan is read from (mlperf_loadgen ships no types)."""

    offline_expected_qps: float
    server_target_qps: float
    single_stream_expected_latency_ns: int
    multi_stream_expected_latency_ns: int
    multi_stream_samples_per_query: int
    min_duration_ms: int
    min_query_count: int


def planned_seconds(s: Planned, scenario: str, rate: float) -> float:
    """How long a test should last by its own plan (the progress line's ETA): Offline until its one query is
    answered at ``rate``; the others their minimum duration or minimum queries, whichever is later."""
    if scenario == "offline":
        return loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, s.min_query_count) / max(rate, 1e-9)
    per_query = {
        "server": 1 / max(s.server_target_qps, 1e-9),
        "singlestream": s.single_stream_expected_latency_ns / 1e9,
        "multistream": s.multi_stream_expected_latency_ns / 1e9,
    }[scenario]
    return max(s.min_duration_ms / 1000, s.min_query_count * per_query)


def planned_samples(s: Planned, scenario: str, accuracy_total: int | None = None) -> int:
    """The samples a test will issue by its own plan: the whole set in accuracy mode, Offline its one query,
    Server its rate over its minimum duration (at least its minimum queries), the streams their queries."""
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
    """The Offline query's size: just over LoadGen's own plan, rounded up to full batches per worker, so a slow
    configuration is not measured at a smaller batch than asked, nor pays for a last partial one. Set as
    ``min_query_count``, it is the exact size LoadGen issues."""
    # one over LoadGen's own plan: its float arithmetic may round the product the other way
    planned = max(min_query_count, loadgen_offline_size(expected_qps, min_duration_ms, 0) + 1)
    unit = batch * workers
    return max(unit, math.ceil(planned / unit) * unit)
