"""Every request of a language-model serving run on record (``logs/requests-*.jsonl``), and the record's figures
found again from the rows: accelbench's own exactly, LoadGen's within what its own clock adds.

The runs are real: ``accelbench infer --engine endpoint`` against the project's stub OpenAI server, under LoadGen
(Offline and Server) and under accelbench's driver (a trace, conversations).
"""

from __future__ import annotations

import json
import os
import random
import sys
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("transformers")

from accelbench.cli.render_requests import summary_line  # noqa: E402
from accelbench.serve import figures  # noqa: E402
from accelbench.serve import requests as rq  # noqa: E402
from accelbench.serve.engines.endpoint.stub import Behaviour, serving  # noqa: E402
from accelbench.serve.rows import RequestRow  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_cli, stored  # noqa: E402
from llm_server import make_checkpoint  # noqa: E402

#: the stub's wait before each answer: TTFT of tens of ms, so LoadGen's and the SUT's clocks are compared on a
#: figure well above a Python callback's cost
DELAY = 0.02


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("requests-ckpt"))


def env_in(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ACCELBENCH_HOME"] = str(folder / "home")
    env["COLUMNS"] = "160"
    return env


def infer(url: str, checkpoint: Path, db: Path, *more: str) -> list[str]:
    return ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint", "--url", url, "--tokenizer",
            str(checkpoint), "--db", str(db), "--out", str(db.parent / "runs"), *more]  # fmt: skip


def ran(args: list[str], env: dict[str, str], cwd: Path, db: Path) -> list[Any]:
    p = run_cli(args, env, cwd)
    assert p.returncode == 0, p.stdout + p.stderr
    records = stored(db)
    assert all(r.status == "ok" for r in records), [r.error for r in records]
    return records


def log_of(record: Any) -> rq.RequestLog:
    entry = record.details["request_log"]
    log = rq.read(Path(entry["path"]))
    assert entry["rows"] == len(log.rows) and entry["failed"] == 0 and not entry["compressed"]
    return log


def limits(record: Any) -> tuple[float | None, float | None]:
    return record.details["limits"]["ttft_p99_ms"], record.details["limits"]["tpot_p99_ms"]


@pytest.fixture(scope="module")
def loadgen_run(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Any]]:
    """One run of two LoadGen records, Offline then Server, through the endpoint engine: its folder, store and
    records."""
    folder = tmp_path_factory.mktemp("requests-loadgen")
    db = folder / "r.db"
    with serving(Behaviour(delay=DELAY)) as url:
        args = infer(url, checkpoint, db, "--scenario", "offline,server", "--output-tokens", "8", "--duration", "2")
        records = ran(args, env_in(folder), folder, db)
    assert [r.params["scenario"] for r in records] == ["offline", "server"]
    return folder, db, records


# --- LoadGen's runs


def test_a_loadgen_runs_rows_are_its_requests_and_give_the_sut_figures_of_its_record_exactly(
    loadgen_run: tuple[Path, Path, list[Any]],
) -> None:
    """Each row a request LoadGen issued (its counts are the record's), and the figures the record takes from the
    SUT's clock (goodput, inter-token latency; Offline's TPOT and tokens/s per user) found again from the rows,
    equal to the last bit."""
    _, _, records = loadgen_run
    for record in records:
        log = log_of(record)
        rows = log.rows
        assert log.meta["driver"] == "LoadGen" and log.meta["scheduled"].startswith("null")
        assert len(rows) == record.details["requests"] and all(r.status == "ok" for r in rows)
        assert sum(r.output_tokens for r in rows) == record.details["output_tokens"]
        assert sum(r.prompt_tokens for r in rows) == record.details["input_tokens"]
        assert all(r.scheduled is None and r.session is None and r.first is not None for r in rows)
        # each answer streamed 8 chunks: 7 gaps after its first token, and it ended after its last chunk
        assert all(len(r.gaps) == 7 and r.sent <= r.first <= r.done for r in rows if r.first and r.done)
        assert min(r.sent for r in rows) == 0.0  # the run's start: LoadGen's first issue
        again = figures.recompute(log, *limits(record))
        exact = figures.SUT_FIGURES + (figures.SUT_OFFLINE_FIGURES if record.params["scenario"] == "offline" else ())
        found = [name for name in exact if name in record.metrics]
        assert found and all(again[name] == record.metrics[name].value for name in found), [
            (name, again[name], record.metrics[name].value) for name in found
        ]
    assert "goodput_tokens_per_second" in records[1].metrics and "tpot_p50_ms" in records[0].metrics


def test_loadgens_own_figures_are_found_within_what_its_clock_adds(loadgen_run: tuple[Path, Path, list[Any]]) -> None:
    """LoadGen times each request from when it scheduled it (Server) or issued it (Offline) to the SUT's calls
    into it; the SUT's clock starts at its issue callback and stops before those calls, so no request's TTFT by
    LoadGen is under the row's. Percentiles of each: LoadGen's at a rank the rows' lower-rank percentile cannot
    pass. Throughput: the same requests and tokens over spans apart by the first and last request's callbacks."""
    _, _, (offline, server) = loadgen_run
    for record in (offline, server):
        again = figures.recompute(log_of(record))
        for name in ("requests_per_second", "tokens_per_second"):
            assert again[name] == pytest.approx(record.metrics[name].value, rel=0.02), name
    rows = log_of(server).rows
    ttft = [1e3 * (r.first - r.sent) for r in rows if r.first is not None]
    for p in (50, 90, 99):
        ours = float(np.percentile(ttft, p, method="lower"))
        assert server.metrics[f"ttft_p{p}_ms"].value >= ours, (p, server.metrics[f"ttft_p{p}_ms"].value, ours)
    # the median apart by the issue callback's wait at most (tens of ms on a busy 2-core host, at a 20 ms TTFT)
    median = float(np.percentile(ttft, 50))
    assert median >= DELAY * 1e3 and server.metrics["ttft_p50_ms"].value <= 1.5 * median + 10.0


# --- accelbench's driver: every figure exactly


def test_a_replayed_traces_rows_give_every_figure_of_its_record_exactly(checkpoint: Path, tmp_path: Path) -> None:
    rng = random.Random(0)
    at, rows = 0.0, []
    for _ in range(40):
        at += rng.expovariate(30.0)
        lengths = {"input_tokens": rng.randint(40, 200), "output_tokens": rng.randint(4, 12)}
        rows.append({"timestamp": round(at, 4), **lengths})
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "t.db"
    with serving(Behaviour(delay=DELAY)) as url:
        (record,) = ran(infer(url, checkpoint, db, "--trace", str(trace), "--scenario", "server"), env_in(tmp_path),
                        tmp_path, db)  # fmt: skip
    log = log_of(record)
    assert log.meta["driver"] == "accelbench" and log.meta["kind"] == "trace"
    assert [r.sample for r in log.rows] == list(range(40)) and all(r.session is None for r in log.rows)
    # due at the trace's timestamps, from its first
    assert [r.scheduled for r in log.rows] == pytest.approx([r["timestamp"] - rows[0]["timestamp"] for r in rows])
    assert [r.output_tokens for r in log.rows] == [max(r["output_tokens"], 2) for r in rows]
    again = figures.recompute(log, *limits(record))
    assert again == {k: record.metrics[k].value for k in again}  # each equal to the last bit, the lateness too
    assert set(record.metrics) - set(again) == {"tokens_per_second_per_device"}  # the one divided by devices
    assert "issue_late_p99_ms" in again and "offered_requests_per_second" in again


def test_conversations_rows_give_each_turn_and_every_figure_exactly(checkpoint: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with serving(Behaviour(delay=DELAY)) as url:
        args = infer(url, checkpoint, db, "--source", "conversations", "--turns", "3", "--scenario", "server",
                     "--input-tokens", "32", "--output-tokens", "6", "--batch-size", "4")  # fmt: skip
        (record,) = ran(args, env_in(tmp_path), tmp_path, db)
    log = log_of(record)
    assert log.meta["kind"] == "conversations" and log.meta["users"] == 4
    turns: dict[int, list[RequestRow]] = {}
    for r in log.rows:
        assert r.session is not None and r.turn is not None
        turns.setdefault(r.session, []).append(r)
    for session in turns.values():  # each turn sent after the answer before it, its prompt that history and more
        assert [r.turn for r in session] == [1, 2, 3]
        for before, after in zip(session, session[1:], strict=False):
            assert before.done is not None and after.sent >= before.done and after.prompt_tokens > before.prompt_tokens
    ok = [r for r in log.rows if r.status == "ok"]
    assert figures.per_turn(ok) == record.details["turns"]
    again = figures.recompute(log, *limits(record))
    assert "ttft_growth_ms_per_turn" in again and again == {k: record.metrics[k].value for k in again}


# --- the file


def rows_of(n: int, gaps: int) -> list[RequestRow]:
    return [
        RequestRow(i, i, None, None, None, None, 0.001 * i, 0.001 * i + 0.01, None, 0.001 * i + 0.02, 100, gaps + 1,
                   array("d", [0.01 / 3] * gaps), "ok", None)
        for i in range(n)
    ]  # fmt: skip


def test_a_large_file_is_compressed_and_reads_back_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = rq.write(tmp_path, "loadgen", {"driver": "LoadGen"}, rows_of(3, 4))
    assert not small["compressed"] and small["path"].endswith(".jsonl") and small["rows"] == 3
    assert rq.read(Path(small["path"])).rows == rows_of(3, 4)
    monkeypatch.setattr(rq, "COMPRESS_BYTES", 10_000)
    big = rq.write(tmp_path, "loadgen", {"driver": "LoadGen"}, rows_of(200, 50))
    assert big["compressed"] and big["path"].endswith(".jsonl.gz") and big["rows"] == 200
    assert not Path(big["path"][: -len(".gz")]).exists()
    log = rq.read(Path(big["path"]))
    assert log.rows == rows_of(200, 50) and log.meta["accelbench_requests"] == rq.VERSION
    assert big["bytes"] < sum(len(r.to_json()) for r in log.rows) / 3  # digits of equal gaps compress well


def test_the_sut_keeps_failed_requests_with_the_servers_words_and_its_failure_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SUT straight, LoadGen's answer calls made no-ops (no test is running to take them): a request answered,
    one failed after its first token, written when the test ends; the run's failure carries where."""
    import mlperf_loadgen as lg

    from accelbench.errors import BenchmarkFailed
    from accelbench.serve.engines.endpoint.client import Failure
    from accelbench.serve.sut import TokenSUT

    monkeypatch.setattr(lg, "FirstTokenComplete", lambda responses: None)
    monkeypatch.setattr(lg, "QuerySamplesComplete", lambda responses: None)

    class Engine:
        name, remote = "endpoint", True
        submitted: list[Any] = []

        def submit(self, requests: list[Any]) -> None:
            self.submitted.extend(requests)

    class Library:
        loaded = {0: [5, 6, 7], 1: [5, 6, 7, 8]}

    class Query:
        def __init__(self, id: int, index: int) -> None:
            self.id, self.index = id, index

    engine = Engine()
    sut = TokenSUT(engine, Library(), lambda i: 3, log_dir=tmp_path)  # type: ignore[arg-type]
    sut.issue([Query(11, 0), Query(12, 1)])
    a, b = engine.submitted
    sut.first(a, 1)
    sut.answering(a)  # a reasoning model's answer begins after its first token
    sut.step(a, 2)  # two tokens at once: two equal gaps
    sut.done(a, [1, 2, 3])
    sut.first(b, 1)
    sut.failed(b, Failure("HTTP 500: stub: induced failure"))
    sut.stop()
    assert isinstance(sut.error, BenchmarkFailed) and sut.error.details["request_log"] == sut.request_log
    log = rq.read(Path(sut.request_log["path"]))  # type: ignore[index]
    ok, failed = log.rows
    assert (ok.id, ok.sample, ok.status, ok.output_tokens, ok.prompt_tokens) == (11, 0, "ok", 3, 3)
    assert len(ok.gaps) == 2 and ok.gaps[0] == ok.gaps[1] and sut.rows[0].gaps == ok.gaps
    assert [r.to_json() for r in sut.rows] == [r.to_json() for r in log.rows]  # what the record's figures read
    assert ok.first is not None and ok.done is not None and ok.first_answer is not None
    assert ok.first <= ok.first_answer <= ok.done and failed.first_answer is None
    assert (failed.id, failed.status, failed.error) == (12, "failed", "HTTP 500: stub: induced failure")
    assert failed.first is not None and failed.done is not None and failed.output_tokens == 0
    assert sut.request_log["failed"] == 1 and "server's usage" in log.meta["output_tokens"]  # type: ignore[index]


def test_a_replay_that_stalls_keeps_its_requests_and_its_failure_says_where(tmp_path: Path) -> None:
    from accelbench.errors import BenchmarkFailed
    from accelbench.serve.drive import run_keeping
    from accelbench.serve.engines.base import EngineSettings, NullEngine
    from accelbench.serve.replay import Driver
    from accelbench.serve.sources.base import Work

    class Silent(NullEngine):
        def serve(self, batch: list[Any]) -> None:  # takes the requests, answers none
            pass

    work = Work.single([[1, 2, 3], [4, 5]], [4, 4], at=[0.0, 0.01])
    engine = Silent(Silent.Options())
    driver = Driver(engine, work, users=2)
    engine.start(None, None, driver, EngineSettings(max_batch=2))  # type: ignore[arg-type]
    try:
        with pytest.raises(BenchmarkFailed, match="the replay stalled") as caught:
            run_keeping(driver, tmp_path, timeout=0.3)
    finally:
        engine.stop()
    entry = caught.value.details["request_log"]
    log = rq.read(Path(entry["path"]))
    assert entry["rows"] == 2 and entry["failed"] == 2 and log.meta["kind"] == "trace"
    assert [(r.sample, r.scheduled, r.prompt_tokens, r.status) for r in log.rows] == [
        (0, 0.0, 3, "failed"),
        (1, 0.01, 2, "failed"),
    ]
    assert all(r.first is None and r.error == "no answer (the replay ended first)" for r in log.rows)


# --- accelbench results requests


def test_results_requests_prints_the_rows_and_their_figures(loadgen_run: tuple[Path, Path, list[Any]]) -> None:
    folder, db, (offline, server) = loadgen_run
    env = env_in(folder)
    (run_dir,) = (db.parent / "runs").iterdir()
    p = run_cli(["results", "requests", run_dir.name, "--db", str(db), "--entry", "2", "--limit", "3"], env, folder)
    assert p.returncode == 0, p.stdout + p.stderr
    log = log_of(server)
    assert "TTFT ms" in p.stdout and f"the first 3 of {len(log.rows)} requests shown" in p.stdout
    summary = summary_line(log, *limits(server))
    assert " ".join(summary.split()) in " ".join(p.stdout.split())
    assert f"{len(log.rows)} requests;" in summary and "ITL p50" in summary and "LoadGen's" in summary
    # the run folder works as well as its id; JSON and CSV hold every row
    p = run_cli(["results", "requests", str(run_dir), "--entry", "1", "--json"], env, folder)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["record"] == offline.id and len(data["rows"]) == offline.details["requests"]
    assert data["figures"]["itl_p99_ms"] == offline.metrics["itl_p99_ms"].value
    p = run_cli(["results", "requests", str(run_dir), "--entry", "2", "--csv"], env, folder)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines[0].startswith("id,sample,") and len(lines) == 1 + server.details["requests"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["nope"], "unknown run 'nope'"),
        (["RUN"], "has 2 language-model serving records: --entry 1 ("),
        (["RUN", "--entry", "3"], "--entry 3 is none"),
        (["RUN", "--entry", "0"], "--entry"),
        (["RUN", "--json", "--csv"], "not allowed with argument"),
        (["FOLDER"], "is not a run folder (it has no results.jsonl)"),
    ],
)
def test_results_requests_refuses_bad_input_in_one_line(
    loadgen_run: tuple[Path, Path, list[Any]], args: list[str], words: str
) -> None:
    folder, db, _ = loadgen_run
    (run_dir,) = (db.parent / "runs").iterdir()
    subst = {"RUN": run_dir.name, "FOLDER": str(folder)}
    p = run_cli(["results", "requests", *[subst.get(x, x) for x in args], "--db", str(db)], env_in(folder), folder)
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr


def test_a_record_without_requests_says_why(loadgen_run: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    """A run folder whose record was made before requests were kept: one line, exit 2."""
    _, db, (offline, _) = loadgen_run
    folder = tmp_path / "old-run"
    folder.mkdir()
    old = offline.to_dict()
    old["details"].pop("request_log")
    (folder / "results.jsonl").write_text(json.dumps(old) + "\n")
    p = run_cli(["results", "requests", str(folder)], env_in(tmp_path), tmp_path)
    assert p.returncode == 2 and "keeps no requests: it was recorded before accelbench kept requests" in p.stderr


def test_a_reasoning_answers_first_token_is_on_its_row(checkpoint: Path, tmp_path: Path) -> None:
    """Chat answers whose first 3 of 6 chunks are reasoning: each row's first answer token comes after its first
    token (the reasoning's), both from the same send, so a reader can take the thinking's time per request."""
    db = tmp_path / "r.db"
    with serving(Behaviour(reasoning=3, delay=DELAY)) as url:
        args = infer(url, checkpoint, db, "--api", "chat", "--output-tokens", "6", "--duration", "1")
        (record,) = ran(args, env_in(tmp_path), tmp_path, db)
    rows = log_of(record).rows
    assert rows and all(r.first_answer is not None and r.first is not None for r in rows)
    assert all(r.sent <= r.first < r.first_answer <= r.done for r in rows if r.first_answer and r.first and r.done)


def test_one_token_answers_are_counted_named_and_explained(checkpoint: Path, tmp_path: Path) -> None:
    """A server that refuses ignore_eos and min_tokens and ends every 5th answer after one token (its end of
    sequence): LoadGen logs an error for each (no time per output token) and the run's lengths-differ concern
    counts them, matching the requests file's rows of one token."""
    db = tmp_path / "r.db"
    with serving(Behaviour(delay=DELAY, eos_every=5)) as url:
        args = infer(url, checkpoint, db, "--scenario", "server", "--output-tokens", "6", "--duration", "2")
        done = run_cli(args, env_in(tmp_path), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = stored(db)
    assert record.status == "ok"
    rows = rq.read(Path(record.details["request_log"]["path"])).rows
    short = [r for r in rows if r.output_tokens == 1]
    assert short and len(short) == pytest.approx(len(rows) / 5, abs=2)
    (differ,) = [c for c in record.concerns if c.kind == "lengths-differ"]
    assert differ.data["one_token"] == len(short) and not differ.data["ignore_eos"]
    assert f"{len(short)} of {len(rows)} answered in one token" in differ.text


def test_an_invalid_runs_reasons_say_what_loadgen_left_bare() -> None:
    """A quick Server run on a slow server that also had one-token answers: early stopping's reason comes first,
    with the requests answered and what the p99 needs; LoadGen's bare error about one-token answers is replaced
    by what they were and what to do."""
    from accelbench.serve.verdict import ONE_TOKEN_ERROR, token_reasons

    detail = {"early_stopping_met": False, "_errors": [f"error_runtime: {ONE_TOKEN_ERROR}", "error_runtime: other"]}
    said = [words for _, words in token_reasons(detail, "server", 429, "3 of 429 requests answered in one token")]
    assert said[0].startswith("too few requests for the p99 TTFT/TPOT (429 answered, LoadGen's early stopping needs")
    assert "run longer" in said[0]
    assert said[1:] == ["3 of 429 requests answered in one token", "LoadGen error: error_runtime: other"]
