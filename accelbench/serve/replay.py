"""accelbench's own request driver, for the arrivals LoadGen cannot schedule: a trace's timestamps, conversations'
turns (each after the answer before it) and a closed loop of users. Each request is a turn of a session, sent
when due straight to the engine, on the engine's own event loop where it has one (no hand-over between threads
inside a TTFT); it hands on every request's :class:`~accelbench.serve.rows.RequestRow`."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from accelbench.errors import BenchmarkFailed
from accelbench.results.details import Details
from accelbench.serve.engines.base import Engine, TokenRequest
from accelbench.serve.figures import WARMUP_PER_USER
from accelbench.serve.rows import InFlight, RequestRow

if TYPE_CHECKING:
    from accelbench.serve.sources.base import Conversation, Work

#: a request sent later than this after its due time is late (the driver, not the server, set its arrival)
LATE_MS = 10.0
#: seconds the driver waits with nothing due and nothing answered before it calls the replay stalled
DRAIN_SECONDS = 600.0


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


@dataclass(frozen=True)
class Replayed:
    """What a replay measured: every request sent (in the order sent), the run's start, and its settings."""

    sent: list[RequestRow]
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
        self._sent: list[InFlight] = []  # every request, in the order sent (its id is its place)
        self._by_id: dict[int, InFlight] = {}
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
            answered = sum(1 for s in self._sent if s.done is not None)
            raise BenchmarkFailed(
                f"the replay stalled: {answered} of {len(self._sent)} requests answered, {self._open} sessions open, "
                f"nothing answered in {timeout:g} s"
            )
        users = self.users if self.kind != "trace" else None
        return Replayed(self.rows(), self.start, end, self.kind, users, self.think, self.most_in_flight, self.stopped)

    def rows(self) -> list[RequestRow]:
        """Every request sent so far, as its row (one still unanswered: failed, with no answer)."""
        return [s.row(self.start) for s in self._sent]

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
        talk = self._conversations is not None  # a turn's row says its session and turn (from 1)
        sent = InFlight(request_id, session, len(prompt), 0.0, due, self._user_of.get(session),
                        session if talk else None, turn + 1 if talk else None)  # fmt: skip
        request = TokenRequest(request_id, request_id, prompt, out)
        with self._wake:
            self._by_id[request_id] = sent
            self._sent.append(sent)
            if self._conversations is not None:
                self._history[session] = prompt
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        sent.sent = self._last_event = time.perf_counter()
        self.engine.submit([request])
        if self.progress is not None:
            self.progress(len(self._sent))

    # the engine's sink
    def wrote(self, request: TokenRequest, at: float) -> None:
        """The engine wrote the request at ``at`` (perf_counter): its TTFT and lateness are timed from there."""
        self._by_id[request.id].sent = at

    def first(self, request: TokenRequest, token: int) -> None:
        s = self._by_id[request.id]
        s.first = s.last = time.perf_counter()

    def step(self, request: TokenRequest, count: int) -> None:
        self._by_id[request.id].step(time.perf_counter(), count)

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        now = time.perf_counter()
        s = self._by_id[request.id]
        s.done, s.output_tokens = now, len(tokens)
        if s.first is None:
            s.first = now
        self._finished(s, tokens)

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        s = self._by_id[request.id]
        s.done = time.perf_counter()
        s.error = str(error) if getattr(error, "plain", False) else f"{type(error).__name__}: {error}"
        self._finished(s, None)

    def _finished(self, s: InFlight, tokens: list[int] | None) -> None:
        """The session's next turn (a conversation: due after the think time, its history the answer), or its end
        (and the next conversation's start, for the user it freed)."""
        convs = self._conversations
        session, turn = s.sample or 0, s.turn or 0  # a turn's row counts from 1: the next turn's index
        with self._wake:
            self._last_event = time.perf_counter()
            self._in_flight -= 1
            if self.closed is not None:  # the user is free: its next request after the think time, if any is left
                self._open -= 1
                user = self._user_of.pop(session)
                self._failed_in_a_row = self._failed_in_a_row + 1 if s.error is not None else 0
                if self._failed_in_a_row >= failures_to_stop(self.closed.users) and self.stopped is None:
                    self.stopped = (
                        f"the closed loop stopped sending: {self._failed_in_a_row} requests failed in a row ({s.error})"
                    )
                if self.stopped is None:
                    self._start_closed((s.done or self._last_event) - self.start + self.think, user)
                self._notify()
                return
            more = convs is not None and tokens is not None and turn < len(convs[session].turns)
            if more:
                self._history[session] = self._history[session] + list(tokens or [])
                due = (s.done or time.perf_counter()) - self.start + self.think
                heapq.heappush(self._due, (due, next(self._order), session, turn))
            else:
                self._open -= 1
                self._history.pop(session, None)
                self._start_session(time.perf_counter() - self.start)
            self._notify()


class ReplayDetails(Details, total=False):
    """What a replay's record keeps beside its figures (:func:`accelbench.serve.drive.replay_figures`): the typed
    keys of :class:`Details`, and the driver's own counts a person reads (``failed``, ``span_seconds``, ``errors``)."""

    failed: int
    span_seconds: float
    errors: list[str]
