"""accelbench's own request driver, for the arrivals LoadGen cannot schedule: a trace's timestamps, and the turns of
a conversation, each sent after the answer before it.

LoadGen issues samples of its library on its own schedule (all at once, or Poisson arrivals at a target rate),
each independent of the others. A production trace has its own arrival times, and a conversation's next turn does
not exist until the previous answer does (its prompt holds that answer). Here each request is a turn of a
session: a trace row is a session of one turn due at its timestamp; a conversation is a session whose first turn
is due when one of ``--batch-size`` users is free and whose later turns are due at the previous answer plus the
think time. One thread sends each turn when it is due, straight to the engine (as LoadGen's issue callback would),
and the engine's callbacks time its tokens, as the LoadGen SUT's do.

The record says what the driver did as well as what the server did: how late each request was sent against its
due time (``issue_late_*``; a driver that falls behind measures itself, and says so), the load offered (a trace's
rows over its span) against the load served, and, for conversations, each turn's TTFT as its history grows.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from accelbench.errors import BenchmarkFailed
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


@dataclass(frozen=True)
class Replayed:
    """What a replay measured: every request sent, the run's start, and its settings."""

    sent: list[Sent]
    start: float
    end: float
    kind: str  # "trace" or "conversations"
    users: int | None  # conversations: users in flight at most
    think_seconds: float


class Driver:
    """Sends a :class:`Work`'s sessions to an engine when each turn is due (the engine's sink, too)."""

    def __init__(
        self,
        engine: Engine,
        work: "Work",
        users: int,
        think_seconds: float = 0.0,
        shape: Callable[[int, list[int]], list[int]] | None = None,
    ) -> None:
        """``shape``: what is done to each prompt as it is sent (counted for the prefix cache, made distinct where
        the source asks)."""
        self.engine = engine
        self.work = work
        self.users = users
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
        self.progress: Callable[[int], None] | None = None

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
            if convs is None:
                arrivals = self.work.arrivals or [0.0] * sessions
                for i, at in enumerate(arrivals):
                    heapq.heappush(self._due, (at, next(self._order), i, 0))
                self._next_session = sessions
            else:
                for _ in range(min(self.users, sessions)):
                    self._start_session(0.0)
        self.start = self._last_event = time.perf_counter()
        while True:
            with self._wake:
                if not self._open:
                    break
                if not self._due:  # every session waits on an answer: it has been quiet for how long?
                    quiet = time.perf_counter() - self._last_event
                    if quiet >= timeout:
                        break
                    self._wake.wait(timeout=timeout - quiet)
                    continue
                due, _, session, turn = self._due[0]
                wait = self.start + due - time.perf_counter()
                if wait > 0:
                    self._wake.wait(timeout=wait)  # a turn due sooner may come in meanwhile
                    continue
                heapq.heappop(self._due)
            self._send(session, turn, due)
        end = time.perf_counter()
        if self._open:
            answered = sum(1 for s in self.sent if s.done is not None)
            raise BenchmarkFailed(
                f"the replay stalled: {answered} of {len(self.sent)} requests answered, {self._open} sessions open, "
                f"nothing answered in {timeout:g} s"
            )
        kind = "conversations" if convs is not None else "trace"
        users = self.users if convs is not None else None
        return Replayed(self.sent, self.start, end, kind, users, self.think)

    def _start_session(self, due: float) -> None:
        """The next conversation's first turn, due at ``due`` (called holding the lock)."""
        convs = self._conversations
        if convs is None or self._next_session >= len(convs):
            return
        heapq.heappush(self._due, (due, next(self._order), self._next_session, 0))
        self._next_session += 1

    def _prompt(self, session: int, turn: int) -> tuple[list[int], int]:
        convs = self._conversations
        if convs is None:
            return self.work.prompts[session], self.work.outs[session]
        t = convs[session].turns[turn]
        prompt = self._history.get(session, []) + list(t.user)
        return prompt, max(t.answer_tokens, 2)

    def _send(self, session: int, turn: int, due: float) -> None:
        prompt, out = self._prompt(session, turn)
        request_id = next(self._ids)
        if self.shape is not None:  # a trace row is its library's sample; a turn is a prompt of its own
            prompt = self.shape(session if self._conversations is None else -1 - request_id, prompt)
        sent = Sent(session, turn, due, len(prompt), out)
        request = TokenRequest(request_id, request_id, prompt, out)
        with self._wake:
            self._by_id[request_id] = sent
            self.sent.append(sent)
            if self._conversations is not None:
                self._history[session] = prompt
        sent.issued = self._last_event = time.perf_counter()
        self.engine.submit([request])
        if self.progress is not None:
            self.progress(len(self.sent))

    # the engine's sink
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
            more = convs is not None and tokens is not None and s.turn + 1 < len(convs[s.session].turns)
            if more:
                self._history[s.session] = self._history[s.session] + list(tokens or [])
                due = (s.done or time.perf_counter()) - self.start + self.think
                heapq.heappush(self._due, (due, next(self._order), s.session, s.turn + 1))
            else:
                self._open -= 1
                self._history.pop(s.session, None)
                self._start_session(time.perf_counter() - self.start)
            self._wake.notify()


def _pct(values: list[float], p: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values), p))


def figures(r: Replayed, limits: "Limits") -> tuple[dict[str, float], dict[str, Any], list[str]]:
    """The replay's figures (name -> value, milliseconds and per second), what the record keeps beside them, and
    why it is INVALID (over a limit), from each request's times by the driver's clock."""
    ok = [s for s in r.sent if s.error is None and s.done is not None and s.first is not None]
    if not ok:
        errors = sorted({s.error for s in r.sent if s.error})
        raise BenchmarkFailed(f"no request of the replay was answered: {'; '.join(errors[:3]) or 'none sent'}")
    first_issue = min(s.issued for s in r.sent)
    last_answer = max(s.done for s in ok if s.done is not None)
    span = max(last_answer - first_issue, 1e-9)
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
    dues = [s.due for s in r.sent]
    offered_span = max(dues) - min(dues)
    if r.kind == "trace" and offered_span > 0:
        out["offered_requests_per_second"] = (len(dues) - 1) / offered_span
    if limits.ttft_ms is not None and limits.tpot_ms is not None:
        good = [s for s, t in zip(ok, ttft, strict=True) if t <= limits.ttft_ms and _tpot(s) * 1e3 <= limits.tpot_ms]
        out["goodput_requests_per_second"] = len(good) / span
        out["goodput_tokens_per_second"] = sum(s.tokens for s in good) / span
    details: dict[str, Any] = {
        "driver": {
            "name": "accelbench replay",
            "why": "LoadGen schedules its own arrivals and issues samples independently; "
            + ("a trace's timestamps" if r.kind == "trace" else "a conversation's turns after their answers")
            + " are sent by accelbench's driver instead",
            "clock": "time.perf_counter in this process, from the send to the engine's callbacks",
            "late_ms": LATE_MS,
            "late_requests": sum(1 for x in late if x > LATE_MS),
        },
        "requests": len(r.sent),
        "answered": len(ok),
        "failed": len(r.sent) - len(ok),
        "output_tokens": tokens,
        "input_tokens": sum(s.prompt_tokens for s in ok),
        "span_seconds": span,
    }
    if r.kind == "conversations":
        details["turns"] = per_turn(ok)
        details["driver"] |= {"users": r.users, "think_ms": r.think_seconds * 1e3}
        growth = ttft_growth(details["turns"])
        if growth is not None:
            out["ttft_growth_ms_per_turn"] = growth
    errors = [s.error for s in r.sent if s.error]
    if errors:
        details["errors"] = sorted(set(errors))[:5]
    reasons = []
    if limits.ttft_ms is not None and out["ttft_p99_ms"] > limits.ttft_ms:
        reasons.append(
            f"TTFT over the limit (accelbench's replay): p99 TTFT {out['ttft_p99_ms']:.4g} ms over the "
            f"{limits.ttft_ms:g} ms limit"
        )
    if limits.tpot_ms is not None and out.get("tpot_p99_ms", 0.0) > limits.tpot_ms:
        reasons.append(
            f"TPOT over the limit (accelbench's replay): p99 TPOT {out['tpot_p99_ms']:.4g} ms over the "
            f"{limits.tpot_ms:g} ms limit"
        )
    if errors:
        reasons.append(f"{len(errors)} of {len(r.sent)} requests failed: {errors[0]}")
    return out, details, reasons


def _tpot(s: Sent) -> float:
    return (s.done - s.first) / (s.tokens - 1) if s.tokens > 1 and s.done and s.first else 0.0


def per_turn(ok: list[Sent]) -> list[dict[str, Any]]:
    """Each turn's requests, prompt tokens and TTFT (the history grows turn by turn, and its prefill with it)."""
    rows = []
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


def ttft_growth(turns: list[dict[str, Any]]) -> float | None:
    """The least-squares slope of the median TTFT over the turn number, in ms a turn (None for one turn)."""
    if len(turns) < 2:
        return None
    xs = [float(t["turn"]) for t in turns]
    ys = [float(t["ttft_p50_ms"]) for t in turns]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None
