"""The XLA device kind against the real PyTorch/XLA on the host (``PJRT_DEVICE=CPU``): run by ``.ci/xla`` in an
environment of its own (torch 2.9.0 + torch_xla 2.9.0); in the main environment only the "not installed" case.

Each case asserts what XLA must produce: an ``ok`` record on the ``xla`` device, timed by cutting a graph per
call (a burst traced whole would fold calls that write the same output into one).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from accelbench.errors import UsageError
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

HAVE_XLA = importlib.util.find_spec("torch_xla") is not None
needs_xla = pytest.mark.skipif(
    not HAVE_XLA and not os.environ.get("ACCELBENCH_REQUIRE_XLA"),
    reason="torch_xla is not installed here (bash .ci/xla builds an environment with it and runs these tests)",
)
XLA = {"device": "xla", "threads": 2}


@pytest.mark.skipif(HAVE_XLA, reason="torch_xla is installed: the device exists")
def test_without_torch_xla_the_device_says_why():
    from accelbench.devices import resolve_device
    from accelbench.devices.kind import by_name

    kind = by_name("xla")
    assert kind is not None and "torch_xla not installed" in (kind.unavailable() or "")
    assert not kind.auto()
    with pytest.raises(UsageError, match="torch_xla not installed"):
        resolve_device("xla")


@needs_xla
def test_the_xla_device_is_found_and_never_picked_by_auto_on_the_host_runtime():
    from accelbench.devices import resolve_device
    from accelbench.devices.kind import by_name

    kind = by_name("xla")
    assert kind is not None and kind.unavailable() is None and kind.count() >= 1
    device = resolve_device("xla")
    assert device.type == "xla" and kind.label(device) == "XLA on CPU"
    assert resolve_device("auto").type == "cpu"  # XLA's host device is a test stand-in, not an accelerator


@needs_xla
def test_a_gemm_on_xla_is_timed_one_graph_per_call(tmp_path):
    [r] = run_inline(
        make_entry("kernels/gemm", {"m": 256, "n": 256, "k": 256, "min_time": 0.05, "max_time": 1.0, **XLA}), tmp_path
    )
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.metrics["tflops"].value > 0
    # a 256^3 fp32 GEMM on two host cores: far below a TFLOPS (calls folded into one would read many times more)
    assert r.metrics["tflops"].value < 1.0
    # the one graph compiled in the warm-up, counted apart; none compiled while samples were taken
    assert r.details["compiles"]["warmup_graphs"] >= 1 and r.details["compiles"]["window_graphs"] == 0
    assert not any(w.startswith("recompiled") for w in r.warnings)


@needs_xla
def test_training_on_xla_stores_a_record_and_counts_compilation_apart(tmp_path):
    """SGD's first step creates its momentum buffers, so the second step is a new graph: with two warm-up steps
    every graph compiles in the warm-up; with one, the second compiles inside the measured windows and the
    record says so."""
    params = {"model": "resnet18", "scale": "tiny", "num_batches": 3, "display_every": 1}
    [r] = run_inline(make_entry("train/throughput", params | {"batch_size": "4", "warmup": 2, **XLA}), tmp_path)
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.metrics["throughput"].value > 0
    assert r.details["clock"] == "perf_counter_ns+xla_synchronize"
    c = r.details["compiles"]
    assert c["warmup_graphs"] >= 2 and c["warmup_compile_seconds"] > 0 and c["window_graphs"] == 0, c
    assert not any(w.startswith("recompiled") for w in r.warnings)

    # another batch size (graphs this process has not compiled yet) with one warm-up step
    [short] = run_inline(make_entry("train/throughput", params | {"batch_size": "2", "warmup": 1, **XLA}), tmp_path)
    assert short.status == "ok", short.error or short.reason
    assert short.details["compiles"]["window_graphs"] >= 1
    assert any(w.startswith("recompiled") for w in short.warnings), short.warnings


@needs_xla
def test_fp32_on_xla_multiplies_at_fp32_not_in_one_bf16_pass():
    """XLA's default matmul precision rounds FP32 operands to bf16 on a TPU; fp32 sets it to ``highest``."""
    import torch_xla.backends as xb

    from accelbench.devices import resolve_device
    from accelbench.devices.precision import set_numeric_mode

    mode = set_numeric_mode(resolve_device("xla"), "fp32")
    assert mode["xla_mat_mul_precision"] == "highest" == xb.get_mat_mul_precision()


@needs_xla
def test_a_loadgen_offline_run_on_xla_is_valid(tmp_path):
    """Under the real LoadGen; XLA's tensors cannot be inference tensors, so serving runs under the kind's
    no_grad there (inference_mode failed: "Cannot set version_counter for inference tensor")."""
    params = {"model": "resnet18", "scale": "tiny", "scenario": "offline", "batch_size": 8}
    [r] = run_inline(make_entry("infer/loadgen", params | XLA), tmp_path)
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.valid and r.metrics["throughput"].value > 0


@needs_xla
def test_the_answers_served_on_xla_are_the_host_fp32_ones(tmp_path):
    """The accuracy mode against the FP32 reference of the same weights. It read 12% agreement while the
    synthetic samples were drawn on the XLA device: torch.manual_seed does not seed XLA's generator, so each
    request drew a different input (and took minutes). Samples are drawn on the host now."""
    params = {"model": "resnet18", "scale": "tiny", "scenario": "offline", "batch_size": 8, "mode": "accuracy"}
    [a] = run_inline(make_entry("infer/loadgen", params | XLA), tmp_path)
    assert a.status == "ok", a.error or a.reason
    assert a.metrics["fp32_agreement"].value >= 0.99


@needs_xla
def test_a_convolution_kernel_on_xla(tmp_path):
    params = {"w": 14, "h": 14, "c": 16, "n": 2, "k": 16, "min_time": 0.05, "max_time": 1.0}
    [r] = run_inline(make_entry("kernels/conv", params | XLA), tmp_path)
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.details["compiles"]["window_graphs"] == 0


@needs_xla
def test_time_to_accuracy_on_xla_reaches_the_digits_target(tmp_path):
    """The tta loop cuts a graph per training step, as on a TPU; the evaluation all runs through the seam."""
    [r] = run_inline(make_entry("tta/time_to_target", {"workload": "digits", "seeds": 1, "seed": 1} | XLA), tmp_path)
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.details["seeds"][0]["converged"]


@needs_xla
def test_a_decoder_preset_trains_on_xla_without_recompiling_in_the_window(tmp_path):
    """The LLM presets' training on XLA (transformers' Llama, tokens/s): the decoder's graphs compile in the warm-up
    (two steps: the optimizer's state is created by the first), none inside the measured windows."""
    if not os.environ.get("ACCELBENCH_REQUIRE_XLA"):  # .ci/xla installs the llm extra: there it must run
        pytest.importorskip("transformers")
    params = {"model": "llama3.1-8b", "scale": "tiny", "num_batches": 3, "display_every": 1, "warmup": 2}
    [r] = run_inline(make_entry("train/llm", params | {"batch_size": "2", **XLA}), tmp_path)
    assert r.status == "ok", r.error or r.reason
    assert r.params["device"].startswith("xla") and r.metrics["throughput"].unit == "tokens/s"
    assert r.details["compiles"]["warmup_graphs"] >= 2 and r.details["compiles"]["window_graphs"] == 0
    assert not any(w.startswith("recompiled") for w in r.warnings)


def test_several_xla_ranks_are_refused_in_one_line_not_launched():
    """Several ranks on XLA need PJRT's launcher or an xla:// rendezvous, which the rank launcher does not do (and
    the host runtime cannot run collectives across processes: tried under torchrun, each process read world size
    1): one line saying so, before anything starts, whether or not torch_xla is installed."""
    from accelbench.kit.ranks import check_nproc, nproc_reason

    assert "not supported yet" in (nproc_reason(2, "xla") or "")
    with pytest.raises(UsageError, match="--nproc 2 --nnodes 1 on xla: several XLA ranks"):
        check_nproc(2, "xla")
    with pytest.raises(UsageError, match="--nproc 1 --nnodes 2 on xla"):  # one rank on each of two nodes
        check_nproc(1, "xla", 2)
    assert nproc_reason(1, "xla") is None or "not supported" not in nproc_reason(1, "xla")


@needs_xla
def test_the_runtime_torch_xla_picks_itself_is_not_a_stray_log_line(tmp_path):
    """Without PJRT_DEVICE torch_xla picks a runtime and says so on the root logger ('WARNING:root:Defaulting to
    PJRT_DEVICE=CPU'), above a one-line refusal; the runtime is in the record's device label instead."""
    env = {k: v for k, v in os.environ.items() if k != "PJRT_DEVICE"}
    code = (
        "import logging; from accelbench.devices.xla import XlaKind; k = XlaKind(); print(k.count(), "
        "k.runtime_type()); logging.getLogger('other').warning('a later warning')"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    count, runtime = out.stdout.split()
    assert out.returncode == 0 and int(count) >= 1 and runtime, out.stderr
    assert "PJRT_DEVICE" not in out.stderr, out.stderr
    # the import left the root logger as it was: Python's last resort prints a later warning bare, not as a
    # 'WARNING:other:' line from a handler the import would have installed
    assert out.stderr.strip().splitlines()[-1] == "a later warning", out.stderr
