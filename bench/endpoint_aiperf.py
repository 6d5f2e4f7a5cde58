"""Does ``--engine endpoint`` measure a real server as NVIDIA AIPerf does?

One ``transformers serve`` of a tiny random-weight Llama (tests/llm_server.py's checkpoint, word-level
tokenizer, CPU), started here and killed at the end, measured under one load by three clients in turn, their
order rotated each round:

* ``accelbench infer ... --engine endpoint --scenario offline --batch-size C`` (its own process, as the suite
  runs it): output tokens/s from the stored record (LoadGen's, over the run from its one query's issue to the
  last answer; tokens counted from the server's usage). LoadGen records no TTFT/TPOT in Offline (its first-token
  figures exist only for Server; in Offline every request is issued at once, so a first-token time from the
  issue would include the wait for one of the C connections): ``ttft_p50_ms``/``tpot_p50_ms`` are shown where
  the record has them, else "-".
* the same ``EndpointEngine`` driven directly (no LoadGen; a ``Timeline`` sink as tests/test_endpoint.py's
  ``drive``), each request stamped when its POST starts: TTFT p50 (POST to the first content chunk), TPOT p50
  (each request's (latency - TTFT) / (tokens - 1): AIPerf's inter-token latency) and output tokens/s (tokens
  over first POST to last answer).
* ``aiperf profile``: the same concurrency and request count, streaming completions, the server's usage for
  token counts (``--use-server-token-count``), its ``time_to_first_token``, ``inter_token_latency`` and
  ``output_token_throughput`` medians/values from ``profile_export_aiperf.json``.

The same load: C requests in flight (a fixed concurrency), prompts of ``--input-tokens`` words of the
checkpoint's vocabulary (every word one token: the server counts exactly that many; accelbench draws its
prompts with ``--input-jitter 1`` so all are that long, AIPerf reads 64 such prompts, as many as accelbench's
quick QSL, from a single_turn file: its synthetic prompts come from an English corpus that this word-level
tokenizer reads as nearly all [UNK]s), ``--output-tokens`` each, and the same number of requests:
accelbench's is set through ``--expected-qps`` (LoadGen's Offline count) and read back from its record; AIPerf
gets that count (300 on both sides in every round). No ``ignore_eos``: transformers serve refuses unknown fields
(HTTP 422), and the checkpoint has no EOS token, so every request generates exactly the tokens asked. AIPerf runs
without its server-metrics and GPU-telemetry collectors and per-request files (nothing to collect here).

The host is 2 shared cores, so: the server (tests/llm_server.py's command, copied) runs torch on one thread
(a team of two stalled whenever any other process ran: 20x slower runs) with a 256-block KV cache (by default
it took 14 GiB and was OOM-killed), pinned to the first CPU, and every client to the others (``--no-pin``:
anywhere), so a client's own CPU does not slow the server. Each run prints the requests AIPerf and the engine
kept in flight (AIPerf's ``effective_concurrency``; the engine's summed latencies over the span), the server's
cores while loaded (sampled every 50 ms; accelbench's record measures them itself) and tokens per server
CPU-second, and, over the whole run, the client's cores and the other processes'.

AIPerf goes in a venv of its own (it pins packages accelbench's environment may not want)::

    python -m venv /work/venv-aiperf && /work/venv-aiperf/bin/pip install aiperf   # or the wheel's path
    python bench/endpoint_aiperf.py --aiperf /work/venv-aiperf/bin/aiperf [--rounds 9] [--concurrency 4]
        [--requests 300] [--input-tokens 128] [--output-tokens 32] [--no-pin]

Measured on the 2-core AMD EPYC VM, aiperf 0.13.0, transformers 5.23.0, C=4, 300 requests of 128/32 tokens,
2026-11-24, 9 rounds (``--rounds 9``), medians and the median of the per-round ratios accelbench/aiperf:

* output tokens/s: accelbench's record 1,384, AIPerf 1,365: 1.085x (rounds 0.82-1.21); the engine direct 1,311:
  1.030x (0.91-1.14). Tokens per server CPU-second 1.070x and 1.012x.
* TTFT p50 (engine direct; not in the Offline record): 14.05 ms against 12.83 ms: 1.069x (0.87-1.27).
* TPOT p50 (engine direct against AIPerf's inter-token latency): 2.60 ms against 2.31 ms: 1.043x (1.01-1.19).

Within 5-9%, not within 5% in every figure; the definitions agree and the rest is the load each client held:
AIPerf's client took 0.87-0.94 of its core and kept 3.70-3.76 requests in flight where the engine kept 3.98-3.99
(accelbench's clients 0.11-0.20 cores),
so its server ran smaller batches and each token came sooner (TPOT 1.043x; 3.99/3.73 in flight is 1.07x). An
earlier 9-round run with other sessions' jobs taking 0.3-1.3 cores meanwhile gave tokens/s 1.16x (0.97-1.48)
and 1.17x, TTFT 0.951x (0.60-1.04), TPOT 0.977x (0.57-1.16): a round varies +-20% here, a whole run ~+-7%.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_server import WORDS, free_port, make_checkpoint, serving_command, started  # noqa: E402

#: LoadGen's Offline slack (accelbench.infer.settings.OFFLINE_SLACK) and the run's minimum seconds
SLACK, DURATION = 1.1, 2.0
#: distinct prompts AIPerf cycles through: accelbench's quick QSL holds 64
PROMPTS = 64


class Host:
    """CPU seconds, over one run, of the whole host, of the server, and of this process and its waited children
    (the client measured): the rest is other processes' (contention)."""

    def __init__(self, server: list[int]) -> None:
        self.server = [psutil.Process(p) for p in server]

    def _now(self) -> tuple[float, float, float, float]:
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        srv = sum(sum(p.cpu_times()[:4]) for p in self.server)
        own = sum(
            resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
            for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return time.perf_counter(), busy, srv, own

    def __enter__(self) -> "Host":
        self.start = self._now()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._now()
        wall, busy, srv, own = (b - a for a, b in zip(self.start, end, strict=True))
        self.wall, self.server_cores, self.client_cores = wall, srv / wall, own / wall
        self.other_cores = max(busy - srv - own, 0.0) / wall


class ServerClock:
    """The server's CPU seconds sampled every 50 ms on a thread of its own: its cores over any wall-clock window
    (what it was given of the CPUs while a client loaded it)."""

    def __init__(self, pids: list[int]) -> None:
        self.procs = [psutil.Process(p) for p in pids]
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            self.samples.append((time.time(), sum(sum(p.cpu_times()[:4]) for p in self.procs)))

    def cores(self, start: float, end: float) -> float:
        t, cpu = zip(*self.samples, strict=True)

        def at(x: float) -> float:
            i = min(max(bisect.bisect_left(t, x), 1), len(t) - 1)
            return cpu[i - 1] + (cpu[i] - cpu[i - 1]) * (x - t[i - 1]) / max(t[i] - t[i - 1], 1e-9)

        return (at(end) - at(start)) / (end - start)


@contextlib.contextmanager
def serve(folder: Path, log: Path, cpus: set[int] | None) -> Iterator[tuple[str, int]]:
    """tests/llm_server.py's ``transformers serve`` (a KV cache of 256 pages, torch on one thread), pinned to
    ``cpus``: its API base (…/v1) and PID, killed at the end."""
    port = free_port()
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(log.parent),
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    command = [
        *(serving_command() or []),
        str(folder),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--continuous-batching",
        "--device",
        "cpu",
        "--cb-num-blocks",
        "256",
        "--cb-block-size",
        "32",
    ]
    base = f"http://127.0.0.1:{port}"
    with started(command, f"{base}/health", log, env, cpus) as proc:
        yield f"{base}/v1", proc.pid


def pinned(cpus: set[int] | None) -> Any:
    """A preexec_fn running a process on ``cpus`` (None: anywhere)."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def accelbench_side(args: argparse.Namespace, url: str, ckpt: Path, tmp: Path, r: int) -> dict[str, Any]:
    from accelbench.results.store import Store

    db = tmp / f"accelbench-{r}.db"
    expected = (args.requests - 0.5) / (SLACK * DURATION)  # LoadGen's Offline query: exactly --requests
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
        url,
        "--served-model",
        str(ckpt),
        "--tokenizer",
        str(ckpt),
        "--scenario",
        "offline",
        "--batch-size",
        str(args.concurrency),
        "--input-tokens",
        str(args.input_tokens),
        "--output-tokens",
        str(args.output_tokens),
        "--input-jitter",
        "1",
        "--expected-qps",
        f"{expected:.4f}",
        "--duration",
        str(DURATION),
        "--db",
        str(db),
        "--out",
        str(tmp / "runs"),
    ]
    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False, preexec_fn=pinned(args.clients))
    if out.returncode != 0:
        sys.exit(f"accelbench failed: {out.stderr.strip()[-2000:]}")
    with Store(db, readonly=True) as store:
        (record,) = store.query()
    m = {k: v.value for k, v in record.metrics.items()}
    client = record.details.get("client", {})
    return {
        "tps": m["tokens_per_second"],
        "ttft": m.get("ttft_p50_ms"),
        "tpot": m.get("tpot_p50_ms"),
        "n": record.details["requests"],
        "isl": client.get("server_prompt_tokens_mean"),
        "osl": record.details["output_tokens"] / record.details["requests"],
        "valid": record.valid,
        # accelbench measures a local server's CPU over its LoadGen run itself
        "load_cores": record.conditions["sut_cpu_seconds"] / record.conditions["wall_seconds"],
    }


def direct_side(args: argparse.Namespace, url: str, ckpt: Path, n: int, clock: ServerClock) -> dict[str, Any]:
    from accelbench.serve.engines.base import EngineSettings, Timeline, TokenRequest
    from accelbench.serve.engines.endpoint.engine import EndpointEngine
    from accelbench.serve.specs import LLMServeParams

    class Stamped(EndpointEngine):
        """The engine, each request's POST start stamped (AIPerf's TTFT starts there)."""

        async def _stream(self, request: TokenRequest) -> Any:
            self.sent[request.id] = time.perf_counter()
            return await super()._stream(request)

    p = LLMServeParams.of(
        model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(ckpt), served_model=str(ckpt)
    )
    engine = Stamped(p.engine_opts)
    engine.sent = {}
    engine.configure(p)
    rng = random.Random(0)
    prompts = [[rng.randrange(3, engine.vocab_size) for _ in range(args.input_tokens)] for _ in range(PROMPTS)]
    timeline = Timeline(expected=n)
    everywhere = os.sched_getaffinity(0)
    if args.clients is not None:  # the engine's loop thread inherits the starting thread's CPUs
        os.sched_setaffinity(0, args.clients)
    engine.start(None, None, timeline, EngineSettings(max_batch=args.concurrency))  # type: ignore[arg-type]
    try:
        began = time.time()
        engine.submit([TokenRequest(i, i, prompts[i % PROMPTS], args.output_tokens) for i in range(n)])
        if not timeline.finished.wait(1800):
            sys.exit("the engine did not finish within 30 minutes")
        ended = time.time()
    finally:
        engine.stop()
        os.sched_setaffinity(0, everywhere)
    if timeline.failures:
        sys.exit(f"{timeline.failures} of {n} requests failed: {timeline.error}")
    ttft = [timeline.firsts[i] - engine.sent[i] for i in range(n)]
    tpot = [(timeline.dones[i][0] - timeline.firsts[i]) / (timeline.dones[i][1] - 1) for i in range(n)]
    tokens = sum(k for _, k in timeline.dones.values())
    span = max(t for t, _ in timeline.dones.values()) - min(engine.sent.values())
    time.sleep(0.1)  # a sample after the end
    return {
        "tps": tokens / span,
        "ttft": statistics.median(ttft) * 1e3,
        "tpot": statistics.median(tpot) * 1e3,
        "n": n,
        "osl": tokens / n,
        "load_cores": clock.cores(began, ended),
        "in_flight": sum(timeline.dones[i][0] - engine.sent[i] for i in range(n)) / span,
    }


def aiperf_side(
    args: argparse.Namespace, url: str, ckpt: Path, tmp: Path, n: int, r: int, clock: ServerClock
) -> dict[str, Any]:
    art = tmp / f"aiperf-{r}"
    cmd = [
        args.aiperf,
        "profile",
        "--model",
        str(ckpt),
        "--tokenizer",
        str(ckpt),
        "--url",
        url.removesuffix("/v1"),
        "--endpoint-type",
        "completions",
        "--streaming",
        "--concurrency",
        str(args.concurrency),
        "--request-count",
        str(n),
        "--warmup-request-count",
        str(args.concurrency),
        "--input-file",
        str(tmp / "prompts.jsonl"),
        "--custom-dataset-type",
        "single_turn",
        "--dataset-sampling-strategy",
        "sequential",
        "--osl",
        str(args.output_tokens),
        "--use-server-token-count",
        "--artifact-dir",
        str(art),
        "--ui-type",
        "none",
        "--random-seed",
        "0",
        # nothing to collect here (no /metrics, no GPU), no per-request files: less of the client's CPU
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--export-level",
        "summary",
    ]
    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False, preexec_fn=pinned(args.clients))
    report = art / "profile_export_aiperf.json"
    if out.returncode != 0 or not report.exists():
        sys.exit(f"aiperf failed: {(out.stdout + out.stderr).strip()[-2000:]}")
    d = json.loads(report.read_text())
    done = int(d["request_count"]["avg"])
    if done != n:
        sys.exit(f"aiperf completed {done} of {n} requests: {d.get('error_summary')}")
    return {
        "tps": d["output_token_throughput"]["avg"],
        "ttft": d["time_to_first_token"]["p50"],
        "tpot": d["inter_token_latency"]["p50"],
        "n": done,
        "isl": d["input_sequence_length"]["avg"],
        "osl": d["output_sequence_length"]["avg"],
        "in_flight": d["effective_concurrency"]["avg"],
        "load_cores": clock.cores(*(datetime.fromisoformat(d[k]).timestamp() for k in ("start_time", "end_time"))),
    }


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiperf", required=True, help="the aiperf executable, in a venv of its own")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=300, help="requests per run (accelbench's LoadGen count)")
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--no-pin", action="store_true", help="leave the server and the clients on any CPU")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    # the server on the first CPU, each client on the others: a client's own CPU then does not slow the server
    args.clients = set(cpus[1:]) if len(cpus) > 1 and not args.no_pin else None
    if serving_command() is None:
        sys.exit("transformers serve is not installed: pip install 'transformers[serving]'")
    version = subprocess.run([args.aiperf, "--version"], capture_output=True, text=True, check=False)
    print(
        f"aiperf {version.stdout.strip() or version.stderr.strip()[-80:]}; C={args.concurrency}, "
        f"{args.requests} requests of {args.input_tokens}/{args.output_tokens} tokens"
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        ckpt = make_checkpoint(tmp / "ckpt")
        rng = random.Random(0)
        with (tmp / "prompts.jsonl").open("w") as f:
            for _ in range(PROMPTS):
                text = " ".join(rng.choice(WORDS) for _ in range(args.input_tokens))
                f.write(json.dumps({"text": text, "output_length": args.output_tokens}) + "\n")
        (tmp / "hf").mkdir()
        server_cpus = {cpus[0]} if args.clients is not None else None
        with serve(ckpt, tmp / "hf" / "serve.log", server_cpus) as (url, pid):
            clock = ServerClock([pid])
            n = args.requests
            rows: dict[str, list[dict[str, Any]]] = {"accelbench": [], "direct": [], "aiperf": []}
            for r in range(args.rounds):
                order = ["accelbench", "direct", "aiperf"]
                order = order[r % 3 :] + order[: r % 3]
                for side in order:
                    with Host([pid]) as host:
                        if side == "accelbench":
                            got = accelbench_side(args, url, ckpt, tmp, r)
                            if got["n"] != n:  # LoadGen planned otherwise: the others follow its count
                                print(f"  LoadGen served {got['n']} requests, not {n}: the others follow")
                                n = got["n"]
                        elif side == "direct":
                            got = direct_side(args, url, ckpt, n, clock)
                        else:
                            got = aiperf_side(args, url, ckpt, tmp, n, r, clock)
                    got |= {
                        "others": host.other_cores,
                        "client": host.client_cores,
                        "wall": host.wall,
                        "per_cpu_s": got["tps"] / got["load_cores"],
                    }
                    rows[side].append(got)
                    print(
                        f"round {r} {side:>10}: {got['tps']:7.1f} tokens/s, TTFT p50 {fmt(got['ttft'])} ms, "
                        f"TPOT p50 {fmt(got['tpot'], '.2f')} ms, {got['n']} requests, "
                        f"{fmt(got.get('in_flight'), '.2f')} in flight, "
                        f"in/out {fmt(got.get('isl'))}/{fmt(got.get('osl'))} tokens; the server's cores under load "
                        f"{got['load_cores']:.2f} ({got['per_cpu_s']:.0f} tokens a server CPU-second); over the "
                        f"{got['wall']:.0f} s: client {got['client']:.2f} cores, other processes {got['others']:.2f}",
                        flush=True,
                    )
            clock.stop.set()
    print()
    for key, label, sides in (
        ("tps", "output tokens/s", ("accelbench", "direct")),
        ("per_cpu_s", "tokens/server CPU-s", ("accelbench", "direct")),
        ("ttft", "TTFT p50 ms", ("accelbench", "direct")),
        ("tpot", "TPOT p50 ms", ("accelbench", "direct")),
    ):
        for side in sides:
            pairs = [(a[key], b[key]) for a, b in zip(rows[side], rows["aiperf"], strict=True) if a[key] is not None]
            if not pairs:
                print(
                    f"{label:>20}: {side} - (not in its record), aiperf "
                    f"{statistics.median(b[key] for b in rows['aiperf']):.2f}"
                )
                continue
            ratios = [a / b for a, b in pairs]
            print(
                f"{label:>20}: {side} {statistics.median(a for a, _ in pairs):.2f}, aiperf "
                f"{statistics.median(b for _, b in pairs):.2f}, ratio {statistics.median(ratios):.3f}x "
                f"(rounds {', '.join(f'{x:.3f}' for x in ratios)})"
            )


if __name__ == "__main__":
    main()
