"""Timed request traces: when each request arrived and how long it was, read from a published trace to replay it.

A steady rate is a load no service sees: real arrivals come in bursts and real lengths are skewed, and a trace keeps
both. It carries no text, so its prompts are random ids of each row's length (:func:`synthesize`), beginning alike
where its ``hash_ids`` say rows did. The formats (Mooncake, Azure, accelbench's JSONL) are in ``docs/infer.md``
("The request files, field by field"). Rows out of time order are an error, never sorted.
"""

from __future__ import annotations

import calendar
import csv
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt
from accelbench.results.details import Prompts
from accelbench.serve.sources.base import RunSettings, Source, Work
from accelbench.serve.sources.tokenizer import writable

FORMATS = ("auto", "accelbench", "mooncake", "azure")
#: Mooncake's block: the tokens one of its ``hash_ids`` stands for (kvcache-ai/Mooncake FAST25-release/README.md)
MOONCAKE_BLOCK_TOKENS = 512
#: Azure's CSV header (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md), matched without regard to case
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
#: each JSON format's fields: timestamp, input length, output length, and the timestamp's unit in seconds
JSON_FIELDS: dict[str, tuple[str, str, str, float]] = {
    "accelbench": ("timestamp", "input_tokens", "output_tokens", 1.0),
    "mooncake": ("timestamp", "input_length", "output_length", 0.001),
}
_AZURE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?", re.IGNORECASE
)


class TracePrompts(Prompts, total=False):
    """``details.prompts`` of the trace source (:meth:`Trace.to_dict`): which trace and how it was read (its
    rows, the replay's ``speed``, the rows read at most, lines passed over), the load it offers (the span from the
    first arrival to the last, arrivals a second between them), its prompt lengths (``input_tokens``, ``{"mean",
    "min", "max"}``), the tokens one hash id stands for and the ideal prefix-cache hit rate its shared blocks offer
    (None: the trace has no hash ids), and how the prompts' tokens were drawn."""

    rows: int
    span_seconds: float
    offered_requests_per_second: float | None
    input_tokens: dict[str, float]
    block_tokens: int | None
    shared_fraction: float | None
    speed: float
    limit: int | None
    skipped: dict[str, int]
    method: str


@dataclass(frozen=True)
class TraceRow:
    """One request: when it arrives (seconds after the trace's first row, scaled by the replay's speed) and its
    lengths; ``hash_ids`` the trace's block hashes of its prompt (empty when the trace has none)."""

    at: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    """A trace's rows in time order, and what a record needs to tell two replays apart: the file, its sha256 and how
    it was read (``speed``, ``limit``). ``block_tokens``: the tokens one hash id stands for (None without hash ids);
    ``skipped``: lines read past and why (blank lines)."""

    rows: list[TraceRow]
    file: str
    sha256: str
    format: str
    block_tokens: int | None
    skipped: dict[str, int]
    speed: float = 1.0
    limit: int | None = None

    @property
    def duration(self) -> float:
        """Seconds from the first arrival to the last, at the replay's speed."""
        return self.rows[-1].at - self.rows[0].at if self.rows else 0.0

    def to_dict(self) -> TracePrompts:
        """The summary a record keeps: which trace, how it was read, and the load it offers (arrivals a second
        between the first and the last, lengths); ``shared_fraction`` the ideal prefix-cache hit rate."""
        span = self.duration
        ins = [r.input_tokens for r in self.rows]
        outs = [r.output_tokens for r in self.rows]
        hashed = any(r.hash_ids for r in self.rows)
        return {
            "file": self.file,
            "sha256": self.sha256,
            "format": self.format,
            "rows": len(self.rows),
            "span_seconds": round(span, 6),
            "offered_requests_per_second": round((len(self.rows) - 1) / span, 6) if span > 0 else None,
            "input_tokens": _stats(ins),
            "output_tokens": _stats(outs),
            "block_tokens": self.block_tokens,
            "shared_fraction": round(shared_fraction(self), 6) if hashed else None,
            "speed": self.speed,
            "limit": self.limit,
            "skipped": dict(self.skipped),
        }


def read_trace(
    path: str | Path,
    *,
    fmt: str = "auto",
    limit: int | None = None,
    speed: float = 1.0,
    block_tokens: int | None = None,
) -> Trace:
    """The trace's rows in time order, each ``at`` seconds after the first row's arrival, divided by ``speed``.

    ``fmt``: one of :data:`FORMATS` (``auto`` tells a CSV header from JSON keys). ``limit``: the first this many rows
    (a week-long trace need not be parsed whole for a ten-minute replay; its sha256 is still of the whole file).
    ``speed``: 2.0 replays twice as fast (the same requests, arrivals twice as close). ``block_tokens``: the tokens
    one hash id stands for, 512 (Mooncake's) unless given.
    """
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise UsageError(f"trace speed must be a number above 0 (2 replays twice as fast), not {speed}")
    if limit is not None and limit < 1:
        raise UsageError(f"the number of trace rows must be at least 1, not {limit}")
    if block_tokens is not None and block_tokens < 1:
        raise UsageError(f"a trace's block must hold at least 1 token, not {block_tokens}")
    if fmt not in FORMATS:
        raise UsageError(f"trace format {fmt!r} is not one of {', '.join(FORMATS)}")
    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"trace file {file} does not exist: give a Mooncake or accelbench JSONL, or an Azure CSV")
    digest = hashlib.sha256()
    with file.open("rb") as fh:
        lines = _lines(file, fh, digest)
        kind, parse, first, blank = _detect(file, lines, fmt)
        rows, skipped = _rows(file, lines, parse, first, limit, blank)
        for chunk in iter(lambda: fh.read(1 << 20), b""):  # the rest, past the limit: hashed, not parsed
            digest.update(chunk)
    if not rows:
        raise UsageError(f"trace file {file} is empty: it has no requests{' after its header' * (kind == 'azure')}")
    start = rows[0][0]
    out = [TraceRow((t - start) / speed, n_in, n_out, ids) for t, n_in, n_out, ids in rows]
    hashed = any(r.hash_ids for r in out)
    block = (block_tokens or MOONCAKE_BLOCK_TOKENS) if hashed else None
    return Trace(out, str(file), digest.hexdigest(), kind, block, skipped, float(speed), limit)


#: a parsed row: timestamp in seconds (from any origin), input and output tokens, hash ids
_Row = tuple[float, int, int, tuple[int, ...]]
#: a line's parser: (line number, text) -> a row, or raise UsageError
_Parser = Callable[[int, str], _Row]
#: the file's lines, numbered from 1, decoded one at a time (the hash is fed as they are read)
_Lines = Iterator[tuple[int, str]]


def _lines(file: Path, fh: IO[bytes], digest: Any) -> _Lines:
    for number, raw in enumerate(fh, 1):
        digest.update(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UsageError(f"trace file {file} is not UTF-8 text (line {number}): give JSONL or CSV") from e
        yield number, text.lstrip("\ufeff") if number == 1 else text


def _detect(file: Path, lines: _Lines, fmt: str) -> tuple[str, _Parser, tuple[int, str] | None, int]:
    """The format, its line parser, the first line for that parser (None: it was the CSV header), and the blank
    lines before it."""
    first: tuple[int, str] | None = None
    for number, text in lines:
        if text.strip():
            first = (number, text)
            break
    if first is None:
        raise UsageError(f"trace file {file} is empty: give one request a line (JSONL) or an Azure CSV")
    number, text = first
    if text.lstrip().startswith("{"):
        if fmt == "azure":
            raise UsageError(f"trace file {file} is JSON, not an Azure CSV: name its format, or leave it to auto")
        record = _json(file, number, text)
        kind = fmt if fmt != "auto" else _json_kind(file, number, record)
        return kind, _json_parser(file, kind), first, number - 1
    if fmt in ("accelbench", "mooncake"):
        raise UsageError(f"trace file {file}: line {number} is not a JSON object: a {fmt} trace is JSONL")
    header = [c.strip() for c in next(csv.reader([text]))]
    if [c.lower() for c in header[:3]] != [c.lower() for c in AZURE_COLUMNS]:
        raise UsageError(
            f"trace file {file} is neither JSONL nor an Azure CSV: its first line {text.strip()[:80]!r} is not "
            f"a JSON object nor the header {','.join(AZURE_COLUMNS)}"
        )
    return "azure", _azure_parser(file, header), None, number - 1


def _json(file: Path, number: int, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"trace file {file} is not JSONL: line {number} is not JSON ({e.msg})") from e
    if not isinstance(value, dict):
        raise UsageError(f"trace file {file}: line {number} is a JSON {type(value).__name__}, not an object")
    return value


def _json_kind(file: Path, number: int, record: dict[str, Any]) -> str:
    for kind, (_, input_key, _, _) in JSON_FIELDS.items():
        if input_key in record:
            return kind
    raise UsageError(
        f"trace file {file}: line {number} has neither input_tokens (accelbench) nor input_length (Mooncake); "
        f"its fields: {_fields(record)}"
    )


def _fields(record: dict[str, Any]) -> str:
    keys = sorted(map(str, record))
    return ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "") if keys else "none"


def _json_parser(file: Path, kind: str) -> _Parser:
    time_key, input_key, output_key, unit = JSON_FIELDS[kind]
    shown_unit = "s" if unit == 1.0 else "ms"
    article = "an" if kind[0] in "aeiou" else "a"

    def parse(number: int, text: str) -> _Row:
        record = _json(file, number, text)
        missing = [k for k in (time_key, input_key, output_key) if k not in record]
        if missing:
            raise UsageError(
                f"trace file {file}: line {number} has no {' or '.join(missing)} ({article} {kind} trace needs "
                f"{time_key}, {input_key}, {output_key}); its fields: {_fields(record)}"
            )
        stamp = record[time_key]
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp):
            raise UsageError(f"trace file {file}: line {number}'s {time_key} {stamp!r} is not a number")
        ids = record.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
            raise UsageError(f"trace file {file}: line {number}'s hash_ids is not a list of whole numbers")
        n_in = _length(file, number, input_key, record[input_key])
        n_out = _length(file, number, output_key, record[output_key])
        return _Stamp(stamp * unit, f"{stamp:g} {shown_unit}"), n_in, n_out, tuple(ids)

    return parse


def _azure_parser(file: Path, header: list[str]) -> _Parser:
    base: list[int] = []  # the first row's whole seconds: times are kept small, so 100 ns digits survive a float

    def parse(number: int, text: str) -> _Row:
        cells = [c.strip() for c in next(csv.reader([text]))]
        if len(cells) < 3 or not all(cells[:3]):
            present = [h for h, c in zip(header, cells, strict=False) if c]
            missing = [h for h, c in zip(header[:3], (cells + [""] * 3)[:3], strict=True) if not c]
            raise UsageError(
                f"trace file {file}: line {number} has no {' or '.join(missing)} (an Azure trace needs "
                f"{', '.join(AZURE_COLUMNS)}); its fields: {', '.join(present) or 'none'}"
            )
        match = _AZURE_TIME.fullmatch(cells[0])
        if match is None:
            raise UsageError(
                f"trace file {file}: line {number}'s {header[0]} {cells[0]!r} is not a date and time "
                "(like 2023-11-16 18:17:03.9799600)"
            )
        y, mo, d, h, mi, s, frac, zone = match.groups()
        whole = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
        if zone and zone.upper() != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            whole -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        if not base:
            base.append(whole)
        seconds = (whole - base[0]) + (float(f"0.{frac}") if frac else 0.0)
        n_in = _length(file, number, header[1], cells[1])
        n_out = _length(file, number, header[2], cells[2])
        return _Stamp(seconds, cells[0]), n_in, n_out, ()

    return parse


class _Stamp(float):
    """A timestamp in seconds that remembers how the file wrote it, for an error message in the file's own terms."""

    shown: str

    def __new__(cls, seconds: float, shown: str) -> _Stamp:
        stamp = super().__new__(cls, seconds)
        stamp.shown = shown
        return stamp


def _length(file: Path, number: int, key: str, value: Any) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise UsageError(f"trace file {file}: line {number}'s {key} {value!r} is not a whole number") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"trace file {file}: line {number}'s {key} {value!r} is not a whole number")
    if value < 1:
        raise UsageError(
            f"trace file {file}: line {number}'s {key} is {value}: a request reads and writes at least 1 token"
        )
    return value


def _rows(
    file: Path, lines: _Lines, parse: _Parser, first: tuple[int, str] | None, limit: int | None, blank: int
) -> tuple[list[_Row], dict[str, int]]:
    rows: list[_Row] = []
    last: tuple[int, float] | None = None

    def numbered() -> _Lines:
        if first is not None:
            yield first
        yield from lines

    for number, text in numbered():
        if limit is not None and len(rows) >= limit:
            break
        if not text.strip():
            blank += 1
            continue
        row = parse(number, text)
        if last is not None and row[0] < last[1]:
            raise UsageError(
                f"trace file {file}: line {number}'s timestamp {_shown(row[0])} is before line {last[0]}'s "
                f"{_shown(last[1])}: a trace is replayed in time order; sort it by timestamp"
            )
        last = (number, row[0])
        rows.append(row)
    return rows, {"blank lines": blank} if blank else {}


def _shown(stamp: float) -> str:
    return stamp.shown if isinstance(stamp, _Stamp) else f"{stamp:g} s"


def _stats(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    return {"mean": round(sum(values) / len(values), 2), "min": min(values), "max": max(values)}


def _block_tokens(trace: Trace) -> int:
    if trace.block_tokens is None or trace.block_tokens < 1:
        raise UsageError(f"trace {trace.file} has hash ids but no block size: give block_tokens")
    return trace.block_tokens


def synthesize(trace: Trace, vocab: int, seed: int = 0) -> list[list[int]]:
    """Each row's prompt: exactly ``input_tokens`` random ids in 1..vocab-1, where rows sharing a hash id share that
    block's ids at that block position, so a server's prefix cache sees the reuse the trace's cache saw.

    A hash id's block is drawn once, ``block_tokens`` long, the first time a row sends it; a row's last block may
    be partial (its first tokens), and tokens past the row's hash ids are its own. Rows are drawn in order from one
    seeded generator, so the same seed gives the same prompts, and the first N rows the same whatever the limit.
    """
    import numpy as np

    if vocab < 2:
        raise UsageError(f"a vocabulary of {vocab} has no token ids to draw from 1..vocab-1: give at least 2")
    rng = np.random.default_rng(seed)
    blocks: dict[int, Any] = {}
    prompts: list[list[int]] = []
    for row in trace.rows:
        if not row.hash_ids:
            prompts.append(rng.integers(1, vocab, size=row.input_tokens).tolist())
            continue
        size = _block_tokens(trace)
        parts = []
        for position, h in enumerate(row.hash_ids):
            start = position * size
            if start >= row.input_tokens:
                break
            block = blocks.get(h)
            if block is None:
                block = blocks[h] = rng.integers(1, vocab, size=size, dtype=np.int64)
            parts.append(block[: row.input_tokens - start])
        own = row.input_tokens - len(row.hash_ids) * size
        if own > 0:
            parts.append(rng.integers(1, vocab, size=own, dtype=np.int64))
        prompts.append(np.concatenate(parts).tolist())
    return prompts


def shared_fraction(trace: Trace) -> float:
    """The fraction of the trace's prompt tokens that an earlier row already sent at the same place: the hit rate
    of an ideal prefix cache (unbounded, never evicting) replaying it in order, the most a server's cache can save.

    Counted in tokens, block by block along each row's hash ids, stopping at the first block no earlier row sent
    (a prefix cache serves only an unbroken beginning); a block an earlier row sent only part of (its partial last
    block) counts that part. Rows without hash ids share nothing.
    """
    total = sum(r.input_tokens for r in trace.rows)
    if not total:
        return 0.0
    sent: dict[int, int] = {}  # hash id -> the most of its block's tokens any row has sent
    shared = 0
    for row in trace.rows:
        if not row.hash_ids:
            continue
        size = _block_tokens(trace)
        hitting = True
        for position, h in enumerate(row.hash_ids):
            here = min(size, row.input_tokens - position * size)
            if here <= 0:
                break
            before = sent.get(h, 0)
            if hitting:
                shared += min(here, before)
                hitting = before >= here
            sent[h] = max(before, here)
    return shared / total


__all__ = [
    "FORMATS",
    "MOONCAKE_BLOCK_TOKENS",
    "Trace",
    "TraceRow",
    "read_trace",
    "shared_fraction",
    "synthesize",
]


@dataclass(frozen=True)
class TraceOptions(NoOptions):
    trace: str = opt(
        "",
        "a timed trace replayed at its timestamps: JSONL of timestamp (s), input_tokens, output_tokens a line, a "
        "Mooncake trace (shared hash_ids become shared prompt blocks) or an Azure LLM inference trace CSV",
        sweep=False,
        metavar="FILE",
    )
    trace_speed: float = opt(1.0, "replay the trace this many times faster than recorded", sweep=False)

    def check(self) -> None:
        if self.trace_speed <= 0:
            raise UsageError(f"--trace-speed must be above 0, got {self.trace_speed:g}")


class TraceSource(Source):
    name = "trace"
    about = "--trace"
    Options = TraceOptions
    replayed = True

    @classmethod
    def check_run(cls, params: RunSettings, options: TraceOptions) -> None:
        if not options.trace:
            raise UsageError("--source trace replays --trace FILE: give the file")
        read_trace(Path(options.trace).expanduser(), speed=options.trace_speed)  # a bad trace: one line, before load

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        """The trace's rows as timed requests. Where the run names a tokenizer, the synthesized ids are written in
        its ordinary tokens (:class:`~.tokenizer.Writable`, one to one, so rows sharing a hash id still share
        that block) and each prompt settled to the ids its own text reads back as, at its length: a server counts
        the prompt the record says was sent (a byte-level BPE may read a block's last tokens otherwise where the
        tokens after it differ)."""
        o: TraceOptions = self.options
        trace = read_trace(Path(o.trace).expanduser(), speed=o.trace_speed)
        ids = writable(params, vocab)
        prompts = synthesize(trace, ids.vocab if ids is not None else vocab)
        method = f"random token ids 1..{vocab - 1} (seed 0)"
        if ids is not None:
            prompts = ids.sendable(prompts)
            method = "random ordinary tokens of the tokenizer (seed 0), each prompt's text read back as its ids"
        outs = [max(r.output_tokens, 2) for r in trace.rows]
        summary: TracePrompts = {"source": self.name, **trace.to_dict(), "speed": o.trace_speed, "method": method}
        summary["shared_fraction"] = shared = shared_fraction(trace)
        return Work.single(prompts, outs, summary, at=[r.at for r in trace.rows], shared_prefix=bool(shared))

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        speed = float(settings.get("trace_speed", 1.0))
        return [f"trace {Path(str(settings.get('trace', ''))).name}" + (f" x{speed:g}" if speed != 1 else "")]
