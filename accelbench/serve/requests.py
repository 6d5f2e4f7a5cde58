"""Every request of a language-model serving run on record: one JSONL row a request, in the run folder's logs.

A record's figures are percentiles and rates; the rows are what they were computed from, so a reader can audit
them (recompute a p99, find the slow requests, see a server slow down over the run) with any tool. Both ways a
run sends requests keep them:

- LoadGen's tests (Offline, Server, interactive, SingleStream): the SUT (:mod:`accelbench.serve.sut`) keeps each
  request's times as its callbacks see them and writes the file when LoadGen's test ends (every request answered
  or failed), before any figure is read, so a run that fails keeps its requests too.
- accelbench's own driver (a trace, conversations: :mod:`accelbench.serve.replay`): :func:`drive` runs it and
  writes the file from its ``Sent`` requests, whether it finished or stalled.

The file is ``logs/requests-<driver>-<id>.jsonl`` (``.jsonl.gz`` past :data:`COMPRESS_BYTES`). Its first line
is the file's meta (``{"accelbench_requests": 1, ...}``: the clock, what each field means for this run, what is
null and why); each line after it is one request (:class:`Row`). Times are seconds from the run's start by the
benchmark process's ``time.perf_counter`` (CLOCK_MONOTONIC on Linux), written at full precision: the start is one
reading of the same clock, so a difference of two times in the file is the difference of the two readings, to
the last bit, and the figures :func:`recompute` finds from the rows are the record's own where accelbench
computed them. The record's ``details.request_log`` says where the file is and how many rows it holds.
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import uuid
import weakref
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from accelbench.errors import BenchmarkFailed, UsageError
from accelbench.results.details import RequestLogEntry, typed

if TYPE_CHECKING:
    from accelbench.results.details import TurnRow
    from accelbench.results.record import Result
    from accelbench.serve.replay import Driver, Replayed, Sent

#: the version of the file's layout, in its meta line
VERSION = 1
#: a file whose rows pass this many bytes is written gzip-compressed (``.jsonl.gz``); under it, plain JSONL that
#: ``less`` and ``jq`` read as it is. A request's row is about 20 bytes a token (its gaps), so 4 MiB is some
#: 200,000 tokens: a quick run stays plain, an official one (an hour of requests) is compressed
COMPRESS_BYTES = 4 << 20
#: gzip's level: 6 compresses these rows nearly as well as 9 (gaps are digits) at a fraction of the time
GZIP_LEVEL = 6
#: percentiles the recomputed figures give, as the record's
POINTS = (50, 90, 99)

CLOCK = (
    "time.perf_counter of the benchmark's process (CLOCK_MONOTONIC on Linux), in seconds from the run's start "
    "(the start a reading of the same clock)"
)


@dataclass(frozen=True)
class Row:
    """One request: who sent it, when, what came back and when.

    ``gaps`` are the seconds between consecutive tokens after the first, as the record's inter-token latency counts
    them: a chunk of k tokens that arrived at once is k gaps of a k-th of its wait each (their sum is the time
    from the first token to the last chunk)."""

    id: int  # LoadGen's query id; the driver's request number
    sample: int | None  # the prompt library's sample (LoadGen's index), a trace's row, a conversation's number
    user: int | None  # the closed loop's user, where the driver says
    session: int | None  # a conversation's number (its turns share it)
    turn: int | None  # 1 for a conversation's first turn
    scheduled: float | None  # when the request was due (the trace's timestamp, a turn after its answer)
    sent: float  # when it was handed to the engine
    first: float | None  # its first token (a reasoning token counts)
    first_answer: float | None  # its first token of the answer after any reasoning, where the engine tells
    done: float | None  # its last token, or its failure
    prompt_tokens: int
    output_tokens: int
    gaps: list[float]
    status: str  # "ok" or "failed"
    error: str | None

    @property
    def ttft(self) -> float | None:
        """Seconds from the send to the first token."""
        return self.first - self.sent if self.first is not None else None

    @property
    def tpot(self) -> float | None:
        """Seconds a token after the first: first token to last over the tokens after the first."""
        if self.first is None or self.done is None or self.output_tokens < 2:
            return None
        return (self.done - self.first) / (self.output_tokens - 1)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Row":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__} | {"gaps": list(d.get("gaps") or [])})


class Kept(NamedTuple):
    """A request the SUT saw through, as compactly as it can keep it for the whole run (``perf_counter`` times)."""

    id: int
    sample: int
    issued: float
    first: float | None
    end: float
    prompt_tokens: int
    output_tokens: int
    gaps: "array[float] | None"
    error: str | None
    first_answer: float | None = None


@dataclass
class RequestLog:
    """A file of rows read back: its meta and its requests."""

    path: Path
    meta: dict[str, Any]
    rows: list[Row] = field(default_factory=list)

    @property
    def loadgen(self) -> bool:
        return bool(self.meta.get("driver") == "LoadGen")


# --- writing


class Writer:
    """Writes the meta line and then rows as they come: plain JSONL until the rows pass :data:`COMPRESS_BYTES`,
    then the whole file gzip-compressed instead (what was written so far moved into it), so memory holds at most
    that much and the file is read as one kind either way."""

    def __init__(self, folder: Path, kind: str, meta: dict[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"requests-{kind}-{uuid.uuid4().hex[:8]}.jsonl"
        self.rows = 0
        self.failed = 0
        self._buffer: io.BytesIO | None = io.BytesIO()
        self._gz: gzip.GzipFile | None = None
        self._write((json.dumps({"accelbench_requests": VERSION} | meta, separators=(",", ":")) + "\n").encode())

    def _write(self, data: bytes) -> None:
        if self._buffer is not None:
            self._buffer.write(data)
            if self._buffer.tell() <= COMPRESS_BYTES:
                return
            self.path = self.path.with_suffix(".jsonl.gz")
            self._gz = gzip.GzipFile(self.path, "wb", compresslevel=GZIP_LEVEL)
            self._gz.write(self._buffer.getvalue())
            self._buffer = None
            return
        assert self._gz is not None
        self._gz.write(data)

    def add(self, row: Row) -> None:
        self.rows += 1
        self.failed += row.status != "ok"
        self._write((row.to_json() + "\n").encode())

    def close(self) -> RequestLogEntry:
        """The file written; what the record's ``details.request_log`` says of it."""
        if self._buffer is not None:
            with open(self.path, "wb") as f:
                f.write(self._buffer.getvalue())
            self._buffer = None
        elif self._gz is not None:
            self._gz.close()
        return {
            "path": str(self.path),
            "rows": self.rows,
            "failed": self.failed,
            "compressed": self.path.suffix == ".gz",
            "bytes": self.path.stat().st_size,
            "format": f"JSONL: a meta line, then one request a line (accelbench results requests RUN; "
            f"gzip past {COMPRESS_BYTES >> 20} MiB)",
        }


def write(folder: Path, kind: str, meta: dict[str, Any], rows: Iterable[Row]) -> RequestLogEntry:
    """Rows written to a new file in ``folder`` (the run's logs); the record's ``details.request_log`` entry."""
    writer = Writer(folder, kind, meta)
    try:
        for row in rows:
            writer.add(row)
    finally:
        entry = writer.close()
    return entry


#: each sink's file, once written (the SUT, a replay): the record built after it reads its entry from here
_written: dict[int, tuple["weakref.ref[Any]", RequestLogEntry]] = {}
_written_lock = threading.Lock()


def _remember(owner: Any, entry: RequestLogEntry) -> None:
    with _written_lock:
        for key in [k for k, (ref, _) in _written.items() if ref() is None]:
            del _written[key]
        _written[id(owner)] = (weakref.ref(owner), entry)


def written(owner: Any) -> RequestLogEntry | None:
    """The file ``owner`` (a :class:`~accelbench.serve.sut.TokenSUT`, a replay's ``Replayed``) wrote, or None."""
    with _written_lock:
        held = _written.get(id(owner))
    return held[1] if held is not None and held[0]() is owner else None


def note(result: "Result", owner: Any) -> None:
    """Say in the record where ``owner``'s requests are (nothing where it wrote none)."""
    entry = written(owner)
    if entry is not None:
        typed(result)["request_log"] = entry


# --- LoadGen's runs: the SUT's requests


def loadgen_meta(engine: Any) -> dict[str, Any]:
    """What a LoadGen run's file says of its fields."""
    remote = bool(getattr(engine, "remote", False))
    return {
        "driver": "LoadGen",
        "engine": getattr(engine, "name", ""),
        "clock": CLOCK,
        "start": "LoadGen's first issue callback to the SUT",
        "sent": "when LoadGen's issue callback handed the request to the SUT"
        + (" (the endpoint's HTTP request follows on its client's loop)" if remote else ""),
        "scheduled": "null: LoadGen schedules its queries itself and hands the SUT no schedule",
        "first_answer": "the first token of the answer after a reasoning model's thinking, where the engine tells "
        "the SUT (its answering call); else null (an endpoint's own figure: details.client.reasoning)",
        "prompt_tokens": "the prompt's token ids as accelbench made them"
        + (" (the server tokenizes the text again: details.client.server_prompt_tokens_mean)" if remote else ""),
        "output_tokens": "the server's usage (completion_tokens) where it gave one, else the tokenizer on the "
        "streamed text (details.engine.output_token_count)"
        if remote
        else "the engine's generated token ids",
        "figures": "LoadGen computes the record's throughput and TTFT/TPOT percentiles from its own timestamps "
        "(its issue to the SUT's callbacks); goodput, inter-token latency and Offline's TPOT are the SUT's, from "
        "these rows",
    }


def loadgen_rows(kept: Iterable[Kept], start: float) -> Iterator[Row]:
    for k in kept:
        yield Row(
            id=k.id,
            sample=k.sample,
            user=None,
            session=None,
            turn=None,
            scheduled=None,
            sent=k.issued - start,
            first=k.first - start if k.first is not None else None,
            first_answer=k.first_answer - start if k.first_answer is not None else None,
            done=k.end - start,
            prompt_tokens=k.prompt_tokens,
            output_tokens=k.output_tokens,
            gaps=list(k.gaps) if k.gaps is not None else [],
            status="failed" if k.error is not None else "ok",
            error=k.error,
        )


def keep_loadgen(owner: Any, folder: Path, engine: Any, kept: list[Kept], start: float | None) -> RequestLogEntry:
    """The SUT's requests written (at the end of LoadGen's test); the entry, remembered for :func:`note`."""
    entry = write(folder, "loadgen", loadgen_meta(engine), loadgen_rows(kept, start or 0.0))
    _remember(owner, entry)
    return entry


# --- accelbench's driver: a replay's requests


def replay_meta(kind: str, users: int | None) -> dict[str, Any]:
    closed = kind == "closed"
    meta = {
        "driver": "accelbench",
        "kind": kind,
        "users": users,
        "clock": CLOCK,
        "start": "the driver's start (time 0 of the trace's timestamps)",
        "scheduled": "when the request was due: its user's last answer plus the think time (a user's first: 0)"
        if closed
        else "when the request was due: the trace's timestamp, or a turn's previous answer plus the think time",
        "sample": "the loop's request number (its prompt: this modulo the prompts drawn)"
        if closed
        else "the prompt library's sample, a trace's row or a conversation's number",
        "sent": "when the driver handed the request to the engine",
        "first_answer": "the first token of the answer after a reasoning model's thinking, where the driver is "
        "told; else null",
        "prompt_tokens": "the prompt's token ids as accelbench made them (a turn's: the history so far)",
        "output_tokens": "the engine's count: the server's usage where it gave one (details.engine.output_token_count)",
        "figures": "accelbench computes every figure of the record from these requests",
    }
    if closed:
        meta["window"] = (
            "the figures are of the steady window: from the moment every user had sent its first request past its "
            "warm-up (each user's first) to the moment every user had sent its last full round; the requests "
            "answered inside it"
        )
    return meta


def replay_rows(sent: Iterable["Sent"], start: float, conversations: bool) -> Iterator[Row]:
    for n, s in enumerate(sent):
        answered = s.error is None and s.done is not None and s.first is not None
        error = s.error if s.error is not None else (None if answered else "no answer (the replay ended first)")
        user, answer = getattr(s, "user", None), getattr(s, "first_answer", None)
        yield Row(
            id=n,
            sample=s.session,
            user=user if isinstance(user, int) else None,
            session=s.session if conversations else None,
            turn=s.turn + 1 if conversations else None,
            scheduled=s.due,
            sent=s.issued - start,
            first=s.first - start if s.first is not None else None,
            first_answer=answer - start if isinstance(answer, float) else None,
            done=s.done - start if s.done is not None else None,
            prompt_tokens=s.prompt_tokens,
            output_tokens=s.tokens,
            gaps=list(s.gaps),
            status="ok" if answered else "failed",
            error=error,
        )


def keep_replayed(
    owner: Any, folder: Path, sent: list["Sent"], start: float, kind: str, users: int | None
) -> RequestLogEntry:
    entry = write(folder, kind, replay_meta(kind, users), replay_rows(sent, start, kind == "conversations"))
    _remember(owner, entry)
    return entry


def drive(driver: "Driver", folder: Path, *args: Any, **kwargs: Any) -> "Replayed":
    """``driver.run(...)``, its requests written to ``folder`` whether it finished or stalled (a stall's failure says
    where they are)."""
    try:
        replayed = driver.run(*args, **kwargs)
    except BenchmarkFailed as exc:
        kind = driver.kind
        users = driver.users if kind != "trace" else None
        exc.details["request_log"] = keep_replayed(driver, folder, list(driver.sent), driver.start, kind, users)
        raise
    keep_replayed(replayed, folder, replayed.sent, replayed.start, replayed.kind, replayed.users)
    return replayed


# --- reading


def read(path: Path) -> RequestLog:
    """A file written here, read back; a UsageError (one line) for one that is not."""
    opener: Callable[..., IO[str]] = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            head = f.readline()
            meta = json.loads(head) if head.strip() else None
            if not isinstance(meta, dict) or "accelbench_requests" not in meta:
                raise UsageError(f"{path} is not a file of accelbench's requests (its first line is no meta line)")
            log = RequestLog(path, meta)
            for n, line in enumerate(f, 2):
                if line.strip():
                    data = json.loads(line)
                    if not isinstance(data, dict):
                        raise UsageError(f"{path}: line {n} is not a JSON object")
                    log.rows.append(Row.from_dict(data))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, EOFError) as exc:
        raise UsageError(f"{path} is not a file of accelbench's requests: {exc}") from None
    return log


def located(entry: Any, run_dir: Path | None) -> Path | None:
    """Where a record's file is: the path it names, else the file of that name in ``run_dir``'s logs (a run folder
    copied from another machine)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return None
    path = Path(entry["path"])
    if path.is_file():
        return path
    if run_dir is not None and (run_dir / "logs" / path.name).is_file():
        return run_dir / "logs" / path.name
    return path


# --- the figures, again, from the rows


def _pct(values: list[float], p: float) -> float:
    """numpy's linear interpolation between the closest ranks, the record's method throughout."""
    import numpy as np

    return float(np.percentile(np.asarray(values), p))


def recompute(log: RequestLog, ttft_ms: float | None = None, tpot_ms: float | None = None) -> dict[str, float]:
    """The record's figures found again from the rows, by the names the record gives them (ms, per second);
    ``ttft_ms``/``tpot_ms``: the limits goodput counts against (the record's ``details.limits``).

    A replay's are every figure the driver's record computes, by its arithmetic: equal to the record's. A LoadGen
    run's goodput, inter-token latency and Offline's TPOT are the SUT's, equal to the record's; its TTFT, TPOT and
    throughput here are by the SUT's clock, beside LoadGen's in the record (LoadGen times from its own issue:
    :func:`loadgen_figures`)."""
    if log.loadgen:
        return loadgen_figures(log.rows, ttft_ms, tpot_ms)
    users = log.meta.get("users")
    kind = str(log.meta.get("kind") or "trace")
    return replay_figures(log.rows, kind, ttft_ms, tpot_ms, users if isinstance(users, int) else None)


def loadgen_figures(rows: list[Row], ttft_ms: float | None, tpot_ms: float | None) -> dict[str, float]:
    """What the SUT computes (:mod:`accelbench.serve.results`: goodput, inter_token, offline_tpot), in its
    arithmetic, and TTFT/TPOT percentiles and throughput by the SUT's clock."""
    import numpy as np

    out: dict[str, float] = {}
    ok = [r for r in rows if r.status == "ok" and r.first is not None and r.done is not None]
    if not rows or not ok:
        return out
    first_issue = min(r.sent for r in rows)
    span = max(r.done for r in ok if r.done is not None) - first_issue
    per = [(r.first - r.sent, (r.done - r.first) / max(r.output_tokens - 1, 1), r.output_tokens) for r in ok
           if r.first is not None and r.done is not None]  # fmt: skip
    if span > 0:
        out["requests_per_second"] = len(ok) / span
        out["tokens_per_second"] = sum(n for _, _, n in per) / span
        if ttft_ms is not None and tpot_ms is not None:
            good = [n for ttft, tpot, n in per if ttft * 1e3 <= ttft_ms and tpot * 1e3 <= tpot_ms]
            out["goodput_requests_per_second"] = len(good) / span
            out["goodput_tokens_per_second"] = sum(good) / span
    gaps = [g for r in rows for g in r.gaps]
    if gaps:
        ms = np.asarray(gaps) * 1e3
        out |= {f"itl_p{p}_ms": float(np.percentile(ms, p)) for p in POINTS}
    ttfts = np.asarray([t for t, _, _ in per]) * 1e3
    out |= {f"ttft_p{p}_ms": float(np.percentile(ttfts, p)) for p in POINTS}
    tpots = [tpot for _, tpot, n in per if n > 1]
    if tpots:
        ms = np.asarray(tpots) * 1e3
        out |= {f"tpot_p{p}_ms": float(np.percentile(ms, p)) for p in POINTS}
        if out["tpot_p50_ms"] > 0:
            out["tokens_per_second_per_user"] = 1000 / out["tpot_p50_ms"]
    return out


#: a LoadGen run's figures that are the SUT's own in the record (the rows give them exactly); the others are
#: LoadGen's, from its own timestamps
SUT_FIGURES = ("goodput_requests_per_second", "goodput_tokens_per_second", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms")
#: and in Offline, where LoadGen gives no token latency, the TPOT and tokens/s per user are the SUT's too
SUT_OFFLINE_FIGURES = ("tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "tokens_per_second_per_user")


def steady(rows: list[Row], users: int | None, warmup_per_user: int = 1) -> tuple[float, float] | None:
    """A closed loop's steady window from its rows (seconds from the run's start): from the moment every user had
    sent its first request past its warm-up to the moment every user had sent its last full round (as many
    requests as the user that sent fewest); None where a user sent too few for one."""
    by_user: dict[int | None, list[float]] = {}
    for r in rows:
        by_user.setdefault(r.user, []).append(r.sent)
    if len(by_user) < (users or 1) or any(len(v) <= warmup_per_user + 1 for v in by_user.values()):
        return None
    last = min(len(v) for v in by_user.values()) - 1
    start = max(sorted(v)[warmup_per_user] for v in by_user.values())
    end = max(sorted(v)[last] for v in by_user.values())
    return (start, end) if end > start else None


def replay_figures(
    rows: list[Row], kind: str, ttft_ms: float | None, tpot_ms: float | None, users: int | None = None
) -> dict[str, float]:
    """The driver's figures (:func:`accelbench.serve.replay.figures`), by its arithmetic, from the rows; a closed
    loop's (``kind`` "closed", ``users`` its users) from the requests answered inside its steady window
    (:func:`steady`)."""
    ok = [r for r in rows if r.status == "ok" and r.first is not None and r.done is not None]
    out: dict[str, float] = {}
    if not ok:
        return out
    first_issue = min(r.sent for r in rows)
    last_answer = max(r.done for r in ok if r.done is not None)
    span = max(last_answer - first_issue, 1e-9)
    window = steady(rows, users) if kind == "closed" else None
    if window is not None:
        inside = [r for r in ok if r.done is not None and window[0] < r.done <= window[1]]
        if inside:
            ok, span = inside, window[1] - window[0]
    tokens = sum(r.output_tokens for r in ok)
    ttft = [1e3 * (r.first - r.sent) for r in ok if r.first is not None]
    tpot = [1e3 * (r.done - r.first) / (r.output_tokens - 1) for r in ok
            if r.output_tokens > 1 and r.done is not None and r.first is not None]  # fmt: skip
    late = [1e3 * max(0.0, r.sent - (r.scheduled or 0.0)) for r in rows]
    out |= {
        "tokens_per_second": tokens / span,
        "requests_per_second": len(ok) / span,
        "issue_late_p50_ms": _pct(late, 50),
        "issue_late_p99_ms": _pct(late, 99),
        "issue_late_max_ms": max(late),
    }
    for p in POINTS:
        out[f"ttft_p{p}_ms"] = _pct(ttft, p)
        if tpot:
            out[f"tpot_p{p}_ms"] = _pct(tpot, p)
    if out.get("tpot_p50_ms"):
        out["tokens_per_second_per_user"] = 1000 / out["tpot_p50_ms"]
    gaps = [1e3 * g for r in ok for g in r.gaps]
    if gaps:
        for p in POINTS:
            out[f"itl_p{p}_ms"] = _pct(gaps, p)
    if kind == "closed":
        latency = [1e3 * (r.done - r.sent) for r in ok if r.done is not None]
        for p in POINTS:
            out[f"latency_p{p}_ms"] = _pct(latency, p)
    dues = [r.scheduled or 0.0 for r in rows]
    if kind == "trace" and max(dues) - min(dues) > 0:
        out["offered_requests_per_second"] = (len(dues) - 1) / (max(dues) - min(dues))
    if ttft_ms is not None and tpot_ms is not None:
        good = [r for r, t in zip(ok, ttft, strict=True) if t <= ttft_ms and (r.tpot or 0.0) * 1e3 <= tpot_ms]
        out["goodput_requests_per_second"] = len(good) / span
        out["goodput_tokens_per_second"] = sum(r.output_tokens for r in good) / span
    if kind == "conversations":
        growth = ttft_growth(per_turn(ok))
        if growth is not None:
            out["ttft_growth_ms_per_turn"] = growth
    return out


def per_turn(ok: list[Row]) -> list[TurnRow]:
    """Each turn's requests, mean prompt and TTFT percentiles (the record's ``details.turns``)."""
    out: list[TurnRow] = []
    for turn in sorted({r.turn for r in ok if r.turn is not None}):
        of = [r for r in ok if r.turn == turn]
        ttft = [1e3 * (r.first - r.sent) for r in of if r.first is not None]
        out.append({
            "turn": turn,
            "requests": len(of),
            "prompt_tokens_mean": sum(r.prompt_tokens for r in of) / len(of),
            "ttft_p50_ms": _pct(ttft, 50),
            "ttft_p99_ms": _pct(ttft, 99),
        })  # fmt: skip
    return out


def ttft_growth(turns: list[TurnRow]) -> float | None:
    """The least-squares slope of the median TTFT over the turn number (ms a turn), as the record's."""
    if len(turns) < 2:
        return None
    xs = [float(t["turn"]) for t in turns]
    ys = [float(t["ttft_p50_ms"]) for t in turns]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None


def summary_line(log: RequestLog, ttft_ms: float | None = None, tpot_ms: float | None = None) -> str:
    """One line of the figures from the rows: requests, throughput, TTFT/TPOT/ITL p50 and p99."""
    f = recompute(log, ttft_ms, tpot_ms)
    rows, failed = len(log.rows), sum(r.status != "ok" for r in log.rows)
    words = [f"{rows} requests" + (f" ({failed} failed)" if failed else "")]
    if "requests_per_second" in f:
        words.append(f"{f['requests_per_second']:,.4g} requests/s, {f['tokens_per_second']:,.4g} output tokens/s")
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("latency", "latency")):
        if f"{name}_p50_ms" in f:
            words.append(f"{label} p50 {f[f'{name}_p50_ms']:.4g} ms, p99 {f[f'{name}_p99_ms']:.4g} ms")
    if "goodput_requests_per_second" in f:
        words.append(f"goodput {f['goodput_requests_per_second']:,.4g} requests/s")
    clock = " (the SUT's clock; the record's TTFT, TPOT and throughput are LoadGen's)" if log.loadgen else ""
    users = log.meta.get("users")
    window = steady(log.rows, users if isinstance(users, int) else None) if log.meta.get("kind") == "closed" else None
    if window is not None:  # a closed loop's figures are its steady window's, as the record's
        inside = sum(1 for r in log.rows if r.status == "ok" and r.done is not None and window[0] < r.done <= window[1])
        clock = (
            f" (the steady window {window[0]:.3f}-{window[1]:.3f} s: {inside} requests answered inside it; each "
            "user's first request and those answered after every user's last full round left out)"
        )
    return "; ".join(words) + clock


def table_rows(log: RequestLog) -> list[dict[str, Any]]:
    """Each request flat, with its TTFT and TPOT in ms, for a table or CSV (its gaps space-separated, seconds)."""
    out = []
    for r in log.rows:
        ttft, tpot = r.ttft, r.tpot
        out.append({
            "id": r.id, "sample": r.sample, "user": r.user, "session": r.session, "turn": r.turn,
            "scheduled_s": r.scheduled, "sent_s": r.sent, "first_s": r.first, "first_answer_s": r.first_answer,
            "done_s": r.done, "ttft_ms": ttft * 1e3 if ttft is not None else None,
            "tpot_ms": tpot * 1e3 if tpot is not None else None, "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens, "chunks": len(r.gaps) + (r.first is not None), "status": r.status,
            "error": r.error, "gaps_s": " ".join(repr(g) for g in r.gaps),
        })  # fmt: skip
    return out
