"""Issue 54, the engines' side: the static engine's cache sized per batch and its compile watched, the compiled
comparison of ``bench/serve_vs_bare.py`` like with like, and that script run end to end for each engine.

A tiny llama3.1-8b on the CPU: the engine's code paths are the ones a GPU runs (transformers' ``generate``, its
static cache, Dynamo's counters), only the sizes are small.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

MODEL = "llama3.1-8b"
ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "serve_vs_bare.py"


def served(engine: Any, batches: list[tuple[int, int]], watch: bool = False) -> tuple[dict[str, Any], list[set[int]]]:
    """``engine`` started on a tiny model, each (prompt tokens, new tokens) served as its own batch in turn: the
    engine's facts after, and (``watch``) the static cache lengths each batch's forward calls were given."""
    import torch

    from accelbench.serve.engines.base import EngineSettings, Timeline, TokenRequest
    from accelbench.workloads import workload_class

    model = workload_class(MODEL)().build("tiny").eval()
    seen: list[set[int]] = []

    def given(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        cache = kwargs.get("cache")
        if cache is not None:
            seen[-1].add(cache.layers[0].max_cache_len)

    if watch:  # eager only: a hook inside a compiled step would be traced into it
        model.register_forward_pre_hook(given, with_kwargs=True)
    timeline = Timeline()
    longest = max(n + out for n, out in batches)
    engine.start(model, torch.device("cpu"), timeline, EngineSettings(max_batch=2, longest=longest))
    try:
        for i, (n, out) in enumerate(batches):
            seen.append(set())
            timeline.expected, done = len(timeline.dones) + 1, timeline.finished
            done.clear()
            engine.submit([TokenRequest(i, i, [1] * n, out)])
            assert done.wait(300), f"batch {i} not answered"
            assert timeline.error is None, timeline.error
            assert timeline.dones[i][1] == out  # every token asked for came
    finally:
        engine.stop()
    return dict(engine.facts), seen


def test_each_static_batch_has_a_cache_of_its_own_length_not_the_longest_seen():
    """A long batch, then short ones: each short batch's forward attends over a cache of its own length (prompt +
    new tokens - 1, what generate writes), not the long batch's, which transformers keeps for every later call on
    the model; the record lists the lengths."""
    from accelbench.serve.engines.static import StaticBatch

    facts, seen = served(StaticBatch(), [(200, 40), (5, 4), (70, 8)], watch=True)
    assert seen == [{239}, {8}, {77}]
    assert facts["cache_lengths"] == [8, 77, 239]
    assert facts["kv_allocated_tokens"] == 239  # one row of the longest batch's cache, the most one batch held
    assert facts["compile"] is False and "compile_held" not in facts


def test_a_compiled_cache_length_is_a_bucket_so_lengths_share_a_compiled_shape():
    """Compiling, a cache length is rounded up to a power of two or 1.5 times one (at least MIN_COMPILED_CACHE): a
    conversation's growing turns reuse a few compiled shapes, two an octave, and no batch attends over more than
    half again its need (a power of two alone would be up to twice)."""
    from accelbench.serve.engines.static import MIN_COMPILED_CACHE, cache_length

    assert cache_length(64, 16, True) == MIN_COMPILED_CACHE == 128  # 79 tokens
    assert cache_length(256, 48, True) == 384 and cache_length(128, 129, True) == 256  # 303, and exactly 256
    assert cache_length(128, 130, True) == 384 and cache_length(512, 128, True) == 768  # 257; 639 (512 in, 128 out)
    assert cache_length(5, 4, False) == 8  # eager: the batch's own length
    assert max(cache_length(n, 1, True) / n for n in range(129, 16385)) <= 1.5
    assert len({cache_length(w, 16, True) for w in range(64, 16384, 64)}) == 15  # 128 ... 16k: two an octave


#: run in a fresh interpreter (glibc's thresholds move with what a process freed before): with ``start``, a static
#: engine is started (and stopped) on the CPU first; then a new thread takes 4 MB in 64 KB blocks, frees them, takes
#: them again and prints the page faults the second taking cost it, and the engine's facts
HEAP_PROBE = """
import ctypes, json, resource, sys, threading
from types import SimpleNamespace
import torch
from transformers import GenerationConfig
from accelbench.serve.engines.base import EngineSettings, Timeline
from accelbench.serve.engines.static import StaticBatch

engine = StaticBatch()
if sys.argv[1] == "start":
    model = SimpleNamespace(config=SimpleNamespace(vocab_size=8, eos_token_id=2))
    engine.start(model, torch.device("cpu"), Timeline(), EngineSettings(max_batch=1, longest=4))
    engine.stop()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes, libc.memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
faults = []

def batch():  # a batch's activations: blocks under the mapping threshold, touched, freed last to first
    blocks = [libc.malloc(64 << 10) for _ in range(64)]
    for b in blocks:
        libc.memset(b, 1, 64 << 10)
    for b in reversed(blocks):
        libc.free(b)

def engine_thread():
    batch()
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    batch()
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

thread = threading.Thread(target=engine_thread)
thread.start()
thread.join()
print(json.dumps({"faults": faults[0], "host_heap": getattr(engine, "facts", {}).get("host_heap")}))
"""


def heap_probe(mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", HEAP_PROBE, mode], capture_output=True, text=True, timeout=300, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
def test_a_static_engine_on_the_cpu_keeps_a_batchs_freed_memory_for_the_next():
    """A batch's freed blocks at the top of its thread's malloc arena: left to glibc in a fresh process, they go back
    to the kernel and the next batch faults every page in again (4 MB: about a thousand faults a batch, which made
    one static engine thread in four about 9% slower); once a static engine has started on the CPU they are kept
    (a handful of faults), and the record says how the heap was set."""
    from accelbench.serve.engines.base import steady_heap

    bare = heap_probe("bare")
    if bare["faults"] < 500:
        pytest.skip(f"this glibc kept the memory by itself ({bare['faults']} faults): nothing to tell apart")
    started = heap_probe("start")
    assert started["faults"] < 100, started
    assert "glibc malloc" in started["host_heap"] and "32 MiB" in started["host_heap"]
    import torch

    assert steady_heap(torch.device("meta")) == {}  # a device's own memory is not malloc's: nothing set


def limited_to_one_compile() -> Any:
    """A compiled static engine whose thread allows Dynamo one compile of a frame (Dynamo's settings are per
    thread: the limit must be set on the engine's own)."""
    import torch._dynamo

    from accelbench.serve.engines.static import StaticBatch

    class Limited(StaticBatch):
        def serve(self, batch: Any) -> None:
            torch._dynamo.config.recompile_limit = 1
            super().serve(batch)

    return Limited(StaticBatch.Options(engine_compile=True))


def test_a_compiled_engine_says_when_dynamo_fell_back_to_eager():
    """Past Dynamo's recompile limit a new cache length runs eager, silently (one log line, once): the engine's
    facts say compile did not hold, where, and how many batches ran eager; a length compiled before still ran
    compiled. (Long, then short twice, then long again: the short ones are the eager ones.)"""
    facts, _ = served(limited_to_one_compile(), [(200, 40), (5, 4), (5, 4), (200, 40)])
    assert facts["compile"] is True and facts["compile_mode"] == "default"
    assert facts["cache_lengths"] == [128, 384] and facts["compiled_cache_lengths"] == [384]
    assert facts["compile_graphs"] == 1
    assert facts["compile_held"] is False
    assert (
        "recompile_limit 1" in facts["compile_fallback"]
        and "at a cache of 128 tokens: 2 batch(es)" in (facts["compile_fallback"])
    )


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("serve_vs_bare", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bare_side_compiles_as_the_engine_does(monkeypatch):
    """The bare generate of the compiled comparison compiles with the engine's compile config: the same Inductor
    mode (no CUDA graph trees, not transformers' default reduce-overhead), static shapes, and on any device (a
    CPU included, where generate would otherwise not compile at all). What generate asks to compile with is
    caught (and the uncompiled call run, so no compile is waited for)."""
    import argparse

    import torch

    from accelbench.serve.engines.base import EngineSettings, Timeline
    from accelbench.serve.engines.static import StaticBatch
    from accelbench.workloads import workload_class

    bench = load_script()
    model = workload_class(MODEL)().build("tiny").eval()
    engine = StaticBatch(StaticBatch.Options(engine_compile=True))
    engine.start(model, torch.device("cpu"), Timeline(), EngineSettings(max_batch=2, longest=8))
    engine.stop()
    asked: list[Any] = []

    def compiled_call(config: Any) -> Any:
        asked.append(config)
        return model.__call__

    monkeypatch.setattr(model, "get_compiled_call", compiled_call)
    args = argparse.Namespace(batch=2, input_tokens=4, output_tokens=3)
    bench.bare_static(model, args, torch.device("cpu"), 2, True)
    assert asked and all(c is not None for c in asked), "the bare side's generate did not compile"
    assert {c.mode for c in asked} == {engine.facts["compile_mode"]} == {"default"}
    assert all(c.to_dict() == engine.generation.compile_config.to_dict() for c in asked)
    asked.clear()
    bench.bare_static(model, args, torch.device("cpu"), 2, False)
    assert asked == []  # uncompiled stays uncompiled


def run_script(tmp_path: Path, engines: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home")}
    args = ["--device", "cpu", "--scale", "tiny", "--precision", "fp32", "--batch", "2", "--input-tokens", "16"]
    args += ["--output-tokens", "4", "--duration", "0.5", "--engines", engines, *extra]
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )


#: the script's line for an engine: both sides' figures and request counts, and the ratio
RATIO = (
    r"^ *{engine}: accelbench [\d,]+ output tokens/s \((VALID|INVALID), (\d+) requests\), "
    r"bare [\d,]+ \((\d+) requests\): [\d.]+x"
)


def test_serve_vs_bare_prints_a_ratio_for_each_engine(tmp_path):
    """The bench script end to end on the CPU, tiny shapes: a line with the ratio for the static and the
    transformers engines, each with the requests counted on both sides."""
    p = run_script(tmp_path, "static,transformers")
    assert p.returncode == 0, p.stderr[-3000:]
    for engine in ("static", "transformers"):
        found = re.search(RATIO.format(engine=engine), p.stdout, re.M)
        assert found, (engine, p.stdout)
        assert int(found.group(2)) > 0 and int(found.group(3)) > 0


@pytest.mark.slow
def test_serve_vs_bare_compiled_states_its_mode_and_its_compile_apart(tmp_path):
    """static-compiled (two compiles of the tiny model, one on each side): the line names the compile mode of both
    sides, the same, and each side's compile seconds, outside the timed window."""
    p = run_script(tmp_path, "static-compiled")
    assert p.returncode == 0, p.stderr[-3000:]
    assert re.search(RATIO.format(engine="static-compiled"), p.stdout, re.M), p.stdout
    said = re.search(r"compile mode: accelbench ([\w-]+), bare ([\w-]+)", p.stdout)
    assert said and said.group(1) == said.group(2) == "default", p.stdout
    apart = r"compile and warm-up apart from the timed window: accelbench [\d.]+ s \(the probe's first batch\), "
    apart += r"bare [\d.]+ s \(its first call\)"
    assert re.search(apart, p.stdout), p.stdout


def test_a_record_whose_compile_fell_back_carries_a_concern() -> None:
    from accelbench.results.record import KINDS, Result
    from accelbench.serve.results import flag_compile_fallback

    held = Result(benchmark="infer/llm", params={}, metrics={})
    flag_compile_fallback(held, {"compile_held": True})
    fell = Result(benchmark="infer/llm", params={}, metrics={})
    flag_compile_fallback(fell, {"compile_held": False, "compile_fallback": "Dynamo's limit was hit at 128 tokens"})
    assert held.concerns == [] and [c.kind for c in fell.concerns] == ["compile-fallback"]
    assert "128 tokens" in fell.warnings[0] and "compile-fallback" in KINDS
