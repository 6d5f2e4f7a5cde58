"""Every request of a language-model serving run on record: one JSONL row a request, in the run folder's logs, so
a reader can audit the record's figures (recompute a p99, find the slow requests) with any tool.

LoadGen's SUT writes its requests when LoadGen's test ends, accelbench's driver when its run ends or stalls, each
before any figure is read, so a run that fails keeps them too. The file is ``logs/requests-<driver>-<id>.jsonl``
(``.jsonl.gz`` past :data:`COMPRESS_BYTES`): a meta line (``{"accelbench_requests": 1, ...}``: the clock, what
each field means for this run), then one :class:`~accelbench.serve.rows.RequestRow` a line. Times are seconds from
the run's start by one ``perf_counter``, at full precision: a difference of two is that of the two readings, to
the last bit, so :func:`accelbench.serve.figures.recompute` finds the record's own figures again.
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable

from accelbench.errors import UsageError
from accelbench.results.details import RequestLogEntry, typed
from accelbench.serve.rows import RequestRow

if TYPE_CHECKING:
    from accelbench.results.record import Result

#: the version of the file's layout, in its meta line
VERSION = 1
#: a file whose rows pass this many bytes is written gzip-compressed (``.jsonl.gz``); under it, plain JSONL that
#: ``less`` and ``jq`` read as it is. A request's row is about 20 bytes a token (its gaps), so 4 MiB is some
#: 200,000 tokens: a quick run stays plain, an official one (an hour of requests) is compressed
COMPRESS_BYTES = 4 << 20
#: gzip's level: 6 compresses these rows nearly as well as 9 (gaps are digits) at a fraction of the time
GZIP_LEVEL = 6
CLOCK = (
    "time.perf_counter of the benchmark's process (CLOCK_MONOTONIC on Linux), in seconds from the run's start "
    "(the start a reading of the same clock)"
)


@dataclass
class RequestLog:
    """A file of rows read back: its meta and its requests."""

    path: Path
    meta: dict[str, Any]
    rows: list[RequestRow] = field(default_factory=list)

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

    def add(self, row: RequestRow) -> None:
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


def write(folder: Path, kind: str, meta: dict[str, Any], rows: Iterable[RequestRow]) -> RequestLogEntry:
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


def keep_loadgen(owner: Any, folder: Path, engine: Any, rows: list[RequestRow]) -> RequestLogEntry:
    """The SUT's requests written (at the end of LoadGen's test); the entry, remembered for :func:`note`."""
    entry = write(folder, "loadgen", loadgen_meta(engine), rows)
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


def keep_replayed(owner: Any, folder: Path, rows: list[RequestRow], kind: str, users: int | None) -> RequestLogEntry:
    """A replay's requests written (when it ended or stalled); the entry, remembered for :func:`note`."""
    entry = write(folder, kind, replay_meta(kind, users), rows)
    _remember(owner, entry)
    return entry


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
                    log.rows.append(RequestRow.from_dict(data))
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
