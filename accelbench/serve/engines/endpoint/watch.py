"""The client measured while it measures a server: did the client, not the server, limit the run?

Four signs: the client's thread busy nearly all the time, its event loop late (a timer due every ``TICK`` seconds),
requests reaching the loop late (dispatch) and requests waiting for a connection (queue). The last two delay a
send, so they count only where requests have arrivals of their own (:func:`limited_by`); a busy thread or a late
loop reads chunks late, which every run's TPOT carries, so they count in every run (:func:`late`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

#: seconds between the loop-lag timer's ticks
TICK = 0.01
#: the client thread's CPU share over which the client is called saturated
BUSY = 0.9
#: p99 loop lag (ms) over which the client is called late
LATE_MS = 5.0
#: the cores the client's whole process used under which a late loop waited for a core other processes held (the
#: words say so), where a busy process held itself up (its other threads, the GIL): late either way
PROCESS_BUSY = 0.5
#: the share of the run the loop's thread waited in the kernel's run queue from which its lateness is the host's
#: (a core other processes held), under which its own callbacks held it
STARVED = 0.1
#: a request that waited longer than this (ms) for a connection was queued here; more than ``QUEUED_SHARE`` of
#: the requests queued (in Server) and the client held back LoadGen's arrivals
QUEUED_MS, QUEUED_SHARE = 1.0, 0.01
#: what a record of a run without arrivals says of its dispatch and queue figures (:func:`limited_by`)
NOT_JUDGED = (
    "dispatch and queue: the whole query was handed over at once, so requests wait for a connection by design; "
    "only the client's thread and loop are judged"
)


def _schedstat(tid: int | None) -> tuple[float, float] | None:
    """A thread's seconds on a core and waiting in the kernel's run queue for one, since it started (Linux's
    ``/proc/self/task/TID/schedstat``), or None where the kernel keeps none."""
    if tid is None:
        return None
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            ran, waited = f.read().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return None


class ClientWatch:
    def __init__(self) -> None:
        self.lags: list[float] = []
        self.waits: list[float] = []
        self.dispatches: list[float] = []
        #: requests sent again because the kept-alive connection they went out on had been closed by the server
        self.retried = 0
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = self._wall0 = self._proc0 = 0.0
        self._cpu = self._wall = self._proc = 0.0
        self._tid: int | None = None  # the loop's thread (its kernel id), whose run-queue wait is read
        self._sched0: tuple[float, float] | None = None
        self._sched_end: tuple[float, float] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop's thread: the ticker and the CPU clock start."""
        self._cpu0, self._wall0, self._proc0 = time.thread_time(), time.perf_counter(), time.process_time()
        self._tid = threading.get_native_id()
        self._sched0 = _schedstat(self._tid)
        self._task = loop.create_task(self._tick())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._sched_end = _schedstat(self._tid)  # the thread's last reading: a report may come after it ended

    def waited(self, dispatch: float, slot: float) -> None:
        """A request took ``dispatch`` seconds from LoadGen's issue to the loop, then waited ``slot`` seconds for
        a connection."""
        self.dispatches.append(dispatch)
        self.waits.append(slot)

    async def _tick(self) -> None:
        due = time.perf_counter() + TICK
        while True:
            await asyncio.sleep(max(due - time.perf_counter(), 0.0))
            now = time.perf_counter()
            self.lags.append(now - due)
            # the loop thread's CPU, read on that thread (thread_time is per thread)
            self._cpu, self._wall = time.thread_time() - self._cpu0, now - self._wall0
            self._proc = time.process_time() - self._proc0  # every thread of the process: its cores
            due = now + TICK

    def report(self, connections: int, arrivals: bool) -> dict[str, Any]:
        """Figures since the last report, and ``limited_by``: why the client limited the run, or absent
        (judged by :func:`limited_by`; ``arrivals``: the run's requests came on a schedule of their own)."""
        import numpy as np

        cpu_share = self._cpu / self._wall if self._wall > 0 else 0.0
        lags = np.asarray(self.lags or [0.0]) * 1e3
        waits = np.asarray(self.waits or [0.0]) * 1e3
        dispatch = np.asarray(self.dispatches or [0.0]) * 1e3
        queued = int((waits > QUEUED_MS).sum())
        out: dict[str, Any] = {
            "connections": connections,
            "client_cpu_share": round(cpu_share, 3),
            "loop_lag_p99_ms": round(float(np.percentile(lags, 99)), 3),
            "dispatch_p99_ms": round(float(np.percentile(dispatch, 99)), 3),
            "requests": len(self.waits),
            "resent_on_closed_connection": self.retried,
            "queued_requests": queued,
            "queue_wait_p99_ms": round(float(np.percentile(waits, 99)), 3),
            "method": "the client thread's CPU time over wall time (time.thread_time), its process's (all threads: "
            "time.process_time) in cores, the share of the time its thread was ready to run and waited for a core "
            "(the kernel's run queue: /proc schedstat, where Linux keeps it); lateness of a "
            f"{TICK * 1e3:g} ms timer on its event loop; time from LoadGen's issue to the loop (dispatch), then to a "
            "free connection (queue)",
        }
        if self._wall > 0:  # the process's cores over the same wall time (a watch never started: none)
            out["process_cores"] = round(self._proc / self._wall, 3)
        sched = _schedstat(self._tid) or self._sched_end
        if sched is not None and self._sched0 is not None and self._wall > 0:
            # the loop's thread: how much of the run it waited for a core it was ready to run on
            out["loop_runq_wait_share"] = round((sched[1] - self._sched0[1]) / self._wall, 3)
            self._sched0 = sched
        if not arrivals:
            out["not_judged"] = NOT_JUDGED
        why = limited_by(out, arrivals)
        if why:
            out["limited_by"] = why
        lateness = late(out, arrivals)
        if lateness:
            out["late"] = lateness
        self.lags, self.waits, self.dispatches, self.retried = [], [], [], 0
        self._cpu0, self._wall0, self._proc0 = (
            self._cpu0 + self._cpu,
            self._wall0 + self._wall,
            self._proc0 + self._proc,
        )
        self._cpu = self._wall = self._proc = 0.0
        return out


def late(figures: dict[str, Any], arrivals: bool) -> str | None:
    """Why the client's clock cannot be trusted to the millisecond, or None: its event loop ran more than
    :data:`LATE_MS` late at p99 (each chunk read as late, whole streams stamped in bursts), or, where requests have
    arrivals of their own, they reached the loop as late after they were issued. Judged whatever the client's CPU
    share: a starved thread is as late as a busy one; the words say which it was."""
    why = []
    if figures["loop_lag_p99_ms"] > LATE_MS:
        lag = figures["loop_lag_p99_ms"]
        why.append(f"its event loop ran {lag:.3g} ms late at p99 (over the {LATE_MS:g} ms bound)")
    if arrivals and figures["dispatch_p99_ms"] > LATE_MS:
        why.append(f"requests reached its loop {figures['dispatch_p99_ms']:.3g} ms after they were issued (p99)")
    if not why:
        return None
    cores, queued = figures.get("process_cores"), figures.get("loop_runq_wait_share")
    starved = float(queued) >= STARVED if queued is not None else cores is not None and float(cores) < PROCESS_BUSY
    if starved:
        waited = f" ({float(queued):.0%} of the run in the kernel's run queue)" if queued is not None else ""
        used = f"its process used {float(cores):.2g} of a core: " if cores is not None else ""
        why.append(
            f"{used}it waited for a core other processes held{waited}; give the client a core of its own (taskset "
            "-c) or the server's priority"
        )
    elif queued is not None:
        why.append(
            f"its own work held its loop (its thread waited for a core {float(queued):.0%} of the run): fewer "
            "users per client process, or a faster host for the client"
        )
    return "the client was late: " + "; ".join(why)


def limited_by(figures: dict[str, Any], arrivals: bool) -> str | None:
    """Why the client limited a run, from its recorded figures (a :meth:`ClientWatch.report`), or None.

    ``arrivals``: each request is timed from an arrival of its own (Server, a trace, a conversation's turns), so a
    request that reached the loop late or waited for a connection carries the client's delay. Without arrivals
    (Offline) those waits are the scenario's own queue, and only the client's thread and loop are judged."""
    why = []
    cpu_share = float(figures["client_cpu_share"])
    if cpu_share >= BUSY:
        why.append(f"the client's thread was busy {cpu_share:.0%} of the time (its CPU saturated)")
    lateness = late(figures, arrivals)
    if lateness:
        why.append(lateness)
    queued, requests = figures["queued_requests"], figures["requests"]
    if arrivals and queued > QUEUED_SHARE * requests:
        why.append(
            f"{queued} of {requests} requests waited for one of the {figures['connections']} connections "
            f"(p99 {figures['queue_wait_p99_ms']:.3g} ms; raise --batch-size, the connections at most)"
        )
    return "; ".join(why) or None
