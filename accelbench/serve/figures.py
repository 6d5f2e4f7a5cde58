"""Every figure of a language-model serving run, computed once, from its requests (:class:`RequestRow`): TTFT, TPOT,
inter-token and whole-answer latency percentiles, throughput, goodput within the limits, how late the sends were,
a closed loop's steady window, a conversation's turns and its TTFT growth.

The records (LoadGen's SUT, accelbench's driver) and ``accelbench results requests`` (the file read back) call
:func:`measure`; who sent the requests (:class:`Load`) decides which rows count over which window, never how a
figure is computed. Percentiles are numpy's linear interpolation between the closest ranks throughout."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from accelbench.serve.rows import RequestRow

if TYPE_CHECKING:
    from accelbench.results.details import TurnRow
    from accelbench.serve.requests import RequestLog

#: the percentiles of each latency
POINTS = (50, 90, 99)
#: each closed-loop user's first requests, left out of the figures: the N first requests leave at once, a burst of
#: prefills no later request meets, and find the engine as the probe left it
WARMUP_PER_USER = 1
#: a LoadGen run's figures that are the SUT's own in the record; the others are LoadGen's, from its own timestamps
SUT_FIGURES = ("goodput_requests_per_second", "goodput_tokens_per_second", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms")
#: and in Offline, where LoadGen gives no token latency, the TPOT and tokens/s per user are the SUT's too
SUT_OFFLINE_FIGURES = ("tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "tokens_per_second_per_user")


@dataclass(frozen=True)
class Load:
    """Who sent the requests, as far as the figures go: a closed loop (``steady``: of ``users``) is measured over
    its steady window, and its users' wait for the whole answer (``latency``) sets its pace; a schedule of its own
    (``offered``: a trace's timestamps) offered a rate of its own. LoadGen's and conversations' are neither."""

    steady: bool = False
    users: int | None = None
    latency: bool = False
    offered: bool = False

    @classmethod
    def of(cls, kind: str | None, users: int | None = None) -> Load:
        """The load of accelbench's driver's ``kind`` ("trace", "conversations", "closed"); None: LoadGen's."""
        if kind == "closed":
            return cls(steady=True, users=users, latency=True)
        return cls(offered=kind == "trace")


@dataclass(frozen=True)
class Window:
    """A closed loop's steady state, in seconds from the run's start (:func:`steady`)."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class RunFigures:
    """The figures (ms, per second) and what they are of: the requests answered, those counted (a closed loop's
    steady window's, else every answered one) over ``span`` seconds, the window found and its answers, the turns."""

    values: dict[str, float]
    answered: list[RequestRow] = field(default_factory=list)
    counted: list[RequestRow] = field(default_factory=list)
    span: float = 0.0
    window: Window | None = None
    inside: list[RequestRow] = field(default_factory=list)
    turns: list[TurnRow] = field(default_factory=list)


def percentiles(values: Sequence[float] | np.ndarray, points: Sequence[int] = POINTS) -> list[float]:
    return [float(x) for x in np.percentile(np.asarray(values), points)]


def _named(name: str, values: Sequence[float] | np.ndarray) -> dict[str, float]:
    return {f"{name}_p{p}_ms": v for p, v in zip(POINTS, percentiles(values), strict=True)} if len(values) else {}


def steady(rows: Iterable[RequestRow], users: int | None, warmup_per_user: int = WARMUP_PER_USER) -> Window | None:
    """A closed loop's steady window: from the moment every user had sent its first request past its warm-up to
    the moment every user had sent its last full round (as many requests as the user that sent fewest); None where
    a user sent too few for one, or the two are the same moment.

    Both ends are rounds of sends, not answers: users in step answer in waves, and a window ending inside a wave
    would count its time but not all its answers, and read the rate low."""
    by_user: dict[int | None, list[float]] = {}
    for r in rows:
        by_user.setdefault(r.user, []).append(r.sent)
    if len(by_user) < (users or 1) or any(len(v) <= warmup_per_user + 1 for v in by_user.values()):
        return None
    last = min(len(v) for v in by_user.values()) - 1  # the last round every user began
    start = max(sorted(v)[warmup_per_user] for v in by_user.values())
    end = max(sorted(v)[last] for v in by_user.values())
    return Window(start, end) if end > start else None


def per_turn(rows: list[RequestRow]) -> list[TurnRow]:
    """Each conversation turn's requests, mean prompt and TTFT (the history, and its prefill, grow turn by turn)."""
    out: list[TurnRow] = []
    for turn in sorted({r.turn for r in rows if r.turn is not None}):
        of = [r for r in rows if r.turn == turn]
        p50, p99 = percentiles([t * 1e3 for r in of if (t := r.ttft) is not None], (50, 99))
        out.append({
            "turn": turn,
            "requests": len(of),
            "prompt_tokens_mean": sum(r.prompt_tokens for r in of) / len(of),
            "ttft_p50_ms": p50,
            "ttft_p99_ms": p99,
        })  # fmt: skip
    return out


def ttft_growth(turns: list[TurnRow]) -> float | None:
    """The least-squares slope of the median TTFT over the turn number, in ms a turn (None for one turn)."""
    if len(turns) < 2:
        return None
    xs = [float(t["turn"]) for t in turns]
    ys = [float(t["ttft_p50_ms"]) for t in turns]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None


def late_ms(rows: list[RequestRow]) -> list[float]:
    """How late each request with a due time was sent after it, in ms (a driver that falls behind times itself)."""
    return [1e3 * max(0.0, r.sent - r.scheduled) for r in rows if r.scheduled is not None]


def _lateness(rows: list[RequestRow]) -> dict[str, float]:
    late = late_ms(rows)
    if not late:
        return {}
    p50, p99 = percentiles(late, (50, 99))
    return {"issue_late_p50_ms": p50, "issue_late_p99_ms": p99, "issue_late_max_ms": max(late)}


def _offered(rows: list[RequestRow]) -> dict[str, float]:
    """The rate a schedule of its own (a trace's) offered: its requests over its span of due times."""
    dues = [r.scheduled or 0.0 for r in rows]
    spread = max(dues) - min(dues)
    return {"offered_requests_per_second": (len(dues) - 1) / spread} if spread > 0 else {}


def _gaps_ms(rows: list[RequestRow]) -> np.ndarray:
    """Every gap of ``rows`` in one array, in ms (a flat array: an Offline run's are tens of millions)."""
    flat: array[float] = array("d")
    for r in rows:
        flat.extend(r.gaps)
    return np.asarray(flat) * 1e3


def _latencies(counted: list[RequestRow], load: Load) -> dict[str, float]:
    """TTFT and TPOT percentiles (in that order a point), tokens/s per user, ITL and a closed loop's latency."""
    ttft = percentiles([t * 1e3 for r in counted if (t := r.ttft) is not None])
    tpot_ms = [t * 1e3 for r in counted if (t := r.tpot) is not None]
    tpot = percentiles(tpot_ms) if tpot_ms else []
    out: dict[str, float] = {}
    for n, p in enumerate(POINTS):
        out[f"ttft_p{p}_ms"] = ttft[n]
        if tpot:
            out[f"tpot_p{p}_ms"] = tpot[n]
    if out.get("tpot_p50_ms"):
        out["tokens_per_second_per_user"] = 1000 / out["tpot_p50_ms"]
    out |= _named("itl", _gaps_ms(counted))
    if load.latency:  # a user's wait for the whole answer: what sets a closed loop's pace
        out |= _named("latency", [1e3 * (r.done - r.sent) for r in counted if r.done is not None])
    return out


def _goodput(counted: list[RequestRow], span: float, ttft_ms: float | None, tpot_ms: float | None) -> dict[str, float]:
    """Requests/s and tokens/s of the requests within both limits (one answered in a token has no TPOT to be over)."""
    if ttft_ms is None or tpot_ms is None:
        return {}
    good = [r for r in counted if (r.ttft or 0.0) * 1e3 <= ttft_ms and (r.tpot or 0.0) * 1e3 <= tpot_ms]
    return {
        "goodput_requests_per_second": len(good) / span,
        "goodput_tokens_per_second": sum(r.output_tokens for r in good) / span,
    }


def measure(
    rows: list[RequestRow], load: Load = Load(), ttft_ms: float | None = None, tpot_ms: float | None = None
) -> RunFigures:
    """Every figure of ``rows`` sent by ``load``; ``ttft_ms``/``tpot_ms``: the limits goodput counts against.

    The requests counted are those answered, over the span from the first send to the last answer; a closed loop's,
    those answered inside its steady window, over the window (every answered one where it has none)."""
    answered = [r for r in rows if r.answered]
    if not answered:
        return RunFigures({})
    counted = answered
    span = max(max(r.done for r in answered if r.done is not None) - min(r.sent for r in rows), 1e-9)
    window = steady(rows, load.users) if load.steady else None
    inside = [r for r in answered if r.done is not None and window.start < r.done <= window.end] if window else []
    if window is not None and inside:
        counted, span = inside, window.seconds
    values = {
        "tokens_per_second": sum(r.output_tokens for r in counted) / span,
        "requests_per_second": len(counted) / span,
    }
    values |= _lateness(rows) | _latencies(counted, load) | (_offered(rows) if load.offered else {})
    values |= _goodput(counted, span, ttft_ms, tpot_ms)
    turns = per_turn(counted)
    growth = ttft_growth(turns)
    if growth is not None:
        values["ttft_growth_ms_per_turn"] = growth
    return RunFigures(values, answered, counted, span, window, inside, turns)


def load_of(log: RequestLog) -> Load:
    """Who sent a file's requests, by its meta."""
    users = log.meta.get("users")
    kind = None if log.loadgen else str(log.meta.get("kind") or "trace")
    return Load.of(kind, users if isinstance(users, int) else None)


def recompute(log: RequestLog, ttft_ms: float | None = None, tpot_ms: float | None = None) -> dict[str, float]:
    """The record's figures found again from a file's rows, by the names the record gives them; ``ttft_ms``/
    ``tpot_ms``: the limits goodput counts against (the record's ``details.limits``).

    Every figure accelbench computed is the record's, to the last bit; a LoadGen run's TTFT, TPOT and throughput
    here are by the SUT's clock, beside LoadGen's own in the record (from its issue: :data:`SUT_FIGURES`)."""
    return measure(log.rows, load_of(log), ttft_ms, tpot_ms).values
