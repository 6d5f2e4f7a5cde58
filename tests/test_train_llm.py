"""Decoder training (train/llm, accelbench/train/llm): the MFU arithmetic by hand, FSDP2 over two gloo ranks, LoRA,
checkpointing, gradient accumulation, the out-of-memory path, bad input and which benchmark takes which model."""

from __future__ import annotations

import math

import pytest
import torch

from accelbench.cli.main import main
from accelbench.errors import UsageError
from accelbench.results.judge import SET_ASIDE
from accelbench.results.store import Store
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline
from accelbench.train.llm.flops import TrainFlops, of_config
from accelbench.train.llm.specs import LLMTrainParams
from accelbench.train.specs import TrainParams
from accelbench.workloads.decoder import PRESETS, config_of

QUICK = {"scale": "tiny", "warmup": 1, "num_batches": 4, "display_every": 2, "threads": 2, "device": "cpu"}


def test_llama31_8b_flops_per_token_at_8192_by_hand():
    """torchtitan's count written out: 6 x the non-embedding matmul parameters + 6 x L x H x (qk + v) x T."""
    hidden, ffn, layers, heads, kv_heads, head_dim, vocab = 4096, 14336, 32, 32, 8, 128, 128256
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    mlp = 3 * hidden * ffn  # gate, up, down
    matmul = layers * (attention + mlp) + vocab * hidden  # the output projection is a matmul; the embedding is not
    assert matmul == 7_504_658_432
    attention_term = 6 * layers * heads * (head_dim + head_dim) * 8192
    assert attention_term == 12_884_901_888

    f = of_config(config_of(PRESETS["llama3.1-8b"], "full"), 8192)
    assert f.matmul_params == matmul and f.frozen_params == 0
    assert f.per_token() == 6 * matmul + attention_term == 57_912_852_480
    assert f.per_token(causal=True) == 6 * matmul + attention_term / 2  # Megatron's, MaxText's
    # at torchtitan's published 8B figure of about 6,000 tokens/s per H100 that is ~347 TFLOPS: 35% of 989.5
    assert 6000 * f.per_token() / 1e12 == pytest.approx(347.5, abs=0.1)


def test_a_mixture_of_experts_counts_only_the_experts_a_token_routes_through():
    config = config_of(PRESETS["mixtral-8x7b"], "full")
    f = of_config(config, 4096)
    experts = 32 * 8 * 3 * 4096 * 14336
    dense = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 8) + 32000 * 4096  # attention, router; output
    assert f.matmul_params == dense + experts * 2 // 8


def test_sliding_window_layers_attend_within_their_window():
    f = TrainFlops(0, 0, layers=2, heads=1, qk_head_dim=1, v_head_dim=1, seq_len=100, windows=(10, 0))
    assert f.context(causal=False) == 10 + 100
    # causal: a token at position i sees min(i + 1, 10) in the sliding layer, half the sequence in the full one
    assert f.context(causal=True) == pytest.approx(sum(min(i + 1, 10) for i in range(100)) / 100 + 50)


def test_lora_counts_the_frozen_base_at_four_flops_per_parameter():
    f = TrainFlops(1000, 900, layers=0, heads=0, qk_head_dim=0, v_head_dim=0, seq_len=1)
    assert f.per_token() == 6 * 100 + 4 * 900


def test_gradient_accumulation_gives_the_gradients_of_the_whole_batch():
    """Two micro-batches of 4, each loss halved, accumulate to the gradient of one batch of 8."""
    from accelbench.kit.step import TrainStep

    torch.manual_seed(0)
    x, y = torch.randn(8, 5), torch.randn(8, 1)
    grads = []
    for chunks in (1, 2):
        model = torch.nn.Linear(5, 1)
        torch.nn.init.constant_(model.weight, 0.5)
        torch.nn.init.zeros_(model.bias)
        step = TrainStep(torch.optim.SGD(model.parameters(), lr=0.0), torch.device("cpu"), "fp32")
        parts = list(zip(x.chunk(chunks), y.chunk(chunks), strict=True))
        loss = step.accumulate([lambda a=a, b=b, m=model: torch.nn.functional.mse_loss(m(a), b) for a, b in parts])
        grads.append((model.weight.grad.clone(), float(loss)))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-6)
    assert grads[0][1] == pytest.approx(grads[1][1], rel=1e-6)


@pytest.mark.slow  # several runs end to end: in CI's second pytest step (pytest -m slow)
def test_fsdp_over_two_gloo_ranks_and_the_scaling_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ACCELBENCH_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    args = ["train", "llama3.1-8b", "--scale", "tiny", "--nproc", "1,2", "--num-batches", "4", "--warmup", "1"]
    code = main([*args, "--display-every", "2", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0, out
    table = out[out.index("scaling over devices") :]
    stored = Store(tmp_path / "accelbench.db").query()
    records = {r.params["nproc"]: r.to_dict() for r in stored}
    # a speedup from two fit runs; from a short run (few samples) or a noisy one, none, and why (its rule)
    fit = not any(r.has(*SET_ASIDE) for r in stored)
    assert "llama3.1-8b" in table and ("1.00x" in table if fit else "not computed: " in table), table
    one, two = records[1], records[2]
    for r in (one, two):
        m = r["metrics"]
        assert r["status"] == "ok" and m["throughput"]["unit"] == "tokens/s"
        tokens = r["params"]["global_batch_tokens"]
        assert tokens == 8 * 128 * r["params"]["nproc"]  # micro-batch 8 of 128 tokens on each rank
        assert m["throughput"]["value"] == pytest.approx(tokens / m["step_seconds"]["value"])
        assert 0 < m["mfu"]["value"] <= 100 and m["mfu_causal"]["value"] < m["mfu"]["value"]
        flops = r["details"]["flops"]
        assert m["tflops"]["value"] == pytest.approx(m["throughput"]["value"] * flops["per_token"] / 1e12)
        assert m["peak_memory_bytes"]["value"] > 0 and math.isfinite(r["details"]["final_loss"])
    assert two["params"]["sharding"] == "fsdp" and one["params"]["sharding"] == "none"
    layout = two["details"]["layout"]
    assert layout["strategy"] == "fsdp" and "2 ranks" in layout["mesh"]
    assert layout["params_per_rank"] == pytest.approx(layout["params"] / 2, rel=0.01)  # each rank holds half
    # two ranks on one CPU are one device: the per-device figure is the whole, the MFU against that one CPU's peak
    # (counted on both ranks' threads), not twice it
    assert two["details"]["devices"] == 1 and two["details"]["world_size"] == 2
    assert two["metrics"]["throughput_per_device"]["value"] == pytest.approx(two["metrics"]["throughput"]["value"])
    peak = two["details"]["peak"]["value"]
    assert two["metrics"]["mfu"]["value"] == pytest.approx(100 * two["metrics"]["tflops"]["value"] / peak, rel=1e-3)
    from accelbench.system.specs import peak_for

    whole = peak_for(torch.device("cpu"), "fp32", two["params"]["threads"] * 2)  # its clock is timed anew: +-10%
    assert whole is not None and peak == pytest.approx(whole.tflops, rel=0.1)
    assert two["details"]["backend"] == "gloo"


def test_lora_checkpointing_and_accumulation_on_one_device():
    params = {"model": "llama3.1-8b", "lora": 8, "precision": "amp_bf16", "activation_checkpointing": "selective"}
    [r] = run_inline(make_entry("train/llm", params | {"grad_accum": 2, "emulated": True, **QUICK}))
    assert r.status == "ok", r.error
    layout, flops = r.details["layout"], r.details["flops"]
    assert 0 < layout["trainable_params"] < layout["params"] / 10  # only the adapters train
    assert flops["frozen_params"] > 0 and "LoRA" in flops["convention"]
    assert r.params["global_batch_size"] == 16 and r.params["global_batch_tokens"] == 16 * 128
    assert r.benchmark == "train/llm" and r.params["optimizer"] == "adamw"  # stated, though no flag chooses it


def test_state_that_cannot_fit_is_skipped_with_what_it_needs():
    [r] = run_inline(make_entry("train/llm", {**QUICK, "model": "llama3.1-405b", "scale": "full"}))
    assert r.status == "skipped"
    assert "GiB per device" in r.reason and "--sharding fsdp" in r.reason


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"seq_len": 20000}, "exceeds llama3.1-8b's 16384 positions"),
        ({"global_batch": 6, "nproc": 2, "grad_accum": 2}, "not divisible by devices x --grad-accum"),
        ({"global_batch": 8, "nproc": 2, "batch_size": "2"}, "disagree"),
        ({"sharding": "fsdp"}, "add --nproc"),
        ({"layers": 3}, "exceeds llama3.1-8b's 2 decoder layers"),
        ({"lora": 4, "precision": "fp8"}, "--lora with --precision fp8"),
        ({"batch_size": "auto"}, "--batch-size auto"),
        ({"batch_size": "lots"}, "positive integer or 'default'"),
        ({"compile_mode": "max-autotune"}, "needs --compile"),
        ({"display_every": 5, "num_batches": 4}, "must not exceed"),
    ],
)
def test_bad_decoder_input_is_one_line(extra, words):
    with pytest.raises(UsageError, match=words):
        make_entry("train/llm", {"model": "llama3.1-8b", "scale": "tiny"} | extra)


@pytest.mark.parametrize("name", ["workers", "data_only", "channels_last", "optimizer", "max_batch_size"])
def test_what_only_other_models_take_is_no_parameter_of_decoder_training(name):
    with pytest.raises(UsageError, match=f"train/llm has no parameter '{name}'"):
        make_entry("train/llm", {"model": "llama3.1-8b", name: 1})


def test_each_training_benchmark_takes_its_own_models_and_refuses_the_others_in_one_line():
    assert LLMTrainParams.takes_model("llama3.1-8b") and LLMTrainParams.takes_model("mixtral-8x7b")
    assert not LLMTrainParams.takes_model("resnet50") and TrainParams.takes_model("resnet50")
    assert not TrainParams.takes_model("llama3.1-8b")
    with pytest.raises(UsageError, match="resnet50 is not a decoder preset.*train/throughput"):
        LLMTrainParams(model="resnet50").validate()
    with pytest.raises(UsageError, match="decoder, trained by the benchmark train/llm: use accelbench train"):
        TrainParams(model="llama3.1-8b").validate()
    with pytest.raises(UsageError, match="did you mean"):
        LLMTrainParams(model="llama3.1-8c").validate()


def test_fp8_on_a_device_without_it_is_refused():
    with pytest.raises(UsageError, match="float8 training"):
        LLMTrainParams(model="llama3.1-8b", precision="fp8").check_environment("cpu")


def test_a_decoder_record_reads_as_before_and_states_its_optimizer():
    """The words a decoder's record is described by are those train/throughput gave it (the docs' examples)."""
    from accelbench.registry import describe_params

    p = {"model": "llama3.1-8b", "batch_size": 8, "nproc": 2, "seq_len": 128, "sharding": "fsdp", "scale": "tiny"}
    p["device"] = "cuda:0"  # ranks of an accelerator each have a device; on a CPU they share one (test_serving_labels)
    assert describe_params("train/llm", p) == "llama3.1-8b bs=8/device fp32 x2 devices seq=128 fsdp tiny"
    p = {"model": "llama3.1-8b", "batch_size": 8, "precision": "amp_bf16", "seq_len": 128, "grad_accum": 2}
    p |= {"activation_checkpointing": "selective", "lora": 8, "scale": "tiny", "compile": True}
    words = "llama3.1-8b bs=8/device amp_bf16 compile seq=128 accum=2 ac=selective lora=8 tiny"
    assert describe_params("train/llm", p) == words


def test_the_report_shows_a_decoders_mfu_beside_its_causal_figure():
    from accelbench.kit import metrics as fig
    from accelbench.report.perf import _of_peak
    from accelbench.results.record import Result

    r = Result("train/llm", {"model": "llama3.1-8b"})
    r.metrics |= {"mfu": fig.figure(41.2, "%", higher_is_better=True)}
    r.metrics |= {"mfu_causal": fig.figure(38.5, "%", higher_is_better=True)}
    assert _of_peak(r, False) == "41.2% (38.5% causal)"
    other = Result("train/throughput", {"model": "resnet50"})
    other.metrics["pct_of_peak"] = fig.figure(12.0, "%", higher_is_better=True)
    assert _of_peak(other, True) == "12.0% (est.)"


@pytest.mark.parametrize("name", ["llama3.1-8b", "mixtral-8x7b", "gpt-oss-20b"])
def test_every_tensor_of_a_meta_built_preset_is_initialised_after_to_empty(name):
    """model.materialise allocates the (sharded) tensors uninitialised and relies on transformers' init_weights to
    fill every parameter and buffer (the rotary tables, the experts, gpt-oss's sinks): memory left as it was would
    train on garbage."""
    from accelbench.train.llm import model as llm_model

    params = LLMTrainParams(model=name, scale="tiny")
    model = llm_model.build(params, llm_model.config_for(params))
    model.to_empty(device="cpu")
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            t.fill_(float("nan"))
        model.init_weights()
    assert [n for n, t in [*model.named_parameters(), *model.named_buffers()] if torch.isnan(t).any()] == []


def test_without_transformers_the_quick_suite_loads_and_decoder_training_is_skipped(monkeypatch):
    """`pip install . && accelbench run` (no llm extra) crashed building the quick suite: checking a decoder's
    shape imported transformers. Now the entry is built and its run is skipped with what to install."""
    import importlib.util

    from accelbench.suite.suites import builtin_suite
    from accelbench.train.llm.run import missing_library

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a)
    )
    entries = [e for e in builtin_suite("quick").entries if e.params.get("model") == "llama3.1-8b"]
    assert "train/llm" in {e.benchmark for e in entries}
    params = LLMTrainParams(model="llama3.1-8b", scale="tiny")
    assert missing_library(params) == "transformers is not installed (pip install 'accelbench[llm]')"


@pytest.mark.parametrize("num_batches, window", [(12, 2), (100, 10), (59, 9), (3, 1)])
def test_the_default_window_leaves_enough_windows_for_an_interval(num_batches, window):
    from accelbench.measure.stats import MIN_CI_SAMPLES
    from accelbench.train.llm.specs import window_of

    params = LLMTrainParams(model="llama3.1-8b", scale="tiny", num_batches=num_batches)
    assert window_of(params) == window == params.window
    assert num_batches // window >= min(MIN_CI_SAMPLES, num_batches)
    assert window_of(LLMTrainParams(model="llama3.1-8b", scale="tiny", num_batches=12, display_every=12)) == 12


def test_twelve_batches_measure_an_interval_and_an_explicit_window_is_kept():
    quick = {**QUICK, "num_batches": 12}
    quick.pop("display_every")
    [r] = run_inline(make_entry("train/llm", {"model": "llama3.1-8b", **quick}))
    assert r.status == "ok", r.error
    assert r.params["display_every"] == 2 and r.details["windows"] == 6
    assert r.metrics[r.primary_metric].ci95 is not None
    assert not r.has("few-samples"), r.warnings
    [kept] = run_inline(make_entry("train/llm", {"model": "llama3.1-8b", **quick, "display_every": 4}))
    assert kept.params["display_every"] == 4 and kept.details["windows"] == 3
