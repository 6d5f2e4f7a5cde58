"""Whose clock a served endpoint's latencies are on: accelbench's driver runs on the endpoint client's own loop (a
send and its chunks stamped on one thread), a stream spread over time is measured as it was sent even beside a
CPU-bound process, a starved client is said ("not judged: the client was late", never VALID, its sweep point off
the front), and the server's own TTFT histogram is read beside the client's.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import accelbench.registry  # noqa: E402, F401  # the benchmarks registered
from accelbench.results.details import not_judged  # noqa: E402
from accelbench.results.record import Concern, Metric, Result  # noqa: E402
from accelbench.serve.engines.endpoint import server_clock  # noqa: E402
from accelbench.serve.specs import LLMServeParams  # noqa: E402

#: the stub's seconds between an answer's chunks: a server decoding a token a step
CHUNK_DELAY = 0.006
OUT = 12


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("aiohttp")
    from llm_server import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("clock-ckpt"))


def closed_loop(url: str, checkpoint: Path, tmp: Path, users: int = 2, **kw: Any) -> Result:
    from accelbench.kit.context import RunContext
    from accelbench.serve import run as token_run

    p = LLMServeParams.of(
        model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(checkpoint),
        served_model="stub", concurrency=users, input_tokens=16, output_tokens=OUT, num_requests=40, **kw,
    )  # fmt: skip
    (record,) = list(token_run.run(p, RunContext(log_dir=tmp)))
    assert record.status == "ok", record.error
    return record


def test_a_stream_spread_over_time_is_measured_as_sent_beside_a_cpu_burner(
    checkpoint: Path, tmp_path: Path, burner: None
) -> None:
    """The stub sends a chunk every 6 ms. A client that reads each chunk as it comes measures gaps of about 6 ms; one
    that reads a whole stream in one burst when it finally runs measures gaps near zero, and must then say it was
    late rather than call its figures VALID. Either way the record may not hold a burst as a valid measurement."""
    from accelbench.serve.engines.endpoint.stub import Behaviour, serving

    with serving(Behaviour(chunk_delay=CHUNK_DELAY)) as url:
        r = closed_loop(url, checkpoint, tmp_path)
    itl = r.metrics["itl_p50_ms"].value
    gaps = [g for row in _rows(r) for g in _gaps(row)]
    burst = sum(1 for g in gaps if g < 0.1) / len(gaps)
    client = r.details["client"]
    assert 0 <= client["loop_runq_wait_share"] <= 1  # the kernel's run-queue wait, where Linux keeps it
    if r.valid:  # judged: the gaps are the stub's
        assert itl == pytest.approx(CHUNK_DELAY * 1e3, rel=0.5), (itl, client)
        assert burst < 0.1, (burst, client)
        assert client["loop_lag_p99_ms"] <= 5.0
    else:  # the host starved the client beyond the bound: said, not VALID
        assert r.valid is None and not_judged(r)[0].startswith("the client was late"), r.details
        assert r.has("client-limited")


def _rows(r: Result) -> list[Any]:
    from accelbench.serve import requests

    return requests.read(Path(r.details["request_log"]["path"])).rows


def _gaps(row: Any) -> list[float]:
    return [1e3 * g for g in (row.gaps or [])]


@pytest.fixture
def starved(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The endpoint client's loop held up 40 ms in every 60 (a callback that blocks its thread), as a client whose
    thread waits for a core other processes hold."""
    from accelbench.serve.engines.endpoint import watch

    started = watch.ClientWatch.start

    def start(self: Any, loop: Any) -> None:
        started(self, loop)

        def hold() -> None:
            time.sleep(0.04)
            loop.call_later(0.02, hold)

        loop.call_later(0.02, hold)

    monkeypatch.setattr(watch.ClientWatch, "start", start)
    yield


def test_a_starved_client_is_not_judged_never_valid(checkpoint: Path, tmp_path: Path, starved: None) -> None:
    from accelbench.serve.engines.endpoint.stub import Behaviour, serving

    with serving(Behaviour(chunk_delay=0.002)) as url:
        r = closed_loop(url, checkpoint, tmp_path)
    assert r.valid is None
    (why,) = not_judged(r)
    assert why.startswith("the client was late: its event loop ran") and "late at p99" in why
    assert r.details["client"]["loop_lag_p99_ms"] > 20
    assert r.has("client-limited")
    from accelbench.cli.render import _details

    assert "not judged: the client was late" in _details(r)  # the headline says it in place of VALID


def test_the_driver_runs_on_the_clients_loop_a_send_and_its_chunks_on_one_thread(checkpoint: Path) -> None:
    """Every send, chunk and answer of a closed loop through the endpoint engine is stamped on the engine's loop
    thread, and each request's TTFT starts where the engine handed it to the HTTP client (``Sink.wrote``)."""
    from accelbench.serve.engines.base import EngineSettings
    from accelbench.serve.engines.endpoint.engine import EndpointEngine
    from accelbench.serve.engines.endpoint.stub import Behaviour, serving
    from accelbench.serve.replay import ClosedLoop, Driver
    from accelbench.serve.sources.base import Work

    threads: set[str] = set()

    class Watched(Driver):
        def wrote(self, request: Any, at: float) -> None:
            threads.add(f"wrote:{threading.current_thread().name}")
            super().wrote(request, at)

        def first(self, request: Any, token: int) -> None:
            threads.add(f"first:{threading.current_thread().name}")
            super().first(request, token)

        def _send(self, session: int, turn: int, due: float) -> None:
            threads.add(f"send:{threading.current_thread().name}")
            super()._send(session, turn, due)

    with serving(Behaviour(chunk_delay=0.001)) as url:
        p = LLMServeParams.of(
            model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(checkpoint),
            served_model="stub",
        )  # fmt: skip
        engine = EndpointEngine(p.engine_opts)
        engine.configure(p)
        work = Work.single([[5, 6, 7, 8]] * 4, [4] * 4)
        driver = Watched(engine, work, 2, closed=ClosedLoop(2, 8, 0.0))
        engine.start(None, None, driver, EngineSettings(max_batch=2))  # type: ignore[arg-type]
        try:
            replayed = driver.run(timeout=30)
        finally:
            engine.stop()
    assert threads == {"send:accelbench-endpoint", "wrote:accelbench-endpoint", "first:accelbench-endpoint"}
    assert all(s.error is None and s.first is not None and s.first > s.sent for s in replayed.sent)
    assert len(replayed.sent) >= 8 + 2


def test_the_servers_clock_is_read_beside_the_clients_and_a_gap_between_them_is_said(
    checkpoint: Path, tmp_path: Path
) -> None:
    """The stub's TTFT histogram times from after its delay (a front end that queued the request outside the
    engine's clock): the client's mean TTFT is the delay over the server's, over the same requests, and said."""
    pytest.importorskip("prometheus_client")
    from accelbench.serve.engines.endpoint.stub import Behaviour, serving

    with serving(Behaviour(metrics=True, delay=0.05)) as url:
        r = closed_loop(url, checkpoint, tmp_path, users=1)
    clock = r.details["client"]["server_clock"]
    assert clock["ttft_family"] == "vllm:time_to_first_token_seconds"
    assert clock["requests"] == clock["client_requests"] == r.details["requests"], clock
    assert clock["ttft_mean_ms"] < 20 and clock["client_ttft_mean_ms"] > 45, clock
    assert clock["ttft_apart_ms"] == pytest.approx(clock["client_ttft_mean_ms"] - clock["ttft_mean_ms"])
    assert "apart" in clock and r.has("server-clock")
    # without /metrics: not reported, never 0
    with serving(Behaviour()) as url:
        r = closed_loop(url, checkpoint, tmp_path / "plain", users=1)
    said = r.details["client"]["server_clock"]["not_reported"]
    assert said.startswith("not reported: ") and "ttft_mean_ms" not in r.details["client"]["server_clock"]


VLLM_METRICS = """# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} {count}
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} {count}
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} {total}
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_the_servers_means_are_the_histograms_difference_and_unlike_counts_are_not_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("prometheus_client")
    texts = iter([VLLM_METRICS.replace("{count}", "200.0").replace("{total}", "2.4"),
                  VLLM_METRICS.replace("{count}", "300.0").replace("{total}", "4.9")])  # fmt: skip

    class Resp:
        def __init__(self, text: str) -> None:
            self.text = text

        def __enter__(self) -> "Resp":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def read(self) -> bytes:
            return self.text.encode()

    monkeypatch.setattr(server_clock.urllib.request, "urlopen", lambda req, timeout: Resp(next(texts)))
    before, after = server_clock.read("http://h:1/v1"), server_clock.read("http://h:1/v1")
    server = server_clock.between(before, after)
    assert server["requests"] == 100 and server["ttft_mean_ms"] == pytest.approx(25.0)
    same = server_clock.compare(server, [30.0] * 100, [4.0] * 100)
    assert same["client_ttft_mean_ms"] == 30.0 and "apart" not in same  # 5 ms apart: under the bound
    late = server_clock.compare(server, [80.0] * 100, [])
    assert "55 ms over the server's own" in late["apart"]
    shared = server_clock.compare(server, [30.0] * 90, [])
    assert "another client shared the server" in shared["not_compared"] and "apart" not in shared
    assert server_clock.metrics_url("https://h:8000/v1") == "https://h:8000/metrics"
    # a URL's password never reaches the record's words
    monkeypatch.setattr(server_clock.urllib.request, "urlopen", lambda req, timeout: (_ for _ in ()).throw(OSError()))
    said = server_clock.read("http://user:s3cret@h:1/v1")
    assert isinstance(said, str) and "s3cret" not in said and "http://h:1/metrics" in said


def test_a_sweep_point_whose_client_was_late_leaves_the_front() -> None:
    from accelbench.serve.sweep import curve

    def point(users: int, device: float, user: float, late: bool) -> Result:
        r = Result(
            "infer/llm", {"concurrency": users, "scenario": "concurrency"},
            metrics={"tokens_per_second_per_device": Metric(value=device, unit="tok/s", higher_is_better=True),
                     "tokens_per_second_per_user": Metric(value=user, unit="tok/s", higher_is_better=True)},
            valid=None if late else True,
        )  # fmt: skip
        if late:
            r.concerns.append(Concern("client-limited", "client-limited: the client was late"))
            r.details["not_judged"] = ["the client was late"]
        return r

    drawn = curve([point(1, 100.0, 2000.0, True), point(2, 180.0, 90.0, False)], 2, "s")
    assert drawn["pareto"] == [2]  # the late point had the most tokens/s per user, and still leaves the front
    assert drawn["points"][0]["set_aside"] and drawn["points"][0]["valid"] is None
