"""accelbench's own driver for the loads LoadGen cannot schedule: a trace's timed arrivals, conversations' turns
each sent after the previous answer, and a closed loop of users; and the record of what it sent.

The run (:mod:`accelbench.serve.run`) chooses it for a replayed source (``Work.replayed``) and for ``--concurrency``;
the driver itself is :mod:`accelbench.serve.replay`, its figures :mod:`accelbench.serve.figures`'. A closed loop is
sized as LoadGen would size a Server run of the profile (:func:`closed_plan`), so its figures stand beside one's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from accelbench.devices.kind import monitored_indices
from accelbench.errors import BenchmarkFailed
from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext
from accelbench.loadgen import settings as lgset
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.heap import frozen_heap
from accelbench.results.details import EngineFacts, ReplayDriver, SteadyWindow
from accelbench.results.record import Concern, Metric, Result
from accelbench.serve import figures, requests
from accelbench.serve.details import ServingDetails, model_identity
from accelbench.serve.limits import Limits, mlperf_name
from accelbench.serve.loadgen import MAX_PLANNED_REQUESTS, quick_requests
from accelbench.serve.probe import TokenProbe
from accelbench.serve.replay import LATE_MS, ClosedLoop, Driver, ReplayDetails, Replayed
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.stage import Stage
from accelbench.serve.sweep import closed_requests

if TYPE_CHECKING:
    from accelbench.results.details import FindPeak
    from accelbench.workloads.decoder import Figures

#: seconds between a replay's progress lines
PROGRESS_EVERY = 2.0


def run_keeping(driver: Driver, folder: Path, **run: Any) -> Replayed:
    """``driver.run(**run)``, its requests written to ``folder`` whether it finished or stalled (a stall's failure
    says where they are)."""
    kind = driver.kind
    try:
        replayed = driver.run(**run)
    except BenchmarkFailed as exc:
        users = driver.users if kind != "trace" else None
        exc.details["request_log"] = requests.keep_replayed(driver, folder, driver.rows(), kind, users)
        raise
    requests.keep_replayed(replayed, folder, replayed.sent, replayed.kind, replayed.users)
    return replayed


def closed_plan(params: LLMServeParams, benchmark: str, rate: float) -> ClosedLoop:
    """How long a closed loop runs: as a Server run of the profile would (LoadGen's settings for the preset's
    benchmark: its minimum duration and requests; the quick profile's requests as :func:`quick_requests` sizes them
    at the probe's rate), past each user's warm-up request; at least three rounds of its users (a steady window
    needs every user to send past its warm-up), and one round more for the cool-down the window leaves out. With
    ``--num-requests N``, N requests past the warm-up and no minimum duration (vLLM's ``--num-prompts N``)."""
    users = int(params.concurrency)
    if params.num_requests:
        expected = (params.num_requests + users) / rate if rate > 0 else 0.0
        return ClosedLoop(users, params.num_requests, 0.0, expected)
    s = lgset.base(replace(params, scenario="server"), params.mode, mlperf_name=mlperf_name(benchmark, "server"))
    least = int(s.min_query_count)
    if params.profile != "official":
        least = quick_requests(min(rate, MAX_PLANNED_REQUESTS), least)
    planned = closed_requests(users, least)
    seconds = s.min_duration_ms / 1000
    expected = max(seconds, (planned + users) / rate) if rate > 0 else 0.0  # the probe's rate: a first ETA
    return ClosedLoop(users, planned, seconds, expected)


def replay(params: LLMServeParams, ctx: RunContext, stage: Stage, loop: "ClosedLoop | None" = None) -> "Driven":
    """The source's sessions sent by accelbench's driver (``loop``: a closed loop of the source's prompts), under
    the conditions monitor; the requests and the conditions."""
    s = stage.served
    engine, work = s.engine, s.work
    think = float((work.summary or {}).get("think_ms", 0.0)) / 1e3 if loop is None else params.user_think_ms / 1e3
    driver = Driver(engine, work, params.batch_size, think, stage.shape, closed=loop)
    stage.relay.target = driver
    total = len(work.arrivals) if work.arrivals is not None else sum(
        len(c.turns) for c in (work.conversations.conversations if work.conversations else [])
    )  # fmt: skip
    left = work.arrivals[-1] if work.arrivals else None
    if loop is not None:  # at least its requests past the warm-up, for at least its seconds
        total, left = loop.requests + loop.warmup, max(loop.seconds, loop.expected)
        at_least = f"at least {total} requests" + (f" and {loop.seconds:g} s" if loop.seconds else "")
        ctx.progress(f"closed loop: {loop.users} users, {at_least} ({loop.warmup} of them warm-up)", left=left)
    else:
        ctx.progress(f"replaying {total} requests ({work.summary and work.summary.get('source')})", left=left)
    began, said = time.monotonic(), [time.monotonic()]

    def sent(n: int) -> None:  # on the driver's sending thread at each send: a line every PROGRESS_EVERY s at most
        now = time.monotonic()
        if now - said[0] < PROGRESS_EVERY:
            return
        said[0], elapsed = now, now - began
        # a trace's end is known; conversations' is what the requests sent so far took, scaled to the rest
        rest = work.arrivals[-1] - elapsed if work.arrivals else elapsed * (total - n) / max(n, 1)
        if loop is not None:  # a closed loop ends at its requests and its seconds, whichever comes later
            rest = max(rest, loop.seconds - elapsed)
        what = "closed loop" if loop is not None else "replay"
        ctx.progress(f"{what}: {n} of {'at least ' if loop else ''}{total} requests sent", left=max(rest, 0.0))

    driver.progress = sent
    engine.measured(arrivals=False)
    with (
        frozen_heap(),
        ConditionsMonitor(s.threads, gpus=monitored_indices([s.device]), sut_pids=engine.local_processes()) as monitor,
    ):
        replayed = run_keeping(driver, ctx.log_dir)  # driver.run(), its requests kept in the logs
    return Driven(stage, replayed, monitor.conditions.to_dict())


@dataclass(frozen=True)
class Driven:
    """What accelbench's driver sent (each request's times) and the conditions it ran in."""

    stage: Stage
    sent: Replayed
    conditions: dict[str, Any]
    found: FindPeak | None = None  # no search: find-peak is LoadGen's

    def result(
        self, params: LLMServeParams, ctx: RunContext, record: dict[str, Any], probed: TokenProbe
    ) -> tuple[Result, dict[str, Any]]:
        s = self.stage.served
        engine = s.engine
        result = replay_result(
            params, record, self.sent, self.conditions, s.limits, engine.facts.copy(), probed.to_dict(), s.counted
        )
        client = engine.measured(arrivals=True)  # the client's, or an in-process engine's own prefix-cache count
        requests.note(result, self.sent)
        return result, client


#: how a closed loop's figures are taken, as the record says it
STEADY_METHOD = (
    "the steady state only: each user's first request is its warm-up (the N first requests leave together); the "
    "window runs from the moment every user had sent its first request past the warm-up to the moment every user "
    "had sent its last full round (as many requests as the user that sent fewest: users in step answer in waves, "
    "and a window ending inside a wave would count its length but not all its answers); after it users run out of "
    "work one by one (the cool-down). The requests answered inside the window give "
    "every figure: their count and output tokens over the window's length (requests/s, tokens/s), their TTFT, "
    "TPOT, inter-token gaps and latency, each timed from the request's own send"
)
#: a closed loop too short for a steady window: what its figures are of instead
NO_WINDOW = (
    "every answered request, from the first send to the last answer: the run was too short for a steady window (a "
    "user sent too few requests past its warm-up, or none was answered inside the window)"
)
#: what each kind of replay sends, as the record says why accelbench's driver sent it
WHY = {
    "trace": "a trace's timestamps",
    "conversations": "a conversation's turns after their answers",
    "closed": "a closed loop's requests, each after its user's last answer,",
}


def _steady(r: Replayed, m: figures.RunFigures) -> SteadyWindow:
    """``details.driver.steady``: the window a closed loop's figures are of, or why they are of every request."""
    if m.window is None or not m.inside:
        return {"method": NO_WINDOW, "warmup_requests": 0, "requests": len(m.counted),
                "left_out": len(r.sent) - len(m.counted)}  # fmt: skip
    return {
        "method": STEADY_METHOD,
        "warmup_requests": figures.WARMUP_PER_USER * (r.users or 1),
        "start_s": m.window.start,
        "end_s": m.window.end,
        "seconds": m.window.seconds,
        "requests": len(m.inside),
        "left_out": len(r.sent) - len(m.inside),
    }


def _counted(r: Replayed, m: figures.RunFigures) -> ReplayDetails:
    """What the replay's record keeps beside its figures: its driver, its requests and tokens, a loop's window."""
    late = sum(1 for ms in figures.late_ms(r.sent) if ms > LATE_MS)
    driver: ReplayDriver = {
        "name": "accelbench closed loop" if r.kind == "closed" else "accelbench replay",
        "why": "LoadGen schedules its own arrivals and issues samples independently; "
        + WHY[r.kind]
        + " are sent by accelbench's driver instead",
        "clock": "time.perf_counter in this process, from the send to the engine's callbacks",
        "late_ms": LATE_MS,
        "late_requests": late,
    }
    details: ReplayDetails = {
        "driver": driver,
        "requests": len(r.sent),
        "answered": len(m.answered),
        "failed": len(r.sent) - len(m.answered),
        "output_tokens": sum(s.output_tokens for s in m.counted),
        "input_tokens": sum(s.prompt_tokens for s in m.counted),
        "span_seconds": m.span,
    }
    if r.kind == "closed":
        driver |= {"users": r.users, "think_ms": r.think_seconds * 1e3, "most_in_flight": r.most_in_flight}
        driver["steady"] = _steady(r, m)
        details["measured"] = len(m.counted)
    if r.kind == "conversations":
        details["turns"] = m.turns
        driver |= {"users": r.users, "think_ms": r.think_seconds * 1e3}
    errors = sorted({s.error for s in r.sent if s.error})
    if errors:
        details["errors"] = errors[:5]
    return details


def replay_figures(r: Replayed, limits: Limits) -> tuple[dict[str, float], ReplayDetails, list[str]]:
    """The replay's figures (:func:`accelbench.serve.figures.measure`), what the record keeps beside them, and why
    it is INVALID (over a limit given, a loop that stopped, requests that failed)."""
    ttft_ms, tpot_ms = limits.ttft_p99_ms, limits.tpot_p99_ms
    m = figures.measure(r.sent, figures.Load.of(r.kind, r.users), ttft_ms, tpot_ms)
    if not m.answered:
        errors = sorted({s.error for s in r.sent if s.error})
        raise BenchmarkFailed(f"no request of the replay was answered: {'; '.join(errors[:3]) or 'none sent'}")
    out, details = m.values, _counted(r, m)
    reasons = []
    what = "accelbench's closed loop" if r.kind == "closed" else "accelbench's replay"
    if limits.judged and ttft_ms is not None and out["ttft_p99_ms"] > ttft_ms:
        reasons.append(
            f"TTFT over the limit ({what}): p99 TTFT {out['ttft_p99_ms']:.4g} ms over the {ttft_ms:g} ms limit"
        )
    if limits.judged and tpot_ms is not None and out.get("tpot_p99_ms", 0.0) > tpot_ms:
        reasons.append(
            f"TPOT over the limit ({what}): p99 TPOT {out['tpot_p99_ms']:.4g} ms over the {tpot_ms:g} ms limit"
        )
    if r.stopped:
        details["driver"]["stopped"] = r.stopped
        reasons.append(r.stopped)
    failed = [s.error for s in r.sent if s.error]
    if failed:
        reasons.append(f"{len(failed)} of {len(r.sent)} requests failed: {failed[0]}")
    return out, details, reasons


def _m(value: float, unit: str, higher: bool) -> Metric:
    return fig.figure(value, unit, higher_is_better=higher)


def replay_result(
    params: LLMServeParams,
    record: dict[str, Any],
    run: Replayed,
    conditions: dict[str, Any],
    limits: Limits,
    engine: EngineFacts,
    probe: dict[str, Any],
    model: "Figures | None",
) -> Result:
    """The record of a replayed source (a trace, conversations) or a closed loop: the driver's figures by its own
    clock (a closed loop's of its steady window), judged against the limits, the requests' mean lengths as the run
    sent them, how late the driver was."""
    values, counted, reasons = replay_figures(run, limits)
    units = {
        "tokens_per_second": ("output tokens/s", True),
        "requests_per_second": ("requests/s answered", True),
        "offered_requests_per_second": ("requests/s the trace offered", True),
        "tokens_per_second_per_user": ("tokens/s per user", True),
        "goodput_requests_per_second": ("requests/s within limits", True),
        "goodput_tokens_per_second": ("output tokens/s within limits", True),
        "ttft_growth_ms_per_turn": ("ms of median TTFT a turn", False),
        **{f"latency_p{q}_ms": ("ms from send to last token", False) for q in (50, 90, 99)},
    }
    metrics = {k: _m(v, *units.get(k, ("ms", False))) for k, v in values.items()}
    per_device = values["tokens_per_second"] / params.devices_serving
    metrics["tokens_per_second_per_device"] = _m(per_device, "output tokens/s per device", True)
    answered = max(counted.get("measured", counted["answered"]), 1)  # the requests the lengths were summed over
    record = record | {
        "input_tokens": round(counted["input_tokens"] / answered),
        "output_tokens": round(counted["output_tokens"] / answered),
    }
    driver = counted["driver"]
    counted["limits"] = limits.record()
    if run.kind == "closed":
        counted["figure_method"] = (
            f"accelbench's closed loop of {run.users} users by its own clock, {driver['steady']['method']}"
        )
    details = cast(ServingDetails, counted)  # the driver's keys, and the wing's beside them (the same dict)
    details |= {"engine": engine, "probe": probe, "compliant": False}
    if model is not None:
        details["model"] = model_identity(model)
    concerns = fig.concerns_of(None, conditions)
    if reasons:
        details["invalid_reasons"] = reasons
        concerns = [Concern("invalid", f"INVALID: {r}") for r in reasons] + concerns
    result = Result(
        benchmark_of(params), record, metrics=metrics, primary_metric="tokens_per_second", valid=not reasons,
        concerns=concerns, conditions=conditions, details=details,
    )  # fmt: skip
    late = driver["late_requests"]
    if late:
        worst = values["issue_late_max_ms"]
        result.concern(
            "late-issue",
            f"late: {late} of {counted['requests']} requests were sent over {LATE_MS:g} ms after they were "
            f"due (the latest {worst:.3g} ms); the arrivals are partly the driver's",
            late=late,
            max_ms=worst,
        )
    return result
