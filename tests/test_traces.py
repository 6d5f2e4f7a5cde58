"""Request traces (Mooncake JSONL, Azure CSV, accelbench JSONL) read from small files written here, the prompts
synthesized from their block hashes, and the ideal prefix-cache hit rate counted by hand."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.serve.sources.traces import (
    MOONCAKE_BLOCK_TOKENS,
    Trace,
    TraceRow,
    read_trace,
    shared_fraction,
    synthesize,
)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def mooncake_rows(count: int = 30) -> list[dict[str, Any]]:
    """Mooncake-like rows: bursts at the same millisecond, every prompt opening with block 0 (a shared system
    prompt), every third row continuing the row before it (a conversation's next turn)."""
    rows: list[dict[str, Any]] = []
    next_id = 1
    for i in range(count):
        length = 700 + 97 * i
        blocks = math.ceil(length / MOONCAKE_BLOCK_TOKENS)
        if i % 3 == 2 and len(rows[-1]["hash_ids"]) <= blocks:
            ids = list(rows[-1]["hash_ids"])
        else:
            ids = [0]
        while len(ids) < blocks:
            ids.append(next_id)
            next_id += 1
        rows.append({"timestamp": (i // 4) * 3000, "input_length": length, "output_length": 10 + i, "hash_ids": ids})
    return rows


AZURE_START = datetime(2023, 11, 16, 18, 17, 3, 979960)
AZURE_GAPS_US = [52000, 46189, 42495, 304310, 94193, 159384, 317470, 283271, 25, 99591, 165]


def azure_csv(path: Path, count: int = 30) -> tuple[Path, list[float]]:
    """An Azure 2023 CSV (naive times, seven fractional digits) and each row's seconds after the first."""
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    seconds = []
    at = AZURE_START
    for i in range(count):
        if i:
            at += timedelta(microseconds=AZURE_GAPS_US[(i - 1) % len(AZURE_GAPS_US)])
        if i == 20:
            at += timedelta(minutes=2, seconds=23)  # a quiet spell, across a minute
        lines.append(f"{at:%Y-%m-%d %H:%M:%S.%f}0,{100 + 37 * i},{6 + i}")
        seconds.append((at - AZURE_START).total_seconds())
    path.write_text("\n".join(lines) + "\n")
    return path, seconds


# --- formats ------------------------------------------------------------------------------------------------------


def test_mooncake_rows_times_rate_and_blocks(tmp_path: Path) -> None:
    rows = mooncake_rows()
    trace = read_trace(write_jsonl(tmp_path / "mooncake_trace.jsonl", rows))
    assert trace.format == "mooncake" and trace.block_tokens == 512 and len(trace.rows) == 30
    assert [r.at for r in trace.rows] == [row["timestamp"] / 1000 for row in rows]  # milliseconds to seconds
    assert trace.rows[5] == TraceRow(3.0, rows[5]["input_length"], rows[5]["output_length"], tuple(rows[5]["hash_ids"]))
    assert trace.duration == 21.0
    summary = trace.to_dict()
    assert summary["rows"] == 30 and summary["span_seconds"] == 21.0
    assert summary["offered_requests_per_second"] == pytest.approx(29 / 21, abs=1e-6)
    assert summary["input_tokens"] == {"mean": 700 + 97 * 14.5, "min": 700, "max": 700 + 97 * 29}
    assert summary["output_tokens"] == {"mean": 24.5, "min": 10, "max": 39}
    assert summary["format"] == "mooncake" and summary["block_tokens"] == 512 and summary["skipped"] == {}
    assert 0 < summary["shared_fraction"] < 1 and summary["speed"] == 1.0 and summary["limit"] is None
    assert len(summary["sha256"]) == 64


def test_azure_datetimes_to_seconds(tmp_path: Path) -> None:
    path, seconds = azure_csv(tmp_path / "AzureLLMInferenceTrace_code.csv")
    trace = read_trace(path)
    assert trace.format == "azure" and trace.block_tokens is None and len(trace.rows) == 30
    assert [r.at for r in trace.rows] == pytest.approx(seconds, abs=1e-9)
    assert trace.rows[1].at == pytest.approx(0.052, abs=1e-9)
    assert trace.rows[0] == TraceRow(0.0, 100, 6)
    assert trace.rows[29].input_tokens == 100 + 37 * 29 and trace.rows[29].output_tokens == 35
    assert trace.duration == pytest.approx(seconds[-1]) and trace.duration > 143
    summary = trace.to_dict()
    assert summary["offered_requests_per_second"] == pytest.approx(29 / seconds[-1], abs=1e-6)
    assert summary["shared_fraction"] is None and summary["block_tokens"] is None


def test_azure_2024_offsets_and_whole_seconds(tmp_path: Path) -> None:
    """The 2024 traces' times carry a UTC offset; a time with no fraction, or another offset, reads the same."""
    path = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,4808,10\n"
        "2024-05-10 00:00:01+00:00,3180,8\n"
        "2024-05-10 01:00:02.5+01:00,110,27\n"  # 00:00:02.5 UTC
        "2024-05-10T00:00:03.25Z,34,12\n"
    )
    trace = read_trace(path)
    assert [r.at for r in trace.rows] == pytest.approx([0.0, 0.99007, 2.49007, 3.24007], abs=1e-9)


def test_accelbench_jsonl_speed_limit_and_blank_lines(tmp_path: Path) -> None:
    rows = [{"timestamp": 100 + 0.5 * i, "input_tokens": 10 + i, "output_tokens": 5} for i in range(20)]
    path = tmp_path / "trace.jsonl"
    path.write_text("\n" + "\n".join(json.dumps(r) for r in rows[:10]) + "\n\n" + "\n".join(map(json.dumps, rows[10:])))
    trace = read_trace(path)
    assert trace.format == "accelbench" and trace.block_tokens is None and trace.skipped == {"blank lines": 2}
    assert [r.at for r in trace.rows] == [0.5 * i for i in range(20)]  # seconds, from the first row
    fast = read_trace(path, speed=2.0)
    assert [r.at for r in fast.rows] == [0.25 * i for i in range(20)] and fast.duration == 4.75
    assert fast.to_dict()["offered_requests_per_second"] == pytest.approx(19 / 4.75)
    assert fast.to_dict()["speed"] == 2.0
    head = read_trace(path, limit=5, speed=0.5)
    assert [r.input_tokens for r in head.rows] == [10, 11, 12, 13, 14] and head.duration == 4.0
    assert head.sha256 == trace.sha256 and head.to_dict()["limit"] == 5  # the whole file's hash, not the first rows'
    one = read_trace(path, limit=1).to_dict()
    assert one["rows"] == 1 and one["span_seconds"] == 0 and one["offered_requests_per_second"] is None


def test_named_formats(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", mooncake_rows(4))
    assert read_trace(path, fmt="mooncake").format == "mooncake"
    with pytest.raises(UsageError, match=r"line 1 has no input_tokens or output_tokens \(an accelbench trace needs"):
        read_trace(path, fmt="accelbench")
    with pytest.raises(UsageError, match="is JSON, not an Azure CSV"):
        read_trace(path, fmt="azure")
    csv_path, _ = azure_csv(tmp_path / "a.csv", 3)
    with pytest.raises(UsageError, match="line 1 is not a JSON object: a mooncake trace is JSONL"):
        read_trace(csv_path, fmt="mooncake")
    with pytest.raises(UsageError, match="trace format 'burstgpt' is not one of auto, accelbench, mooncake, azure"):
        read_trace(csv_path, fmt="burstgpt")


# --- synthesized prompts and the ideal hit rate ---------------------------------------------------------------------

#: blocks of 4 tokens, countable by hand: (input tokens, hash ids) -> tokens an earlier row sent at the same place
HAND = [
    (10, [0, 1, 2]),  # 0: nothing sent before
    (9, [0, 1, 3]),  # 8: blocks 0 and 1; block 3 is new
    (12, [0, 1, 2]),  # 10: blocks 0, 1 and the 2 tokens of block 2 row 0 sent; then a miss
    (12, [0, 5, 1]),  # 4: block 0, then block 5 misses: block 1 after it is no prefix hit
    (7, []),  # 0: no hash ids, all its own
    (10, [0, 1, 2]),  # 10: block 2 was sent whole by row 2
    (14, [0, 1]),  # 8: two blocks, then 6 tokens of its own
]
HAND_SHARED = 0 + 8 + 10 + 4 + 0 + 10 + 8


def hand_trace(tmp_path: Path) -> Trace:
    rows = [{"timestamp": i, "input_tokens": n, "output_tokens": 1, "hash_ids": ids} for i, (n, ids) in enumerate(HAND)]
    for row in rows:
        if not row["hash_ids"]:
            del row["hash_ids"]
    return read_trace(write_jsonl(tmp_path / "hand.jsonl", rows), block_tokens=4)


def test_shared_fraction_by_hand(tmp_path: Path) -> None:
    trace = hand_trace(tmp_path)
    assert trace.block_tokens == 4
    total = sum(n for n, _ in HAND)
    assert shared_fraction(trace) == pytest.approx(HAND_SHARED / total)
    assert trace.to_dict()["shared_fraction"] == pytest.approx(40 / 74, abs=1e-6)
    plain = Trace([TraceRow(0.0, 5, 1)], "x", "0" * 64, "accelbench", None, {})
    assert shared_fraction(plain) == 0.0 and plain.to_dict()["shared_fraction"] is None


def test_synthesize_shares_blocks(tmp_path: Path) -> None:
    trace = hand_trace(tmp_path)
    prompts = synthesize(trace, vocab=100_000, seed=3)
    assert [len(p) for p in prompts] == [n for n, _ in HAND]
    assert all(1 <= t < 100_000 for p in prompts for t in p)
    r0, r1, r2, r3, r4, r5, r6 = prompts
    assert r1[:8] == r0[:8] and r1[8] != r2[8]  # blocks 0 and 1 shared; block 3 is not block 2
    assert r2[:10] == r0[:10]  # row 0 sent block 2's first 2 tokens; row 2 sends all 4
    assert r5 == r2[:10]
    assert r3[:4] == r0[:4] and r3[8:12] == r0[4:8]  # block 1, wherever it stands, is the same block
    assert r6[:8] == r0[:8] and r6[8:] != r2[8:14]  # past its hash ids, its own tokens
    assert r4 not in (r0[:7], r1[:7])
    assert synthesize(trace, vocab=100_000, seed=3) == prompts  # deterministic
    assert synthesize(trace, vocab=100_000, seed=4) != prompts
    head = read_trace(Path(trace.file), limit=3, block_tokens=4)
    assert synthesize(head, vocab=100_000, seed=3) == prompts[:3]  # a limit keeps the first rows' prompts


def test_synthesize_mooncake_blocks(tmp_path: Path) -> None:
    trace = read_trace(write_jsonl(tmp_path / "mooncake_trace.jsonl", mooncake_rows(12)))
    prompts = synthesize(trace, vocab=32000, seed=0)
    assert [len(p) for p in prompts] == [r.input_tokens for r in trace.rows]
    first: dict[int, list[int]] = {}
    for row, prompt in zip(trace.rows, prompts, strict=True):
        for k, h in enumerate(row.hash_ids):
            block = prompt[k * 512 : (k + 1) * 512]
            seen = first.setdefault(h, block)
            n = min(len(seen), len(block))
            assert block[:n] == seen[:n]
    assert all(p[:512] == prompts[0][:512] for p in prompts)  # block 0, the shared opening
    no_ids = Trace([TraceRow(0.0, 20, 1), TraceRow(1.0, 20, 1)], "x", "0" * 64, "accelbench", None, {})
    a, b = synthesize(no_ids, vocab=1000)
    assert len(a) == len(b) == 20 and a != b  # all random


def test_synthesize_bad_inputs() -> None:
    hashed = Trace([TraceRow(0.0, 8, 1, (0, 1))], "t.jsonl", "0" * 64, "accelbench", None, {})
    with pytest.raises(UsageError, match="trace t.jsonl has hash ids but no block size: give block_tokens"):
        synthesize(hashed, vocab=100)
    with pytest.raises(UsageError, match="a vocabulary of 1 has no token ids to draw from 1..vocab-1"):
        synthesize(hashed, vocab=1)


# --- bad input: one line each ---------------------------------------------------------------------------------------


def one_line(path: Path, **kwargs: Any) -> str:
    with pytest.raises(UsageError) as info:
        read_trace(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bad_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    assert one_line(missing) == (
        f"trace file {missing} does not exist: give a Mooncake or accelbench JSONL, or an Azure CSV"
    )
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,10,5 \xe9t\xe9\n")
    assert one_line(latin) == f"trace file {latin} is not UTF-8 text (line 2): give JSONL or CSV"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    assert one_line(empty) == f"trace file {empty} is empty: give one request a line (JSONL) or an Azure CSV"
    header = tmp_path / "header.csv"
    header.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n\n")
    assert one_line(header) == f"trace file {header} is empty: it has no requests after its header"
    other = tmp_path / "other.csv"
    other.write_text("Timestamp,Model,Request tokens,Response tokens\n")
    assert "is neither JSONL nor an Azure CSV: its first line 'Timestamp,Model" in one_line(other)
    unknown = write_jsonl(tmp_path / "unknown.jsonl", [{"time": 0, "prompt_len": 5}])
    assert one_line(unknown) == (
        f"trace file {unknown}: line 1 has neither input_tokens (accelbench) nor input_length (Mooncake); "
        "its fields: prompt_len, time"
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1,\n')
    assert one_line(broken).startswith(f"trace file {broken} is not JSONL: line 2 is not JSON (")
    listed = tmp_path / "listed.jsonl"
    listed.write_text('{"timestamp": 0, "input_tokens": 5, "output_tokens": 1}\n[1, 2]\n')
    assert one_line(listed) == f"trace file {listed}: line 2 is a JSON list, not an object"
    for speed in (0, -1.0, float("nan")):
        assert one_line(unknown, speed=speed).startswith("trace speed must be a number above 0")
    assert one_line(unknown, limit=0) == "the number of trace rows must be at least 1, not 0"


def test_bad_rows(tmp_path: Path) -> None:
    rows = mooncake_rows(6)
    del rows[2]["output_length"]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    assert one_line(path) == (
        f"trace file {path}: line 3 has no output_length (a mooncake trace needs timestamp, input_length, "
        "output_length); its fields: hash_ids, input_length, timestamp"
    )
    rows = mooncake_rows(6)
    rows[3]["output_length"] = 0
    path = write_jsonl(tmp_path / "m0.jsonl", rows)
    assert one_line(path) == (
        f"trace file {path}: line 4's output_length is 0: a request reads and writes at least 1 token"
    )
    rows = mooncake_rows(6)
    rows[1]["input_length"] = "many"
    path = write_jsonl(tmp_path / "m1.jsonl", rows)
    assert one_line(path) == f"trace file {path}: line 2's input_length 'many' is not a whole number"
    rows = mooncake_rows(6)
    rows[1]["hash_ids"] = "0,1"
    path = write_jsonl(tmp_path / "m2.jsonl", rows)
    assert one_line(path) == f"trace file {path}: line 2's hash_ids is not a list of whole numbers"
    rows = mooncake_rows(6)
    rows[4]["timestamp"] = "soon"
    path = write_jsonl(tmp_path / "m3.jsonl", rows)
    assert one_line(path) == f"trace file {path}: line 5's timestamp 'soon' is not a number"

    short, _ = azure_csv(tmp_path / "short.csv", 8)
    lines = short.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0]
    short.write_text("\n".join(lines) + "\n")
    assert one_line(short) == (
        f"trace file {short}: line 6 has no GeneratedTokens (an Azure trace needs TIMESTAMP, ContextTokens, "
        "GeneratedTokens); its fields: TIMESTAMP, ContextTokens"
    )
    zero, _ = azure_csv(tmp_path / "zero.csv", 8)
    zero.write_text(zero.read_text().replace(",174,", ",0,"))  # the third row's ContextTokens
    assert (
        one_line(zero) == f"trace file {zero}: line 4's ContextTokens is 0: a request reads and writes at least 1 token"
    )
    when, _ = azure_csv(tmp_path / "when.csv", 4)
    when.write_text(when.read_text().replace("2023-11-16 18:17:04.0319600", "16/11/2023 18:17"))
    assert one_line(when) == (
        f"trace file {when}: line 3's TIMESTAMP '16/11/2023 18:17' is not a date and time "
        "(like 2023-11-16 18:17:03.9799600)"
    )


def test_out_of_order(tmp_path: Path) -> None:
    stamps = [0.0, 0.2, 0.4, 0.9, 1.1, 1.5, 1.2, 1.9]
    rows = [{"timestamp": t, "input_tokens": 10, "output_tokens": 5} for t in stamps]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    assert one_line(path) == (
        f"trace file {path}: line 7's timestamp 1.2 s is before line 6's 1.5 s: a trace is replayed in time "
        "order; sort it by timestamp"
    )
    assert len(read_trace(path, limit=6).rows) == 6  # the rows a limit keeps are in order
    rows = mooncake_rows(8)
    rows[4]["timestamp"], rows[5]["timestamp"] = 6000, 5999
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    assert "line 6's timestamp 5999 ms is before line 5's 6000 ms" in one_line(path)
    azure, _ = azure_csv(tmp_path / "a.csv", 5)
    lines = azure.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    azure.write_text("\n".join(lines))
    assert "line 5's timestamp 2023-11-16 18:17:04.0781490 is before line 4's 2023-11-16 18:17:04.1206440" in one_line(
        azure
    )
