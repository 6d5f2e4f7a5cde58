"""How many streaming requests a second can ``--engine endpoint``'s client itself sustain?

The client alone: ``EndpointEngine`` driven directly (no LoadGen; a ``Timeline`` sink as tests/test_endpoint.py's
``drive``) against the stub OpenAI server (``python -m accelbench.serve.engines.endpoint.stub``, no model: each
answer is ``max_tokens`` one-word chunks at once, then its usage) in a process of its own, started here and killed
at the end. ``--connections`` requests in flight (Offline's fixed concurrency; the engine's pool), ``--requests``
of them each round, ``--tokens`` chunks each; one warm-up batch first opens the connections. Printed per round and
as medians: requests/s and content chunks/s from the first submit to the last answer, the client loop thread's
CPU share (``engine.measured``: its thread time over wall time), this whole process's cores, and the stub's
cores (psutil): on 2 cores the two compete, so whichever is near its ceiling is what saturates. ``--pin`` puts
the stub on the first CPU and this process on the others (a core each on 2 CPUs). Target: >= 2,000 requests/s,
or a clear statement of where it saturates.

    python bench/endpoint_client.py [--rounds 5] [--connections 256] [--requests 20000] [--tokens 8,32]
        [--prompt-tokens 128] [--pin]

Measured on the 2-core AMD EPYC VM (shared with other sessions' runs; quiet during these), aiohttp 3.14.5,
2026-11-24, 256 connections, 128-token prompts, 20,000 requests a round, 5 rounds (``python
bench/endpoint_client.py --rounds 5``):

* 8 chunks a request: 2,186 requests/s (rounds 2,182, 1,773, 2,233, 2,379, 2,186), 17,487 chunks/s; the client's
  loop thread 100% of a core (456 us of its CPU a request), the stub 0.48 cores.
* 32 chunks a request: 1,435 requests/s (1,286-1,573), 45,919 chunks/s; the loop thread 100% (695 us a request),
  the stub 0.66 cores.

The client saturates first: its one loop thread is busy all the time while the stub has half a core to spare, so
>= 2,000 requests/s holds at 8 chunks a request and not at 32 (about 375 us a request plus 10 us a chunk of one
core). With ``--pin`` (3 rounds): 2,396 and 1,508 requests/s, the loop thread again at 100%. Where its time goes
(py-spy, 32 chunks): aiohttp sending the request 33%, reading lines 18%, parsing the events (``Answer.feed``,
json) 18%, encoding the answer's text back to tokens 9%, the JSON body 6%. The answer's tokenizer encode runs
even when the server reports its usage (the ids are what LoadGen logs in accuracy mode), so it stayed.

Before the engine decoded each prompt once per QSL sample (commit "each prompt's text decoded once per QSL
sample"), it decoded it for every request; with 1,024-token prompts (``--prompt-tokens 1024``, 10,000 requests,
3 alternating rounds each) the loop's CPU fell from 721-811 to 520-586 us a request at 8 chunks (1,019-1,183 ->
1,242-1,337 requests/s) and from 1,043-1,052 to 722-818 us at 32 chunks (610-760 -> 717-1,233 requests/s; the
host was busy with other runs during these).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_server import free_port, make_checkpoint, started  # noqa: E402


@contextlib.contextmanager
def stub(cpus: set[int] | None, log: Path) -> Iterator[tuple[str, int]]:
    """The stub server in a process of its own (on ``cpus``): its API base and PID, killed at the end."""
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    command = [sys.executable, "-m", "accelbench.serve.engines.endpoint.stub", "--port", str(port)]
    with started(command, f"{base}/models", log, cpus=cpus, timeout=60) as proc:
        yield base, proc.pid


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def one_round(
    engine: Any, stub_proc: psutil.Process, prompts: list[list[int]], requests: int, tokens: int, first: int
) -> dict[str, float]:
    from accelbench.serve.engines.base import Timeline, TokenRequest

    timeline = Timeline(expected=requests)
    engine.sink = timeline
    me = psutil.Process()
    n = len(prompts)  # as LoadGen issues them: sample i % n of the QSL, the same list each time
    batch = [TokenRequest(first + i, i % n, prompts[i % n], tokens) for i in range(requests)]
    engine.measured(arrivals=False)  # the client's figures from here
    own0, stub0, t0 = cpu_seconds(me), cpu_seconds(stub_proc), time.perf_counter()
    engine.submit(batch)
    if not timeline.finished.wait(600):
        sys.exit("the round did not finish within 10 minutes")
    wall = time.perf_counter() - t0
    own, served = cpu_seconds(me) - own0, cpu_seconds(stub_proc) - stub0
    client = engine.measured(arrivals=False)
    if timeline.failures:
        sys.exit(f"{timeline.failures} of {requests} requests failed, the first: {timeline.error}")
    chunks = sum(n for _, n in timeline.dones.values())
    return {
        "rps": requests / wall,
        "cps": chunks / wall,
        "thread": client["client_cpu_share"],
        "process": own / wall,
        "stub": served / wall,
        "lag": client["loop_lag_p99_ms"],
        # the loop thread's CPU per request: what a core sustains, whatever share of one it was given
        "us": client["client_cpu_share"] * wall / requests * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=256)
    ap.add_argument("--requests", type=int, default=20000, help="requests per round")
    ap.add_argument("--tokens", default="8,32", help="chunks (output tokens) per request, a comma list")
    ap.add_argument("--prompt-tokens", type=int, default=128, help="each prompt's tokens (64 prompts, a quick QSL)")
    ap.add_argument("--pin", action="store_true", help="the stub on the first CPU, this process on the others")
    args = ap.parse_args()
    from accelbench.serve.engines.base import EngineSettings, Timeline, TokenRequest
    from accelbench.serve.engines.endpoint.engine import EndpointEngine
    from accelbench.serve.engines.endpoint.stub import MODEL
    from accelbench.serve.specs import LLMServeParams

    cpus = sorted(os.sched_getaffinity(0))
    pinned = args.pin and len(cpus) > 1
    if pinned:
        os.sched_setaffinity(0, set(cpus[1:]))  # before the engine's thread starts: it inherits them
    print(
        f"{len(cpus)} CPUs, {args.connections} connections, {args.requests} requests a round"
        f"{', the stub pinned to CPU ' + str(cpus[0]) + ', the client to the others' if pinned else ''}"
    )
    stub_cpus = {cpus[0]} if pinned else None
    with tempfile.TemporaryDirectory() as name, stub(stub_cpus, Path(name) / "stub.log") as (url, pid):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        folder = make_checkpoint(Path(name))
        params = LLMServeParams.of(
            model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(folder), served_model=MODEL
        )
        engine = EndpointEngine(params.engine_opts)
        engine.configure(params)
        warm = Timeline(expected=args.connections)
        engine.start(None, None, warm, EngineSettings(max_batch=args.connections))  # type: ignore[arg-type]
        stub_proc = psutil.Process(pid)
        rng = random.Random(0)
        prompts = [[rng.randrange(3, engine.vocab_size) for _ in range(args.prompt_tokens)] for _ in range(64)]
        rows: dict[int, list[dict[str, float]]] = {}
        try:
            engine.submit([TokenRequest(i, i, [5, 6, 7, 8], 4) for i in range(args.connections)])
            warm.finished.wait(120)
            first = args.connections
            for r in range(args.rounds):
                for tokens in (int(t) for t in args.tokens.split(",")):
                    got = one_round(engine, stub_proc, prompts, args.requests, tokens, first)
                    first += args.requests
                    rows.setdefault(tokens, []).append(got)
                    print(
                        f"round {r}, {tokens:>3} chunks: {got['rps']:7,.0f} requests/s, {got['cps']:8,.0f} chunks/s; "
                        f"client thread {got['thread']:.0%} of a core ({got['us']:.0f} us a request), this process "
                        f"{got['process']:.2f} cores, "
                        f"stub {got['stub']:.2f} cores, loop lag p99 {got['lag']:.1f} ms",
                        flush=True,
                    )
        finally:
            engine.stop()
    print()
    for tokens, got in rows.items():
        med = {k: statistics.median(g[k] for g in got) for k in got[0]}
        spread = ", ".join(f"{g['rps']:,.0f}" for g in got)
        print(
            f"{tokens:>3} chunks a request: {med['rps']:,.0f} requests/s (rounds {spread}), {med['cps']:,.0f} "
            f"chunks/s; "
            f"client thread {med['thread']:.0%} ({med['us']:.0f} us a request: {1e6 / med['us']:,.0f} requests/s a "
            f"core), this process {med['process']:.2f} cores, stub {med['stub']:.2f} cores"
        )


if __name__ == "__main__":
    main()
