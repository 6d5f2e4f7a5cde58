"""accelbench's own request driver, for the arrivals LoadGen cannot schedule: a trace's timestamps, the turns of
a conversation, each sent after the answer before it, and a closed loop of N users, each sending its next request
when its last one was answered.

LoadGen issues samples of its library on its own schedule (all at once, or Poisson arrivals at a target rate),
each independent of the others. A production trace has its own arrival times, and a conversation's next turn does
not exist until the previous answer does (its prompt holds that answer). Here each request is a turn of a
session: a trace row is a session of one turn due at its timestamp; a conversation is a session whose first turn
is due when one of ``--batch-size`` users is free and whose later turns are due at the previous answer plus the
think time; a closed loop (``--concurrency N``, the load of vLLM's ``bench serve --max-concurrency`` and AIPerf's
``--concurrency``) is N users, each a run of single-turn sessions drawn from the run's prompts in turn, the next one
due when the user's last request was answered (plus the think time). The driver sends each turn when it is due,
straight to the engine (as LoadGen's issue callback would), and the engine's callbacks time its tokens, as the
LoadGen SUT's do. Where the engine has an event loop of its own (the endpoint engine: :meth:`Engine.event_loop`),
the driver runs on that loop's thread, so a request's send, its chunks and the next user's send are stamped on one
thread, with no hand-over to wait for a core between them (on a busy host each hand-over to a thread that must be
woken cost milliseconds to a hundred, inside the TTFT); an engine without one is driven from a thread of the
driver's own. A request's send is the engine's stamp where it makes one (``Sink.wrote``: as the request is handed to
the HTTP client), else the driver's as it submits it.

A closed loop's figures are of its steady state (:func:`steady_window`): each user's first request is its warm-up
(the N first requests leave together, a burst no later request sees), and the window ends at the last round of
sends every user began (from then users run out of work one by one and fewer than N requests are in flight).

The record says what the driver did as well as what the server did: how late each request was sent against its
due time (``issue_late_*``; a driver that falls behind measures itself, and says so), the load offered (a trace's
rows over its span) against the load served, and, for conversations, each turn's TTFT as its history grows.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from accelbench.errors import BenchmarkFailed
from accelbench.results.details import Details, ReplayDriver, SteadyWindow, TurnRow
from accelbench.serve.engines.base import Engine, TokenRequest

if TYPE_CHECKING:
    from accelbench.serve.limits import Limits
    from accelbench.serve.sources.base import Conversation, Work

#: a request sent later than this after its due time is late (the driver, not the server, set its arrival)
LATE_MS = 10.0
#: seconds the driver waits with nothing due and nothing answered before it calls the replay stalled
DRAIN_SECONDS = 600.0


@dataclass
class Sent:
    """One request the driver sent: its session and turn, when it was due and sent, and what came back."""

    session: int
    turn: int
    due: float  # seconds from the run's start
    prompt_tokens: int
    max_tokens: int
    issued: float = 0.0  # perf_counter
    first: float | None = None
    done: float | None = None
    tokens: int = 0
    error: str | None = None
    gaps: list[float] = field(default_factory=list)
    last: float | None = None
    user: int | None = None  # a closed loop's user (0 to N-1) who sent it


@dataclass(frozen=True)
class ClosedLoop:
    """A closed loop's load: ``users`` users, each sending its next request when its last one was answered, until
    at least ``requests`` requests past the warm-up were sent and ``seconds`` have passed."""

    users: int
    requests: int
    seconds: float
    #: the seconds it should take at the probe's rate (0: not known): its progress's first ETA
    expected: float = 0.0

    @property
    def warmup(self) -> int:
        """The requests left out as warm-up: each user's first (:data:`WARMUP_PER_USER`)."""
        return WARMUP_PER_USER * self.users


def failures_to_stop(users: int) -> int:
    """Failed requests in a row after which a closed loop stops sending: a server that refuses every request
    answers at once, and its users would otherwise resend for the whole planned duration (ten minutes in the
    official profile), filling the request log with one error."""
    return max(16, 2 * users)


#: each closed-loop user's first requests, left out of the figures: the N first requests leave at once, a burst of
#: prefills no later request meets, and find the engine as the probe left it
WARMUP_PER_USER = 1


@dataclass(frozen=True)
class Replayed:
    """What a replay measured: every request sent, the run's start, and its settings."""

    sent: list[Sent]
    start: float
    end: float
    kind: str  # "trace", "conversations" or "closed"
    users: int | None  # conversations: users in flight at most; closed: the loop's users
    think_seconds: float
    most_in_flight: int = 0  # the most requests the driver had in flight at once (sent, not yet answered)
    stopped: str | None = None  # why a closed loop stopped sending before its plan was done


class Driver:
    """Sends a :class:`Work`'s sessions to an engine when each turn is due (the engine's sink, too)."""

    def __init__(
        self,
        engine: Engine,
        work: "Work",
        users: int,
        think_seconds: float = 0.0,
        shape: Callable[[int, list[int]], list[int]] | None = None,
        closed: ClosedLoop | None = None,
    ) -> None:
        """``shape``: what is done to each prompt as it is sent (counted for the prefix cache, made distinct where
        the source asks); ``closed``: a closed loop of the work's prompts (its users replace ``users``)."""
        self.engine = engine
        self.work = work
        self.closed = closed
        self.users = closed.users if closed is not None else users
        self.think = think_seconds
        self.shape = shape
        self.sent: list[Sent] = []
        self._by_id: dict[int, Sent] = {}
        self._history: dict[int, list[int]] = {}  # a conversation's prompt and answers so far
        self._due: list[tuple[float, int, int, int]] = []  # (due, order, session, turn)
        self._order = itertools.count()
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._open = 0  # sessions not yet finished
        self._next_session = 0
        self.start = 0.0
        self._last_event = 0.0  # the last send or answer (perf_counter): a replay quiet for the timeout stalled
        self._user_of: dict[int, int] = {}  # a closed loop's session -> the user who sends it
        self._in_flight = 0
        self.most_in_flight = 0
        self._failed_in_a_row = 0
        self.stopped: str | None = None
        self.progress: Callable[[int], None] | None = None
        #: wakes the sending loop when a turn becomes due: the condition's notify on the driver's own thread, an
        #: asyncio event where the driver runs on the engine's loop
        self._notify: Callable[[], None] = self._wake.notify

    @property
    def kind(self) -> str:
        """What is replayed: "closed" (a closed loop), "conversations" or "trace"."""
        if self.closed is not None:
            return "closed"
        return "conversations" if self.work.conversations is not None else "trace"

    @property
    def _conversations(self) -> list["Conversation"] | None:
        c = self.work.conversations
        return c.conversations if c is not None else None

    def run(self, timeout: float = DRAIN_SECONDS) -> Replayed:
        """Send every session's turns when due; the requests, once all are answered (or failed)."""
        convs = self._conversations
        sessions = len(convs) if convs is not None else len(self.work.prompts)
        self._open = sessions
        with self._wake:
            if self.closed is not None:  # every user's first request at once; the next ones as users are freed
                self._open = 0
                for user in range(self.closed.users):
                    self._start_closed(0.0, user)
            elif convs is None:
                arrivals = self.work.arrivals or [0.0] * sessions
                for i, at in enumerate(arrivals):
                    heapq.heappush(self._due, (at, next(self._order), i, 0))
                self._next_session = sessions
            else:
                for _ in range(min(self.users, sessions)):
                    self._start_session(0.0)
        loop = self.engine.event_loop()
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._send_on_loop(timeout), loop).result()
        else:
            self.start = self._last_event = time.perf_counter()
            self._send_on_thread(timeout)
        end = time.perf_counter()
        if self._open:
            answered = sum(1 for s in self.sent if s.done is not None)
            raise BenchmarkFailed(
                f"the replay stalled: {answered} of {len(self.sent)} requests answered, {self._open} sessions open, "
                f"nothing answered in {timeout:g} s"
            )
        users = self.users if self.kind != "trace" else None
        return Replayed(self.sent, self.start, end, self.kind, users, self.think, self.most_in_flight, self.stopped)

    def _next(self, timeout: float) -> tuple[float, int, int] | float | None:
        """The turn to send now (due, session, turn), or the seconds to wait for one (called holding the lock);
        None: every session is done, or nothing was sent or answered for ``timeout`` seconds (a stall)."""
        if not self._open:
            return None
        if not self._due:  # every session waits on an answer: it has been quiet for how long?
            quiet = time.perf_counter() - self._last_event
            return timeout - quiet if quiet < timeout else None
        due, _, session, turn = self._due[0]
        wait = self.start + due - time.perf_counter()
        if wait > 0:
            return wait  # a turn due sooner may come in meanwhile
        heapq.heappop(self._due)
        return due, session, turn

    def _send_on_thread(self, timeout: float) -> None:
        """The sending loop on the driver's own thread: the engine's callbacks notify it from theirs."""
        while True:
            with self._wake:
                step = self._next(timeout)
                if isinstance(step, float):
                    self._wake.wait(timeout=step)
                    continue
            if step is None:
                return
            self._send(step[1], step[2], step[0])

    async def _send_on_loop(self, timeout: float) -> None:
        """The sending loop as a task on the engine's event loop, whose callbacks (every answer) run on the same
        thread: a turn made due by an answer is sent on the loop's next pass."""
        woken = asyncio.Event()
        self._notify = woken.set
        self.start = self._last_event = time.perf_counter()
        while True:
            with self._wake:  # the engine's callbacks run on this thread: the lock is never contended here
                step = self._next(timeout)
            if step is None:
                return
            if isinstance(step, float):
                woken.clear()
                try:
                    await asyncio.wait_for(woken.wait(), timeout=step)
                except asyncio.TimeoutError:
                    pass
                continue
            self._send(step[1], step[2], step[0])

    def _start_closed(self, due: float, user: int) -> None:
        """``user``'s next request, due at ``due`` (called holding the lock), while the loop wants more: fewer
        sessions than its requests and warm-up, or less time than its seconds since the start."""
        loop = self.closed
        assert loop is not None
        elapsed = time.perf_counter() - self.start if self.start else 0.0
        if self._next_session >= loop.requests + loop.warmup and elapsed >= loop.seconds:
            return
        session = self._next_session
        self._next_session += 1
        self._open += 1
        self._user_of[session] = user
        heapq.heappush(self._due, (due, next(self._order), session, 0))

    def _start_session(self, due: float) -> None:
        """The next conversation's first turn, due at ``due`` (called holding the lock)."""
        convs = self._conversations
        if convs is None or self._next_session >= len(convs):
            return
        heapq.heappush(self._due, (due, next(self._order), self._next_session, 0))
        self._next_session += 1

    def _prompt(self, session: int, turn: int) -> tuple[list[int], int]:
        convs = self._conversations
        if convs is None:  # a closed loop draws the prompts in turn, again from the first once all were sent
            sample = session % len(self.work.prompts)
            return self.work.prompts[sample], self.work.outs[sample]
        t = convs[session].turns[turn]
        prompt = self._history.get(session, []) + list(t.user)
        return prompt, max(t.answer_tokens, 2)

    def _send(self, session: int, turn: int, due: float) -> None:
        prompt, out = self._prompt(session, turn)
        request_id = next(self._ids)
        if self.shape is not None:  # a trace row (a closed loop's prompt) is its library's sample; a turn is its own
            sample = session % len(self.work.prompts)
            prompt = self.shape(sample if self._conversations is None else -1 - request_id, prompt)
        sent = Sent(session, turn, due, len(prompt), out, user=self._user_of.get(session))
        request = TokenRequest(request_id, request_id, prompt, out)
        with self._wake:
            self._by_id[request_id] = sent
            self.sent.append(sent)
            if self._conversations is not None:
                self._history[session] = prompt
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        sent.issued = self._last_event = time.perf_counter()
        self.engine.submit([request])
        if self.progress is not None:
            self.progress(len(self.sent))

    # the engine's sink
    def wrote(self, request: TokenRequest, at: float) -> None:
        """The engine wrote the request at ``at`` (perf_counter): its TTFT and lateness are timed from there."""
        self._by_id[request.id].issued = at

    def first(self, request: TokenRequest, token: int) -> None:
        s = self._by_id[request.id]
        s.first = s.last = time.perf_counter()

    def step(self, request: TokenRequest, count: int) -> None:
        s = self._by_id[request.id]
        now = time.perf_counter()
        if s.last is not None:
            s.gaps.extend([(now - s.last) / count] * count)
        s.last = now

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        now = time.perf_counter()
        s = self._by_id[request.id]
        s.done, s.tokens = now, len(tokens)
        if s.first is None:
            s.first = now
        self._finished(s, tokens)

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        s = self._by_id[request.id]
        s.done = time.perf_counter()
        s.error = str(error) if getattr(error, "plain", False) else f"{type(error).__name__}: {error}"
        self._finished(s, None)

    def _finished(self, s: Sent, tokens: list[int] | None) -> None:
        """The session's next turn (a conversation: due after the think time, its history the answer), or its end
        (and the next conversation's start, for the user it freed)."""
        convs = self._conversations
        with self._wake:
            self._last_event = time.perf_counter()
            self._in_flight -= 1
            if self.closed is not None:  # the user is free: its next request after the think time, if any is left
                self._open -= 1
                user = self._user_of.pop(s.session)
                self._failed_in_a_row = self._failed_in_a_row + 1 if s.error is not None else 0
                if self._failed_in_a_row >= failures_to_stop(self.closed.users) and self.stopped is None:
                    self.stopped = (
                        f"the closed loop stopped sending: {self._failed_in_a_row} requests failed in a row "
                        f"({s.error})"
                    )
                if self.stopped is None:
                    self._start_closed((s.done or self._last_event) - self.start + self.think, user)
                self._notify()
                return
            more = convs is not None and tokens is not None and s.turn + 1 < len(convs[s.session].turns)
            if more:
                self._history[s.session] = self._history[s.session] + list(tokens or [])
                due = (s.done or time.perf_counter()) - self.start + self.think
                heapq.heappush(self._due, (due, next(self._order), s.session, s.turn + 1))
            else:
                self._open -= 1
                self._history.pop(s.session, None)
                self._start_session(time.perf_counter() - self.start)
            self._notify()


def _pct(values: list[float], p: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values), p))


@dataclass(frozen=True)
class Window:
    """A closed loop's steady state, in ``perf_counter`` seconds: from the moment every user had sent its first
    request past the warm-up to the moment every user had sent as many requests as the one that sent fewest."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


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


def steady_window(r: Replayed, warmup_per_user: int = WARMUP_PER_USER) -> Window | None:
    """The closed loop's steady window (:data:`STEADY_METHOD`), or None where the run was too short to have one
    (a user that never sent past its warm-up, or no time between the window's ends).

    Both ends are rounds of sends, not answers: with answers of one length a loop's users move in step, their
    answers arriving in waves, and each user sends the moment its answer came. A window from the round after the
    warm-up to the last round every user began holds whole waves: the answers of the rounds between, all of them,
    over their whole time. Ending at the run's last send instead would cut the last wave (the loop stops as soon as
    it has sent enough, mid-round), its time counted and part of its answers not, and read the rate low."""
    by_user: dict[int | None, list[Sent]] = {}
    for s in sorted(r.sent, key=lambda s: s.issued):
        by_user.setdefault(s.user, []).append(s)
    if len(by_user) < (r.users or 1) or any(len(v) <= warmup_per_user + 1 for v in by_user.values()):
        return None
    last = min(len(v) for v in by_user.values()) - 1  # the last round every user began
    start = max(v[warmup_per_user].issued for v in by_user.values())
    end = max(v[last].issued for v in by_user.values())
    return Window(start, end) if end > start else None


class ReplayDetails(Details, total=False):
    """What :func:`figures` keeps beside the figures: the record's typed keys (the driver, the counts of requests
    and tokens, the requests answered and a closed loop's ``measured``, a conversation's turns), and the driver's
    own counts, which a person reads (``failed``, ``span_seconds``, the first ``errors``)."""

    failed: int
    span_seconds: float
    errors: list[str]


def figures(r: Replayed, limits: "Limits") -> tuple[dict[str, float], ReplayDetails, list[str]]:
    """The replay's figures (name -> value, milliseconds and per second), what the record keeps beside them, and
    why it is INVALID (over a limit), from each request's times by the driver's clock; a closed loop's from its
    steady window (:func:`steady_window`)."""
    ok = [s for s in r.sent if s.error is None and s.done is not None and s.first is not None]
    if not ok:
        errors = sorted({s.error for s in r.sent if s.error})
        raise BenchmarkFailed(f"no request of the replay was answered: {'; '.join(errors[:3]) or 'none sent'}")
    first_issue = min(s.issued for s in r.sent)
    last_answer = max(s.done for s in ok if s.done is not None)
    span = max(last_answer - first_issue, 1e-9)
    steady: SteadyWindow | None = None
    if r.kind == "closed":
        window = steady_window(r)
        inside = [s for s in ok if s.done is not None and window.start < s.done <= window.end] if window else []
        if window is not None and inside:
            ok, span = inside, window.seconds
            steady = {
                "method": STEADY_METHOD,
                "warmup_requests": WARMUP_PER_USER * (r.users or 1),
                "start_s": window.start - r.start,
                "end_s": window.end - r.start,
                "seconds": window.seconds,
                "requests": len(inside),
                "left_out": len(r.sent) - len(inside),
            }
        else:
            steady = {
                "method": "every answered request, from the first send to the last answer: the run was too short "
                "for a steady window (a user sent too few requests past its warm-up, or none was answered "
                "inside the window)",
                "warmup_requests": 0,
                "requests": len(ok),
                "left_out": len(r.sent) - len(ok),
            }
    tokens = sum(s.tokens for s in ok)
    ttft = [1e3 * (s.first - s.issued) for s in ok if s.first is not None]
    tpot = [1e3 * (s.done - s.first) / (s.tokens - 1) for s in ok if s.tokens > 1 and s.done and s.first]
    late = [1e3 * max(0.0, s.issued - (r.start + s.due)) for s in r.sent]
    out: dict[str, float] = {
        "tokens_per_second": tokens / span,
        "requests_per_second": len(ok) / span,
        "issue_late_p50_ms": _pct(late, 50),
        "issue_late_p99_ms": _pct(late, 99),
        "issue_late_max_ms": max(late),
    }
    for p in (50, 90, 99):
        out[f"ttft_p{p}_ms"] = _pct(ttft, p)
        if tpot:
            out[f"tpot_p{p}_ms"] = _pct(tpot, p)
    if out.get("tpot_p50_ms"):
        out["tokens_per_second_per_user"] = 1000 / out["tpot_p50_ms"]
    gaps = [1e3 * g for s in ok for g in s.gaps]
    if gaps:
        for p in (50, 90, 99):
            out[f"itl_p{p}_ms"] = _pct(gaps, p)
    if r.kind == "closed":  # a user's wait for the whole answer: what sets the loop's pace
        latency = [1e3 * (s.done - s.issued) for s in ok if s.done is not None]
        for p in (50, 90, 99):
            out[f"latency_p{p}_ms"] = _pct(latency, p)
    dues = [s.due for s in r.sent]
    offered_span = max(dues) - min(dues)
    if r.kind == "trace" and offered_span > 0:
        out["offered_requests_per_second"] = (len(dues) - 1) / offered_span
    ttft_ms, tpot_ms = limits.ttft_p99_ms, limits.tpot_p99_ms
    if ttft_ms is not None and tpot_ms is not None:
        good = [s for s, t in zip(ok, ttft, strict=True) if t <= ttft_ms and _tpot(s) * 1e3 <= tpot_ms]
        out["goodput_requests_per_second"] = len(good) / span
        out["goodput_tokens_per_second"] = sum(s.tokens for s in good) / span
    why = {
        "trace": "a trace's timestamps",
        "conversations": "a conversation's turns after their answers",
        "closed": "a closed loop's requests, each after its user's last answer,",
    }[r.kind]
    driver: ReplayDriver = {
        "name": "accelbench closed loop" if r.kind == "closed" else "accelbench replay",
        "why": "LoadGen schedules its own arrivals and issues samples independently; "
        + why
        + " are sent by accelbench's driver instead",
        "clock": "time.perf_counter in this process, from the send to the engine's callbacks",
        "late_ms": LATE_MS,
        "late_requests": sum(1 for x in late if x > LATE_MS),
    }
    details: ReplayDetails = {
        "driver": driver,
        "requests": len(r.sent),
        "answered": sum(1 for s in r.sent if s.error is None and s.done is not None and s.first is not None),
        "failed": sum(1 for s in r.sent if s.error is not None or s.done is None or s.first is None),
        "output_tokens": tokens,
        "input_tokens": sum(s.prompt_tokens for s in ok),
        "span_seconds": span,
    }
    if steady is not None:
        driver |= {"users": r.users, "think_ms": r.think_seconds * 1e3, "most_in_flight": r.most_in_flight}
        driver["steady"] = steady
        details["measured"] = len(ok)
    if r.kind == "conversations":
        turns = details["turns"] = per_turn(ok)
        driver |= {"users": r.users, "think_ms": r.think_seconds * 1e3}
        growth = ttft_growth(turns)
        if growth is not None:
            out["ttft_growth_ms_per_turn"] = growth
    errors = [s.error for s in r.sent if s.error]
    if errors:
        details["errors"] = sorted(set(errors))[:5]
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
    if errors:
        reasons.append(f"{len(errors)} of {len(r.sent)} requests failed: {errors[0]}")
    return out, details, reasons


def _tpot(s: Sent) -> float:
    return (s.done - s.first) / (s.tokens - 1) if s.tokens > 1 and s.done and s.first else 0.0


def per_turn(ok: list[Sent]) -> list[TurnRow]:
    """Each turn's requests, prompt tokens and TTFT (the history grows turn by turn, and its prefill with it)."""
    rows: list[TurnRow] = []
    for turn in sorted({s.turn for s in ok}):
        of = [s for s in ok if s.turn == turn]
        ttft = [1e3 * (s.first - s.issued) for s in of if s.first is not None]
        rows.append({
            "turn": turn + 1,
            "requests": len(of),
            "prompt_tokens_mean": sum(s.prompt_tokens for s in of) / len(of),
            "ttft_p50_ms": _pct(ttft, 50),
            "ttft_p99_ms": _pct(ttft, 99),
        })  # fmt: skip
    return rows


def ttft_growth(turns: list[TurnRow]) -> float | None:
    """The least-squares slope of the median TTFT over the turn number, in ms a turn (None for one turn)."""
    if len(turns) < 2:
        return None
    xs = [float(t["turn"]) for t in turns]
    ys = [float(t["ttft_p50_ms"]) for t in turns]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None
