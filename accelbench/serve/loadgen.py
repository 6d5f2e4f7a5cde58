"""LoadGen's test of a started engine, in token mode: the settings planned from the probe, the test rerun while it
disagrees with its plan, find-peak's search of Server rates, and the record of what it measured.

The run (:mod:`accelbench.serve.run`) chooses this driver for the sources LoadGen schedules (random prompts, a
prompt file, MLPerf's data set); the rest go to accelbench's own (:mod:`accelbench.serve.drive`). A rerun is
planned as the other models' runs are (:mod:`accelbench.loadgen.replan`); the engine stays warm between runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.kit.context import RunContext
from accelbench.loadgen import replan
from accelbench.loadgen import settings as lgset
from accelbench.loadgen.library import SampleLibrary
from accelbench.loadgen.start import Outcome, start_test
from accelbench.results.details import FindPeak, invalid_reasons, typed
from accelbench.results.record import Result
from accelbench.serve import accuracy, quality, requests
from accelbench.serve.engines.base import engine_class
from accelbench.serve.limits import Limits, mlperf_name
from accelbench.serve.probe import TokenProbe, probe
from accelbench.serve.results import endpoint_accuracy_result, token_accuracy_result, token_result
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.stage import Stage
from accelbench.serve.sut import TokenSUT

#: Server (and interactive) without --target-qps: this fraction of the probed requests/s
SERVER_FRACTION = 0.5
#: the most requests/s a run is planned for: the SUT answers each request twice (first token, completion) from
#: Python (the null engine, which probes as infinitely fast, served Offline at 69,000 requests/s on 2 cores);
#: planning LoadGen's one Offline query for the probe's millions only makes a run of minutes
MAX_PLANNED_REQUESTS = 200_000.0
#: the quick profile's Server run lasts about this long at its planned rate, with at least this many requests
QUICK_SECONDS, QUICK_MIN_REQUESTS = 60.0, 16


def quick_requests(rate: float, tail: int) -> int:
    """A quick Server run's requests: what ``QUICK_SECONDS`` at ``rate`` holds, between ``QUICK_MIN_REQUESTS``
    and ``tail`` (what LoadGen's early stopping needs to bound the p99 with no late request). Long answers from
    a slow server are a fraction of a request a second: 662 requests of 1024/1024 tokens were an hour."""
    return max(QUICK_MIN_REQUESTS, min(tail, math.ceil(rate * QUICK_SECONDS)))


def server_qps(params: LLMServeParams, rate: float) -> float:
    """Server's (and interactive's) target requests/s: ``--target-qps``, else :data:`SERVER_FRACTION` of ``rate``."""
    return params.target_qps or max(rate * SERVER_FRACTION, 0.1)


def settings_for(params: LLMServeParams, limits: Limits, preset_benchmark: str, plan: lgset.Probe, total: int) -> Any:
    """LoadGen's settings in token mode, planned from the probe (``official``: mlperf.conf's rules)."""
    import mlperf_loadgen as lg

    s = lgset.base(params, params.mode, mlperf_name=mlperf_name(preset_benchmark, params.scenario))
    s.use_token_latencies = True
    s.server_target_latency_ns = 0  # as mlperf.conf sets for LLMs: only TTFT and TPOT are judged
    if limits.ttft_p99_ms is not None and limits.tpot_p99_ms is not None:
        s.ttft_latency = int(limits.ttft_p99_ms * 1e6)
        s.tpot_latency = int(limits.tpot_p99_ms * 1e6)
    rate = min(plan.rate, MAX_PLANNED_REQUESTS)
    s.offline_expected_qps = params.expected_qps or rate * lgset.OFFLINE_HEADROOM
    s.single_stream_expected_latency_ns = int(plan.single * 1e9)
    s.server_target_qps = server_qps(params, rate)
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


@dataclass
class _Tests:
    """One run's LoadGen tests of the stage's engine: each on a fresh token SUT pointed at by the engine's sink,
    with what the engine saw of its own side kept per test."""

    params: LLMServeParams
    ctx: RunContext
    stage: Stage
    clients: list[dict[str, Any]] = field(default_factory=list)
    qsl: SampleLibrary[list[int]] = field(init=False)

    def __post_init__(self) -> None:
        prompts = self.stage.served.work.prompts
        self.qsl = SampleLibrary(lambda i: prompts[i], len(prompts))

    def once(self, settings: Any, what: str, rate: float) -> Outcome:
        """One test, its line saying ``what`` and how long ``settings`` plan it at ``rate``."""
        params, ctx, s = self.params, self.ctx, self.stage.served
        engine = s.engine
        scenario = "server" if params.scenario == "interactive" else params.scenario
        # its requests kept in the logs
        sut = TokenSUT(engine, self.qsl, s.work.outs.__getitem__, self.stage.shape, log_dir=ctx.log_dir)
        self.stage.relay.target = sut
        ctx.progress(what, left=lgset.planned_seconds(settings, scenario, rate))
        engine.measured(arrivals=False)  # what came before (the probe, a trial) is not this run's
        test = start_test(sut, self.qsl, settings, params, ctx, s.threads, [s.device], engine.local_processes())
        self.clients.append(engine.measured(arrivals=params.scenario != "offline"))
        return Outcome(*test, sut)


def measure(params: LLMServeParams, ctx: RunContext, stage: Stage, probed: TokenProbe) -> "Tested":
    """LoadGen's test, repeated (at most ``replan.MAX_RERUNS`` times) while a performance run disagrees with its
    plan; the last run is the one reported, the earlier ones are listed with why. In find-peak, the search's
    trials instead (:mod:`accelbench.serve.peak`), and the search for the record."""
    tests = _Tests(params, ctx, stage)
    plan = lgset.Probe(probed.requests_per_second, probed.single_seconds)
    if params.mode == "find-peak":
        outcome, found = _find_peak(tests, plan)
        return Tested(stage, outcome, [], tests.clients[-1], found)
    outcome, reruns = _until_planned(tests, plan)
    return Tested(stage, outcome, reruns, tests.clients[-1])


def _find_peak(tests: _Tests, plan: lgset.Probe) -> tuple[Outcome, FindPeak]:
    """The Server rates :func:`accelbench.serve.peak.search` tries, each a LoadGen test; the last and the search."""
    from accelbench.serve import peak

    params, s = tests.params, tests.stage.served
    total = len(s.work.prompts)

    def run_at(rate: float, size: tuple[int, int] | None) -> Outcome:
        settings = settings_for(replace(params, target_qps=rate), s.limits, s.benchmark, plan, total)
        if size is not None:
            settings.min_duration_ms, settings.min_query_count = size
        return tests.once(settings, f"LoadGen {params.scenario} at {rate:,.2f} requests/s", plan.rate)

    start = params.target_qps or plan.rate * SERVER_FRACTION
    _, outcome, found = peak.search(run_at, plan.rate, start, s.limits, tests.ctx.progress)
    return outcome, found


def _until_planned(tests: _Tests, plan: lgset.Probe) -> tuple[Outcome, list[dict[str, Any]]]:
    """The test until it agrees with its plan, or ``replan.MAX_RERUNS`` reruns planned from what each measured
    and a probe repeated; the last test and the reruns before it."""
    params, ctx, stage = tests.params, tests.ctx, tests.stage
    s = stage.served
    prompts, outs = s.work.prompts, s.work.outs
    reruns: list[dict[str, Any]] = []
    while True:
        settings = settings_for(params, s.limits, s.benchmark, plan, len(prompts))
        again = f" again ({len(reruns)} of at most {replan.MAX_RERUNS} reruns)" if reruns else ""
        what = f"LoadGen {params.scenario}{again}, token latencies ({params.profile})"
        outcome = tests.once(settings, what, plan.rate)
        detail, outdir = outcome.detail, outcome.outdir
        wrong = None
        if params.mode == "performance":
            wrong = replan.disagreement(detail, params, plan, outcome.sut.samples)
            wrong = wrong or replan.below_probe(detail, params, plan)
        if wrong is None or len(reruns) == replan.MAX_RERUNS:
            if wrong is not None and replan.below_probe(detail, params, plan) is not None:
                outcome.disturbed = wrong.why  # its record is INVALID with this cause
            return outcome, reruns
        ctx.progress(f"the run disagreed with its plan: {wrong.why}; probing again")
        repeated = probe(stage.relay, s.engine, prompts, outs, params.batch_size, stage.shape)
        measured = lgset.Probe(repeated.requests_per_second, repeated.single_seconds)
        reruns.append(replan.rerun(wrong, plan, measured, outdir, outcome.conditions))
        plan = replan.replanned(plan, wrong.measured, measured, params.scenario, bool(reruns[-1]["contended"]))


@dataclass(frozen=True)
class Tested:
    """What LoadGen measured: the reported test, the reruns before it, the engine's own side of that test, and
    find-peak's search where one ran."""

    stage: Stage
    outcome: Outcome
    reruns: list[dict[str, Any]]
    client: dict[str, Any]
    found: FindPeak | None = None

    def result(
        self, params: LLMServeParams, ctx: RunContext, record: dict[str, Any], probed: TokenProbe
    ) -> tuple[Result, dict[str, Any]]:
        result = self._result(params, ctx, record, probed)
        requests.note(result, self.outcome.sut)
        return result, self.client

    def _result(self, params: LLMServeParams, ctx: RunContext, record: dict[str, Any], probed: TokenProbe) -> Result:
        """The record of LoadGen's test: accuracy against the server's answers' references (an endpoint), against
        FP32's tokens (an engine here), or the performance figures."""
        s, outcome = self.stage.served, self.outcome
        engine, work = s.engine, s.work
        rouge: dict[str, Any] | None  # ROUGE of the answers, where the prompt file has references
        if params.mode == "accuracy" and s.where.server:  # the server's weights: ROUGE on the file's answers only
            served = accuracy.served_tokens(outcome.outdir / "mlperf_log_accuracy.json", len(work.prompts))
            gate = getattr(engine.options, "accuracy_target", "")  # the remote engine's own: a ROUGE target, or none
            target = quality.target(gate, params.model) if gate else None
            rouge = accuracy.served_rouge(work, served, target, ctx.progress)
            return endpoint_accuracy_result(params, record, outcome, engine.facts.copy(), rouge)
        if s.reference is not None:
            served = accuracy.served_tokens(outcome.outdir / "mlperf_log_accuracy.json", len(work.prompts))
            verdict = accuracy.judge(served, s.reference, params.effective_precision)
            rouge = accuracy.rouge(work, served, s.reference, ctx.progress) if work.references else None
            return token_accuracy_result(params, record, outcome, verdict, engine.facts.copy(), rouge)
        facts = engine.facts.copy()
        return token_result(params, record, outcome, probed.to_dict(), s.limits, facts, s.counted, self.reruns, s.roof)


def peak_found(result: Result, found: FindPeak) -> None:
    """A find-peak record: the confirmed rate as a figure beside the run's own, or no peak (INVALID) with why."""
    from accelbench.kit import metrics as fig

    typed(result)["find_peak"] = found
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
    typed(result)["invalid_reasons"] = [why, *invalid_reasons(result)]
    result.concern("invalid", f"INVALID: {why}", first=True)
