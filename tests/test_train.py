import math

import pytest
import torch

from accelbench.errors import UsageError
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline
from accelbench.workloads import MODELS, workload_class

QUICK = {"scale": "tiny", "warmup": 1, "num_batches": 4, "display_every": 2, "threads": 2, "device": "cpu"}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_builds_and_trains_two_steps(name):
    workload = workload_class(name)()
    model = workload.build("tiny")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = workload.synthetic_batch(2, torch.device("cpu"), "tiny")
    for _ in range(2):
        opt.zero_grad()
        loss = workload.loss(model, batch)
        loss.backward()
        opt.step()
        assert math.isfinite(loss.item())
    info = workload.info
    assert info.name == name and info.domain and info.sample_unit and info.batch_for("cuda") > 0


def test_train_record_has_throughput_memory_and_flops():
    [r] = run_inline(make_entry("train/throughput", {"model": "resnet18", "batch_size": "4", **QUICK}))
    assert r.status == "ok", r.error
    assert r.params["batch_size"] == 4 and r.params["global_batch_size"] == 4 and r.params["nproc"] == 1
    tp, step = r.metrics["throughput"], r.metrics["step_seconds"]
    assert tp.unit == "images/s" and tp.value == pytest.approx(4 / step.value)
    assert tp.n == 2 and len(r.samples) == 2  # 4 measured steps in windows of 2
    assert r.metrics["peak_memory_bytes"].value > 0
    # FLOPs per sample counted by torch, at least the forward pass of resnet18 at 64x64 (~0.15 GFLOP)
    assert r.details["flops_per_sample"] > 1e8 and r.metrics["tflops"].value > 0


def test_amp_bf16_on_cpu():
    [r] = run_inline(
        make_entry(
            "train/throughput", {"model": "bert", "batch_size": "4", "precision": "amp_bf16", "emulated": True, **QUICK}
        )
    )
    assert r.status == "ok", r.error
    assert r.params["precision"] == "amp_bf16" and math.isfinite(r.details["final_loss"])


def test_bf16_weights_train_the_model_itself_in_bf16(monkeypatch):
    """--precision bf16 converts the model (weights, activations, gradients), unlike amp_bf16's autocast."""
    from accelbench.train import loop

    dtypes: list[torch.dtype] = []
    real = loop.make_trainer

    def spy(workload, model, params, device, batch_size):  # type: ignore[no-untyped-def]
        trainer = real(workload, model, params, device, batch_size)
        dtypes.extend([next(model.parameters()).dtype, trainer.batch[0].dtype])
        return trainer

    monkeypatch.setattr(loop, "make_trainer", spy)
    params = {"model": "resnet18", "scale": "tiny", "batch_size": "4", "precision": "bf16", "emulated": True, **QUICK}
    [r] = run_inline(make_entry("train/throughput", params))
    assert r.status == "ok", r.error
    assert dtypes == [torch.bfloat16, torch.bfloat16] and math.isfinite(r.details["final_loss"])


def test_auto_batch_stops_at_the_memory_cap():
    import psutil

    cap = psutil.Process().memory_info().rss + 2**28  # what is in use now plus 256 MiB (WideMLP: ~1 MB a sample)
    entry = make_entry(
        "train/throughput",
        {"model": "train_fixtures:WideMLP", "batch_size": "auto", "memory_cap": str(cap), **QUICK},
    )
    [r] = run_inline(entry)
    assert r.status == "ok", r.error
    trials = r.details["auto_batch_trials"]
    chosen = r.params["batch_size"]
    assert any(not t["fits"] for t in trials), trials  # the search did hit the cap
    assert all(t["fits"] for t in trials if t["batch_size"] <= chosen)
    assert 8 <= chosen < min(t["batch_size"] for t in trials if not t["fits"])
    assert r.params["batch_size_request"] == "auto"


def test_oom_at_a_fixed_batch_is_a_failed_record_and_auto_finds_what_fits():
    [failed] = run_inline(
        make_entry("train/throughput", {"model": "train_fixtures:OomAbove64", "batch_size": "128", **QUICK})
    )
    assert failed.status == "failed"
    assert "batch size 128 per device did not fit" in failed.error and "auto" in failed.error
    [auto] = run_inline(
        make_entry("train/throughput", {"model": "train_fixtures:OomAbove64", "batch_size": "auto", **QUICK})
    )
    # 64 is the edge a two-step trial found; the measured run keeps a margin below it (what it adds beyond
    # two steps: FLOP counting, compile buffers, fragmentation)
    assert auto.status == "ok" and auto.details["auto_batch"]["largest_fitting"] == 64
    assert auto.params["batch_size"] == 56 and "memory" in auto.details["auto_batch"]["reason"]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"model": "resnet51"}, "did you mean 'resnet50'"),
        ({"batch_size": "0"}, "positive integer"),
        ({"batch_size": "lots"}, "'default' or 'auto'"),
        ({"num_batches": 0}, "positive"),
        ({"warmup": -1}, "must not be negative"),
        ({"precision": "fp4"}, "unknown precision"),
        ({"precision": "fp8"}, "trains decoder models"),
        ({"model": "ncf", "channels_last": True}, "no 4-D image input"),
        ({"display_every": 50, "num_batches": 20}, "must not exceed"),
        ({"memory_cap": "1G"}, "only apply with --batch-size auto"),
        ({"max_batch_size": 512}, "only apply with --batch-size auto"),
        ({"model": "train_fixtures:NotAWorkload"}, "not a subclass"),
        ({"model": "nosuchmodule:Thing"}, "cannot load workload"),
        ({"compile_mode": "reduce-overhead"}, "needs --compile"),
    ],
)
def test_bad_training_input(params, message):
    with pytest.raises(UsageError, match=message):
        make_entry("train/throughput", params)


DDP = {"scale": "tiny", "warmup": 1, "num_batches": 4, "display_every": 2, "nproc": 2, "device": "cpu"}


@pytest.mark.slow  # torchrun: several processes
def test_two_process_gloo_ddp_yields_one_aggregated_record(tmp_path):
    """Two ranks on real data (MovieLens ratings): one record, each rank reading its own shard."""
    from tta_fixtures import write_ratings

    real = {"data": "real", "data_dir": str(write_ratings(tmp_path / "ml")), "workers": 0}
    single = run_inline(make_entry("train/throughput", {"model": "ncf", "batch_size": "64", **QUICK}), tmp_path)
    [r] = run_inline(make_entry("train/throughput", {"model": "ncf", "batch_size": "64", **DDP, **real}), tmp_path)
    assert single[0].status == "ok" and r.status == "ok", r.error
    assert r.params["nproc"] == 2 and r.params["global_batch_size"] == 128 and r.details["world_size"] == 2
    tp, per_device = r.metrics["throughput"], r.metrics["throughput_per_device"]
    assert tp.value == pytest.approx(128 / r.metrics["step_seconds"].value)
    # two ranks on one CPU are one device: the per-device figure is the whole, not half of it
    assert r.details["devices"] == 1 and per_device.value == pytest.approx(tp.value)
    assert r.details["backend"] == "gloo"
    assert r.details["pipeline"]["sampler"].startswith("DistributedSampler") and r.params["data"] == "real"
    assert len(r.details["input_wait_seconds_per_window"]) == 2 and "input_wait_share" in r.metrics


@pytest.mark.slow  # torchrun: several processes
def test_a_dead_rank_ends_the_run_with_a_clear_error(tmp_path, monkeypatch):
    import time
    from pathlib import Path

    # the ranks import the fixture too (without it every rank failed to load the model, not rank 1 in its step)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    t0 = time.perf_counter()
    entry = make_entry("train/throughput", {"model": "train_fixtures:DiesOnRank1", **DDP})
    [r] = run_inline(entry, tmp_path)
    assert r.status == "failed" and "a rank failed" in r.error and "exited with status" in r.error
    assert "rank 1 exited with code 13" in r.error and r.details["log"] in r.error, r.error
    assert r.params["batch_size"] == 8 and r.params["global_batch_size"] == 16  # the record as train resolved it
    assert time.perf_counter() - t0 < 120


def test_distributed_input_checks():
    with pytest.raises(UsageError, match="auto searches on one device"):
        make_entry("train/throughput", {"batch_size": "auto", "nproc": 2})
    with pytest.raises(UsageError, match="--rdzv-endpoint"):
        make_entry("train/throughput", {"nnodes": 2})
    with pytest.raises(UsageError, match="--node-rank"):
        make_entry("train/throughput", {"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:29500"})


def test_rnnt_loss_equals_the_sum_over_every_alignment():
    """The lattice recursion against brute force: every path of T blanks and U labels."""
    from accelbench.workloads.speech import rnnt_loss

    torch.manual_seed(0)
    t_len, u_len, vocab = 4, 3, 5
    logits = torch.randn(1, t_len, u_len + 1, vocab, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 3, 2]])
    lp = logits.log_softmax(-1)[0]
    paths = []

    def walk(t, u, acc):
        if t == t_len - 1 and u == u_len:
            paths.append(acc + lp[t, u, 0])
            return
        if t < t_len - 1:
            walk(t + 1, u, acc + lp[t, u, 0])
        if u < u_len:
            walk(t, u + 1, acc + lp[t, u, targets[0, u]])

    walk(0, 0, torch.zeros((), dtype=torch.float64))
    assert len(paths) == math.comb(t_len - 1 + u_len, u_len)
    brute = -torch.logsumexp(torch.stack(paths), 0)
    ours = rnnt_loss(logits, targets)
    assert ours.item() == pytest.approx(brute.item(), rel=1e-5)
    ours.backward()
    assert torch.isfinite(logits.grad).all()


def test_cpu_peak_memory_is_the_measured_run_s_own():
    """After a large allocation earlier in the process, the measured run's peak is its own, not the lifetime's."""
    import numpy as np

    from accelbench.train.loop import PeakMemory

    big = np.ones(100_000_000)  # 800 MB, freed before the block
    del big
    with PeakMemory(torch.device("cpu")) as mem:
        small = np.ones(1_000_000)
    del small
    if not mem.method.startswith("VmHWM"):
        pytest.skip(f"no resettable high-water mark here ({mem.method})")
    assert mem.peak < mem.start + 400 * 2**20, (mem.start, mem.peak)
