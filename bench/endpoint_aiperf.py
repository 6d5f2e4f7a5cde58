"""Does accelbench's closed loop (``--concurrency N``) measure a real server as NVIDIA AIPerf and a bare loop do?

Measured 2026-11-28 on the 2-core AMD EPYC VM (shared: other sessions' tests took 0.1-1.5 cores meanwhile),
aiperf 0.13.0, transformers 5.24.0, torch 2.14.1, 128/32 tokens, 3 rounds
(``python bench/endpoint_aiperf.py --aiperf /work/venv-aiperf/bin/aiperf --rounds 3``, 12 minutes), medians over
rounds; ratios accelbench/other, the median of the per-round ratios (their range):

=====  ============================  ===========================  ===============================================
C      accelbench req/s, TTFT, TPOT  AIPerf req/s, TTFT, its ITL  curl loop req/s, TTFT, TPOT
=====  ============================  ===========================  ===============================================
1      25.42, 5.68 ms, 0.974 ms      20.52, 6.78 ms, 0.938 ms     28.39, 6.05 ms, 0.907 ms
4      61.71, 12.42 ms, 1.636 ms     42.75, 12.19 ms, 1.572 ms    65.82, 10.78 ms, 1.588 ms
16     72.21, 41.81 ms, 5.302 ms     54.19, 67.37 ms, 5.966 ms    85.07, 35.23 ms, 4.535 ms
=====  ============================  ===========================  ===============================================

* accelbench/curl (one steady window, so the clients alone differ): req/s 0.920x (0.865-0.927), 1.008x
  (0.814-1.031), 0.867x (0.649-1.000) at C=1, 4, 16; per server CPU-second 0.968x, 1.032x, 0.947x; TTFT p50
  1.032x, 1.075x, 1.061x; pooled ITL p50 1.035x, 0.907x, 1.108x; TPOT p50 1.079x, 0.993x, 1.159x. accelbench's
  process took 0.09-0.16 of a core, the curl loop's 0.05-0.14.
* accelbench/AIPerf: req/s 1.298x (1.093-2.955), 1.312x (1.149-1.444), 1.333x (0.980-1.807); per server
  CPU-second 1.062x, 1.072x, 1.003x; TTFT p50 0.839x, 0.942x, 0.621x; ITL p50 per request (accelbench's TPOT
  p50 over AIPerf's ITL p50) 1.051x, 1.036x, 0.889x.
* Not judged within 10% at any concurrency: at C=1 and 4 AIPerf's client was the bottleneck (its processes 0.92
  and 0.91 of the clients' core, median; 0.91 and 3.70 requests in flight of 1 and 4); at C=16 (0.76 of a core,
  14.81 in flight) the server had 0.67 of its core under AIPerf against 0.95 under accelbench: with AIPerf filling
  the clients' core the host's other processes ran on the server's, so AIPerf measured a slower server (per
  server CPU-second the two agree, 1.003x). In the one round where the host was otherwise idle (round 1, other
  processes 0.09 cores) AIPerf's client ran at 0.95 of a core, 14.60 in flight, and gave 85.73 req/s to
  accelbench's 84.04 and the curl loop's 96.99.
* accelbench's record said "client-limited" (its event loop 5-9 ms late at p99) in 8 of its 9 runs, at 0.09-0.16
  of a core, each also "contended": the lateness was the host's, its thread waiting for the CPU.
* "other processes" on accelbench's lines (1.1-1.5 cores, where the other clients' lines say 0.09-1.14, 1.22
  in the round the others found 0.09) hold accelbench's own start-up: its suite worker runs under a forkserver,
  whose CPU does not reach this process's rusage of its children.

One ``transformers serve`` of a tiny random-weight Llama (tests/llm_server.py's checkpoint, word-level
tokenizer, CPU), started here and killed at the end, loaded by three clients in turn at each concurrency C, their
order rotated each round:

* ``accelbench infer llama3.1-8b --scale tiny --engine endpoint --url ... --concurrency C`` (its own process, as
  the suite runs it): C users, each sending its next request when its last one was answered. Its figures are read
  from its stored record: ``requests_per_second``, ``tokens_per_second``, ``ttft_p50_ms``, ``itl_p50_ms`` and
  ``tpot_p50_ms``, all of its steady window (``details.driver.steady``: each user's first request left out as
  warm-up, the window from the moment every user had sent past it to the run's last send, the requests answered
  inside it); its own process's CPU and the server's over the loop's run (the record's ``conditions``); the
  requests it kept in flight over the window from its per-request file (``details.request_log``).
* ``aiperf profile --concurrency C`` (``--streaming``, completions, the server's usage for token counts): C
  requests of ``--warmup-request-count C`` first (one per user, as accelbench's warm-up), then the profiled ones;
  its figures are over its whole profiled run (``profile_export_aiperf.json``: ``request_throughput``,
  ``output_token_throughput``, ``time_to_first_token`` and ``inter_token_latency`` p50,
  ``effective_concurrency``), so its cool-down (users running out of work one by one) is in them, where
  accelbench leaves it out. Its processes (it runs several) are summed for its CPU, sampled every 100 ms over
  its profiled run's start and end.
* a bare closed loop written here (:func:`curl_loop`, in a process of its own): C threads, each with one
  ``http.client`` connection, each POSTing its next streaming request when its last answer ended, stamping the
  send, each content chunk and the end; its figures over the same steady window as accelbench's (so the ratio
  accelbench/curl compares the clients, not the windows), and its requests/s over its whole run past the warm-up
  as well (as AIPerf counts). Its CPU is its own process's over its run.

Inter-token latency differs by tool, so both forms are printed: accelbench's ``itl_p50_ms`` is the median of every
gap between consecutive chunks, pooled over the window's requests (a chunk of k tokens is k gaps of a k-th of
its wait); its ``tpot_p50_ms`` is the median over requests of (last token - first token) / (tokens - 1), which
is AIPerf's ``inter_token_latency`` (per request: (request latency - TTFT) / (output tokens - 1), the p50 over
requests). The curl loop gives both. TTFT is from the send to the first chunk carrying text everywhere.

The same load: C users, prompts of ``--input-tokens`` words of the checkpoint's vocabulary (every word one
token: accelbench draws its prompts with ``--input-jitter 1`` so all are that long; AIPerf and the curl loop read
the same 64 prompts from a single_turn file: AIPerf's synthetic prompts come from an English corpus that this
word-level tokenizer reads as nearly all [UNK]s), ``--output-tokens`` each (the checkpoint has no EOS token, so
every request generates exactly the tokens asked; no ``ignore_eos``: transformers serve refuses unknown fields),
tokens counted from the server's usage, and the same requests: accelbench sizes its loop itself (its quick
profile: 662 past the warm-up where the server is fast), AIPerf and the curl loop then get that count past
their warm-up (read back from accelbench's record; the first round's accelbench run sets it, so accelbench runs
first in round 0).

The host is 2 shared cores, so: the server (tests/llm_server.py's command, copied) runs torch on one thread
with a 256-block KV cache, pinned to the first CPU, and every client to the others (``--no-pin``: anywhere), so a
client's own CPU does not slow the server. A client is called the bottleneck where its CPU was near a whole core
(:data:`BUSY`) or it kept well under C requests in flight (:data:`HELD`); the verdict per concurrency judges
accelbench within 10% of AIPerf only where AIPerf's client was not the bottleneck.

AIPerf goes in a venv of its own (it pins packages accelbench's environment may not want)::

    python -m venv /work/venv-aiperf && /work/venv-aiperf/bin/pip install aiperf
    python bench/endpoint_aiperf.py [--aiperf /work/venv-aiperf/bin/aiperf] [--rounds 3] [--concurrency 1,4,16]
        [--input-tokens 128] [--output-tokens 32] [--no-pin]

Without ``--aiperf`` it compares accelbench with the curl loop only.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
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
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_server import WORDS, free_port, make_checkpoint, serving_command, started  # noqa: E402

#: distinct prompts AIPerf and the curl loop cycle through: accelbench's quick prompt library holds 64
PROMPTS = 64
#: requests past the warm-up the others get before accelbench's record has said its own (its quick profile's)
FIRST_COUNT = 662
#: a client whose CPU reached this share of one core was the bottleneck (a saturated Python client reads late)
BUSY = 0.9
#: a client that kept fewer than this share of its C requests in flight was the bottleneck (its users idled)
HELD = 0.9
#: accelbench/AIPerf within this of 1 in requests/s, TTFT p50 and ITL p50: the issue's "within 10%"
WITHIN = 0.10
SIDES = ("accelbench", "aiperf", "curl")


class Host:
    """CPU seconds, over one client's whole run, of the host, of the server and of this process with its waited
    children: the rest is other processes' (what else ran on the shared host meanwhile)."""

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
        wall, busy, srv, own = (b - a for a, b in zip(self.start, self._now(), strict=True))
        self.other_cores = max(busy - srv - own, 0.0) / wall


class Clock:
    """The CPU seconds of a process and all its descendants, sampled on a thread of its own (every ``every`` s,
    stamped with ``time.time``): their cores over any wall-clock window. A child reaped meanwhile moves into its
    parent's ``children_*`` times, so the tree's sum counts it once."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.root = psutil.Process(pid)
        self.every = every
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _cpu(self) -> float:
        total = 0.0
        with contextlib.suppress(psutil.Error):
            for p in [self.root, *self.root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += sum(p.cpu_times()[:4])
        return total

    def _run(self) -> None:
        while True:
            self.samples.append((time.time(), self._cpu()))
            if self.stop.wait(self.every):
                return

    def cores(self, start: float, end: float) -> float:
        """CPU seconds between the samples nearest inside ``start`` and ``end``, over their wall time."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) / (t1 - t0)


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


def in_flight(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """Requests in flight on average over ``[start, end]``: each (send, end) span's overlap with it, summed."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans) / (end - start)


def accelbench_side(args: argparse.Namespace, c: int, url: str, ckpt: Path, tmp: Path, r: int) -> dict[str, Any]:
    from accelbench.results.store import Store
    from accelbench.serve.requests import read

    db = tmp / f"accelbench-{c}-{r}.db"
    cmd = [
        sys.executable, "-m", "accelbench", "infer", "llama3.1-8b", "--scale", "tiny",
        "--engine", "endpoint", "--url", url, "--served-model", str(ckpt), "--tokenizer", str(ckpt),
        "--concurrency", str(c),
        "--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens), "--input-jitter", "1",
        "--db", str(db), "--out", str(tmp / "runs"),
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False, preexec_fn=pinned(args.clients))
    if out.returncode != 0:
        sys.exit(f"accelbench failed: {(out.stdout + out.stderr).strip()[-2000:]}")
    with Store(db, readonly=True) as store:
        (record,) = store.query()
    if record.status != "ok":
        sys.exit(f"accelbench's run is {record.status}: {record.error or record.details.get('invalid_reasons')}")
    m = {k: v.value for k, v in record.metrics.items()}
    d, cond = record.details, record.conditions
    steady = d["driver"]["steady"]
    log = read(Path(d["request_log"]["path"]))
    spans = [(row.sent, row.done) for row in log.rows if row.done is not None]
    return {
        "rps": m["requests_per_second"],
        "tps": m["tokens_per_second"],
        "ttft": m["ttft_p50_ms"],
        "itl": m.get("itl_p50_ms"),
        "tpot": m.get("tpot_p50_ms"),
        "sent": d["requests"],
        "measured": steady["requests"],
        "window_s": steady.get("seconds"),
        "isl": d.get("client", {}).get("server_prompt_tokens_mean"),
        "osl": d["output_tokens"] / d["measured"],
        "in_flight": in_flight(spans, steady["start_s"], steady["end_s"]) if "start_s" in steady else None,
        "client_cores": cond["own_cpu_seconds"] / cond["wall_seconds"],
        "server_cores": cond["sut_cpu_seconds"] / cond["wall_seconds"],
        "concerns": [
            x.text if x.kind == "client-limited" else x.kind for x in record.concerns if x.kind != "non-compliant"
        ],
    }


def aiperf_side(
    args: argparse.Namespace, c: int, n: int, url: str, ckpt: Path, tmp: Path, r: int, server: Clock
) -> dict[str, Any]:
    art = tmp / f"aiperf-{c}-{r}"
    cmd = [
        args.aiperf, "profile", "--model", str(ckpt), "--tokenizer", str(ckpt), "--url", url.removesuffix("/v1"),
        "--endpoint-type", "completions", "--streaming",
        "--concurrency", str(c), "--request-count", str(n), "--warmup-request-count", str(c),
        "--input-file", str(tmp / "prompts.jsonl"), "--custom-dataset-type", "single_turn",
        "--dataset-sampling-strategy", "sequential", "--osl", str(args.output_tokens),
        "--use-server-token-count", "--artifact-dir", str(art), "--ui-type", "none", "--random-seed", "0",
        # nothing to collect here (no /metrics, no GPU), no per-request files: less of the client's CPU
        "--no-server-metrics", "--no-gpu-telemetry", "--export-level", "summary",
    ]  # fmt: skip
    with (tmp / f"aiperf-{c}-{r}.log").open("w") as log:
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, preexec_fn=pinned(args.clients))
        clock = Clock(proc.pid, every=0.1)
        proc.wait()
        clock.stop.set()
        clock.thread.join()
    report = art / "profile_export_aiperf.json"
    if proc.returncode != 0 or not report.exists():
        sys.exit(f"aiperf failed: {(tmp / f'aiperf-{c}-{r}.log').read_text()[-2000:]}")
    d = json.loads(report.read_text())
    done = int(d["request_count"]["avg"])
    if done != n:
        sys.exit(f"aiperf completed {done} of {n} requests: {d.get('error_summary')}")
    start, end = (datetime.fromisoformat(d[k]).timestamp() for k in ("start_time", "end_time"))
    return {
        "rps": d["request_throughput"]["avg"],
        "tps": d["output_token_throughput"]["avg"],
        "ttft": d["time_to_first_token"]["p50"],
        "itl": d["inter_token_latency"]["p50"],
        "tpot": d["inter_token_latency"]["p50"],  # AIPerf's ITL is per request: the TPOT of the others
        "sent": done + c,
        "measured": done,
        "window_s": end - start,
        "isl": d["input_sequence_length"]["avg"],
        "osl": d["output_sequence_length"]["avg"],
        "in_flight": d.get("effective_concurrency", {}).get("avg"),
        "client_cores": clock.cores(start, end),
        "server_cores": server.cores(start, end),
        "concerns": [],
    }


# --- the bare loop


def curl_loop(url: str, model: str, prompts: list[str], max_tokens: int, users: int, requests: int) -> dict[str, Any]:
    """``users`` threads, each with one kept-alive connection, each POSTing a streaming completion when its last
    one ended, ``users`` warm-up requests (each user's first) then ``requests`` more: every request's send, first
    and last content chunk (``time.perf_counter``), gaps between chunks, and the server's usage."""
    parsed = urllib.parse.urlparse(url)
    path = f"{parsed.path.rstrip('/')}/completions"
    numbers = itertools.count()
    lock = threading.Lock()
    rows: list[dict[str, Any]] = []

    def user(u: int) -> None:
        conn = http.client.HTTPConnection(parsed.netloc, timeout=600)
        while True:
            with lock:
                i = next(numbers)
            if i >= users + requests:
                conn.close()
                return
            body = json.dumps({
                "model": model, "prompt": prompts[i % len(prompts)], "max_tokens": max_tokens, "temperature": 0.0,
                "stream": True, "stream_options": {"include_usage": True},
            }).encode()  # fmt: skip
            sent = time.perf_counter()
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
            times: list[float] = []
            tokens = prompt_tokens = None
            for line in resp:  # server-sent events, one "data: {...}" a line, to the end of the stream
                if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                    continue
                now = time.perf_counter()
                event = json.loads(line[5:])
                if any(ch.get("text") for ch in event.get("choices") or []):
                    times.append(now)
                if event.get("usage"):
                    tokens, prompt_tokens = event["usage"]["completion_tokens"], event["usage"]["prompt_tokens"]
            ended = time.perf_counter()
            with lock:
                rows.append({
                    "user": u, "sent": sent, "first": times[0], "last": times[-1], "ended": ended, "chunks": len(times),
                    "tokens": tokens, "prompt_tokens": prompt_tokens,
                    "gaps": [b - a for a, b in zip(times, times[1:], strict=False)],
                })  # fmt: skip

    cpu0 = time.process_time()
    began = time.time()
    threads = [threading.Thread(target=user, args=(u,)) for u in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"rows": rows, "cpu_s": time.process_time() - cpu0, "began": began, "ended": time.time()}


def curl_figures(run: dict[str, Any], users: int) -> dict[str, Any]:
    """The curl loop's figures over accelbench's steady window (:func:`accelbench.serve.figures.steady`'s
    definition, written out: from the moment every user had sent its first request past the warm-up to the last
    send, the requests answered inside it), and its requests/s over the whole run past the warm-up."""
    rows = sorted(run["rows"], key=lambda x: x["sent"])
    by_user: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_user.setdefault(row["user"], []).append(row)
    start = max(v[1]["sent"] for v in by_user.values())
    end = rows[-1]["sent"]
    inside = [x for x in rows if start < x["last"] <= end]
    past_warmup = [x for v in by_user.values() for x in v[1:]]
    whole = min(x["sent"] for x in past_warmup), max(x["last"] for x in past_warmup)
    tokens = sum(x["tokens"] for x in inside)
    wall = run["ended"] - run["began"]
    return {
        "rps": len(inside) / (end - start),
        "rps_whole": len(past_warmup) / (whole[1] - whole[0]),
        "tps": tokens / (end - start),
        "ttft": 1e3 * statistics.median(x["first"] - x["sent"] for x in inside),
        "itl": 1e3 * statistics.median(g for x in inside for g in x["gaps"]),
        "tpot": 1e3 * statistics.median((x["last"] - x["first"]) / (x["tokens"] - 1) for x in inside),
        "sent": len(rows),
        "measured": len(inside),
        "window_s": end - start,
        "isl": statistics.fmean(x["prompt_tokens"] for x in rows),
        "osl": tokens / len(inside),
        "chunks_per_token": sum(x["chunks"] for x in inside) / tokens,
        "in_flight": in_flight([(x["sent"], x["last"]) for x in rows], start, end),
        "client_cores": run["cpu_s"] / wall,
        "concerns": [],
    }


def curl_side(
    args: argparse.Namespace, c: int, n: int, url: str, ckpt: Path, tmp: Path, server: Clock
) -> dict[str, Any]:
    spec = tmp / "curl.json"
    spec.write_text(json.dumps({"url": url, "model": str(ckpt), "prompts": args.prompt_texts,
                                "max_tokens": args.output_tokens, "users": c, "requests": n}))  # fmt: skip
    cmd = [sys.executable, __file__, "--curl-loop", str(spec)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, preexec_fn=pinned(args.clients))
    if out.returncode != 0:
        sys.exit(f"the curl loop failed: {out.stderr.strip()[-2000:]}")
    run = json.loads(out.stdout)
    return curl_figures(run, c) | {"server_cores": server.cores(run["began"], run["ended"])}


# --- the report


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def ratio_words(rows: dict[str, list[dict[str, Any]]], a: str, b: str, key: str) -> tuple[float | None, str]:
    """The median over rounds of ``a``/``b``'s ``key``, and its words with every round's ratio."""
    ratios = [x[key] / y[key] for x, y in zip(rows[a], rows[b], strict=True) if x.get(key) and y.get(key)]
    if not ratios:
        return None, "-"
    mid = statistics.median(ratios)
    return mid, f"{mid:.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"


def bottleneck(side: str, got: list[dict[str, Any]], c: int) -> str | None:
    """Why ``side``'s client limited its load (its CPU near a whole core, or well under C requests in flight),
    from the median over rounds, or None."""
    cores = statistics.median(x["client_cores"] for x in got)
    held = [x["in_flight"] for x in got if x.get("in_flight") is not None]
    why = []
    if cores >= BUSY:
        why.append(f"its CPU {cores:.2f} of a core")
    if held and statistics.median(held) < HELD * c:
        why.append(f"{statistics.median(held):.2f} of {c} requests in flight")
    return ", ".join(why) or None


def summary(c: int, rows: dict[str, list[dict[str, Any]]]) -> None:
    sides = [s for s in SIDES if rows[s]]
    print(f"\nconcurrency {c}: medians over {len(rows['accelbench'])} rounds")
    print(
        f"  {'client':<11} {'req/s':>7} {'out tok/s':>9} {'TTFT p50':>9} {'ITL p50':>8} {'TPOT p50':>9} "
        f"{'in flight':>9} {'client CPU':>10} {'server CPU':>10} {'req/srv CPU-s':>13} {'requests':>9}"
    )
    for s in sides:
        got = rows[s]

        def med(key: str, spec: str = ".2f", got: list[dict[str, Any]] = got) -> str:
            values = [x[key] for x in got if x.get(key) is not None]
            return fmt(statistics.median(values) if values else None, spec)

        print(
            f"  {s:<11} {med('rps'):>7} {med('tps', '.1f'):>9} {med('ttft'):>9} {med('itl', '.3f'):>8} "
            f"{med('tpot', '.3f'):>9} {med('in_flight'):>9} {med('client_cores'):>10} {med('server_cores'):>10} "
            f"{med('per_cpu_s', '.1f'):>13} {med('measured', '.0f'):>9}"
        )
    if rows["curl"]:
        print(f"  curl loop over its whole run past the warm-up (as AIPerf counts): "
              f"{statistics.median(x['rps_whole'] for x in rows['curl']):.2f} req/s")  # fmt: skip
    judged: dict[str, float | None] = {}
    for other in ("aiperf", "curl"):
        if not rows[other]:
            continue
        # AIPerf's ITL is per request (accelbench's TPOT): accelbench's pooled gaps have no AIPerf counterpart
        figures = [("rps", "req/s"), ("per_cpu_s", "req/server CPU-s"), ("ttft", "TTFT p50")]
        if other == "aiperf":
            figures.append(("tpot", "ITL p50"))
        else:
            figures += [("itl", "ITL p50 (pooled gaps)"), ("tpot", "TPOT p50")]
        words = []
        for key, label in figures:
            mid, text = ratio_words(rows, "accelbench", other, key)
            words.append(f"{label} {text}")
            if other == "aiperf":
                judged[label] = mid
        if other == "aiperf":
            words[-1] = words[-1].replace("ITL p50", "ITL p50 (per request: accelbench's TPOT p50/AIPerf's ITL p50)")
        print(f"  accelbench/{other}: " + "; ".join(words))
    limited = {s: bottleneck(s, rows[s], c) for s in sides}
    said = "; ".join(f"{s}'s client the bottleneck ({why})" for s, why in limited.items() if why)
    print(f"  bottleneck: {said or 'no client the bottleneck (CPU under 0.9 of a core, over 0.9 C in flight)'}")
    if not rows["aiperf"]:
        print("  verdict: no AIPerf run, no verdict against it")
        return
    if limited["aiperf"]:
        print("  verdict: not judged: AIPerf's figures describe its client here")
        return
    off = [k for k in ("req/s", "TTFT p50", "ITL p50") if abs((judged.get(k) or 0.0) - 1) > WITHIN]
    within = "within 10% of AIPerf" if not off else f"NOT within 10% of AIPerf in {', '.join(off)}"
    server = {s: statistics.median(x["server_cores"] for x in rows[s]) for s in ("accelbench", "aiperf")}
    if server["aiperf"] < (1 - WITHIN) * server["accelbench"]:
        print(
            f"  verdict: not judged: the server had {server['aiperf']:.2f} of its core under AIPerf, "
            f"{server['accelbench']:.2f} under accelbench (the shared host's other processes ran on the server's CPU "
            f"while AIPerf's filled the clients'), so AIPerf measured a slower server; as measured, accelbench is "
            f"{within}; per server CPU-second {fmt(judged.get('req/server CPU-s'), '.3f')}x"
        )
        return
    print(f"  verdict: judged: accelbench's req/s, TTFT p50 and ITL p50 {within}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--aiperf", help="the aiperf executable, in a venv of its own (none: accelbench and curl only)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="1,4,16", help="the concurrencies, comma-separated")
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--no-pin", action="store_true", help="leave the server and the clients on any CPU")
    ap.add_argument("--save", help="write every run's figures to this JSON file (for --summarize)")
    ap.add_argument("--summarize", help="print the summary of a --save file, running nothing")
    ap.add_argument("--curl-loop", help=argparse.SUPPRESS)  # the curl loop's own process: its spec's JSON file
    args = ap.parse_args()
    if args.curl_loop:
        spec = json.loads(Path(args.curl_loop).read_text())
        print(json.dumps(curl_loop(**spec)))
        return
    if args.summarize:
        for c, rows in json.loads(Path(args.summarize).read_text()).items():
            summary(int(c), rows)
        return
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    cpus = sorted(os.sched_getaffinity(0))
    # the server on the first CPU, each client on the others: a client's own CPU then does not slow the server
    args.clients = set(cpus[1:]) if len(cpus) > 1 and not args.no_pin else None
    if serving_command() is None:
        sys.exit("transformers serve is not installed: pip install 'transformers[serving]'")
    import torch
    import transformers

    said = f"transformers {transformers.__version__}, torch {torch.__version__}"
    if args.aiperf:
        version = subprocess.run([args.aiperf, "--version"], capture_output=True, text=True, check=False)
        said = f"aiperf {version.stdout.strip() or version.stderr.strip()[-80:]}, {said}"
    print(
        f"{said}; concurrency {args.concurrency}, {args.rounds} rounds, prompts of "
        f"{args.input_tokens}/{args.output_tokens} tokens; server on CPU {cpus[0] if args.clients else 'any'}, "
        f"clients on {sorted(args.clients) if args.clients else 'any'}",
        flush=True,
    )
    sides = [s for s in SIDES if s != "aiperf" or args.aiperf]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        ckpt = make_checkpoint(tmp / "ckpt")
        rng = random.Random(0)
        args.prompt_texts = [" ".join(rng.choice(WORDS) for _ in range(args.input_tokens)) for _ in range(PROMPTS)]
        with (tmp / "prompts.jsonl").open("w") as f:
            for text in args.prompt_texts:
                f.write(json.dumps({"text": text, "output_length": args.output_tokens}) + "\n")
        (tmp / "hf").mkdir()
        server_cpus = {cpus[0]} if args.clients is not None else None
        rows = {c: {s: [] for s in SIDES} for c in concurrencies}
        count = dict.fromkeys(concurrencies, FIRST_COUNT)  # requests past the warm-up, as accelbench's record says
        with serve(ckpt, tmp / "hf" / "serve.log", server_cpus) as (url, pid):
            server = Clock(pid)
            if args.clients is not None:  # this process's samplers off the server's CPU too
                os.sched_setaffinity(0, args.clients)
            for r in range(args.rounds):
                order = sides[r % len(sides) :] + sides[: r % len(sides)]
                for c in concurrencies:
                    for side in order:
                        with Host([pid]) as host:
                            if side == "accelbench":
                                got = accelbench_side(args, c, url, ckpt, tmp, r)
                                if got["sent"] - c != count[c]:
                                    print(f"  accelbench sent {got['sent'] - c} past its warm-up: the others follow")
                                    count[c] = got["sent"] - c
                            elif side == "aiperf":
                                got = aiperf_side(args, c, count[c], url, ckpt, tmp, r, server)
                            else:
                                got = curl_side(args, c, count[c], url, ckpt, tmp, server)
                        got |= {"others": host.other_cores, "per_cpu_s": got["rps"] / got["server_cores"]}
                        rows[c][side].append(got)
                        if args.save:
                            Path(args.save).write_text(json.dumps(rows))
                        print(
                            f"round {r} C={c:<2} {side:>10}: {got['rps']:6.2f} req/s, {got['tps']:7.1f} tok/s, TTFT "
                            f"p50 {got['ttft']:.2f} ms, ITL p50 {fmt(got['itl'], '.3f')} ms, TPOT p50 "
                            f"{fmt(got['tpot'], '.3f')} ms; {got['measured']} of {got['sent']} requests over "
                            f"{got['window_s']:.1f} s, {fmt(got['in_flight'], '.2f')} in flight, in/out "
                            f"{fmt(got['isl'])}/{fmt(got['osl'])} tokens; CPU: client {got['client_cores']:.2f}, "
                            f"server {got['server_cores']:.2f}, other processes {host.other_cores:.2f}"
                            + (f"; concerns {', '.join(got['concerns'])}" if got["concerns"] else ""),
                            flush=True,
                        )
            server.stop.set()
    for c in concurrencies:
        summary(c, rows[c])


if __name__ == "__main__":
    main()
