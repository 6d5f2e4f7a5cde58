"""``--concurrency N``: a closed loop of N users by accelbench's own driver, each sending its next request when its
last one was answered, against the project's stub server (told to answer slowly), an in-process engine, and as the
points of ``--mode sweep``; its steady-window figures, and the flags that contradict it refused in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from array import array
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import run_cli, stored
from helpers import writer_misfits

from accelbench.errors import UsageError
from accelbench.registry import describe_params
from accelbench.serve import figures, requests
from accelbench.serve.drive import replay_figures
from accelbench.serve.limits import Limits, limits_for
from accelbench.serve.replay import Replayed
from accelbench.serve.rows import RequestRow
from accelbench.serve.specs import LLMServeParams

sys.path.insert(0, str(Path(__file__).parent))

#: what the stub is told to wait before each answer (seconds)
DELAY = 0.05
#: the client's share of a TTFT on top of the stub's delay, allowed at the median: the endpoint client's send, the
#: stub's parse and the first chunk's read, on a 2-core host other processes share (measured about 3-6 ms idle)
CLIENT_COST_MS = 100.0
OUT = 4


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from llm_server import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("closed-ckpt"))


@contextlib.contextmanager
def counted_stub(delay: float) -> Iterator[tuple[str, dict[str, int]]]:
    """The project's stub (:mod:`accelbench.serve.engines.endpoint.stub`) with ``delay`` before each answer, and the
    server's own count of the requests it held at once (``most``) and of all it was sent (``total``): what the client
    sent, seen from the server."""
    pytest.importorskip("aiohttp")
    from aiohttp import web

    from accelbench.serve.engines.endpoint.stub import Behaviour, app

    held = {"now": 0, "most": 0, "total": 0}

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.endswith("completions"):
            return await handler(request)
        held["now"] += 1  # one event loop: no lock needed
        held["most"] = max(held["most"], held["now"])
        held["total"] += 1
        try:
            return await handler(request)
        finally:
            held["now"] -= 1

    application = app(Behaviour(delay=delay))
    application.middlewares.append(count)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    async def open_() -> None:
        runner = web.AppRunner(application, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"], box["port"] = runner, runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(open_())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield f"http://127.0.0.1:{box['port']}/v1", held
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def endpoint(url: str, checkpoint: Path, *more: str) -> list[str]:
    return ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint", "--url", url, "--tokenizer",
            str(checkpoint), "--input-tokens", "16", "--output-tokens", str(OUT), *more]  # fmt: skip


def rows_of(record: Any) -> list[Any]:
    return requests.read(Path(record.details["request_log"]["path"])).rows


def most_at_once(rows: list[Any]) -> int:
    """The most requests between their send and their answer at one instant, by the rows' times."""
    events = sorted([(r.sent, 1) for r in rows] + [(r.done, -1) for r in rows if r.done is not None],
                    key=lambda e: (e[0], e[1]))  # fmt: skip  # an answer before a send at the same instant
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_a_closed_loop_at_concurrency_4_times_ttft_from_each_send(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    db = tmp_path / "c.db"
    with counted_stub(DELAY) as (url, held):
        p = run_cli([*endpoint(url, checkpoint, "--concurrency", "4"), "--db", str(db)], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = stored(db)
    assert r.status == "ok", r.error
    assert (r.params["scenario"], r.params["concurrency"], r.params["batch_size"]) == ("concurrency", "4", 4)
    label = describe_params("infer/llm", r.params)
    assert "concurrency 4" in label and "bs<=" not in label
    driver = r.details["driver"]
    assert driver["name"] == "accelbench closed loop" and driver["users"] == 4
    # never more than N in flight: by the driver, by the rows, and as the server saw them
    assert driver["most_in_flight"] == 4
    rows = rows_of(r)
    assert most_at_once(rows) == 4 and held["most"] == 4
    assert {row.user for row in rows} == {0, 1, 2, 3}
    # TTFT from each send: the stub's delay and the client's cost, not a queue
    ttft = r.metrics["ttft_p50_ms"].value
    assert 1e3 * DELAY <= ttft <= 1e3 * DELAY + CLIENT_COST_MS, ttft
    steady = driver["steady"]
    assert steady["warmup_requests"] == 4 and "warm-up" in steady["method"] and "cool-down" in steady["method"]
    assert 0 < steady["requests"] < r.details["requests"] and steady["seconds"] > 0
    assert r.details["requests"] >= 662 + 4  # the quick profile's Server tail, past the warm-up
    # the figures are the window's: its answers over its length, and N users cycling at their latency
    rps = r.metrics["requests_per_second"].value
    assert rps == pytest.approx(steady["requests"] / steady["seconds"])
    mean_latency = sum(row.done - row.sent for row in rows if row.done) / len(rows)
    assert rps * mean_latency == pytest.approx(4, rel=0.2)  # Little's law: N = X * (R + Z)
    for name in ("itl_p50_ms", "tpot_p99_ms", "latency_p50_ms", "goodput_requests_per_second"):
        assert name in r.metrics
    assert r.details["limits"]["judged"] is False  # no limit given: goodput only
    assert r.valid or r.details["not_judged"][0].startswith("the client was late")  # a busy host may starve it
    # the requests file gives every figure again, from the same steady window
    log = requests.read(Path(r.details["request_log"]["path"]))
    assert log.meta["kind"] == "closed" and log.meta["users"] == 4 and "window" in log.meta
    limits = Limits.of(r)
    assert limits is not None
    again = figures.recompute(log, limits.ttft_p99_ms, limits.tpot_p99_ms)
    for name in ("requests_per_second", "tokens_per_second", "ttft_p50_ms", "ttft_p99_ms", "tpot_p90_ms",
                 "itl_p99_ms", "latency_p50_ms", "latency_p99_ms", "goodput_requests_per_second"):  # fmt: skip
        assert again[name] == r.metrics[name].value, name  # the same function on the same rows
    # and the command that prints them names each request's user and says the figures are the window's
    p = run_cli(["results", "requests", r.run_id, "--db", str(db), "--limit", "3"], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    said = " ".join(p.stdout.split())  # the console wraps long lines
    assert " user " in said and "latency p50" in said
    assert "the steady window" in said and f"{steady['requests']} requests answered inside it" in said
    assert r.params["output_tokens"] == OUT  # every answer as long as asked (the stub takes ignore_eos)


def test_a_sweep_of_concurrency_1_2_is_two_closed_loops_and_the_report_draws_them(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    db = tmp_path / "s.db"
    with counted_stub(0.0) as (url, held):
        args = endpoint(
            url, checkpoint, "--mode", "sweep", "--concurrency", "1,2", "--num-requests", "6", "--db", str(db)
        )
        p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    records = stored(db)
    assert [(r.params["scenario"], r.params["concurrency"], r.params["mode"]) for r in records] == [
        ("concurrency", "1", "sweep"),
        ("concurrency", "2", "sweep"),
    ]
    assert held["most"] <= 2  # a stub that answers at once may never hold both
    # --num-requests 6 at each point: 6 past its users' warm-up, whatever the profile's minimum duration
    assert [r.details["requests"] for r in records] == [6 + 1, 6 + 2]
    assert all(r.params["num_requests"] == 6 for r in records)
    unmeasured = [r.details["unmeasured_requests"] for r in records]
    assert [u["preflight"] for u in unmeasured] == [1, 0] and [u["warmup"] for u in unmeasured] == [1, 2]
    # what the server saw: the command line's preflight and the call's (once, on the first point's record), each
    # point's probe and its loop
    sent = sum(u["probe"] + r.details["requests"] for u, r in zip(unmeasured, records, strict=True))
    assert held["total"] == 2 * 1 + sent
    assert all(r.status == "ok" and r.details["driver"]["name"] == "accelbench closed loop" for r in records)
    curve = records[-1].details["sweep"]
    assert curve["axis"] == "concurrency" and [pt["concurrency"] for pt in curve["points"]] == [1, 2]
    assert "closed loop" in curve["method"]
    assert all(pt["ttft_p90_ms"] and pt["tokens_per_second_per_user"] for pt in curve["points"])
    out = tmp_path / "report"
    p = run_cli(["report", "--db", str(db), "--out", str(out)], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    html = next(out.glob("*.html")).read_text() if out.is_dir() else out.read_text()
    assert "tokens-pareto" in html


def test_num_requests_sends_that_many_past_the_warm_up_and_the_record_counts_the_rest_the_server_saw(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """--num-requests N (vLLM's --num-prompts N): N requests past each user's warm-up request, with no minimum
    duration; the record counts the requests the server was sent that no figure counts (its preflight, the probe,
    the warm-up), so that its own counters can be read against the record's."""
    db = tmp_path / "n.db"
    with counted_stub(0.0) as (url, held):
        args = [*endpoint(url, checkpoint, "--concurrency", "2", "--num-requests", "10"), "--db", str(db)]
        p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = stored(db)
    assert r.status == "ok", r.error
    assert r.params["num_requests"] == 10 and r.details["requests"] == 10 + 2
    assert r.details["driver"]["steady"]["warmup_requests"] == 2 and r.details["measured"] <= 10
    unmeasured = r.details["unmeasured_requests"]
    probe = unmeasured["probe"]  # the probe's batches of 2 (until two agree) and its one timed request
    assert (unmeasured["preflight"], unmeasured["warmup"]) == (1, 2) and probe % 2 == 1 and 5 <= probe <= 15
    assert "earlier_tests" not in unmeasured and "/metrics" in unmeasured["why"]
    # everything the server was sent: the command line's preflight and the run's, the probe, the loop's requests
    assert held["total"] == 2 * unmeasured["preflight"] + probe + r.details["requests"]
    assert writer_misfits(r) == []


def test_an_in_process_engine_serves_a_closed_loop(tmp_path: Path, cli_env: dict[str, str]) -> None:
    pytest.importorskip("transformers")
    db = tmp_path / "t.db"
    args = ["infer", "llama3.1-8b", "--scale", "tiny", "--input-tokens", "16", "--output-tokens", str(OUT),
            "--threads", "1", "--engine", "transformers", "--concurrency", "2", "--db", str(db)]  # fmt: skip
    p = run_cli(args, cli_env, tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = stored(db)
    assert r.status == "ok", r.error
    assert r.params["scenario"] == "concurrency" and r.details["driver"]["most_in_flight"] == 2
    assert most_at_once(rows_of(r)) == 2
    assert r.metrics["ttft_p50_ms"].value > 0 and r.metrics["tokens_per_second"].value > 0
    assert all(row.output_tokens == OUT for row in rows_of(r) if row.status == "ok")
    assert r.details["engine"]["engine"] == "transformers" and writer_misfits(r) == []  # as ContinuousFacts says


def test_a_users_think_time_passes_between_its_answer_and_its_next_request(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    db = tmp_path / "n.db"
    args = ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "null", "--concurrency", "3",
            "--user-think-ms", "5", "--db", str(db)]  # fmt: skip
    p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = stored(db)
    assert r.details["driver"]["think_ms"] == 5.0
    by_user: dict[int, list[Any]] = {}
    for row in rows_of(r):
        by_user.setdefault(row.user, []).append(row)
    assert set(by_user) == {0, 1, 2}
    waits = [b.sent - a.done for rows in by_user.values() for a, b in zip(rows, rows[1:], strict=False)
             if a.done is not None]  # fmt: skip
    assert waits and min(waits) >= 0.005


def _row(n: int, user: int, at: float, latency: float, gaps: bool = True) -> RequestRow:
    """Request ``n`` of a closed loop's ``user``, sent at ``at`` (due then), its first token half its ``latency``
    later and its last at ``latency``, ``OUT`` tokens."""
    spread = array("d", [latency / 2 / (OUT - 1)] * (OUT - 1) if gaps else [])
    return RequestRow(n, n, user, None, None, at, at, at + latency / 2, None, at + latency, 16, OUT, spread, "ok", None)


def _lockstep(users: int, rounds: int, latency: float, think: float = 0.0) -> Replayed:
    """A closed loop whose users move in step: every answer ``latency`` after its send, the next send ``think``
    later (what answers of one length from a batching server look like)."""
    sent = [_row(k * users + u, u, k * (latency + think), latency) for k in range(rounds) for u in range(users)]
    return Replayed(sent, 0.0, rounds * (latency + think), "closed", users, think, users)


@pytest.mark.parametrize("think", [0.0, 0.25])
def test_a_steady_window_of_users_in_step_counts_whole_waves(think: float) -> None:
    """Users in step answer in waves; a window ending on an answer would cut the last wave. The steady window runs
    from every user's first send past its warm-up to the last send, so its rate is N / (latency + think)."""
    from accelbench.serve.limits import Limits

    run = _lockstep(users=4, rounds=10, latency=1.0, think=think)
    window = figures.steady(run.sent, run.users)
    assert window is not None and window.start == 1 + think and window.end == 9 * (1 + think)
    values, details, reasons = replay_figures(run, Limits(2000.0, 200.0, "test", judged=False))  # TPOT 167 ms
    assert values["requests_per_second"] == pytest.approx(4 / (1.0 + think))
    assert values["tokens_per_second"] == pytest.approx(4 * OUT / (1.0 + think))
    assert values["latency_p50_ms"] == pytest.approx(1000.0) and values["ttft_p50_ms"] == pytest.approx(500.0)
    steady = details["driver"]["steady"]
    assert steady["warmup_requests"] == 4 and steady["requests"] == 4 * 8 and not reasons
    # over a limit given, the closed loop is INVALID; over MLPerf's alone (judged=False) it only counts goodput
    assert replay_figures(run, Limits(400.0, 200.0, "--ttft-ms"))[2]
    assert not replay_figures(run, Limits(400.0, 200.0, "mlperf.conf", judged=False))[2]
    assert values["goodput_requests_per_second"] == pytest.approx(4 / (1.0 + think))


def test_a_last_round_cut_short_is_left_out_of_the_window_not_counted_in_part() -> None:
    """A batching server answers a wave's requests a little apart (2 ms here) and the loop stops mid-round, as
    soon as it has sent enough: only 2 of 4 users send a last time. The window ends at the last round every user
    began, so it holds whole waves and reads the true rate, N / latency; ending at the run's last send would count
    the cut round's time and half its answers (3.79 requests/s here). The requests file's rows agree."""
    from accelbench.serve.limits import Limits

    users, latency, step = 4, 1.0, 0.01
    sent: list[RequestRow] = []
    for k in range(11):  # ten full rounds, then a round of two users
        for u in range(users if k < 10 else 2):
            sent.append(_row(len(sent), u, k * latency + u * step, latency, gaps=False))  # sent as its answer came
    run = Replayed(sent, 0.0, 11 * latency, "closed", users, 0.0, users)
    assert figures.steady(sent, users) == figures.Window(latency + 3 * step, 9 * latency + 3 * step)
    values, details, _ = replay_figures(run, Limits(None, None, "none"))
    assert values["requests_per_second"] == pytest.approx(users / latency)
    assert details["driver"]["steady"]["requests"] == 8 * users


def test_a_closed_loop_whose_requests_all_fail_stops_sending_and_says_why() -> None:
    """A server that refuses every request answers at once; its users would resend for the whole planned time.
    The loop stops after failures in a row (failures_to_stop) and the record's reasons say so."""
    from accelbench.errors import BenchmarkFailed
    from accelbench.serve.engines.base import EngineSettings, NullEngine, TokenRequest
    from accelbench.serve.replay import ClosedLoop, Driver, failures_to_stop
    from accelbench.serve.sources.base import Work

    class Refusing(NullEngine):
        def serve(self, batch: list[TokenRequest]) -> None:
            for r in batch:
                self.sink.failed(r, ConnectionRefusedError("connection refused"))

    work = Work.single([[1, 2, 3]] * 8, [4] * 8)
    engine = Refusing(Refusing.Options())
    driver = Driver(engine, work, users=2, closed=ClosedLoop(2, 100_000, 600.0))
    engine.start(None, None, driver, EngineSettings(max_batch=2))  # type: ignore[arg-type]
    try:
        run = driver.run(timeout=30)
    finally:
        engine.stop()
    assert len(run.sent) < failures_to_stop(2) + 2 and run.stopped and "failed in a row" in run.stopped
    with pytest.raises(BenchmarkFailed, match="no request of the replay was answered"):
        replay_figures(run, limits_for("llama3.1-8b", "llama3_1-8b", True, "concurrency", 0.0, 0.0))


def test_limits_that_judge_nothing_are_never_out_of_reach() -> None:
    """A closed loop given no limit counts goodput against MLPerf's; a slow server's single-request TPOT over
    them must not skip the run (nor tell the user to raise a flag that would judge it)."""
    from types import SimpleNamespace

    from accelbench.serve.run import unreachable_tpot

    slow = SimpleNamespace(single_tpot_seconds=0.25)  # 250 ms a token, over 2 x MLPerf's 100 ms
    unjudged = limits_for("llama3.1-8b", "llama3_1-8b", True, "concurrency", 0.0, 0.0)
    assert not unjudged.judged and unreachable_tpot(unjudged, slow) is None  # type: ignore[arg-type]
    given = limits_for("llama3.1-8b", "llama3_1-8b", True, "concurrency", 0.0, 100.0)
    assert given.judged and "out of reach" in (unreachable_tpot(given, slow) or "")  # type: ignore[arg-type]
    one = limits_for("llama3.1-8b", "llama3_1-8b", True, "concurrency", 5000.0, 0.0)
    assert one.tpot_p99_ms == 100 and "judged too" in one.source  # the other limit borrowed, and said judged


def test_a_closed_loop_plans_rounds_enough_for_a_window_and_its_cool_down() -> None:
    from accelbench.serve.drive import closed_plan

    params = LLMServeParams(model="llama3.1-8b", scale="tiny", concurrency="64", batch_size=64)
    slow = closed_plan(params, "llama3_1-8b", rate=0.5)  # the quick profile's minute holds 30 requests
    assert slow.requests >= 3 * 64 + 64 and slow.expected >= (slow.requests + 64) / 0.5
    fast = closed_plan(LLMServeParams(model="llama3.1-8b", scale="tiny", concurrency="4"), "llama3_1-8b", 500.0)
    assert fast.requests == 662 + 4 and fast.expected == fast.seconds  # LoadGen's tail, and its 2 s at least


def test_num_requests_plans_exactly_that_many_past_the_warm_up_and_no_minimum_duration() -> None:
    from accelbench.serve.drive import closed_plan
    from accelbench.serve.replay import ClosedLoop

    params = LLMServeParams(model="llama3.1-8b", scale="tiny", concurrency="4", batch_size=4, num_requests=100)
    assert closed_plan(params, "llama3_1-8b", rate=52.0) == ClosedLoop(4, 100, 0.0, (100 + 4) / 52.0)
    assert closed_plan(params, "llama3_1-8b", rate=0.0).expected == 0.0  # no rate known: no first ETA


def test_a_run_too_short_for_a_window_says_its_figures_are_of_every_request() -> None:
    from accelbench.serve.limits import Limits

    run = _lockstep(users=4, rounds=1, latency=1.0)
    assert figures.steady(run.sent, run.users) is None
    values, details, _ = replay_figures(run, Limits(None, None, "none"))
    assert "too short" in details["driver"]["steady"]["method"] and values["requests_per_second"] > 0


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (dict(concurrency="4", scenario="server"), "drop --scenario server"),
        (dict(concurrency="4", target_qps=3.0), "drop --target-qps"),
        (dict(concurrency="1,2"), "add --mode sweep"),
        (dict(concurrency="0"), "at least 1 user"),
        (dict(concurrency="4", mode="accuracy"), "performance mode"),
        (dict(concurrency="4", batch_size=2), "--batch-size 2 is under --concurrency 4"),
        (dict(scenario="concurrency"), "give --concurrency N"),
        (dict(user_think_ms=5.0), "add --concurrency N"),
        (dict(concurrency="4", user_think_ms=-1.0), "must not be negative"),
        (dict(concurrency="4", source="conversations"), "drop one"),
        (dict(mode="sweep", scenario="server", concurrency="1,2"), "drop --scenario server"),
        (dict(mode="sweep", concurrency="1,2", target_qps=3.0), "drop --target-qps"),
        (dict(num_requests=100), "drop --num-requests"),
        (dict(scenario="server", num_requests=100), "drop --num-requests"),
        (dict(mode="sweep", scenario="server", rates="1,2", num_requests=100), "drop --num-requests"),
        (dict(concurrency="4", num_requests=-1), "must not be negative"),
        (dict(concurrency="4", num_requests=11), "--num-requests 11 is under 12, 3 rounds of 4 users"),
        (dict(mode="sweep", concurrency="1,8", num_requests=20), "under 24, 3 rounds of 8 users .the sweep's largest"),
    ],
)
def test_contradictory_closed_loop_flags_are_refused(kw: dict[str, Any], words: str) -> None:
    base = {"model": "llama3.1-8b", "scale": "tiny", "engine": "null"}
    with pytest.raises(UsageError, match=words):
        LLMServeParams.of(**(base | kw)).validate()


def test_concurrency_alone_is_a_closed_loop_and_a_bad_one_is_one_line_exit_2(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    p = LLMServeParams.of(model="llama3.1-8b", scale="tiny", engine="null", concurrency="16")
    p.validate()
    assert (p.scenario, p.batch_size) == ("concurrency", 16)
    bad = run_cli(["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "null", "--concurrency", "4",
                   "--scenario", "server", "--db", str(tmp_path / "b.db")], cli_env, tmp_path)  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "drop --scenario server" in bad.stderr
    p = LLMServeParams.of(model="llama3.1-8b", scale="tiny", engine="null", concurrency="4", num_requests=12)
    p.validate()  # three rounds of 4 users: enough for a steady window
    few = run_cli(["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "null", "--num-requests", "50",
                   "--db", str(tmp_path / "b.db")], cli_env, tmp_path)  # fmt: skip
    assert few.returncode == 2 and len(few.stderr.strip().splitlines()) == 1 and "--num-requests" in few.stderr


def test_a_sweep_recorded_before_the_closed_loop_still_reads() -> None:
    """An Offline sweep's point (scenario offline, its concurrency list, the point in batch_size) keeps its label
    and its place on the curve."""
    from accelbench.kit import metrics as fig
    from accelbench.results.record import Result
    from accelbench.serve.sweep import curve

    old = {"model": "llama3.1-8b", "scenario": "offline", "mode": "sweep", "concurrency": "1,2", "batch_size": 2,
           "engine": "null", "profile": "quick", "scale": "tiny", "precision": "fp32"}  # fmt: skip
    assert "offline sweep" in describe_params("infer/llm", old) and "bs<=2" in describe_params("infer/llm", old)
    per_device = fig.figure(10.0, "t/s", higher_is_better=True)
    r = Result("infer/llm", old, metrics={"tokens_per_second_per_device": per_device})
    assert curve([r], 2, "x")["points"][0]["concurrency"] == 2
