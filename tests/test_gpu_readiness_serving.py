"""Serving a language model as it will run on the next GPU, checked on this CPU (issue 54): Offline plans of whole
batches, RoPE buffers kept in FP32 at a rounding precision, memory checks against free device memory with the
copies alive at the peak, and tensor-parallel advice a server accepts."""

from __future__ import annotations

from typing import Any

import pytest

MODEL = "llama3.1-8b"


# -- Offline plans whole batches ---------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["static", "transformers", "endpoint"])
@pytest.mark.parametrize("batch", [8, 64])
@pytest.mark.parametrize("probed", [0.7, 52.0, 69.4, 1003.3])
def test_an_offline_token_run_plans_whole_batches(engine, batch, probed):
    """A last partial batch costs nearly a full one's time: the planned query is the fewest whole batches that cover
    LoadGen's own plan (and the engine's floor), never 229 requests at batch 8."""
    from accelbench.loadgen import settings as lgset
    from accelbench.serve.engines.base import engine_class
    from accelbench.serve.limits import limits_for
    from accelbench.serve.loadgen import settings_for
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS

    extra: dict[str, Any] = {"url": "http://127.0.0.1:1"} if engine == "endpoint" else {}
    params = LLMServeParams.of(model=MODEL, scale="tiny", scenario="offline", engine=engine, batch_size=batch, **extra)
    limits = limits_for(MODEL, PRESETS[MODEL].mlperf, True, "offline", 0, 0)
    s = settings_for(params, limits, PRESETS[MODEL].mlperf, lgset.Probe(probed, 0.1), 64)
    issued = lgset.loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, s.min_query_count)
    assert issued == s.min_query_count  # LoadGen issues exactly the planned count
    assert issued % batch == 0, issued
    covered = max(
        lgset.loadgen_offline_size(s.offline_expected_qps, s.min_duration_ms, 1),
        engine_class(engine).min_requests(params),
    )
    assert covered <= issued < covered + 1 + batch


# -- RoPE's frequencies stay FP32 at a rounding precision -----------------------------------------------------------


def _served(tmp_path: Any, how: str) -> Any:
    """A tiny llama3.1-8b in bf16 as ``build_model`` serves it: drawn in bf16, drawn in FP32 and rounded (accuracy
    mode), or read from a checkpoint folder."""
    import torch

    from accelbench.serve.run import build_model
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads import workload_class

    cpu = torch.device("cpu")
    if how == "checkpoint":
        folder = tmp_path / "ckpt"
        workload_class(MODEL)().build("tiny", cpu, torch.float32).save_pretrained(folder)
        params = LLMServeParams.of(model=MODEL, scale="tiny", precision="bf16", checkpoint=str(folder))
    else:
        params = LLMServeParams.of(model=MODEL, scale="tiny", precision="bf16", mode=how)
    return build_model(params, cpu)[0]


@pytest.mark.parametrize("how", ["performance", "accuracy", "checkpoint"])
def test_a_bf16_served_decoder_keeps_its_rope_frequencies_in_fp32(how, tmp_path):
    """Rounded to bf16, RoPE's frequencies turn each position's rotation by up to 0.9 rad at position 512: the
    parameters are rounded, the frequencies are FP32's own, and the record's list names them."""
    import torch

    from accelbench.workloads import workload_class
    from accelbench.workloads.decoder import fp32_buffers

    model = _served(tmp_path, how)
    reference = workload_class(MODEL)().build("tiny", "cpu", torch.float32)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    rope, exact = model.model.rotary_emb, reference.model.rotary_emb
    assert rope.inv_freq.dtype == torch.float32 and torch.equal(rope.inv_freq, exact.inv_freq)
    assert torch.equal(rope.original_inv_freq, exact.original_inv_freq)
    assert fp32_buffers(model) == ["model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"]


def test_the_served_bf16_logits_are_those_of_transformers_own_bf16_model_far_into_the_context():
    """Past 600 positions a bf16-rounded RoPE moves the logits; the model accelbench serves computes exactly what the
    same weights built in bf16 by transformers compute (its RoPE in FP32)."""
    import torch

    from accelbench.serve.run import build_model
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads import workload_class

    served = build_model(LLMServeParams.of(model=MODEL, scale="tiny", precision="bf16"), torch.device("cpu"))[0]
    own = workload_class(MODEL)().build("tiny", "cpu", torch.bfloat16).eval()
    ids = torch.randint(1, served.config.vocab_size, (1, 640), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        got, want = served(ids).logits, own(ids).logits
    assert torch.equal(got, want)
    positions = torch.arange(640)[None]
    x = torch.zeros(1, dtype=torch.bfloat16)
    for a, b in zip(served.model.rotary_emb(x, positions), own.model.rotary_emb(x, positions), strict=True):
        assert torch.equal(a, b)


# -- memory checks: free memory, the copies alive at the peak, headroom stated ---------------------------------------

GIB = 2**30


def _gpu(monkeypatch: Any, total: int, free: int | None) -> None:
    """The run's device kind, answered as a GPU of ``total`` bytes with ``free`` bytes free (None: a kind that cannot
    read its free memory)."""
    from accelbench.devices.base import DeviceKind
    from accelbench.serve import memory

    class Gpu(DeviceKind):
        accelerator = True

        def total_memory(self, device):  # type: ignore[no-untyped-def]
            return total

        def record_name(self, device=None):  # type: ignore[no-untyped-def]
            return "cuda:0"

    if free is not None:
        Gpu.free_memory = lambda self, device: free  # type: ignore[method-assign]
    monkeypatch.setattr(memory, "kind_of", lambda device: Gpu())


def _refusal(model: str, **given: Any) -> str | None:
    import torch

    from accelbench.serve.memory import too_big
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    config = config_of(PRESETS[model], "full")
    params = LLMServeParams.of(model=model, precision="bf16", **given)
    return too_big(params, figures(config, 2), torch.device("cpu"), config)


def test_llama3_1_8b_accuracy_at_batch_64_is_accepted_on_an_80_gib_gpu(monkeypatch):
    """The FP32 reference and its rounded twin (2 x 32 GB) are dropped before the bf16 copy and the batch's KV cache
    are made: the peak is about 66 GiB, not the 91 GiB of every copy and the cache counted together."""
    _gpu(monkeypatch, 80 * GIB, 78 * GIB)
    assert _refusal("llama3.1-8b", mode="accuracy", batch_size=64) is None


def test_accuracy_mode_counts_its_fp32_reference_phase():
    """The reference phase is two FP32 copies of the weights and its own batch, and it is the peak at batch 64."""
    from accelbench.serve.memory import memory_need
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    config = config_of(PRESETS["llama3.1-8b"], "full")
    model = figures(config, 2)
    need = memory_need(LLMServeParams.of(model="llama3.1-8b", precision="bf16", mode="accuracy"), model, config)
    assert 2 * model.params * 4 < need.reference < 3 * model.params * 4  # two copies, and never the served one
    assert need.peak == need.reference > need.serving > need.weights + need.cache
    plain = memory_need(LLMServeParams.of(model="llama3.1-8b", precision="bf16"), model, config)
    assert plain.reference == 0 and plain.peak == plain.serving == need.serving


def test_a_gpu_whose_memory_others_hold_is_refused_though_its_total_would_do(monkeypatch):
    """llama3.1-8b bf16 at batch 64 needs about 39 GiB: an 80 GiB GPU with 30 GiB free (another process holds the
    rest) refuses it with both figures and the headroom it counted; with 79 GiB free it is served."""
    _gpu(monkeypatch, 80 * GIB, 30 * GIB)
    why = _refusal("llama3.1-8b", batch_size=64)
    assert why is not None and "cuda:0 has 30.0 GiB free of 80.0 GiB" in why
    assert "1.0 GiB of headroom" in why and "prefill activations" in why and "lower --batch-size" in why
    _gpu(monkeypatch, 80 * GIB, 79 * GIB)
    assert _refusal("llama3.1-8b", batch_size=64) is None


def test_the_headroom_is_counted_against_what_is_free(monkeypatch):
    """A need that fits the free memory only without the headroom is refused."""
    from accelbench.serve.memory import HEADROOM_BYTES, memory_need
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    config = config_of(PRESETS["llama3.1-8b"], "full")
    peak = memory_need(LLMServeParams.of(model="llama3.1-8b", precision="bf16"), figures(config, 2), config).peak
    _gpu(monkeypatch, 80 * GIB, peak + HEADROOM_BYTES // 2)
    assert _refusal("llama3.1-8b") is not None
    _gpu(monkeypatch, 80 * GIB, peak + HEADROOM_BYTES)
    assert _refusal("llama3.1-8b") is None


# -- tensor-parallel advice vLLM accepts -----------------------------------------------------------------------------


@pytest.mark.parametrize("free", [80 * GIB, None])
@pytest.mark.parametrize("model", ["llama3.1-70b", "llama2-70b", "llama3.1-405b", "mixtral-8x7b", "gpt-oss-120b"])
@pytest.mark.parametrize("batch", [1, 64, 512])
def test_multi_gpu_advice_names_a_tensor_parallel_size_vllm_accepts(monkeypatch, model, batch, free):
    """vLLM splits the attention heads evenly across the group and splits, or replicates, the KV heads: the size
    advised is the smallest such size that holds the weights and cache in vLLM's 90% of each 80 GiB device."""
    import math

    from accelbench.serve.memory import VLLM_MEMORY_SHARE, memory_need
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    _gpu(monkeypatch, 80 * GIB, free)
    why = _refusal(model, batch_size=batch)
    assert why is not None
    size = int(why.split("--tensor-parallel-size ")[1].split(",")[0])
    assert f"it needs {size} such devices" in why
    config = config_of(PRESETS[model], "full")
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    assert heads % size == 0 and (kv % size == 0 if size < kv else size % kv == 0), size
    need = memory_need(LLMServeParams.of(model=model, precision="bf16", batch_size=batch), figures(config, 2), config)
    least = math.ceil((need.weights + need.cache) / (VLLM_MEMORY_SHARE * 80 * GIB))
    assert size >= least and not any(
        heads % s == 0 and (kv % s == 0 if s < kv else s % kv == 0) for s in range(least, size)
    )
    assert size not in (3, 5, 6, 7, 9, 10, 11, 12)


# -- end to end: the record ------------------------------------------------------------------------------------------


def test_a_bf16_offline_record_served_whole_batches_and_names_its_fp32_buffers(cli_env, tmp_path):
    """A real run of the static engine: LoadGen's one Offline query is whole batches of --batch-size, and the record
    names the buffers served in FP32 beside the bf16 weights."""
    import json

    from conftest import run_cli

    args = ["infer", MODEL, "--scale", "tiny", "--precision", "bf16", "--scenario", "offline", "--engine", "static"]
    args += ["--batch-size", "4", "--input-tokens", "16", "--output-tokens", "4", "--duration", "0.5", "--threads", "1"]
    p = run_cli([*args, "--json", "--db", str(tmp_path / "a.db")], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    (result,) = json.loads(p.stdout)["results"]
    assert result["details"]["requests"] % 4 == 0, result["details"]["requests"]
    assert result["details"]["fp32_buffers"] == ["model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"]


def test_a_cuda_kind_reads_free_memory_not_total(monkeypatch: Any) -> None:
    """The memory check reads what is free now (CUDA's mem_get_info), where the device's total would overstate it."""
    import torch

    from accelbench.devices.base import DeviceKind
    from accelbench.devices.cuda import CudaKind

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (30 * 2**30, 80 * 2**30))
    assert CudaKind().free_memory(torch.device("cuda", 0)) == 30 * 2**30
    assert DeviceKind().free_memory(torch.device("cpu")) is None
