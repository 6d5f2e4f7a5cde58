"""LLM serving (issue 28) through its real parts: the decoder presets against their model cards, MLPerf's TTFT/TPOT
limits against LoadGen's own mlperf.conf, and ``accelbench infer`` on a tiny llama3.1-8b with the real engines
(``static``, ``transformers``) and the real LoadGen in token mode, checked against LoadGen's own summary log.

Timing on a shared 2-core machine. Each run is its own worker process (~8 s of imports, model build and probe before
LoadGen starts), so the runs are made once per module and shared by the tests that read them. A Server run in the
quick profile issues at least 662 requests (``settings.QUICK_TAIL_QUERIES``, LoadGen's early-stopping minimum for a
p99), so a 5-10 requests/s target would take 66-132 s: the Server and interactive runs ask for 80 requests/s (8 s),
which a tiny model with 16-token prompts and 4 output tokens serves with p99 TTFT ~30 ms and TPOT ~7 ms. They run
with ``--threads 1``: with two OpenMP threads on two cores shared with other processes, a parallel region waits for
a descheduled thread and single decode steps stall for 100+ ms (measured: TPOT p99 276 ms at 40 requests/s with
``--threads 2``, 7 ms with ``--threads 1``), which fails the TPOT limit with no late request allowed. Offline runs are
given ``--expected-qps``: planned from the probe, LoadGen's one query can end before ``--duration`` (the probe's
one warm-up batch left the transformers engine cold: its first batches of 8 took 1.7 s, later ones 0.1 s), and the
run would be INVALID for "min duration not met" before its rerun (a rerun costs seconds the tests need not spend).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, stored

from accelbench.errors import UsageError

MODEL = "llama3.1-8b"
OUT = 4  # output tokens per request (ignore_eos: reached exactly)
TINY = ["--scale", "tiny", "--input-tokens", "16", "--output-tokens", str(OUT), "--threads", "1"]
#: LoadGen's one Offline query is 1.1 x expected-qps x duration requests (331): VALID while the engine serves fewer
#: than 3,300 requests/s (the static engine served 880/s here with one thread), 0.4-3 s of serving
OFFLINE = ["--scenario", "offline", "--expected-qps", "3000", "--duration", "0.1"]

#: the shared runs: name -> accelbench infer arguments
RUNS: dict[str, list[str]] = {
    "offline-static": [MODEL, *TINY, *OFFLINE, "--engine", "static"],
    "offline-transformers": [MODEL, *TINY, *OFFLINE, "--engine", "transformers"],
    "server-static": [MODEL, *TINY, "--scenario", "server", "--engine", "static", "--target-qps", "80"],
    "interactive-transformers": [
        MODEL, *TINY, "--scenario", "interactive", "--engine", "transformers", "--target-qps", "80",
    ],
    # the harness alone: LoadGen, the SUT and the null engine's thread
    "null-server": [MODEL, *TINY, "--scenario", "server", "--engine", "null", "--target-qps", "500"],
    "impossible": [
        MODEL, *TINY, "--scenario", "server", "--engine", "null", "--target-qps", "500",
        "--ttft-ms", "0.001", "--tpot-ms", "1000",  # a first token in 1 us: never; a TPOT never out of reach
    ],
}  # fmt: skip
ENGINE_OF = {name: args[args.index("--engine") + 1] for name, args in RUNS.items()}
REAL = ["offline-static", "offline-transformers", "server-static", "interactive-transformers"]
#: what details.limits says for each run's scenario (mlperf.conf llama3_1-8b and llama3_1-8b-interactive)
LIMITS = {"offline": (None, None), "server": (2000, 100), "interactive": (500, 30)}


def scenario_of(name: str) -> str:
    args = RUNS[name]
    return args[args.index("--scenario") + 1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """``served(name)``: the CLI's completed process and the stored record of run ``name``, each run made once (only
    the runs the selected tests read)."""

    root = tmp_path_factory.mktemp("llm")
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(root / "home"), "COLUMNS": "160"}

    @cache
    def run(name: str) -> tuple[subprocess.CompletedProcess[str], Any]:
        db = root / f"{name}.db"
        p = run_cli(["infer", *RUNS[name], "--db", str(db)], env, root)
        records = stored(db)
        assert len(records) == 1, p.stdout + p.stderr
        return p, records[0]

    return run


# 1. presets against their model cards


@pytest.fixture(scope="module")
def counted() -> dict[str, tuple[Any, Any, Any]]:
    """Each preset's full config, its figures (counted on the meta device: 405b takes seconds) and tiny config."""
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    out = {}
    for name, preset in PRESETS.items():
        full = config_of(preset, "full")
        out[name] = (full, figures(full), config_of(preset, "tiny"))
    return out


def test_every_preset_counts_its_published_parameters(counted):
    from accelbench.workloads.decoder import PRESETS

    assert {"llama2-7b", "llama3.1-8b", "llama3.1-405b", "mixtral-8x7b", "gpt-oss-20b"} <= set(PRESETS)
    for name, preset in PRESETS.items():
        _, fig, _ = counted[name]
        assert fig.params == pytest.approx(preset.published_params, rel=0.01), name
        assert fig.active_params <= fig.params and fig.embedding_params > 0, name
        if not preset.moe:
            assert fig.active_params == fig.params, name
    _, mixtral, _ = counted["mixtral-8x7b"]
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.02)
    assert mixtral.active_params < 0.3 * mixtral.params  # 2 of 8 experts a token


def test_gpt_oss_active_parameters_match_the_model_card_without_the_unembedding(counted):
    """OpenAI's gpt-oss model card counts active parameters per token without the unembedding matrix (vocab x
    hidden: 0.58e9 of gpt-oss-20b's counted 4.19e9 active, against the card's 3.6e9), so the figure compared is
    ``active_params - vocab * hidden``; the embedding table itself is a lookup, counted as the card counts it."""
    from accelbench.workloads.decoder import PRESETS

    for name, preset in PRESETS.items():
        if preset.model_type != "gpt_oss":
            continue
        config, fig, _ = counted[name]
        assert not config.tie_word_embeddings, name  # an unembedding of its own, so subtracting it is exact
        without_unembedding = fig.active_params - config.vocab_size * config.hidden_size
        assert without_unembedding == pytest.approx(preset.published_active, rel=0.03), name


def test_tiny_configs_keep_the_architecture(counted):
    from accelbench.workloads.decoder import PRESETS

    for name, preset in PRESETS.items():
        full, _, tiny = counted[name]
        assert tiny.model_type == full.model_type == preset.model_type, name
        assert tiny.hidden_size < full.hidden_size and tiny.num_hidden_layers < full.num_hidden_layers, name
        if full.num_key_value_heads < full.num_attention_heads:  # grouped-query attention kept
            assert tiny.num_key_value_heads < tiny.num_attention_heads, name
        assert tiny.num_attention_heads % tiny.num_key_value_heads == 0, name
        if preset.moe:  # a mixture of experts: the routing kept (the same experts per token, more than that many)
            assert tiny.num_experts_per_tok == full.num_experts_per_tok, name
            assert tiny.num_local_experts > tiny.num_experts_per_tok, name


# 2. MLPerf's limits as LoadGen itself loads them

_FROM_CONFIG = """
import json, sys, mlperf_loadgen as lg
s = lg.TestSettings()
rc = s.FromConfig(sys.argv[1], sys.argv[2], "Server", 1)
print(json.dumps([rc, s.ttft_latency, s.tpot_latency, s.use_token_latencies]))
"""


def test_mlperf_limits_are_what_loadgen_loads_from_its_mlperf_conf(tmp_path):
    """Each (benchmark, scenario) is read in a fresh interpreter: LoadGen reads its embedded mlperf.conf at the first
    ``FromConfig`` of a process only (a second call, for another benchmark, silently returns the defaults:
    100 ms / 100 ms and no token latencies; LoadGen 6.0.17)."""
    from accelbench.serve.limits import MLPERF_LIMITS, mlperf_name
    from accelbench.workloads.decoder import PRESETS

    user_conf = tmp_path / "user.conf"
    user_conf.write_text("")
    for preset in PRESETS.values():  # every preset is served under limits of a benchmark listed here
        assert "server" in MLPERF_LIMITS[preset.mlperf], preset.name
    checked = 0
    for benchmark, scenarios in MLPERF_LIMITS.items():
        for scenario, (ttft_ms, tpot_ms) in scenarios.items():
            name = mlperf_name(benchmark, scenario)
            out = subprocess.run(
                [sys.executable, "-c", _FROM_CONFIG, str(user_conf), name],
                capture_output=True, text=True, check=True, timeout=60,
            )  # fmt: skip
            rc, ttft_ns, tpot_ns, token_latencies = json.loads(out.stdout.strip().splitlines()[-1])
            assert rc == 0 and token_latencies is True, (name, out.stdout)  # mlperf.conf's entry was found
            assert (ttft_ns, tpot_ns) == (int(ttft_ms * 1e6), int(tpot_ms * 1e6)), name
            checked += 1
    assert checked >= 10


# 3 and 6. real engines under LoadGen: ok, valid, the figures, the limits, the engine's facts, the tokens


@pytest.mark.parametrize("name", REAL)
def test_a_tiny_llm_is_served_validly(name, served):
    p, r = served(name)
    scenario = scenario_of(name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert r.status == "ok" and r.valid is True, (r.error, r.details.get("invalid_reasons"))
    assert r.benchmark == "infer/llm" and r.params["model"] == MODEL and r.params["scenario"] == scenario
    assert r.primary_metric == "tokens_per_second" and r.metrics["tokens_per_second"].value > 0
    assert r.metrics["tokens_per_second"].unit == "output tokens/s"
    assert r.metrics["total_tokens_per_second"].value > r.metrics["tokens_per_second"].value
    limits = r.details["limits"]
    assert (limits["ttft_p99_ms"], limits["tpot_p99_ms"]) == LIMITS[scenario]
    if scenario != "offline":
        assert limits["source"].startswith(
            f"mlperf.conf llama3_1-8b{'-interactive' if scenario == 'interactive' else ''}"
        )
        for key in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"):
            assert r.metrics[key].value > 0 and r.metrics[key].unit == "ms", key
        assert r.metrics["ttft_p99_ms"].value <= LIMITS[scenario][0]  # VALID means LoadGen found them within
        assert r.metrics["tpot_p99_ms"].value <= LIMITS[scenario][1]
        assert r.metrics["tokens_per_second_per_user"].value == pytest.approx(1000 / r.metrics["tpot_p50_ms"].value)
        assert r.details["target_qps"] == 80
        assert r.metrics["goodput_requests_per_second"].value > 0
    else:  # LoadGen gives no token latency in Offline: TPOT by the SUT's clock, for the Pareto curve's per-user axis
        assert "ttft_p99_ms" not in r.metrics and r.details["tpot_method"].startswith("the SUT's clock")
        assert 0 < r.metrics["tpot_p50_ms"].value <= r.metrics["tpot_p99_ms"].value
        assert r.metrics["tokens_per_second_per_user"].value == pytest.approx(1000 / r.metrics["tpot_p50_ms"].value)
    engine = r.details["engine"]
    assert engine["engine"] == ENGINE_OF[name]
    if ENGINE_OF[name] == "static":
        assert engine["cache"] == "static" and engine["max_batch"] == 8 and engine["compile"] is False
    else:
        assert engine["page_size"] == 16 and engine["max_requests_per_batch"] == 8
        assert engine["kv_blocks"] > 0 and engine["max_batch_tokens"] > 0
    assert r.details["model"]["params"] > 0 and r.details["probe"]["requests_per_second"] > 0
    # the KV cache: at least one whole request held at its peak, never more than the engine reserved
    assert r.metrics["kv_cache_peak_tokens"].value >= 16 * 0.8 + OUT
    assert 0 < r.metrics["kv_cache_mean_tokens"].value <= r.metrics["kv_cache_peak_tokens"].value
    assert r.metrics["kv_cache_peak_gib"].value == pytest.approx(
        r.metrics["kv_cache_peak_tokens"].value * r.details["model"]["kv_bytes_per_token"] / 2**30
    )
    assert 0 < r.metrics["kv_cache_peak_occupancy"].value <= 1.0
    assert r.metrics["kv_cache_peak_occupancy"].value == pytest.approx(
        r.metrics["kv_cache_peak_tokens"].value / engine["kv_capacity_tokens"]
    )
    # the hardware's limits beside the figure: the host's bandwidth measured, the share and the limit consistent
    roof = r.details["roofline"]
    assert roof["bandwidth_source"].startswith("measured here: STREAM copy") and roof["bandwidth_gbs"] > 0
    share, limit = r.metrics["decode_bandwidth_utilization"].value, r.metrics["decode_limit_tokens_per_second"].value
    assert 0 < share <= 100 and limit > r.metrics["tokens_per_second"].value
    assert 1 <= roof["requests_in_flight"] <= 8
    assert roof["kv_tokens_in_flight"] <= r.metrics["kv_cache_peak_tokens"].value
    assert roof["bytes_per_decode_step"] > r.details["model"]["params"] * 4 * 0.5  # fp32 weights, most of them
    assert 0 < r.metrics["prefill_flops_utilization"].value < 100


@pytest.mark.parametrize("name", [*REAL, "null-server"])
def test_each_request_gets_exactly_the_output_tokens_asked(name, served):
    """ignore_eos: every request generates --output-tokens, whatever the engine (static decodes a batch to its
    longest request; continuous batching stops each request on its own)."""
    _, r = served(name)
    assert r.params["output_tokens"] == OUT and r.params["input_tokens"] == 16
    assert r.details["requests"] > 0
    assert r.details["output_tokens"] == r.details["requests"] * OUT
    assert r.details["input_tokens"] == 16 * r.details["requests"]  # every prompt as long as asked (no jitter)
    if scenario_of(name) != "offline":
        assert r.details["requests"] >= 662  # the quick profile's minimum for a Server p99


# 4. an impossible limit


def test_an_impossible_limit_is_invalid_with_exit_3_and_named(served):
    p, r = served("impossible")
    assert p.returncode == 3, p.stdout + p.stderr
    assert r.status == "ok" and r.valid is False
    assert r.details["limits"]["ttft_p99_ms"] == 0.001 and r.details["limits"]["tpot_p99_ms"] == 1000
    assert r.details["limits"]["source"] == "--ttft-ms and --tpot-ms"
    reasons = r.details["invalid_reasons"]
    assert any(re.search(r"\bTTFT constraint not met", why) for why in reasons), reasons
    assert any(w.startswith("INVALID:") for w in r.warnings)


def test_an_offline_run_held_to_a_tpot_limit_is_judged_on_its_p99() -> None:
    from accelbench.serve.limits import limits_for, offline_tpot_reason

    held = limits_for(MODEL, "llama3_1-8b", True, "offline", 0.0, 50.0)
    assert (held.ttft_p99_ms, held.tpot_p99_ms) == (None, 50.0) and "fixed concurrency" in held.source
    assert offline_tpot_reason(held, 49.9) is None
    assert "p99 TPOT 50.1 ms over the 50 ms --tpot-ms" in (offline_tpot_reason(held, 50.1) or "")
    # a Server run's limits are LoadGen's to judge, and an Offline run without --tpot-ms has none
    assert offline_tpot_reason(limits_for(MODEL, "llama3_1-8b", True, "server", 0.0, 50.0), 99.0) is None
    assert offline_tpot_reason(limits_for(MODEL, "llama3_1-8b", True, "offline", 0.0, 0.0), 99.0) is None
    with pytest.raises(UsageError, match="--tpot-ms alone to offline"):
        limits_for(MODEL, "llama3_1-8b", True, "offline", 5.0, 50.0)
    with pytest.raises(UsageError, match="not singlestream"):
        limits_for(MODEL, "llama3_1-8b", True, "singlestream", 0.0, 50.0)


# 5. the record's figures are LoadGen's own


def _summary(log_dir: str) -> dict[str, float]:
    text = (Path(log_dir) / "mlperf_log_summary.txt").read_text()
    patterns = {
        "ttft_p99_ns": r"^99\.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
        "tpot_p99_ns": r"^99\.00 percentile time to output token \(ns\)\s*:\s*(\d+)",
        "ttft_p50_ns": r"^50\.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
        "tokens_per_second": r"^(?:Completed tokens|Tokens) per second\s*:\s*([0-9.eE+]+)",
    }
    found = {}
    for key, pattern in patterns.items():
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            found[key] = float(m.group(1))
    return found


@pytest.mark.parametrize("name", REAL)
def test_the_record_s_token_figures_are_loadgen_s_summary(name, served):
    _, r = served(name)
    s = _summary(r.details["loadgen_log_dir"])
    assert r.metrics["tokens_per_second"].value == pytest.approx(s["tokens_per_second"], rel=1e-4, abs=0.01)
    if scenario_of(name) == "offline":
        return
    assert r.metrics["ttft_p99_ms"].value == pytest.approx(s["ttft_p99_ns"] / 1e6, abs=1e-6)
    assert r.metrics["tpot_p99_ms"].value == pytest.approx(s["tpot_p99_ns"] / 1e6, abs=1e-6)
    assert r.metrics["ttft_p50_ms"].value == pytest.approx(s["ttft_p50_ns"] / 1e6, abs=1e-6)


# 8. the harness alone


def test_the_null_engine_holds_a_high_server_target_validly(served):
    p, r = served("null-server")
    assert p.returncode == 0, p.stdout + p.stderr
    assert r.status == "ok" and r.valid is True, r.details.get("invalid_reasons")
    assert r.details["engine"] == {"engine": "null"} and "model" not in r.details  # no model built
    assert r.details["target_qps"] == 500
    assert r.metrics["completed_requests_per_second"].value > 250  # half the target: a stalled harness is far below
    assert r.metrics["tokens_per_second"].value == pytest.approx(
        OUT * r.metrics["completed_requests_per_second"].value, rel=0.05
    )


# 7. bad input: one line, exit 2, no traceback

BAD = [
    (["infer", "llama3-8b"], "did you mean 'llama3.1-8b'"),
    (["infer", MODEL, "--output-tokens", "1"], "--output-tokens must be at least 2"),
    (["infer", MODEL, "--output-tokens", "0"], "--output-tokens must be at least 2, got 0"),  # never "the default"
    (["infer", MODEL, "--input-tokens", "0"], "--input-tokens must be at least 1, got 0"),
    (["infer", MODEL, "--ttft-ms", "-1"], "--ttft-ms must not be negative"),
    (["infer", MODEL, "--engine", "nope"], "unknown engine 'nope'"),
    (["infer", "resnet50", "--input-tokens", "8"], "--input-tokens applies to language models"),
    (["infer", "resnet50", "--scenario", "interactive"], "interactive is MLPerf's category for language models"),
    (["infer", MODEL, "--scenario", "multistream"], "served in offline, server, interactive and singlestream"),
    (["infer", MODEL, "--backend", "onnxruntime"], "--backend applies to models served a batch at a time"),
    (
        ["infer", "mixtral-8x7b", "--scenario", "interactive", "--scale", "tiny", "--engine", "null"],
        "give both --ttft-ms and --tpot-ms",
    ),
    (["infer", MODEL, "--prompts", "qa.jsonl"], "--prompts needs --checkpoint DIR"),
    (["infer", MODEL, "--source", "file", "--chat-template", "maybe"], "--chat-template is auto, on or off"),
    (["infer", MODEL, "--engine", "null", "--engine-compile"], "--engine-compile applies to the"),
    (["infer", MODEL, "--chat-template", "off"], "--chat-template applies to the file, conversations prompt sources"),
    (
        ["infer", MODEL, "--scenario", "offline", "--ttft-ms", "5", "--scale", "tiny", "--engine", "null"],
        "apply to the server and interactive scenarios",
    ),
]


@pytest.mark.parametrize("args, message", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_bad_llm_input_is_one_line_exit_2(args, message, cli_env, tmp_path):
    p = run_cli([*args, "--db", str(tmp_path / "bad.db")], cli_env, tmp_path)
    assert "Traceback" not in p.stderr + p.stdout
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert message in lines[0]


def test_a_preset_too_big_for_the_machine_is_skipped_with_what_it_needs():
    """A full llama2-70b (138 GB in fp32) is refused before it is built; its tiny scale fits anywhere."""
    import torch

    from accelbench.serve.memory import too_big
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    cpu, preset = torch.device("cpu"), PRESETS["llama2-70b"]
    why = too_big(LLMServeParams(model="llama2-70b"), figures(config_of(preset, "full")), cpu)
    assert why is not None and "GiB of weights (fp32)" in why and "--scale tiny" in why
    assert too_big(LLMServeParams(model="llama2-70b", scale="tiny"), figures(config_of(preset, "tiny")), cpu) is None


#: an engine whose speed changes after the probe (its three calls: a batch, a warm-up that agrees, one request)
PACED = """
import time

from accelbench.serve.engines.base import NullEngine


class Paced(NullEngine):
    name = "paced"
    calls = 0

    def serve(self, batch):
        Paced.calls += 1
        time.sleep({probe} if Paced.calls <= 3 else {run})
        super().serve(batch)
"""


def paced_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: float, run: float, duration: str) -> Any:
    """An Offline token run of an engine that sleeps ``probe`` s a batch while probed and ``run`` s after.

    In this process's CLI: the worker (forked by the runner's server) takes this process's ``sys.path``, the test's
    folder first, and imports its own ``paced`` module (this process's copy of another test's is dropped)."""
    (tmp_path / "paced.py").write_text(PACED.format(probe=probe, run=run))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "paced", raising=False)
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home")}
    args = [MODEL, *TINY, "--scenario", "offline", "--duration", duration, "--engine", "paced:Paced"]
    p = run_cli(["infer", *args, "--json", "--db", str(tmp_path / "r.db")], env, tmp_path)
    return json.loads(p.stdout)["results"][0]


def test_a_token_run_that_disagrees_with_its_plan_is_rerun_from_what_it_measured(tmp_path, monkeypatch):
    """Planned from a slow probe, Offline runs out of requests before its minimum duration; the run is repeated
    from its own measurement, reported VALID, with the first run's reason in the record."""
    r = paced_run(tmp_path, monkeypatch, 0.2, 0.02, "1")  # the probe at a tenth of the run's speed
    assert r["valid"] is True, r["warnings"]
    reruns = r["details"]["reruns"]
    assert reruns and "the probe planned" in reruns[0]["why"]
    assert reruns[0]["probe_repeated"]["samples_per_second"] > 5 * reruns[0]["probe"]["samples_per_second"]
    assert r["warnings"][0].startswith("rerun: the first run disagreed with its plan")


def test_a_compiled_static_engine_sees_few_shapes():
    """Compiling, every batch is filled to --batch-size rows and its prompt width and output length rounded up to
    a bucket: jittered prompts give one compiled shape, not one per batch (each a compile of seconds)."""
    from accelbench.serve.engines.base import EngineSettings, TokenRequest
    from accelbench.serve.engines.static import BUCKET, OUTPUT_BUCKET, shape

    sizes = (([3], 5), ([40, 9], 16))
    batches = [[TokenRequest(i, i, [1] * n, out) for i, n in enumerate(lens)] for lens, out in sizes]
    settings = EngineSettings(max_batch=8)
    assert [shape(b, settings, False) for b in batches] == [(1, 3, 5), (2, 40, 16)]
    assert {shape(b, settings, True) for b in batches} == {(8, BUCKET, OUTPUT_BUCKET)}


def test_a_checkpoint_run_is_its_folders_model_by_its_label_its_path_and_its_size(cli_env, tmp_path):
    """The folder's model, whatever the preset's name: the label names the checkpoint (not "tiny"), the record
    keeps its absolute path, --scale (which shrinks a preset) is refused, and compare sets two models of other
    sizes apart by their counted parameters."""
    from llm_server import make_checkpoint

    from accelbench.results.judge import unlike
    from accelbench.results.record import Result
    from accelbench.serve.specs import LLMServeParams

    make_checkpoint(tmp_path / "ck")
    (tmp_path / "folder").mkdir()
    plan = run_cli(["infer", MODEL, "--checkpoint", "ck", "--dry-run", "--json"], cli_env, tmp_path)
    assert plan.returncode == 0, plan.stderr
    [row] = json.loads(plan.stdout)
    assert row["params"]["checkpoint"] == str((tmp_path / "ck").absolute())
    assert LLMServeParams.describe(row["params"] | {"scale": "tiny"}).endswith(" checkpoint ck")
    for args, said in (
        (["--scale", "tiny"], "--scale tiny shrinks a preset; a --checkpoint folder is its own model: drop --scale"),
        (["--prompts", "folder"], f"prompt file {tmp_path / 'folder'} is a folder: give a JSONL or ShareGPT"),
    ):
        p = run_cli(["infer", MODEL, "--checkpoint", "ck", *args, "--dry-run"], cli_env, tmp_path)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and said in p.stderr

    def served(params: int) -> Result:
        return Result("infer/loadgen", {"model": MODEL, "scale": "full"}, details={"model": {"params": params}})

    assert unlike(served(121_024), served(8_030_261_248)) == ["unlike models: 1.21e+05 vs 8.03e+09 parameters"]
    assert unlike(served(121_024), served(121_024)) == []


BUILD_PEAK = """
import resource, sys, torch
from accelbench.workloads.decoder import PRESETS, config_of
from accelbench.workloads import workload_class

config = config_of(PRESETS["llama3.1-8b"], "full")
config.num_hidden_layers, config.vocab_size = 1, 32000  # full widths: one layer, a smaller vocabulary
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
model = workload_class("llama3.1-8b")().build("full", "cpu", torch.bfloat16, config)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
weights = sum(p.numel() for p in model.parameters())
print(before, after, weights, {str(p.dtype) for p in model.parameters()})
"""


def test_a_full_width_decoder_is_built_in_its_served_precision_without_an_fp32_copy():
    """The weights are drawn in bf16 where they live: the build's peak memory is the bf16 weights (plus slack),
    well under the fp32 copy (twice as large) an fp32-then-cast build would peak at."""
    p = subprocess.run([sys.executable, "-c", BUILD_PEAK], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    before, after, weights, dtypes = p.stdout.split(maxsplit=3)
    grew, bf16, fp32 = int(after) - int(before), int(weights) * 2, int(weights) * 4
    assert dtypes.strip() == "{'torch.bfloat16'}"
    assert grew < 1.25 * bf16 < fp32, (grew / 2**30, bf16 / 2**30)


def test_the_static_engine_compiles_only_when_asked():
    """transformers compiles a static-cache generate by itself on accelerators: accelbench turns that off unless
    --engine-compile is given, and the record says which."""
    import torch

    from accelbench.serve.engines.base import EngineSettings, Timeline
    from accelbench.serve.engines.static import StaticBatch
    from accelbench.workloads import workload_class

    model = workload_class(MODEL)().build("tiny").eval()
    for compile in (False, True):
        engine = StaticBatch(StaticBatch.Options(engine_compile=compile))
        engine.start(model, torch.device("cpu"), Timeline(), EngineSettings(max_batch=2, longest=8))
        engine.stop()
        assert engine.generation.disable_compile is (not compile) and engine.facts["compile"] is compile
        assert engine.facts.get("compile_mode") == ("default" if compile else None)  # no graph trees off-thread


@pytest.mark.parametrize("probed, requests", [(0.34, 16), (4.0, 120), (100.0, 662)])
def test_a_quick_server_run_is_sized_to_about_a_minute_of_its_planned_rate(probed, requests):
    """A slow server's long answers (0.34 requests/s probed, half of it planned) are 16 requests, not LoadGen's
    662 for an early-stopping p99 (an hour); a fast one keeps the 662; the official profile keeps mlperf.conf's."""
    from accelbench.loadgen import settings as lgset
    from accelbench.serve.limits import limits_for
    from accelbench.serve.loadgen import settings_for
    from accelbench.serve.specs import LLMServeParams

    params = LLMServeParams.of(model=MODEL, scenario="server", engine="endpoint", url="http://127.0.0.1:1")
    from accelbench.workloads.decoder import PRESETS

    limits = limits_for(MODEL, PRESETS[MODEL].mlperf, True, "server", 0, 0)
    s = settings_for(params, limits, PRESETS[MODEL].mlperf, lgset.Probe(probed, 1.0), 64)
    assert s.min_query_count == requests
    assert lgset.planned_seconds(s, "server", probed) <= 120
    strict = replace(params, profile="official")
    official = settings_for(strict, limits, PRESETS[MODEL].mlperf, lgset.Probe(probed, 1.0), 64)
    assert official.min_query_count == lgset.base(strict, strict.mode, PRESETS[MODEL].mlperf).min_query_count


def test_a_preset_that_needs_several_gpus_is_refused_with_how_many_and_the_route(monkeypatch):
    """llama3.1-405b in bf16 (756 GiB of weights) on one 80 GiB GPU: the count of such devices it needs and the way
    to serve it across them; an 8B model fits, and one whose KV cache alone overflows is told to shrink the batch."""
    import math

    import torch

    from accelbench.devices.base import DeviceKind
    from accelbench.serve import memory as mem
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    class Gpu80(DeviceKind):
        accelerator = True

        def total_memory(self, device):  # type: ignore[no-untyped-def]
            return 80 * 2**30

        def record_name(self, device=None):  # type: ignore[no-untyped-def]
            return "cuda:0"

    monkeypatch.setattr(mem, "kind_of", lambda device: Gpu80())
    big = figures(config_of(PRESETS["llama3.1-405b"], "full"), 2)
    why = mem.too_big(LLMServeParams(model="llama3.1-405b", precision="bf16"), big, torch.device("cpu"))
    weights = big.params * 2
    assert why is not None and f"{weights / 2**30:.1f} GiB of weights (bf16)" in why
    devices = int(why.split("it needs ")[1].split()[0])
    assert devices >= math.ceil(weights / (80 * 2**30)) and "--engine endpoint --url" in why
    assert f"--tensor-parallel-size {devices}" in why
    small = figures(config_of(PRESETS["llama3.1-8b"], "full"), 2)
    assert mem.too_big(LLMServeParams(model="llama3.1-8b", precision="bf16"), small, torch.device("cpu")) is None
    crowded = LLMServeParams(model="llama3.1-8b", precision="bf16", batch_size=4096, input_tokens=8192)
    why = mem.too_big(crowded, small, torch.device("cpu"))
    assert why is not None and "lower --batch-size" in why and "GiB of KV cache for 4096 requests" in why


def test_a_server_run_that_fell_behind_shows_what_it_completed_and_names_the_scheduled_rate():
    """LoadGen scheduled 22.0 requests/s and the engine completed 14.6: the record's requests/s is the completed
    rate, the scheduled one stands beside it under its own name, and each figure names its LoadGen field."""
    from accelbench.serve.results import figure_sources, token_metrics

    detail = {
        "result_scheduled_samples_per_sec": 22.03,
        "result_completed_samples_per_sec": 14.61,
        "result_completed_tokens_per_second": 172.3,
        "result_first_token_99.00_percentile_latency_ns": 8.1e9,
    }
    metrics, primary = token_metrics("server", detail, 1)
    assert primary == "tokens_per_second" and metrics["tokens_per_second"].value == 172.3
    assert metrics["requests_per_second"].value == 14.61
    assert metrics["scheduled_requests_per_second"].value == 22.03
    sources = figure_sources("server", detail)
    assert sources["requests_per_second"].startswith("LoadGen's result_completed_samples_per_sec")
    assert sources["scheduled_requests_per_second"].startswith("LoadGen's result_scheduled_samples_per_sec")
    kept, _ = token_metrics("server", detail | {"result_completed_samples_per_sec": 22.0}, 1)
    assert "scheduled_requests_per_second" not in kept  # within 1%: one figure, not two


def test_an_offline_run_far_under_its_probe_is_rerun_from_what_it_measured(tmp_path, monkeypatch):
    """LoadGen calls the first run VALID, but it measured a tenth of its probe: it is rerun after a repeated probe,
    and the record keeps why (the trial's 452.7 tokens/s after a probe of 3,952 was reported VALID)."""
    r = paced_run(tmp_path, monkeypatch, 0.005, 0.05, "0.2")  # the probe at ten times the run's speed
    reruns = r["details"]["reruns"]
    assert reruns and "its probe measured: the system's speed changed during the run" in reruns[0]["why"]
    assert reruns[0]["probe_repeated"]["samples_per_second"] < 0.5 * reruns[0]["probe"]["samples_per_second"]
    assert r["valid"] is True, r["details"].get("invalid_reasons")  # the rerun agreed with the repeated probe


def test_an_offline_run_still_far_under_its_probe_after_the_reruns_is_invalid_with_the_cause():
    from accelbench.loadgen import replan
    from accelbench.loadgen.settings import Probe
    from accelbench.serve.specs import LLMServeParams

    params = LLMServeParams(model=MODEL, scale="tiny", scenario="offline", engine="null")
    detail = {"result_validity": "VALID", "result_samples_per_second": 14.0}
    wrong = replan.below_probe(detail, params, Probe(123.5, 0.01))
    assert wrong is not None and "under 50% of the 123.50 its probe measured" in wrong.why
    assert replan.below_probe(detail, params, Probe(27.0, 0.01)) is None  # within a factor of two: the verdict
    assert replan.below_probe(detail | {"result_validity": "INVALID"}, params, Probe(123.5, 0.01)) is None


def test_a_tpot_limit_no_rate_can_meet_is_skipped_after_the_probe(tmp_path):
    """--tpot-ms 0.0001 against an engine whose tokens take milliseconds, one request alone: skipped with what the
    probe measured, in seconds, not a Server test of minutes that ends INVALID."""
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home")}
    args = [MODEL, *TINY, "--scenario", "server", "--engine", "static", "--ttft-ms", "10000", "--tpot-ms", "0.0001"]
    p = run_cli(["infer", *args, "--json", "--db", str(tmp_path / "r.db")], env, tmp_path)
    r = json.loads(p.stdout)["results"][0]
    assert r["status"] == "skipped", r
    assert r["reason"].startswith("the TPOT limit (0.0001 ms, --ttft-ms and --tpot-ms) is out of reach: one request")


def test_a_cpu_engine_leaves_a_core_to_loadgen_when_no_threads_are_asked(tmp_path):
    """On a CPU the engine computes on every usable core but one (two threads on two cores ran the tiny model at
    a third of one thread's speed, LoadGen and the SUT's threads fighting for the cores); --threads overrides.
    The threads are chosen before LoadGen starts, so the module's short Offline plan (OFFLINE) shows it as well."""
    from accelbench.system.cpu import usable_cores

    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home")}
    args = [MODEL, "--scale", "tiny", "--input-tokens", "16", "--output-tokens", str(OUT), *OFFLINE]
    p = run_cli(["infer", *args, "--engine", "static", "--json", "--db", str(tmp_path / "r.db")], env, tmp_path)
    r = json.loads(p.stdout)["results"][0]
    assert r["status"] == "ok", r.get("error")
    assert r["params"]["threads"] == max(1, usable_cores() - 1)
    assert r["details"]["threads_method"].startswith("no --threads: every usable core but one")
