"""``--engine endpoint``: a real ``transformers serve`` measured under LoadGen, each way a server can misbehave as
a clear per-query outcome (the stub server), and bad input as one line before any load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("transformers")

import accelbench.registry  # noqa: E402, F401  # the benchmarks registered: a record names its benchmark by its params
from accelbench.errors import BenchmarkFailed, UsageError  # noqa: E402
from accelbench.serve.engines.base import EngineSettings, Timeline, TokenRequest  # noqa: E402
from accelbench.serve.engines.endpoint.client import Answer, Failure, Target, error_words  # noqa: E402
from accelbench.serve.engines.endpoint.engine import EndpointEngine, listening  # noqa: E402
from accelbench.serve.engines.endpoint.preflight import load_tokenizer
from accelbench.serve.engines.endpoint.stub import MODEL, Behaviour, serving  # noqa: E402
from accelbench.serve.specs import LLMServeParams  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from llm_server import make_checkpoint, serving_command, transformers_serve  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("endpoint-ckpt"))


def params(url: str, checkpoint: Path, **kw: Any) -> LLMServeParams:
    base = dict(model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(checkpoint))
    return LLMServeParams.of(**(base | kw))


def endpoint_args(url: str, checkpoint: Path, *more: str) -> list[str]:
    """``accelbench infer`` of the tiny llama3.1-8b through the endpoint at ``url``, its tokenizer the checkpoint's."""
    return ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint", "--url", url, "--tokenizer",
            str(checkpoint), *more]  # fmt: skip


def drive(url: str, checkpoint: Path, requests: int = 6, out: int = 5, **kw: Any) -> tuple[EndpointEngine, Timeline]:
    """Requests straight to the engine (no LoadGen): what each one's outcome was."""
    p = params(url, checkpoint, served_model=MODEL, **kw)
    engine = EndpointEngine(p.engine_opts)
    engine.configure(p)
    timeline = Timeline(expected=requests)
    engine.start(None, None, timeline, EngineSettings(max_batch=4))  # type: ignore[arg-type]
    failures: list[str] = []
    timeline_failed = timeline.failed
    timeline.failed = lambda r, e: (failures.append(str(e)), timeline_failed(r, e))  # type: ignore[method-assign]
    try:
        engine.submit([TokenRequest(i, i, [5, 6, 7, 8], out) for i in range(requests)])
        assert timeline.finished.wait(60)
    finally:
        engine.stop()
    engine.failures = failures  # type: ignore[attr-defined]
    return engine, timeline


# --- the stream, line by line


def test_a_stream_is_read_as_openai_sends_it() -> None:
    answer, seen = Answer(), []
    for line in (
        b'data: {"choices":[{"delta":{"role":"assistant"},"index":0}]}',  # a role-only chunk: no content, no TTFT
        b"",
        b'data: {"choices":[{"delta":{"content":"Hi"},"index":0}]}',
        b": keep-alive",
        b'data: {"choices":[{"delta":{"content":" there"},"finish_reason":"length","index":0}]}',
        b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}',
        b"data: [DONE]",
    ):
        answer.feed(line, "chat", lambda: seen.append(1))
    answer.ended()
    assert (answer.text, len(seen), answer.completion_tokens, answer.prompt_tokens) == (["Hi", " there"], 2, 2, 7)
    assert answer.finish_reason == "length" and answer.done


def test_a_stream_that_breaks_says_how() -> None:
    early = Answer()
    early.feed(b'data: {"choices":[{"text":"a","index":0}]}', "completions", lambda: None)
    with pytest.raises(Failure, match="closed the stream after 1 content chunks, without a finish"):
        early.ended()
    with pytest.raises(Failure, match="server error mid-stream: out of memory"):
        Answer().feed(b'data: {"error": {"message": "out of memory"}}', "completions", lambda: None)
    with pytest.raises(Failure, match="not an OpenAI stream event"):
        Answer().feed(b"data: <html>", "completions", lambda: None)
    assert error_words(404, b'{"detail": "Model  not\\n found"}') == "HTTP 404: Model not found"
    assert error_words(500, b'{"error": {"message": "boom"}}') == "HTTP 500: boom"
    assert error_words(502, b"") == "HTTP 502: (empty body)"


def test_the_client_watch_blames_itself_only_on_its_own_signs() -> None:
    from accelbench.serve.engines.endpoint.watch import ClientWatch

    watch = ClientWatch()
    for _ in range(100):
        watch.waited(0.0001, 0.0)
    assert "limited_by" not in watch.report(connections=8, arrivals=True)
    for wait in [0.0] * 90 + [0.05] * 10:  # a tenth of the arrivals waited 50 ms for a connection
        watch.waited(0.0001, wait)
    # in Server the client held LoadGen's arrivals back; in Offline the same waits are the concurrency asked for
    server = watch.report(connections=8, arrivals=True)
    assert server["queued_requests"] == 10 and "10 of 100 requests waited" in server["limited_by"]
    for wait in [0.0] * 90 + [0.05] * 10:
        watch.waited(0.0001, wait)
    assert "limited_by" not in watch.report(connections=8, arrivals=False)
    for _ in range(100):
        watch.waited(0.02, 0.0)  # requests reached the loop 20 ms after they were issued
    assert "limited_by" not in watch.report(connections=8, arrivals=False)  # Offline: the query's own queue
    for _ in range(100):
        watch.waited(0.02, 0.0)
    assert "after they were issued" in watch.report(connections=8, arrivals=True)["limited_by"]


# --- each misbehaviour of a server is a clear per-query outcome


def test_every_answer_of_a_well_behaved_server_is_counted_from_its_usage(checkpoint: Path) -> None:
    with serving() as url:
        engine, timeline = drive(url, checkpoint)
    assert not engine.failures and len(timeline.dones) == 6
    assert all(n == 5 for _, n in timeline.dones.values())  # the stub's usage: exactly the asked tokens
    assert engine.facts["output_token_count"] == "the server's usage (completion_tokens)"
    assert listening(url) == [] or all(isinstance(p, int) for p in listening(url))


def test_the_servers_cached_tokens_give_the_prefix_caches_hit_rate_and_none_is_said_as_not_reported(
    checkpoint: Path,
) -> None:
    """The stub reports 6 of each answer's prompt tokens cached: the hit rate is 6 over its prompt tokens, from the
    server's own words; a server whose usage says nothing of a cache is "not reported", never a rate of 0."""
    with serving(Behaviour(cached_tokens=6)) as url:
        engine, _ = drive(url, checkpoint)
    cache = engine.measured(arrivals=False)["prefix_cache"]
    assert cache["cached_tokens"] == 36 and cache["prompt_tokens"] > 36
    assert cache["hit_rate"] == 36 / cache["prompt_tokens"]
    assert "cached_tokens" in cache["source"]
    assert "prefix_cache" not in engine.measured(arrivals=False)  # each LoadGen run's own, then reset
    with serving() as url:
        engine, _ = drive(url, checkpoint)
    assert engine.measured(arrivals=False)["prefix_cache"].startswith("not reported")


def test_a_reasoning_models_thinking_is_counted_apart_from_its_answer(checkpoint: Path) -> None:
    """Chat answers whose first 3 of 5 chunks are reasoning_content: the first token is the first reasoning chunk
    (LoadGen's TTFT), the answer's own first token comes later and is timed apart; the usage's reasoning tokens are
    recorded, the answer's text holds no reasoning, and every token still counts as output."""
    with serving(Behaviour(reasoning=3, delay=0.0)) as url:
        engine, timeline = drive(url, checkpoint, api="chat")
    assert not engine.failures and all(n == 5 for _, n in timeline.dones.values())
    thinking = engine.measured(arrivals=False)["reasoning"]
    assert thinking["reasoning_tokens"] == 18 and thinking["completion_tokens"] == 30  # 3 of 5, six answers
    assert thinking["reasoning_chunks"] == 18 and thinking["answers_with_text"] == 6
    assert 0 < thinking["first_answer_ms_p50"] <= thinking["first_answer_ms_p99"]


def test_an_answer_is_read_apart_from_its_reasoning() -> None:
    from accelbench.serve.engines.endpoint.client import Answer

    answer, contents, answers = Answer(), [], []
    events = [
        {"choices": [{"delta": {"reasoning_content": "hmm"}}]},
        {"choices": [{"delta": {"reasoning": "so"}}]},
        {"choices": [{"delta": {"content": "yes"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 4, "completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2},
                   "prompt_tokens_details": {"cached_tokens": 4}}},
    ]  # fmt: skip
    for event in events:
        line = b"data: " + json.dumps(event).encode()
        answer.feed(line, "chat", lambda: contents.append(1), lambda: answers.append(1))
    assert (len(contents), len(answers), answer.text, answer.reasoning_chunks) == (3, 1, ["yes"], 2)
    assert (answer.reasoning_tokens, answer.cached_tokens, answer.completion_tokens) == (2, 4, 3)


def test_a_stream_of_no_text_whose_usage_counts_tokens_is_an_answer(checkpoint: Path) -> None:
    """A server that streams none of its tokens' text (they decode to nothing) but counts them in its usage
    answered: each request counted from the usage, its first token timed at its end, and the record says so."""
    with serving(Behaviour(silent=True)) as url:
        engine, timeline = drive(url, checkpoint)
    assert not engine.failures and len(timeline.dones) == 6
    assert all(n == 5 for _, n in timeline.dones.values()) and len(timeline.firsts) == 6
    assert engine.facts["answers_without_streamed_text"] == 6


def test_server_errors_and_early_closes_fail_only_their_queries(checkpoint: Path) -> None:
    # the preflight's request is the stub's first: the run's 2nd, 4th... requests are its even ones
    with serving(Behaviour(fail_every=2)) as url:
        engine, timeline = drive(url, checkpoint, requests=6)
    assert engine.failures == ["HTTP 500: stub: induced failure"] * 3
    assert sum(1 for _, n in timeline.dones.values() if n == 5) == 3
    with serving(Behaviour(close_every=3)) as url:
        engine, _ = drive(url, checkpoint, requests=6)
    assert engine.failures and all("closed the stream after 2 content chunks" in f for f in engine.failures)


def test_a_slow_server_is_a_timeout_not_a_hang(checkpoint: Path) -> None:
    with serving(Behaviour(delay=3.0)) as url:
        p = params(url, checkpoint, served_model=MODEL)
        engine = EndpointEngine(p.engine_opts)
        engine.target = Target(url, MODEL, "completions")  # the slow server's preflight is not what is tested
        engine.tokenizer = load_tokenizer(p.engine_opts, p.checkpoint)
        engine.timeout = 0.5
        failures: list[str] = []
        timeline = Timeline(expected=2)
        timeline_failed = timeline.failed
        timeline.failed = lambda r, e: (failures.append(str(e)), timeline_failed(r, e))  # type: ignore[method-assign]
        engine.start(None, None, timeline, EngineSettings(max_batch=2))  # type: ignore[arg-type]
        try:
            engine.submit([TokenRequest(i, i, [5, 6], 3) for i in range(2)])
            assert timeline.finished.wait(20)
        finally:
            engine.stop()
    assert failures == ["no complete answer within 0.5 s (--request-timeout)"] * 2


# --- bad input: one line, before any load


def test_bad_endpoints_are_one_line_before_any_load(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_server import free_port

    nothing = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(UsageError, match=r"cannot reach .*start the server or fix --url"):
        params(nothing, checkpoint).check_environment("cpu")
    with serving(Behaviour(html=True)) as url, pytest.raises(UsageError, match="not OpenAI's model list"):
        params(url, checkpoint).check_environment("cpu")
    with serving() as url:
        with pytest.raises(UsageError, match=r"does not serve 'llama'; it serves stub: fix --served-model"):
            params(url, checkpoint, served_model="llama").check_environment("cpu")
        monkeypatch.delenv("ACCELBENCH_TEST_KEY", raising=False)
        with pytest.raises(UsageError, match="ACCELBENCH_TEST_KEY: that environment variable is unset"):
            params(url, checkpoint, api_key_env="ACCELBENCH_TEST_KEY").check_environment("cpu")
        params(url, checkpoint).check_environment("cpu")  # the one model it lists is taken
    for kw, words in (
        (dict(url=""), "needs --url"),
        (dict(url="127.0.0.1:8000"), "is not an http"),
        (dict(tokenizer=""), "needs the served model's tokenizer"),
        (dict(server_devices=0), "--server-devices must be at least 1"),
    ):
        with pytest.raises(UsageError, match=words):
            params(str(kw.pop("url", "http://127.0.0.1:1/v1")), checkpoint, **kw).validate()
    with pytest.raises(UsageError, match="--url applies to the endpoint engine, not transformers"):
        LLMServeParams.of(model="llama3.1-8b", scale="tiny", url="http://127.0.0.1:1/v1").validate()
    with pytest.raises(UsageError, match="resnet50 is not a language model"):
        LLMServeParams.of(model="resnet50", engine="endpoint", url="http://127.0.0.1:1/v1").validate()


def test_the_cli_refuses_an_unreachable_server_with_exit_2(checkpoint: Path, tmp_path: Path) -> None:
    import subprocess

    from llm_server import free_port

    cmd = [
        sys.executable,
        "-m",
        "accelbench",
        "infer",
        "llama3.1-8b",
        "--scale",
        "tiny",
        "--engine",
        "endpoint",
        "--url",
        f"http://127.0.0.1:{free_port()}/v1",
        "--tokenizer",
        str(checkpoint),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cannot reach" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- a failed query makes a failed record that counts them, under LoadGen


def test_a_run_with_failed_queries_is_a_failed_record_that_counts_them(checkpoint: Path, tmp_path: Path) -> None:
    from accelbench.kit.context import RunContext
    from accelbench.serve import run as token_run

    with serving(Behaviour(fail_every=5)) as url:
        p = params(url, checkpoint, served_model=MODEL, scenario="offline", output_tokens=4, duration=0.5)
        with pytest.raises(BenchmarkFailed, match=r"\d+ of \d+ probe requests failed, the first: HTTP 500: stub"):
            list(token_run.run(p, RunContext(log_dir=tmp_path)))


def _answers(path: Path, answer: str, count: int = 6) -> Path:
    """A JSONL prompt file whose every reference answer is ``answer``."""
    import json

    lines = [json.dumps({"prompt": "ba be bi bo", "output": answer}) for _ in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "reference, target, valid",
    [
        ("ba ba ba ba", "rouge1=90,rouge2=90,rougeL=90", True),  # the server answers "ba ba ba ba": ROUGE 100
        ("ke ki ko ku", "rouge1=10,rougeL=10", False),  # nothing in common: ROUGE 0, under the target
        ("ba ba ba ba", "", None),  # scored, but nothing sets the bar: no verdict
    ],
)
def test_an_endpoint_s_accuracy_is_rouge_on_the_file_s_answers(
    checkpoint: Path, tmp_path: Path, reference: str, target: str, valid: bool | None
) -> None:
    from accelbench.kit.context import RunContext
    from accelbench.serve import run as token_run

    prompts = _answers(tmp_path / "qa.jsonl", reference)
    with serving(Behaviour(word="ba")) as url:
        p = params(url, checkpoint, served_model=MODEL, mode="accuracy", prompts=str(prompts), accuracy_target=target)
        (record,) = list(token_run.run(p, RunContext(log_dir=tmp_path)))
    assert record.status == "ok" and record.valid is valid, record.details
    rouge1 = record.metrics["rouge1"].value
    assert rouge1 == pytest.approx(100.0 if reference.startswith("ba") else 0.0)
    assert record.primary_metric == "rougeL" and record.details["labels"] == "prompt file's reference answers"
    if target:
        assert record.details["rouge"]["verdict"]["source"] == "--accuracy-target"
    else:
        assert record.warnings[0].startswith("no verdict") and record.details["accuracy_verified"] is False


def test_an_endpoint_s_accuracy_flags_are_checked(checkpoint: Path, tmp_path: Path) -> None:
    prompts = _answers(tmp_path / "qa.jsonl", "ba")
    url = "http://127.0.0.1:9/v1"
    for kw, words in (
        ({"mode": "accuracy"}, "give --prompts FILE"),
        ({"accuracy_target": "rouge1=40"}, "add --mode accuracy"),
        ({"mode": "accuracy", "prompts": str(prompts), "accuracy_target": "bleu=3"}, "unknown figure 'bleu'"),
        ({"mode": "accuracy", "prompts": str(prompts), "accuracy_target": "rouge1=140"}, "outside ROUGE's 0-100"),
    ):
        with pytest.raises(UsageError, match=words):
            params(url, checkpoint, **kw).validate()
    mlperf = params(url, checkpoint, mode="accuracy", prompts=str(prompts), accuracy_target="mlperf")
    mlperf.validate()  # llama3.1-8b has MLPerf's published target
    from accelbench.serve.quality import target

    assert target("mlperf", "llama3.1-8b").values["rouge1"] == pytest.approx(38.7792)


# --- a real server: transformers serve, under LoadGen


@pytest.mark.skipif(serving_command() is None, reason="transformers serve needs transformers[serving]")
def test_transformers_serve_under_loadgen_stores_a_valid_server_record(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    from conftest import run_cli, stored

    from accelbench.cli.commands_measure import EXIT_INVALID

    cache = tmp_path / "hf"
    cache.mkdir()
    with transformers_serve(checkpoint, cache) as url:
        server = _own_server(url)
        # limits a 2-core machine holds whatever else runs on it (the server, LoadGen and the client share its
        # cores): the test is of the path, MLPerf's own limits held here too when it was quiet. A run INVALID by
        # its latency is run once more (seen once beside other load at a load average of 10): the verdict is
        # LoadGen's on this host's moment, the path is what is tested
        for attempt in range(2):
            db = tmp_path / f"r{attempt}.db"
            args = endpoint_args(url, checkpoint, "--served-model", str(checkpoint), "--scenario", "server",
                                 "--server-devices", "2", "--db", str(db), "--ttft-ms", "20000", "--tpot-ms", "2000",
                                 "--output-tokens", "16")  # fmt: skip
            p = run_cli(args, cli_env, tmp_path)
            if p.returncode != EXIT_INVALID:
                break
    assert p.returncode == 0, p.stdout + p.stderr
    (record,) = stored(db)
    late = record.details.get("not_judged")  # a host busy enough to starve the client: said, not VALID
    assert record.status == "ok" and (record.valid or late and "the client was late" in late[0]), record.details
    m = record.metrics
    for name in ("tokens_per_second", "ttft_p99_ms", "tpot_p99_ms", "itl_p99_ms", "goodput_tokens_per_second"):
        assert m[name].value > 0, name
    # two devices behind the server: per-device figures divide by them
    assert m["tokens_per_second_per_device"].value == pytest.approx(m["tokens_per_second"].value / 2)
    engine = record.details["engine"]
    assert engine["engine"] == "endpoint" and engine["served_model"] == str(checkpoint)
    assert engine["output_token_count"] == "the server's usage (completion_tokens)"
    assert record.params["device"].startswith("server at 127.0.0.1:") or "server at" in str(record.params)
    assert record.params["precision"] == "unstated"
    client = record.details["client"]
    assert client["connections"] == 1024 and 0 <= client["client_cpu_share"] <= 1
    assert client["queued_requests"] == 0 and client["loop_lag_p99_ms"] >= 0 and "dispatch_p99_ms" in client
    # the server is this machine's own process: its CPU is the work, not contention
    assert record.conditions["sut_cpu_seconds"] > 0
    # this test's server (by pid: another `transformers serve` on a busy host is other load, rightly named) is never
    # among the other processes; the test checks what is counted, never that the host is idle
    others = record.conditions.get("other_processes", [])
    assert not [p for p in others if p["pid"] in server], (server, others)


def _own_server(url: str) -> set[int]:
    """The pids of the server this test started at ``url`` (its process, a child of this one, and what it started)."""
    import psutil

    port = url.split(":")[2].split("/")[0]
    found: set[int] = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if port in child.cmdline():
                found |= {child.pid} | {p.pid for p in child.children(recursive=True)}
        except psutil.Error:  # a child that ended meanwhile (a compiler of an earlier test's)
            continue
    assert found, f"no child of this process serves {url}"
    return found


# --- sweep: one Offline run per concurrency, stored, and the curve in the report


@pytest.mark.slow  # several runs end to end: in CI's second pytest step (pytest -m slow)
def test_a_sweep_stores_seven_points_and_the_report_draws_the_curve(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    from conftest import run_cli, stored

    db = tmp_path / "s.db"
    with serving() as url:
        args = endpoint_args(url, checkpoint, "--mode", "sweep", "--output-tokens", "8", "--duration", "0.5",
                             "--db", str(db))  # fmt: skip
        p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    records = stored(db)
    assert [r.params["batch_size"] for r in records] == [1, 2, 4, 8, 16, 32, 64]
    assert all(r.params["mode"] == "sweep" and r.status == "ok" for r in records)
    curve = max((r.details["sweep"] for r in records), key=lambda s: len(s["points"]))
    assert [pt["concurrency"] for pt in curve["points"]] == [1, 2, 4, 8, 16, 32, 64]
    assert curve["planned_points"] == 7 and set(curve["pareto"]) <= {1, 2, 4, 8, 16, 32, 64}
    # both axes at every point (Offline's TPOT by the SUT's clock), and a front drawn from them
    assert all(pt["tokens_per_second_per_user"] and pt["tokens_per_second_per_device"] for pt in curve["points"])
    usable = [pt for pt in curve["points"] if pt["valid"] and not pt["set_aside"]]
    assert curve["pareto"] or not usable
    for pt in curve["pareto"]:  # nothing usable beats a front point on both axes
        a = next(x for x in usable if x["concurrency"] == pt)
        assert not any(
            b["tokens_per_second_per_device"] > a["tokens_per_second_per_device"]
            and b["tokens_per_second_per_user"] > a["tokens_per_second_per_user"]
            for b in usable
        )
    out = tmp_path / "report"
    p = run_cli(["report", "--db", str(db), "--out", str(out)], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    html = next(out.glob("*.html")).read_text() if out.is_dir() else out.read_text()
    assert "tokens-pareto" in html and "Sweep: throughput against interactivity" in html


def test_a_rate_sweep_runs_server_at_each_rate(checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]) -> None:
    from conftest import run_cli, stored

    from accelbench.cli.commands_measure import EXIT_INVALID

    db = tmp_path / "r.db"
    with serving() as url:
        args = endpoint_args(url, checkpoint, "--mode", "sweep", "--scenario", "server", "--rates", "600,300",
                             "--output-tokens", "4", "--ttft-ms", "2000", "--tpot-ms", "200",
                             "--db", str(db))  # fmt: skip
        p = run_cli(args, cli_env, tmp_path)
    # the curve is what is tested: a point LoadGen calls INVALID on a busy host (exit 3) is still a point
    assert p.returncode in (0, EXIT_INVALID), p.stdout + p.stderr
    records = stored(db)
    assert [(r.params["scenario"], r.params["target_qps"]) for r in records] == [("server", 300.0), ("server", 600.0)]
    curve = records[-1].details["sweep"]
    assert curve["axis"] == "rate" and [pt["rate"] for pt in curve["points"]] == [300.0, 600.0]
    assert all(pt["ttft_p90_ms"] and pt["tokens_per_second_per_user"] for pt in curve["points"])
    assert "one Server LoadGen run per request rate" in curve["method"]


@pytest.mark.slow  # several runs end to end: in CI's second pytest step (pytest -m slow)
def test_find_peak_through_an_endpoint_confirms_a_rate(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """The whole path of an LLM find-peak, against the stub (its capacity is the client's and the stub's CPU): a
    confirmed rate is stored with every trial of the search."""
    from conftest import run_cli, stored

    db = tmp_path / "p.db"
    with serving() as url:
        args = endpoint_args(url, checkpoint, "--scenario", "server", "--mode", "find-peak", "--ttft-ms", "200",
                             "--tpot-ms", "20", "--output-tokens", "8", "--db", str(db))  # fmt: skip
        p = run_cli(args, cli_env, tmp_path, timeout=400)
    (record,) = stored(db)
    assert record.status == "ok", (record.error, p.stdout[-2000:])
    found = record.details["find_peak"]
    trials = found["trials"]
    assert any(t["confirmation"] for t in trials) and len(trials) >= 3
    if record.valid is None:  # a host busy enough to starve the client: the verdict withheld, and said
        assert record.details["not_judged"][0].startswith("the client was late"), record.details
    if record.valid is not False and found["peak_requests_per_second"] is not None:  # a confirmation held
        peak = record.metrics["peak_requests_per_second"]
        assert peak.value == found["peak_requests_per_second"] > 0 and peak.higher_is_better
        assert any(t["confirmation"] and t["valid"] and t["requests_per_second"] == peak.value for t in trials)
    else:  # a busy host may hold no confirmation: then it says so, never a rate
        assert found["peak_requests_per_second"] is None and "no peak" in " ".join(record.details["invalid_reasons"])


def test_sweep_flags_are_checked() -> None:
    for kw, words in (
        (dict(model="resnet50", mode="sweep"), "resnet50 is not a language model"),
        (dict(mode="sweep", scenario="server"), "drop --scenario server"),
        (dict(mode="sweep", concurrency="1,x"), "whole numbers"),
        (dict(mode="sweep", concurrency="0,2"), "at least 1"),
        (dict(concurrency="1,2"), "add --mode sweep"),
        (dict(rates="1,2"), "--rates lists the points of --mode sweep"),
        (dict(mode="sweep", rates="1,2"), "give --scenario server"),
        (dict(mode="sweep", scenario="server", rates="1,x"), "numbers separated by commas"),
        (dict(mode="sweep", scenario="server", rates="0,2"), "positive request rates"),
        (dict(mode="sweep", scenario="server", rates="1", concurrency="2"), "not both"),
        (dict(mode="sweep", scenario="server", rates="1", target_qps=3.0), "drop --target-qps"),
    ):
        with pytest.raises(UsageError, match=words):
            LLMServeParams.of(**({"model": "llama3.1-8b", "scale": "tiny", "engine": "null"} | kw)).validate()


def test_an_endpoint_record_is_labelled_with_the_model_the_server_serves():
    """The preset named first sets the limits and lengths; the server's own model is what was measured."""
    from accelbench.registry import describe_params

    params = {"model": "llama3.1-8b", "scenario": "server", "engine": "endpoint", "served_model": "my-2-layer"}
    assert "endpoint serving my-2-layer " in describe_params("infer/loadgen", params)
    assert "serving" not in describe_params("infer/loadgen", params | {"served_model": ""})
