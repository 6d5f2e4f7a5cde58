"""The CUDA paths: run only where a GPU is present (skipped with the reason elsewhere).

On a GPU each case must produce what the GPU can produce: ``ok`` wherever the
device's capability says the variant runs, ``skipped`` only where
:func:`accelbench.devices.precision.unsupported_reason` names a reason. A test that
accepted ``skipped`` everywhere would pass on a GPU while checking nothing.
"""

import importlib.util

import pytest
import torch

from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA not available here)"),
]
FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 6, "warmup_time": 0.01, "device": "cuda"}


def _expected(precision: str) -> str:
    from accelbench.devices.precision import unsupported_reason

    return "skipped" if unsupported_reason(torch.device("cuda"), precision) else "ok"


@pytest.mark.parametrize(
    "name, params",
    [
        ("kernels/gemm", {"m": 1024, "n": 1024, "k": 1024, "precision": p, "graph": True})
        for p in ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
    ]
    + [
        ("kernels/conv", {"phase": "fwd_bwd", "layout": "nhwc", "precision": "fp16"}),
        ("kernels/rnn", {"phase": "fwd_bwd", "precision": "fp16"}),
        ("kernels/attention", {"phase": "fwd_bwd", "causal": True, "precision": "bf16"}),
        ("kernels/sparse", {"m": 1024, "n": 1024, "k": 1024, "density": 0.5, "format": "semi24", "precision": "fp16"}),
        ("kernels/membw", {"size": "256M"}),
    ],
)
def test_kernels_on_cuda(name, params):
    [r] = run_inline(make_entry(name, {**params, **FAST}))
    assert r.status == _expected(params.get("precision", "fp32")), (r.error, r.reason)
    if r.status != "ok":
        return
    assert r.details["clock"] == "cuda_event" and r.details["cache"] == "cold"
    if importlib.util.find_spec("pynvml"):  # the [nvidia] extra: clocks and the window's throttling counters
        gpu = r.conditions["gpu"]
        assert gpu.get("sm_clock_mhz") and "throttled_fraction" in gpu, gpu
    seconds = r.metrics["seconds"].value
    assert 1e-7 < seconds < 1.0, seconds  # events bracketed the work, not an idle stream
    if params.get("graph"):
        assert "graph_seconds" in r.metrics, r.warnings
        assert r.metrics["graph_seconds"].value <= seconds * 1.5


def test_event_time_agrees_with_wall_time_for_a_long_kernel():
    """A kernel of tens of milliseconds: CUDA events and the host clock around a synchronise agree."""
    import time

    from accelbench.measure.timer import Timer, TimerConfig

    a = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        a @ a
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 5
    m = Timer(lambda: a @ a, "cuda", TimerConfig(cache="hot", min_time=0.2)).measure()
    assert m.median == pytest.approx(wall, rel=0.25), (m.median, wall)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="all-reduce over NCCL needs 2 GPUs")
def test_allreduce_over_nccl(tmp_path):
    [r] = run_inline(make_entry("kernels/allreduce", {"nproc": 2, "sizes": "1M", "device": "cuda"}), tmp_path)
    assert r.status == "ok" and r.params["backend"] == "nccl", r.error
    assert r.metrics["busbw_gbps"].value > 1.0


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp_fp16", "amp_bf16", "bf16"])
def test_training_on_cuda(precision):
    params = {"model": "resnet18", "batch_size": "32", "precision": precision, "warmup": 2, "num_batches": 6}
    [r] = run_inline(make_entry("train/throughput", {**params, "display_every": 3, "device": "cuda"}))
    peak = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16", "amp_bf16": "bf16", "bf16": "bf16"}[precision]
    assert r.status == _expected(peak), (r.error, r.reason)
    if r.status == "ok":
        assert r.details["clock"] == "cuda_event" and r.metrics["peak_memory_bytes"].value > 0
        assert r.metrics["throughput"].value > 0


def test_fp32_is_not_silently_tf32():
    """cuBLAS and cuDNN each have a TF32 switch; an fp32 figure as fast as TF32 would mean the mode leaked."""
    from accelbench.devices.precision import unsupported_reason

    if unsupported_reason(torch.device("cuda"), "tf32"):
        pytest.skip("this GPU has no TF32")
    shape = {"m": 4096, "n": 4096, "k": 4096}
    [fp32] = run_inline(make_entry("kernels/gemm", {**shape, **FAST, "precision": "fp32"}))
    [tf32] = run_inline(make_entry("kernels/gemm", {**shape, **FAST, "precision": "tf32"}))
    assert fp32.status == tf32.status == "ok", (fp32.error, tf32.error)
    assert tf32.metrics["tflops"].value > 1.5 * fp32.metrics["tflops"].value


def test_int8_semi_structured_sparse_runs_or_says_why():
    from accelbench.devices.precision import unsupported_reason

    if torch.cuda.get_device_capability() < (8, 0) or unsupported_reason(torch.device("cuda"), "int8"):
        pytest.skip("2:4 sparsity needs compute capability 8.0+")
    params = {"m": 1024, "n": 1024, "k": 1024, "density": 0.5, "format": "semi24", "precision": "int8", **FAST}
    [r] = run_inline(make_entry("kernels/sparse", params))
    # ok, or skipped with the reason: cuSPARSELt refuses the int8 product (seen on an H100 with torch 2.11:
    # "operation not supported"), or it runs and writes an int8 output that wraps around
    assert (
        r.status == "ok"
        or (r.status == "skipped" and r.reason.startswith("semi24 sparse int8 on cuda"))
        or (r.status == "skipped" and "wraps around" in r.reason)
    ), (r.error, r.reason)


def test_long_attention_is_checked_on_a_slice_that_fits():
    """Llama-sized 8k-token attention: the fp64 reference of the whole problem would need ~70 GB."""
    params = {"batch": 4, "heads": 32, "seq_len": 8192, "head_dim": 128, "precision": "bf16", "causal": True, **FAST}
    [r] = run_inline(make_entry("kernels/attention", params))
    assert r.status == "ok", r.error
    assert r.details["relative_error"] < 0.05


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_timing_on_the_second_gpu_brackets_its_own_stream():
    """Without torch.cuda.set_device, events on cuda:0's stream would time an idle stream."""
    shape = {"m": 4096, "n": 4096, "k": 4096, "precision": "fp16", **FAST}
    [first] = run_inline(make_entry("kernels/gemm", {**shape, "device": "cuda:0"}))
    [second] = run_inline(make_entry("kernels/gemm", {**shape, "device": "cuda:1"}))
    assert first.status == second.status == "ok" and second.params["device"] == "cuda:1"
    ratio = second.metrics["seconds"].value / first.metrics["seconds"].value
    assert 0.5 < ratio < 2.0, ratio


def _infer(params: dict) -> list:
    base = {"model": "resnet18", "scale": "tiny", "duration": 1.0, "batch_size": 8, "device": "cuda"}
    return run_inline(make_entry("infer/loadgen", base | params))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_inference_on_two_gpus_serves_from_both():
    [r] = _infer({"nproc": 2})
    assert r.status == "ok", r.error
    assert r.details["samples_per_worker"][0] > 0 and r.details["samples_per_worker"][1] > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_inference_on_cuda_1_records_the_device_it_served_on():
    [r] = _infer({"device": "cuda:1"})
    assert r.status == "ok" and r.params["device"] == "cuda:1", r.error


def test_onnx_runtime_on_a_gpu_runs_on_its_gpu_provider_or_says_how_to_get_it():
    pytest.importorskip("onnxruntime")
    import onnxruntime as ort

    [r] = _infer({"backend": "onnxruntime"})
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert r.status == "ok", (r.error, r.reason)
    else:
        assert r.status == "skipped" and "accelbench[onnx-gpu]" in r.reason
    [q] = _infer({"backend": "int8"})
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        assert q.status == "skipped" and "TensorRT" in q.reason


def test_training_with_cuda_graphs_through_compile():
    """torch.compile's reduce-overhead mode replays CUDA graphs: a small batch must train, and not slower than eager."""
    base = {"model": "resnet18", "scale": "tiny", "batch_size": "8", "warmup": 5, "num_batches": 20, "device": "cuda"}
    [eager] = run_inline(make_entry("train/throughput", {**base, "display_every": 5}))
    graphs = {**base, "display_every": 5, "compile": True, "compile_mode": "reduce-overhead"}
    [r] = run_inline(make_entry("train/throughput", graphs))
    assert eager.status == "ok" and r.status == "ok", (eager.error, r.error)
    assert r.params["compile_mode"] == "reduce-overhead"
    assert r.metrics["throughput"].value > 0.8 * eager.metrics["throughput"].value


def test_tensorrt_serves_from_its_own_provider():
    ort = pytest.importorskip("onnxruntime")
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime has no TensorRT provider (onnxruntime-gpu with TensorRT)")
    [r] = _infer({"backend": "tensorrt", "precision": "fp16"})
    assert r.status == "ok", (r.error, r.reason)
    assert r.details["backend"]["provider"] == "TensorrtExecutionProvider"


def test_real_data_decoded_on_the_gpu(tmp_path):
    """--decode cuda (and auto, on a GPU) decodes the batch's JPEGs with nvJPEG; cpu stays with PIL in the workers.
    nvJPEG's pixels agree with the CPU decoder's to within JPEG's rounding."""
    import numpy as np
    from PIL import Image
    from torchvision.io import decode_jpeg, read_file
    from train_fixtures import image_folders

    data = image_folders(tmp_path / "imgs", per_class=16, size=(320, 240))
    # a photo-like image (smooth, as photos are: on pure noise the decoders' rounding differs by ~13 levels)
    y, x = np.mgrid[0:240, 0:320]
    smooth = np.stack([x * 255 // 320, y * 255 // 240, (x + y) * 255 // 560], axis=-1).astype(np.uint8)
    Image.fromarray(smooth).save(tmp_path / "smooth.jpg", quality=90)
    jpeg = read_file(str(tmp_path / "smooth.jpg"))
    on_gpu, on_cpu = decode_jpeg([jpeg], device="cuda")[0].cpu().float(), decode_jpeg(jpeg).float()
    assert on_gpu.shape == on_cpu.shape == (3, 240, 320) and (on_gpu - on_cpu).abs().mean() < 2.0
    base = {"model": "resnet18", "scale": "tiny", "batch_size": "16", "warmup": 2, "num_batches": 8, "device": "cuda"}
    base |= {"display_every": 2, "data": "real", "data_dir": str(data), "workers": 2}
    runs = {d: run_inline(make_entry("train/throughput", {**base, "decode": d}))[0] for d in ("cuda", "auto", "cpu")}
    assert all(r.status == "ok" for r in runs.values()), {d: r.error for d, r in runs.items()}
    assert runs["cuda"].details["pipeline"]["decode"].startswith("nvJPEG on cuda")
    assert runs["auto"].details["pipeline"]["decode"].startswith("nvJPEG on cuda")
    assert runs["cpu"].details["pipeline"]["decode"].startswith("PIL")
    assert all(0 <= r.metrics["input_wait_share"].value <= 100 for r in runs.values())


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers (accelbench[llm])")
@pytest.mark.parametrize("engine", ["transformers", "static"])
@pytest.mark.parametrize("scenario", ["offline", "server"])
def test_a_language_model_serves_tokens_on_cuda(engine, scenario):
    """A tiny llama3.1-8b in bf16, token by token on the GPU: LoadGen's tokens/s and TPOT in the record (TTFT in
    Server: Offline issues every request at once, so its TTFT is not recorded), not compiled unless asked."""
    params = {"model": "llama3.1-8b", "scale": "tiny", "scenario": scenario, "engine": engine}
    r = _infer(params | {"precision": "bf16", "output_tokens": 16, "batch_size": 16})[0]
    assert r.status == "ok", r.error
    assert r.params["device"].startswith("cuda") and r.metrics["tokens_per_second"].value > 0
    assert r.metrics["tpot_p99_ms"].value > 0
    assert ("ttft_p99_ms" in r.metrics) == (scenario == "server")
    assert r.details["engine"]["engine"] == engine and r.details["engine"]["compile"] is False


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers (accelbench[llm])")
def test_a_language_model_s_bf16_tokens_keep_fp32_s_decided_tokens_on_cuda():
    """Accuracy mode on the GPU: bf16's greedy tokens against FP32's, a verdict (not 'uninformative') that holds."""
    params = {"model": "llama3.1-8b", "scale": "tiny", "scenario": "offline", "engine": "static", "mode": "accuracy"}
    r = _infer(params | {"precision": "bf16", "output_tokens": 16, "input_tokens": 32})[0]
    assert r.status == "ok", r.error
    assert "uninformative" not in r.details, r.details.get("uninformative")
    assert r.valid is True and r.metrics["decided_token_agreement"].value >= 0.99, r.details["token_fidelity"]


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers (accelbench[llm])")
def test_a_compiled_static_engine_serves_on_cuda():
    """--engine-compile on the GPU: compiled in the probe's first batch, then VALID Offline tokens/s."""
    params = {"model": "llama3.1-8b", "scale": "tiny", "scenario": "offline", "engine": "static"}
    r = _infer(params | {"precision": "bf16", "output_tokens": 16, "batch_size": 16, "engine_compile": True})[0]
    assert r.status == "ok", r.error
    assert r.details["engine"]["compile"] is True and r.details["probe"]["first_batch_seconds"] > 0
    assert r.details["engine"]["compile_mode"] == "default"  # Inductor, no CUDA graph trees off the main thread
    assert r.valid is True and r.metrics["tokens_per_second"].value > 0


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (pip install 'accelbench[vllm]')")
def test_vllm_serves_a_preset_on_cuda(tmp_path):
    """vLLM's CUDA build, through the CLI (vLLM spawns its engine core: a process with a __main__ guard), on its
    own dummy weights for the tiny preset; skipped only if its attention refuses the preset's head size."""
    import json
    import os
    import subprocess
    import sys

    args = ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "vllm", "--precision", "bf16", "--json"]
    env = dict(os.environ) | {"ACCELBENCH_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-m", "accelbench", *args, "--device", "cuda"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    [r] = json.loads(p.stdout)["results"]
    if r["status"] == "skipped":
        assert "head" in r["reason"], r["reason"]
        return
    assert r["status"] == "ok" and r["valid"] is True, r.get("error") or r["warnings"]
    assert r["details"]["engine"]["engine"] == "vllm" and r["metrics"]["tokens_per_second"]["value"] > 0


@pytest.mark.parametrize("precision", ["amp_bf16", "fp8"])
def test_a_real_size_decoder_slice_trains_with_an_mfu_on_cuda(precision):
    """llama3.1-8b at its full widths, 2 of its 32 layers, at 8192 tokens: a real-size shard of the model on one
    GPU; its MFU against the H100's dense peak must be a fraction of it, never above."""
    if precision == "fp8" and importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (fp8 training is skipped with this reason by accelbench too)")
    params = {"model": "llama3.1-8b", "layers": 2, "seq_len": 8192, "batch_size": "1", "precision": precision}
    [r] = run_inline(make_entry("train/llm", params | {"warmup": 2, "num_batches": 6, "display_every": 2,
                                                       "device": "cuda"}))  # fmt: skip
    if precision == "fp8" and _expected("fp8") == "skipped":
        assert r.status == "skipped"
        return
    assert r.status == "ok", r.error or r.reason
    assert r.metrics["throughput"].unit == "tokens/s" and r.params["global_batch_tokens"] == 8192
    if "mfu" in r.metrics:  # fp8 has an MFU only where the spec table knows the device's fp8 peak
        assert 0 < r.metrics["mfu"].value <= 100
    assert r.metrics["peak_memory_bytes"].value > 0 and r.metrics["peak_reserved_bytes"].value > 0


def test_a_decoder_that_runs_out_of_memory_is_a_failed_record_with_what_to_change():
    """128 sequences of 32768 tokens through a full-width llama3.1-8b layer cannot fit an 80 GB GPU: the
    record says what the state needs and what to change; the process goes on."""
    params = {"model": "llama3.1-8b", "layers": 1, "seq_len": 32768, "batch_size": "128", "precision": "amp_bf16"}
    [r] = run_inline(make_entry("train/llm", params | {"warmup": 1, "num_batches": 1, "device": "cuda"}))
    assert r.status == "failed" and "out of memory" in r.error
    assert "GiB per device" in r.error and "--activation-checkpointing full" in r.error
