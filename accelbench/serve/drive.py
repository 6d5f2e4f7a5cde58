"""accelbench's own driver for the loads LoadGen cannot schedule: a trace's timed arrivals, conversations' turns
each sent after the previous answer, and a closed loop of users; and the record of what it sent.

The run (:mod:`accelbench.serve.run`) chooses it for a replayed source (``Work.replayed``) and for ``--concurrency``;
the driver itself (its sessions, its clock, its figures) is :mod:`accelbench.serve.replay`. A closed loop is sized
as LoadGen would size a Server run of the profile (:func:`closed_plan`), so its figures stand beside one's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accelbench.kit.context import RunContext
from accelbench.loadgen import settings as lgset
from accelbench.results.record import Result
from accelbench.serve import requests
from accelbench.serve.limits import mlperf_name
from accelbench.serve.loadgen import MAX_PLANNED_REQUESTS, quick_requests
from accelbench.serve.probe import TokenProbe
from accelbench.serve.results import replay_result
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.stage import Stage

if TYPE_CHECKING:
    from accelbench.results.details import FindPeak
    from accelbench.serve.replay import ClosedLoop, Replayed

#: seconds between a replay's progress lines
PROGRESS_EVERY = 2.0


def closed_plan(params: LLMServeParams, benchmark: str, rate: float) -> "ClosedLoop":
    """How long a closed loop runs: as a Server run of the profile would (LoadGen's settings for the preset's
    benchmark: its minimum duration and requests; the quick profile's requests as :func:`quick_requests` sizes them
    at the probe's rate), past each user's warm-up request; at least three rounds of its users (a steady window
    needs every user to send past its warm-up), and one round more for the cool-down the window leaves out. With
    ``--num-requests N``, N requests past the warm-up and no minimum duration (vLLM's ``--num-prompts N``)."""
    from accelbench.serve.replay import ClosedLoop

    users = int(params.concurrency)
    if params.num_requests:
        expected = (params.num_requests + users) / rate if rate > 0 else 0.0
        return ClosedLoop(users, params.num_requests, 0.0, expected)
    s = lgset.base(replace(params, scenario="server"), params.mode, mlperf_name=mlperf_name(benchmark, "server"))
    least = int(s.min_query_count)
    if params.profile != "official":
        least = quick_requests(min(rate, MAX_PLANNED_REQUESTS), least)
    planned = max(least, 3 * users) + users
    seconds = s.min_duration_ms / 1000
    expected = max(seconds, (planned + users) / rate) if rate > 0 else 0.0  # the probe's rate: a first ETA
    return ClosedLoop(users, planned, seconds, expected)


def replay(params: LLMServeParams, ctx: RunContext, stage: Stage, loop: "ClosedLoop | None" = None) -> "Driven":
    """The source's sessions sent by accelbench's driver (``loop``: a closed loop of the source's prompts), under
    the conditions monitor; the requests and the conditions."""
    from accelbench.devices.kind import monitored_indices
    from accelbench.measure.conditions import ConditionsMonitor
    from accelbench.measure.heap import frozen_heap
    from accelbench.serve.replay import Driver

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
        replayed = requests.drive(driver, ctx.log_dir)  # driver.run(), its requests kept in the logs
    return Driven(stage, replayed, monitor.conditions.to_dict())


@dataclass(frozen=True)
class Driven:
    """What accelbench's driver sent (each request's times) and the conditions it ran in."""

    stage: Stage
    sent: "Replayed"
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
