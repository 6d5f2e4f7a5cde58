"""Every kernel: hand-checked FLOP formulas, a validated run on tiny shapes, skips, timing agreement."""

import statistics

import pytest
import torch

from accelbench.errors import UsageError
from accelbench.kernels.allreduce import bus_factor
from accelbench.kernels.attention import attention_flops
from accelbench.kernels.conv import conv_flops
from accelbench.kernels.membw import membw_bytes
from accelbench.kernels.rnn import rnn_flops
from accelbench.kernels.sets import all_sets, load_set
from accelbench.kernels.sparse import sparse_flops
from accelbench.kernels.specs import AttentionParams, ConvParams, RnnParams
from accelbench.measure.timer import Timer, TimerConfig
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 6, "warmup_time": 0.01, "threads": 2, "device": "cpu"}


def test_conv_flops_hand_checked():
    # output 12 x 8 (stride 2 in w), 2 images, 6 filters, 4 input channels per group, 3x3 taps: 2 FLOPs per tap
    p = ConvParams(w=16, h=12, c=8, n=2, k=6, stride_w=2, groups=2)
    assert p.output_hw() == (12, 8)
    assert conv_flops(p) == 2 * 2 * 6 * 12 * 8 * 4 * 9 == 82944
    assert conv_flops(ConvParams(w=16, h=12, c=8, n=2, k=6, stride_w=2, groups=2, phase="fwd_bwd")) == 3 * 82944


def test_rnn_flops_hand_checked():
    # 10 steps x 4 gates x 2 FLOPs x batch 4 x hidden 32 x (input 32 + hidden 32)
    assert rnn_flops(RnnParams(hidden=32, batch=4, timesteps=10, cell="lstm")) == 10 * 4 * 2 * 4 * 32 * 64
    assert rnn_flops(RnnParams(hidden=32, batch=4, timesteps=10, cell="vanilla", phase="fwd_bwd")) == 3 * 163840


def test_attention_flops_hand_checked():
    # Q@K^T and P@V: 2 x (2 x S x S x D) per head
    p = AttentionParams(batch=2, heads=3, seq_len=8, head_dim=4)
    assert attention_flops(p) == 2 * 3 * 2 * (2 * 8 * 8 * 4)
    causal = AttentionParams(batch=2, heads=3, seq_len=8, head_dim=4, causal=True, phase="fwd_bwd")
    assert attention_flops(causal) == attention_flops(p) / 2 * 3.5
    assert AttentionParams(heads=8, width=512).dim == 64


def test_an_emulated_precision_is_skipped_unless_asked():
    """fp8 has no CPU arithmetic anywhere; bf16 only with AVX-512 BF16 or AMX: otherwise torch's fallback."""
    from accelbench.devices.precision import emulated_reason

    [fp8] = run_inline(make_entry("kernels/gemm", {"m": 32, "n": 32, "k": 32, "precision": "fp8", **FAST}))
    assert fp8.status == "skipped" and "no CPU has fp8 arithmetic" in fp8.reason and "--emulated" in fp8.reason
    [bf16] = run_inline(make_entry("kernels/gemm", {"m": 32, "n": 32, "k": 32, "precision": "bf16", **FAST}))
    native = emulated_reason(torch.device("cpu"), "bf16") is None
    assert bf16.status == ("ok" if native else "skipped"), bf16.reason


def test_native_units_come_from_the_cpu_flags():
    from accelbench.devices.host import emulated_reason

    assert emulated_reason("bf16", ["avx2", "fma"]) and emulated_reason("bf16", ["avx512_bf16"]) is None
    assert emulated_reason("fp16", ["amx_fp16"]) is None and emulated_reason("int8", ["avx_vnni"]) is None
    assert emulated_reason("fp32", []) is None and "fp8" in emulated_reason("fp8", ["amx_bf16"])


def test_other_formulas():
    assert sparse_flops(nnz=10, n=3) == 60
    assert membw_bytes("copy", 100) == 200 and membw_bytes("triad", 100) == 300
    assert bus_factor(2) == 1.0 and bus_factor(8) == pytest.approx(1.75)


CASES = [
    ("kernels/conv", {"w": 12, "h": 10, "c": 4, "n": 2, "k": 8, "phase": "fwd"}),
    ("kernels/conv", {"w": 12, "h": 10, "c": 4, "n": 2, "k": 8, "phase": "bwd_data", "layout": "nhwc"}),
    (
        "kernels/conv",
        {
            "w": 12,
            "h": 10,
            "c": 4,
            "n": 2,
            "k": 8,
            "phase": "fwd_bwd",
            "groups": 2,
            "precision": "bf16",
            "emulated": True,
        },
    ),
    ("kernels/rnn", {"hidden": 16, "batch": 2, "timesteps": 5, "cell": "gru", "phase": "fwd_bwd"}),
    ("kernels/rnn", {"hidden": 16, "batch": 2, "timesteps": 5, "cell": "vanilla"}),
    (
        "kernels/attention",
        {
            "batch": 1,
            "heads": 2,
            "seq_len": 32,
            "head_dim": 16,
            "causal": True,
            "phase": "fwd_bwd",
            "precision": "fp32",
        },
    ),
    ("kernels/attention", {"batch": 1, "heads": 2, "seq_len": 32, "width": 64, "precision": "bf16", "emulated": True}),
    ("kernels/sparse", {"m": 64, "n": 8, "k": 64, "density": 0.2}),
    ("kernels/membw", {"op": "triad", "size": "1M"}),
    ("kernels/membw", {"op": "copy", "size": "64K"}),
    ("kernels/gemm", {"m": 32, "n": 32, "k": 32, "precision": "int8", "emulated": True}),
    ("kernels/gemm", {"m": 32, "n": 32, "k": 32, "precision": "fp8", "emulated": True}),
    ("kernels/gemm", {"m": 48, "n": 32, "k": 16, "a_t": True, "b_t": True}),
]


@pytest.mark.parametrize("name, params", CASES, ids=[f"{n.split('/')[1]}-{i}" for i, (n, _) in enumerate(CASES)])
def test_every_kernel_runs_and_validates(name, params):
    [r] = run_inline(make_entry(name, {**params, **FAST}))
    assert r.status == "ok", r.error or r.reason
    assert r.details["relative_error"] < 0.05
    assert r.metrics["seconds"].value > 0
    primary = r.metrics[r.primary_metric]
    assert primary.value > 0 and primary.ci95[0] <= primary.value <= primary.ci95[1]
    if r.primary_metric == "tflops":
        assert primary.value == pytest.approx(r.details["flops_per_call"] / r.metrics["seconds"].value / 1e12)
        assert r.metrics["arithmetic_intensity"].value > 0


def test_sparse_reports_useful_and_dense_equivalent_rates():
    [r] = run_inline(make_entry("kernels/sparse", {"m": 128, "n": 8, "k": 128, "density": 0.1, **FAST}))
    useful, dense = r.metrics["tflops"].value, r.metrics["effective_tflops"].value
    assert dense / useful == pytest.approx(128 * 128 / r.details["nnz"])


@pytest.mark.parametrize(
    "name, params, why",
    [
        ("kernels/conv", {"w": 8, "h": 8, "c": 4, "n": 1, "k": 4, "precision": "tf32"}, "tf32"),
        ("kernels/sparse", {"m": 64, "n": 8, "k": 64, "density": 0.5, "format": "semi24", "precision": "fp16"}, "2:4"),
        ("kernels/sparse", {"m": 64, "n": 8, "k": 64, "precision": "int8"}, "int8"),
        ("kernels/gemm", {"m": 32, "n": 32, "k": 32, "batch": 2, "precision": "int8"}, "batched int8"),
        ("kernels/gemm", {"m": 24, "n": 32, "k": 32, "precision": "fp8"}, "multiples of 16"),
        ("kernels/conv", {"w": 8, "h": 8, "c": 4, "n": 1, "k": 4, "precision": "int8"}, "no documented PyTorch int8"),
        ("kernels/attention", {"batch": 1, "heads": 1, "seq_len": 8, "precision": "fp8"}, "no documented PyTorch fp8"),
        ("kernels/rnn", {"hidden": 8, "batch": 1, "timesteps": 2, "precision": "int8"}, "no documented PyTorch int8"),
    ],
)
def test_what_the_device_cannot_run_is_skipped_with_a_reason(name, params, why):
    if torch.cuda.is_available():
        pytest.skip("the reasons differ on a GPU")
    [r] = run_inline(make_entry(name, {**params, **FAST}))
    assert r.status == "skipped" and why in r.reason


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("kernels/conv", {"filter_w": 9, "w": 4, "pad_w": 1}, "larger than the padded input"),
        ("kernels/conv", {"c": 6, "groups": 4}, "multiples of --groups"),
        ("kernels/conv", {"n": 0}, "positive"),
        ("kernels/attention", {"heads": 6, "width": 512}, "must divide --width"),
        ("kernels/sparse", {"density": 0.0}, "(0, 1]"),
        ("kernels/sparse", {"density": 1.5}, "(0, 1]"),
        ("kernels/sparse", {"format": "semi24", "density": 0.3}, "--density 0.5"),
        ("kernels/rnn", {"cell": "transformer"}, "unknown cell"),
        ("kernels/membw", {"size": "lots"}, "bad size"),
        ("kernels/allreduce", {"nproc": 1}, "at least 2"),
    ],
)
def test_impossible_shapes_are_usage_errors(name, params, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        make_entry(name, params)


@pytest.mark.slow  # torchrun: several processes
def test_allreduce_with_two_gloo_processes(tmp_path):
    entry = make_entry(
        "kernels/allreduce", {"nproc": 2, "sizes": "4K,256K", "min_time": 0.1, "min_reps": 6, "device": "cpu"}
    )
    results = run_inline(entry, tmp_path)
    assert [r.status for r in results] == ["ok", "ok"], [r.error for r in results]
    assert [r.params["size"] for r in results] == [4096, 262144]
    for r in results:
        assert r.params["backend"] == "gloo" and r.details["world_size"] == 2
        assert r.metrics["busbw_gbps"].value == pytest.approx(r.metrics["algbw_gbps"].value * 1.0)


def test_shape_sets_load_with_the_published_counts():
    counts = {(s.benchmark, s.name): len(s.rows) for s in all_sets()}
    assert counts[("kernels/gemm", "deepbench-train")] == 160
    assert counts[("kernels/gemm", "deepbench-inference-server")] == 75
    assert counts[("kernels/gemm", "deepbench-inference-device")] == 13
    assert counts[("kernels/conv", "deepbench-train")] == 94
    assert counts[("kernels/conv", "deepbench-inference-server")] == 107
    assert counts[("kernels/conv", "deepbench-inference-device")] == 16
    assert counts[("kernels/rnn", "deepbench-train")] == 53
    assert counts[("kernels/rnn", "deepbench-inference-server")] == 69
    assert counts[("kernels/rnn", "deepbench-inference-device")] == 3
    assert counts[("kernels/sparse", "deepbench-inference-server")] == 24
    assert counts[("kernels/sparse", "deepbench-inference-device")] == 8
    assert counts[("kernels/gemm", "transformer")] == 24 and counts[("kernels/attention", "transformer")] == 8
    assert counts[("kernels/allreduce", "deepbench-train")] == 7
    # every row of every set is a valid entry
    for s in all_sets():
        for row in s.rows:
            make_entry(s.benchmark, row)
    with pytest.raises(UsageError, match="unknown shape set"):
        load_set("kernels/gemm", "deepbench-everything")


TIMED = [
    ("kernels/conv", {"w": 56, "h": 56, "c": 64, "n": 4, "k": 64}),
    ("kernels/attention", {"batch": 2, "heads": 8, "seq_len": 512, "head_dim": 64, "precision": "fp32"}),
    ("kernels/rnn", {"hidden": 512, "batch": 16, "timesteps": 10}),
    ("kernels/membw", {"op": "triad", "size": "16M"}),
]


@pytest.mark.parametrize("name, params", TIMED, ids=[n.split("/")[1] for n, _ in TIMED])
def test_kernel_time_agrees_with_torch_utils_benchmark(name, params):
    """Our Timer and torch's measure the same call within 10% (interleaved to share the noise)."""
    import importlib

    from torch.utils.benchmark import Timer as TorchTimer

    from accelbench.registry import get

    info = get(name)
    p = info.make_params(params)
    module = importlib.import_module(info.target.split(":")[0])
    case = module.build_case(p, torch.device("cpu"))
    # Noise on a shared machine only ever adds time: alternate the two timers, a round at a time until one agrees.
    # Like with like: the median of single calls on both sides (ours times each call; torch's blocked_autorange
    # averages blocks of calls, and a block that other work preempted counts whole, where a preempted call is one
    # of many: beside two busy processes its median read 1.5x to 3x ours for the same call). One thread on both: a
    # team of two on cores that other work shares waits at each parallel region for whichever thread was
    # descheduled (8 to 32 ms seen for one rnn call), where one thread only runs slower.
    ours, theirs = [], []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(8):
            ours.append(Timer(case.fn, "cpu", TimerConfig(min_time=0.4, max_time=3.0)).measure().median)
            ref = TorchTimer("fn()", globals={"fn": case.fn}, num_threads=1)
            calls = max(10, min(400, int(0.4 / ours[-1])))
            theirs.append(statistics.median(ref.timeit(1).median for _ in range(calls)))
            if _agree(ours, theirs):
                break
    finally:
        torch.set_num_threads(before)
    assert _agree(ours, theirs), (ours, theirs)


def _agree(ours: list[float], theirs: list[float], tol: float = 0.10) -> bool:
    """One interleaved round within ``tol``, or the two timers' best figures within ``tol``."""
    same_round = any(abs(a / b - 1) < tol for a, b in zip(ours, theirs, strict=True))
    return same_round or abs(min(ours) / min(theirs) - 1) < tol


def test_membw_says_when_the_arrays_fit_in_cache(tmp_path):
    """STREAM's rule: arrays under 4x the last-level cache measure cache, not memory."""
    from accelbench.kernels.membw import last_level_cache_bytes

    for cpu, level, size, shared, kind in [
        ("cpu0", 2, "1024K", "0", "Unified"),
        ("cpu1", 2, "1024K", "1", "Unified"),
        ("cpu0", 3, "16M", "0-1", "Unified"),
        ("cpu1", 3, "16M", "0-1", "Unified"),  # one L3 shared by both CPUs: counted once
        ("cpu0", 1, "32K", "0", "Instruction"),
    ]:
        index = tmp_path / cpu / "cache" / f"index{level}{kind[0]}"
        index.mkdir(parents=True)
        for name, text in (("level", level), ("size", size), ("shared_cpu_list", shared), ("type", kind)):
            (index / name).write_text(f"{text}\n")
    assert last_level_cache_bytes(torch.device("cpu"), tmp_path) == 16 * 2**20
    llc = last_level_cache_bytes(torch.device("cpu"))
    if llc is None:
        pytest.skip("this machine's sysfs shows no caches")
    [r] = run_inline(make_entry("kernels/membw", {"size": "1M", **FAST}))
    assert r.status == "ok" and any(w.startswith("cache-resident") for w in r.warnings), r.warnings


@pytest.mark.parametrize(
    "flags, expected",
    [([], "fp32"), (["avx512_bf16"], "bf16"), (["amx_fp16", "avx512_bf16"], "fp16"), (["asimdhp"], "fp16")],
)
def test_attention_defaults_to_the_cpu_s_native_precision(monkeypatch, flags, expected):
    """A fixed fp16 default was skipped on every CPU without fp16 arithmetic; the default follows the device."""
    from accelbench.devices import host
    from accelbench.kernels.common import native_precision

    monkeypatch.setattr(host, "cpu_flags", lambda: flags)
    assert native_precision(torch.device("cpu")) == expected


def test_attention_s_default_precision_runs_and_is_recorded_as_what_ran():
    from accelbench.kernels.common import native_precision

    entry = make_entry("kernels/attention", {"batch": 1, "heads": 2, "seq_len": 16, "head_dim": 8, **FAST})
    assert entry.params["precision"] == "auto"
    [r] = run_inline(entry)
    assert r.status == "ok", r.error or r.reason
    assert r.params["precision"] == native_precision(torch.device("cpu")) != "auto"
