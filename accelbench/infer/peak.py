"""``--mode find-peak`` for an image model: the highest Server QPS (the floor's search, :mod:`accelbench.loadgen.
search`) or the largest MultiStream query that LoadGen calls valid. A trial is a real LoadGen run with its own log
folder, sized here (screens short, confirmations by time as well as by queries) and listed in the record; where no
confirmation holds VALID there is no peak, and the record is the highest confirmation's, INVALID."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from accelbench.errors import BenchmarkFailed
from accelbench.infer import settings as lgset
from accelbench.infer.driver import loadgen_run
from accelbench.infer.results import ImageDetails, multistream_within_bound, performance_result
from accelbench.infer.serving import Serving
from accelbench.infer.specs import InferParams
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext
from accelbench.loadgen import tail
from accelbench.loadgen.logs import invalid_reasons
from accelbench.loadgen.search import (
    CONFIRM_BACKOFF,
    CONFIRMATIONS,
    PRECISION,
    TRIAL_OVERHEAD,
    screen_passed,
    screens_left,
    search_server,
)
from accelbench.loadgen.settings import Probe, bound_ms
from accelbench.loadgen.start import Outcome
from accelbench.results.details import FindPeak
from accelbench.results.record import Concern, Result

MAX_SAMPLES_PER_QUERY = 4096
#: Queries in a Server confirmation at most: enough for early stopping to pass a tail near 1% (4,096 queries may
#: have 25 late); a slow system gets fewer (``CONFIRM_SECONDS``), which its progress line and record state
CONFIRM_QUERIES = 4096
#: a quick-profile Server confirmation lasts about this long at most (at least LoadGen's minimum for the p99)
CONFIRM_SECONDS = 60.0
#: A confirmation whose early stopping allows fewer late queries than this fraction (662 queries: none) starts
#: ``CONFIRM_BACKOFF`` under the screened peak: a screen of 32 queries says nothing of a 1-in-662 slow query
TIGHT_TAIL = 0.005
#: a screening trial: about this long, with between these many queries (a p99 clearly over or under the bound)
SCREEN_MS, SCREEN_MIN_QUERIES, SCREEN_MAX_QUERIES = 1000, 32, 200
#: a slow screen stops at this many seconds of queries, and at no fewer than this many queries
SCREEN_MAX_SECONDS, SCREEN_FEWEST = 8.0, 8


def screen_queries(scenario: str, value: float, bound_ms: float) -> int:
    """Queries in about two screening seconds: Server issues ``value`` per second, MultiStream one per bound."""
    per_second = value if scenario == "server" else 1000.0 / bound_ms
    least = max(SCREEN_FEWEST, min(SCREEN_MIN_QUERIES, per_second * SCREEN_MAX_SECONDS))
    return int(min(SCREEN_MAX_QUERIES, max(least, 2 * per_second * SCREEN_MS / 1000)))


def confirmation_size(
    full: tuple[float, int], scenario: str, qps: float = 0.0, official: bool = False
) -> tuple[float, int]:
    """A confirmation run's (minimum ms, minimum queries): the profile's, and for Server sized by time too. Near a
    peak the tail is close to 1% and early stopping needs thousands of queries, so a quick confirmation issues
    ``CONFIRM_SECONDS`` of queries where that is fewer (never under early stopping's minimum) and says what bound
    that leaves; the official profile keeps mlperf.conf's count."""
    if scenario != "server":
        return full
    timed = int(qps * CONFIRM_SECONDS) if qps > 0 and not official else CONFIRM_QUERIES
    return full[0], max(full[1], tail.min_queries(), min(CONFIRM_QUERIES, timed))


def trial_seconds(scenario: str, value: float, queries: int, min_ms: float, bound_ms: float) -> float:
    """How long one trial takes by its plan: its queries at its rate (MultiStream: one per bound), or its minimum."""
    per_query = 1 / max(value, 1e-9) if scenario == "server" else bound_ms / 1000
    return max(min_ms / 1000, queries * per_query) + TRIAL_OVERHEAD


class _Trials:
    """One search's trials: each a real LoadGen run at a value (Server QPS, MultiStream samples per query), sized,
    announced with the time left, judged and listed for the record."""

    def __init__(self, params: InferParams, serving: Serving, probe: Probe, ctx: RunContext) -> None:
        self.params, self.serving, self.probe, self.ctx = params, serving, probe, ctx
        self.reuse = lgset.base(params)  # FromConfig reads mlperf.conf once per process: one object for all trials
        self.bound = bound_ms(params)
        self.full = (self.reuse.min_duration_ms, self.reuse.min_query_count)
        self.trials: list[dict[str, Any]] = []
        self.started = time.monotonic()

    def size(self, value: float, confirm: bool) -> tuple[float, int]:
        """(minimum ms, minimum queries): screens are short; a confirmation runs under the profile's rules."""
        if confirm:
            return confirmation_size(self.full, self.params.scenario, value, self.params.profile == "official")
        return min(self.full[0], SCREEN_MS), screen_queries(self.params.scenario, value, self.bound)

    def seconds(self, value: float, confirm: bool) -> float:
        ms, queries = self.size(value, confirm)
        return trial_seconds(self.params.scenario, value, queries, ms, self.bound)

    def margin(self, value: float) -> float:
        """How far under the screened peak the first confirmation runs (see ``TIGHT_TAIL``)."""
        n = self.size(value, True)[1]
        return CONFIRM_BACKOFF if tail.late_allowed(n) < TIGHT_TAIL * n else 0.0

    def __call__(self, value: float, confirm: bool = False, after: int = 0) -> tuple[bool, Outcome]:
        """One LoadGen run at ``value``; ``after``: the screens the search expects after this one (for the ETA)."""
        params = self.params
        if params.scenario == "server":
            s = lgset.performance_settings(params, self.probe, target_qps=value, reuse=self.reuse)
        else:
            s = lgset.performance_settings(params, self.probe, samples_per_query=int(value), reuse=self.reuse)
        s.min_duration_ms, s.min_query_count = self.size(value, confirm)
        stopping = self._announce(value, confirm, after, s.min_query_count)
        outcome = loadgen_run(self.serving, s, params, self.ctx)
        busy = getattr(outcome.sut, "utilization", None)
        d = outcome.detail
        if confirm:
            ok = d.get("result_validity") == "VALID"
        else:  # too few queries for early stopping by design: judge the screen by its latency and load
            ok = screen_passed(d, busy if params.scenario == "server" else None)
        why = invalid_reasons(d, params.scenario) if confirm and not ok else []
        if params.scenario == "multistream" and not multistream_within_bound(d, self.bound):
            ok = False  # accelbench's own bound: LoadGen >= 2.0 has none for MultiStream
            ns = d.get("result_99.00_percentile_per_query_latency_ns") or d.get("result_99.00_percentile_latency_ns", 0)
            over = f"the 99th-percentile query latency {ns / 1e6:.3g} ms is over the {self.bound:g} ms bound"
            why = [r for r in why if not r.startswith("LoadGen reported INVALID")] + [over] if confirm else []
        self.trials.append(
            _trial_row(value, ok, confirm, d, busy, outcome)
            | ({"early_stopping": stopping} if stopping else {})
            | ({"invalid_reasons": why} if why else {})
        )
        return ok, outcome

    def _announce(self, value: float, confirm: bool, after: int, queries: int) -> str:
        """The progress line of a trial with the time the search expects to have left; a Server confirmation's
        early-stopping bound (returned for its record)."""
        done = f"{time.monotonic() - self.started:.0f} s so far"
        label = _label(self.params, value)
        if not confirm:
            # then, most likely, one confirmation near the capacity the probe measured (MultiStream: at the value)
            likely = max(value, self.probe.rate * 0.9) if self.params.scenario == "server" else value
            left = self.seconds(value, False) * (1 + after) + self.seconds(likely, True)
            self.ctx.progress(f"find-peak trial {len(self.trials) + 1}: {label} ({done})", left=left)
            return ""
        n = sum(t["confirmation"] for t in self.trials) + 1
        stopping = tail.bound_text(queries, self.bound) if self.params.scenario == "server" else ""
        self.ctx.progress(
            f"find-peak confirmation {n} of at most {CONFIRMATIONS}: {label}, "
            f"{queries:,} queries ({done}){'; ' + stopping if stopping else ''}",
            left=self.seconds(value, True),
        )
        return stopping


def _trial_row(
    value: float, ok: bool, confirm: bool, d: dict[str, Any], busy: float | None, outcome: Outcome
) -> dict[str, Any]:
    return {
        "value": value,
        "valid": ok,
        "confirmation": confirm,
        "queries": d.get("result_query_count"),
        "late_queries": d.get("result_overlatency_query_count"),
        "p99_latency_seconds": d.get("result_99.00_percentile_latency_ns", 0) / 1e9,
        "completed_per_second": d.get("result_completed_samples_per_sec"),
        "utilization": busy,
        "log_dir": str(outcome.outdir),
    }


def find_peak(params: InferParams, serving: Serving, probe: Probe, record: dict[str, Any], ctx: RunContext) -> Result:
    bound = bound_ms(params)
    if probe.single * 1000 > bound:  # a probe disturbed by other load reads slow: measured again before giving up
        ctx.progress(
            f"the probe's single sample took {probe.single * 1000:.3g} ms, over the {bound:g} ms bound: probing again"
        )
        probe = lgset.probe(serving, params, warm=False)
    trial = _Trials(params, serving, probe, ctx)
    try:
        if params.scenario == "server":
            peak, outcome, held = _search_server(params, trial, probe, bound)
        else:  # its first trial, a query of one sample, says whether any query can meet the bound
            peak, outcome, held = _search_multistream(trial)
    except BenchmarkFailed as exc:  # no load at all met the bound: no run a record could keep
        found = {"find_peak": {"trials": trial.trials, "latency_bound_ms": bound}}
        raise BenchmarkFailed(str(exc), record, found) from None
    search: FindPeak = {
        "precision": PRECISION,
        "trials": trial.trials,
        "latency_bound_ms": bound,
        "search_seconds": round(time.monotonic() - trial.started, 1),
    }
    if params.scenario == "multistream":
        params = dataclasses.replace(params, samples_per_query=int(peak))
        record = record | {"samples_per_query": int(peak)}
    if not held:
        return _no_peak(params, record, outcome, probe, search, [t for t in trial.trials if t["confirmation"]])
    # the target that held; the headline is LoadGen's own metric of that run (its scheduled rate for Server)
    result = performance_result(params, record, outcome, probe, ImageDetails(find_peak=search | {"peak": peak}))
    if params.scenario == "multistream":
        result.metrics["peak_samples_per_query"] = fig.figure(peak, "samples/query", higher_is_better=True)
        result.primary_metric = "peak_samples_per_query"
    return result


def _no_peak(
    params: InferParams,
    record: dict[str, Any],
    outcome: Outcome,
    probe: Probe,
    search: FindPeak,
    tried: list[dict[str, Any]],
) -> Result:
    """No confirmation held VALID: a peak LoadGen did not accept is no peak. The record is the highest
    confirmation's, as LoadGen's own INVALID record of that run would be (ok, ``valid`` false, its figures, the
    reasons as ``INVALID: ...`` warnings; exit status 3); ``details.find_peak.peak`` is None."""
    result = performance_result(params, record, outcome, probe, ImageDetails(find_peak=search | {"peak": None}))
    why = list(dict.fromkeys(r for t in tried for r in t.get("invalid_reasons", []))) or ["latency bound"]
    summary = (
        f"no peak: {len(tried)} confirmation runs at {', '.join(_label(params, t['value']) for t in tried)} were all "
        f"INVALID; the figures are the first's, at {_label(params, tried[0]['value'])}, and the screening trials are "
        "in details.find_peak"
    )
    result.valid = False  # a MultiStream run LoadGen calls VALID can still be over accelbench's bound
    result.details["invalid_reasons"] = [summary, *why]
    invalid = [Concern("invalid", f"INVALID: {r}") for r in (summary, *why)]
    result.set_concerns([*invalid, *(c for c in result.concerns if c.kind != "invalid")])
    return result


def _search_server(params: InferParams, trial: "_Trials", probe: Probe, bound: float) -> tuple[float, Any, bool]:
    """The Server search. Where both probes say one sample alone is over the bound, LoadGen has the last word: a
    probe on a host shared with other load can read many times slower than the run it plans (OpenMP threads
    waiting for one that another process preempts), so one screen at a light load (queries two bounds apart)
    decides whether any load can meet the bound, and the search goes on from there if it did."""
    start = params.target_qps or probe.rate * lgset.SERVER_FRACTION
    if probe.single * 1000 <= bound:
        return search_server(trial, start, probe.rate, trial.margin)
    light = min(start, 500.0 / bound) if not params.target_qps else start
    try:
        return search_server(trial, light, max(probe.rate, light), trial.margin, halvings=1)
    except BenchmarkFailed:
        screen = trial.trials[-1]
        raise BenchmarkFailed(
            f"one sample alone took {probe.single * 1000:.3g} ms in the probe, more than the {bound:g} ms bound, "
            f"and a LoadGen screen at {screen['value']:.3g} QPS, a light load, missed the bound too (99th "
            f"percentile {screen['p99_latency_seconds'] * 1000:.3g} ms), so no load can meet it: raise "
            "--latency-bound-ms or serve faster (--backend, --precision)"
        ) from None


def _label(params: InferParams, value: float) -> str:
    return f"{value:,.1f} QPS" if params.scenario == "server" else f"{int(value)} samples/query"


def _search_multistream(trial: Callable[..., tuple[bool, Any]]) -> tuple[float, Any, bool]:
    if not trial(1)[0]:
        raise BenchmarkFailed("a MultiStream query of one sample already misses the bound: raise --latency-bound-ms")
    lo, hi = 1, None
    while hi is None:
        n = lo * 2
        if n > MAX_SAMPLES_PER_QUERY:
            break
        if trial(n)[0]:
            lo = n
        else:
            hi = n
    while hi is not None and hi - lo > max(1, int(lo * PRECISION)):
        mid = (lo + hi) // 2
        if trial(mid, after=screens_left(lo, hi) - 1)[0]:
            lo = mid
        else:
            hi = mid
    first: tuple[float, Any] | None = None
    for k in range(CONFIRMATIONS):
        ok, outcome = trial(lo, confirm=True)
        if ok:
            return float(lo), outcome, True
        first = first or (float(lo), outcome)
        lo = max(1, min(lo - 1, int(lo * (1 - CONFIRM_BACKOFF * 2**k))))
    assert first is not None
    return *first, False
