"""LoadGen runs that measure what they say: a disturbed probe, a run that disagrees with it, find-peak's clock.

The real LoadGen drives a sleep backend (a system of known capacity); a backend slow only for its first calls
stands for a probe disturbed by another process on a shared core.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.infer import settings as imgset
from accelbench.infer.backends import Sleep
from accelbench.infer.serving import Serving
from accelbench.infer.specs import InferParams
from accelbench.infer.sut import Worker
from accelbench.loadgen import replan, tail
from accelbench.loadgen import settings as lgset

SLEEP = {"backend": "sleep", "service_ms": 2.0, "batch_size": 8, "threads": 2, "device": "cpu"}
#: calls the probe makes before it times anything: two of each shape on the one worker
WARM_UP_CALLS = 4


class SlowStart(Sleep):
    """2 ms a batch, except the first ``slow_calls`` calls, which take 60 ms each: a probe disturbed by a
    neighbour. Subclasses set how many calls the disturbance lasts."""

    slow_calls = 0

    def load(self, served: Any, model: Any, device: Any, precision: str, calibration: list[Any], **kw: Any) -> Any:
        fast, calls = super().load(served, model, device, precision, calibration, service_ms=2.0), [0]

        def predict(inputs: Any) -> None:
            calls[0] += 1
            if calls[0] <= self.slow_calls:
                time.sleep(0.06)
            else:
                fast(inputs)

        return predict


class OnceSlow(SlowStart):
    """The warm-up and one timed batch are slow: a mean of three calls planned this run 10x too short."""

    slow_calls = WARM_UP_CALLS + 1


class SlowProbe(SlowStart):
    """Every call of the probe is slow, and none of the run's: the probe plans a tenth of the real rate."""

    slow_calls = WARM_UP_CALLS + imgset.PROBE_BATCHES + imgset.PROBE_SINGLES


def test_a_probe_disturbed_once_still_sizes_the_run(run_isolated):
    [r] = run_isolated({**SLEEP, "backend": "test_loadgen_probe:OnceSlow"})
    assert r.status == "ok" and r.valid is True, (r.error, r.details.get("invalid_reasons"))
    assert "reruns" not in r.details  # the median of the probe's calls was right the first time
    assert r.details["probe"]["samples_per_second"] == pytest.approx(8 / 0.002, rel=0.3)


def test_a_run_far_below_its_minimum_duration_is_rerun_at_the_measured_rate(run_isolated):
    [r] = run_isolated({**SLEEP, "backend": "test_loadgen_probe:SlowProbe"})
    assert r.status == "ok" and r.valid is True, (r.error, r.details.get("invalid_reasons"))
    [rerun] = r.details["reruns"]
    assert rerun["probe"]["samples_per_second"] < 200  # 8 samples per 60 ms: the disturbed plan
    assert rerun["measured"]["samples_per_second"] > 1000  # what the short run itself measured
    assert "the probe planned" in rerun["why"] and "of its 2 s minimum" in rerun["why"]
    assert r.warnings[0].startswith("rerun: the first run disagreed with its plan")
    assert r.details["probe"]["samples_per_second"] > 1000  # the reported run's plan


def test_a_user_s_own_plan_is_not_rerun(run_isolated):
    """--expected-qps is the user's plan: INVALID with LoadGen's hint, as before."""
    [r] = run_isolated({**SLEEP, "expected_qps": 100})
    assert r.status == "ok" and r.valid is False and "reruns" not in r.details
    assert any("raise --expected-qps to" in x for x in r.details["invalid_reasons"])


def test_the_probe_takes_the_median_of_its_calls(monkeypatch):
    """With a patched clock: one slow call among the timed ones moves the median not at all."""
    now, costs = [0.0], iter([0.01] * WARM_UP_CALLS + [0.5] + [0.01] * 50)

    def predict(batch: list) -> None:
        now[0] += next(costs)

    monkeypatch.setattr(imgset, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    p = imgset.probe(Serving([Worker(predict)], lambda i: i, 64, list, None, None, 1), InferParams(batch_size=8))
    assert p.rate == pytest.approx(8 / 0.01) and p.single == pytest.approx(0.01)


def _detail(**values: Any) -> dict[str, Any]:
    return {"result_validity": "INVALID", "effective_min_duration_ms": 2000} | values


def test_what_disagrees_with_the_probe_and_what_does_not():
    offline = InferParams(scenario="offline")
    probe = lgset.Probe(rate=10.0, single=0.1)
    short = _detail(result_min_duration_met=False, result_samples_per_second=180.0)
    wrong = replan.disagreement(short, offline, probe, 32)
    assert wrong is not None and wrong.measured.rate == 180.0
    assert "the run lasted 0.18 s of its 2 s minimum" in wrong.why
    assert replan.disagreement(short | {"result_validity": "VALID"}, offline, probe, 32) is None
    assert replan.disagreement(short, InferParams(scenario="offline", expected_qps=10.0), probe, 32) is None

    server = InferParams(scenario="server")
    overloaded = _detail(
        result_perf_constraints_met=False,
        result_scheduled_samples_per_sec=100.0,
        result_completed_samples_per_sec=40.0,
    )
    assert replan.disagreement(overloaded, server, probe, 100).measured.rate == 40.0
    kept_up = overloaded | {"result_completed_samples_per_sec": 99.0}  # a latency miss, not a wrong plan
    assert replan.disagreement(kept_up, server, probe, 100) is None

    single = _detail(result_min_duration_met=False, result_mean_latency_ns=2e6, effective_samples_per_query=1)
    assert replan.disagreement(single, InferParams(scenario="singlestream"), probe, 100).measured.single == 0.002


def test_a_server_rerun_is_planned_from_what_measured_the_system():
    """An overloaded Server run's own rate plans the rerun (the slower of it and a repeated probe), unless that
    run measured nothing of the system: contended, or under a quarter of what both probes measured. A rerun
    planned from it would be sent a small fraction of the system's capacity, and its VALID figure be that."""
    first = lgset.Probe(rate=84.7, single=0.01)
    overloaded, again = lgset.Probe(rate=40.0, single=0.01), lgset.Probe(rate=90.0, single=0.01)
    assert replan.replanned(first, overloaded, again, "server").rate == 40.0  # the run measured the system
    assert replan.replanned(first, again, overloaded, "server").rate == 40.0  # or the probe now says slower
    disturbed = lgset.Probe(rate=4.4, single=0.01)  # completed 4.4 between probes of 84.7 and 124
    assert replan.replanned(first, disturbed, lgset.Probe(rate=124.0, single=0.01), "interactive").rate == 124.0
    assert replan.replanned(first, overloaded, again, "server", contended=True).rate == 90.0
    # the system slowed for good (the repeated probe agrees with the run): the run's rate stands
    assert replan.replanned(first, disturbed, lgset.Probe(rate=5.0, single=0.01), "server").rate == 4.4
    # Offline keeps the faster plan whatever the conditions (too low a rate runs out of queries again)
    assert replan.replanned(first, overloaded, again, "offline", contended=True).rate == 90.0
    warned = replan.rerun_warning(
        [{"why": "overloaded", "contended": "contended: 50%"}, {"why": "x", "contended": None}]
    )
    assert warned.endswith("run(s) 1 contended: the run after each was planned from a repeated probe instead")
    assert "contended" not in replan.rerun_warning([{"why": "overloaded", "contended": None}])


def test_an_invalid_verdict_after_reruns_names_the_true_cause():
    said = "min duration not met: LoadGen ran out of planned queries before the minimum duration; raise x"
    reasons = [("min-duration", said)]
    rerun = {"why": "the probe planned 10 samples/s, the run measured 180", "measured": {}}
    busy = "contended: other processes used 50% of the CPU"
    conditions = {"warnings": [busy], "concerns": [{"kind": "contended", "text": busy, "data": {}}]}
    [cause] = replan.true_cause(reasons, [rerun], conditions)
    assert "--expected-qps" not in cause and "raise x" not in cause
    assert "speed changed from one run to the next" in cause and "other processes used 50%" in cause
    # no rerun: LoadGen's own hint stands, and where other load shared the run, that it may be the cause
    assert replan.true_cause(reasons, [], {"warnings": []}) == [said]
    [warned] = replan.true_cause(reasons, [], conditions)
    assert warned.startswith(said) and warned.endswith("rerun on a quiet machine before changing a setting)")


def test_early_stopping_s_bound_is_loadgen_s():
    """LoadGen needs 662 queries for the 99th percentile and 64 for SingleStream's 90th with no late query."""
    assert tail.min_queries(0.99) == 662 and tail.min_queries(0.90) == 64
    assert tail.late_allowed(661) == -1 and tail.late_allowed(662) == 0
    assert tail.passes(4096, tail.late_allowed(4096)) and not tail.passes(4096, tail.late_allowed(4096) + 1)
    assert "only if none is over 2000 ms" in tail.bound_text(662, 2000.0)


def test_find_peak_on_a_slow_system_confirms_in_minutes_and_says_how_long(monkeypatch, tmp_path):
    """A system that serves 10.5 QPS (ResNet-50 on a 2-core CPU) with a 2 s bound, simulated: a screen's latency
    holds up to 12 QPS (too short for the queue to form) but its SUT is busy rate/10.5 of the time; a confirmation
    passes below 9.5 QPS. Screens over 90% busy fail, confirmations are sized by time (not 4,096 queries, six
    minutes each), the planned total is a few minutes, and every progress line has the time left."""
    from accelbench.infer import peak
    from accelbench.kit.context import RunContext
    from accelbench.loadgen import search
    from accelbench.loadgen.start import Outcome

    planned, lines = [], []

    def fake_run(serving, s, params, ctx):
        rate, queries = s.server_target_qps, s.min_query_count
        planned.append(peak.trial_seconds("server", rate, queries, s.min_duration_ms, 2000.0))
        confirm = queries >= tail.min_queries()
        ok = rate < (9.5 if confirm else 12.0)
        detail = {
            "result_validity": "VALID" if ok else "INVALID",
            "result_perf_constraints_met": ok,
            "early_stopping_met": ok,
            "result_query_count": queries,
            "result_overlatency_query_count": 0 if ok else 12,
            "result_scheduled_samples_per_sec": rate,
            "result_completed_samples_per_sec": rate,
            "result_99.00_percentile_latency_ns": (1.5e9 if ok else 2.5e9),
        }
        sut = SimpleNamespace(batches=1, samples=queries, per_worker=[queries], utilization=rate / 10.5)
        return Outcome(detail, {}, tmp_path, sut)

    monkeypatch.setattr(peak, "loadgen_run", fake_run)
    params = InferParams(scenario="server", mode="find-peak", latency_bound_ms=2000.0, backend="sleep")
    ctx = RunContext(tmp_path, progress=lambda m, left=None: lines.append((m, left)))
    r = peak.find_peak(params, Serving([], lambda i: i, 64, list, None, None, 2), lgset.Probe(11.0, 0.3), {}, ctx)
    assert r.status == "ok" and r.valid is True, r.error
    assert 8.0 < r.details["find_peak"]["peak"] < 9.5
    screens = [t for t in r.details["find_peak"]["trials"] if not t["confirmation"]]
    assert all(t["utilization"] <= search.SCREEN_MAX_UTILIZATION for t in screens if t["valid"])
    assert any(not t["valid"] and t["value"] < 12.0 for t in screens)  # latency held, but the SUT never rested
    confirmations = [t for t in r.details["find_peak"]["trials"] if t["confirmation"]]
    assert all(t["queries"] == tail.min_queries() for t in confirmations)  # 60 s at ~9 QPS is under 662
    assert "only if none is over 2000 ms" in confirmations[0]["early_stopping"]
    assert sum(planned) < 5 * 60, planned  # the whole search, by LoadGen's own schedule
    assert all(left is not None and left > 0 for _, left in lines)
    assert any("confirmation 1 of at most 3" in m and "662 queries" in m for m, _ in lines)


def test_find_peak_with_a_sleep_backend_ends_in_time_with_a_valid_peak(run_once):
    """8 samples per 2 ms batch: at most 4,000 QPS; a 20 ms bound. The whole search, LoadGen included, is short.

    The run is the one test_infer_modes checks converging (conftest.FIND_PEAK_SERVER), made once a session."""
    from conftest import FIND_PEAK_SERVER

    [r] = run_once(FIND_PEAK_SERVER)
    took = run_once.seconds(FIND_PEAK_SERVER)
    assert r.status == "ok" and r.valid is True, r.error
    search = r.details["find_peak"]
    assert 0.4 * 4000 <= search["peak"] <= 4000 * 1.02, search["trials"]
    assert search["trials"][-1]["confirmation"] and search["trials"][-1]["valid"]
    assert all(0 < t["utilization"] <= 1.0 for t in search["trials"])
    assert search["search_seconds"] < 20 and took < 30, (search["search_seconds"], took)


def test_a_duration_its_timeout_would_kill_is_refused_in_one_line(tmp_path, cli_env):
    from conftest import run_cli

    proc = run_cli(["infer", "resnet18", "--backend", "null", "--duration", "100000"], cli_env, tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "at least 100000 s (--duration), not less than its 1800 s timeout" in proc.stderr
    assert "lower --duration or raise --timeout" in proc.stderr


def test_find_peak_climbs_above_a_probe_that_read_low(monkeypatch, tmp_path):
    """A probe disturbed by load read 1 QPS of a 100 QPS system: the search doubles past the probe's capacity."""
    from accelbench.infer import peak
    from accelbench.kit.context import RunContext
    from accelbench.loadgen.start import Outcome

    def fake_run(serving, s, params, ctx):
        rate = s.server_target_qps
        ok = rate < 90.0
        detail = {"result_validity": "VALID" if ok else "INVALID", "result_perf_constraints_met": ok}
        return Outcome(detail, {}, tmp_path, SimpleNamespace(batches=1, samples=1, per_worker=[1], utilization=0.5))

    monkeypatch.setattr(peak, "loadgen_run", fake_run)
    params = InferParams(scenario="server", mode="find-peak", latency_bound_ms=2000.0, backend="sleep")
    serving = Serving([], lambda i: i, 64, list, None, None, 2)
    r = peak.find_peak(params, serving, lgset.Probe(1.0, 0.01), {}, RunContext(tmp_path))
    assert r.status == "ok" and 80.0 < r.details["find_peak"]["peak"] < 90.0, r.details["find_peak"]["trials"]


def test_find_peak_probes_again_and_lets_loadgen_decide_whether_any_load_can_meet_the_bound(monkeypatch, tmp_path):
    """A first probe disturbed by load timed one sample over the bound: find-peak probes again, as a performance run
    replans, and searches from the second probe. Where the second is as slow, one LoadGen screen at a light load
    decides: the system met the bound there (the probes read slow beside other load), so the search goes on; where
    it missed it too, no load can meet the bound."""
    from accelbench.errors import BenchmarkFailed
    from accelbench.infer import peak
    from accelbench.kit.context import RunContext
    from accelbench.loadgen.start import Outcome

    limit = [90.0]
    rates: list[float] = []

    def fake_run(serving, s, params, ctx):
        rates.append(s.server_target_qps)
        ok = s.server_target_qps < limit[0]
        detail = {"result_validity": "VALID" if ok else "INVALID", "result_perf_constraints_met": ok,
                  "result_99.00_percentile_latency_ns": 50e6 if ok else 700e6}  # fmt: skip
        return Outcome(detail, {}, tmp_path, SimpleNamespace(batches=1, samples=1, per_worker=[1], utilization=0.5))

    probes = []
    monkeypatch.setattr(peak, "loadgen_run", fake_run)
    monkeypatch.setattr(peak.lgset, "probe", lambda serving, params, warm=True: probes.append(warm) or again[0])
    params = InferParams(scenario="server", mode="find-peak", latency_bound_ms=100.0, backend="sleep")
    serving = Serving([], lambda i: i, 64, list, None, None, 2)
    again = [lgset.Probe(100.0, 0.02)]  # 20 ms: the system's own
    r = peak.find_peak(params, serving, lgset.Probe(1.0, 0.644), {}, RunContext(tmp_path))  # 644 ms under load
    assert probes == [False] and r.status == "ok" and 80.0 < r.details["find_peak"]["peak"] < 90.0
    assert r.details["probe"]["single_sample_seconds"] == 0.02  # the record's plan is the second probe's

    again[0], rates[:] = lgset.Probe(4.0, 0.5), []  # as slow again: a light screen (1 QPS, a quarter of 4) holds
    r = peak.find_peak(params, serving, lgset.Probe(1.0, 0.644), {}, RunContext(tmp_path))
    assert rates[0] == 1.0 and r.status == "ok" and 80.0 < r.details["find_peak"]["peak"] < 90.0

    limit[0], rates[:] = 0.5, []  # the light screen misses the bound too: nothing below it is tried
    with pytest.raises(BenchmarkFailed, match="one sample alone took 500 ms in the probe, more than the 100 ms bound"):
        peak.find_peak(params, serving, lgset.Probe(1.0, 0.644), {}, RunContext(tmp_path))
    assert rates == [1.0]


def test_loadgen_says_where_it_is_while_its_test_holds_the_thread(tmp_path, monkeypatch):
    """A LoadGen test longer than the progress interval says, at each one, how many of its planned samples are
    answered and the time left at that rate; the plan is LoadGen's own (Offline's one query, Server's rate over
    its minimum duration)."""
    from accelbench.loadgen import heartbeat
    from accelbench.suite.suites import make_entry
    from accelbench.suite.worker import run_inline

    monkeypatch.setattr(heartbeat, "EVERY", 0.4)
    said: list[str] = []
    params = {"model": "resnet18", "backend": "sleep", "service_ms": 2.0, "batch_size": 1, "threads": 1}
    entry = make_entry("infer/loadgen", params | {"scenario": "server", "target_qps": 200.0, "duration": 1.0})
    [r] = run_inline(entry, tmp_path, said.append)
    assert r.status == "ok", r.error
    beats = [m.split() for m in said if m.startswith("LoadGen: ")]
    assert len(beats) >= 3, said  # LoadGen's 662 queries at 200/s: 3.3 s, at 0.4 s intervals
    counts, planned = [int(b[1].replace(",", "")) for b in beats], {int(b[3].replace(",", "")) for b in beats}
    assert counts == sorted(counts) and 0 < counts[-1] <= max(planned)
    assert len(planned) == 1 and planned.pop() >= 200  # 200 queries/s over its 1 s minimum, or its least queries


def test_the_planned_samples_are_loadgens_own_plan():
    import mlperf_loadgen as lg

    from accelbench.loadgen.heartbeat import line
    from accelbench.loadgen.settings import planned_samples

    s = lg.TestSettings()
    s.min_duration_ms, s.min_query_count = 2000, 100
    s.offline_expected_qps, s.server_target_qps = 50.0, 40.0
    s.single_stream_expected_latency_ns = 5_000_000
    assert planned_samples(s, "offline") == lgset.loadgen_offline_size(50.0, 2000, 100)
    assert planned_samples(s, "server") == 100 and planned_samples(s, "interactive") == 100  # min queries
    s.server_target_qps = 400.0
    assert planned_samples(s, "server") == 800  # 400/s over 2 s
    assert planned_samples(s, "singlestream") == 400  # 2 s at 5 ms a query
    assert planned_samples(s, "server", accuracy_total=1024) == 1024  # accuracy mode: every sample once
    assert line(0, 800, 3.0) == ("LoadGen: 0 of 800 planned samples answered after 3 s", None)
    message, left = line(200, 800, 10.0)
    assert message == "LoadGen: 200 of 800 planned samples answered after 10 s" and left == pytest.approx(30.0)
