"""Each family's cost model, by hand: on a target of stated peaks (or none, where every step is its floor) the
seconds and the words a plan prints are the sums written out beside each case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from accelbench import registry
from accelbench.errors import UsageError
from accelbench.kit.estimate import Costs
from accelbench.plugins import load_object
from accelbench.registry import BenchmarkInfo
from accelbench.selftest import OkParams
from accelbench.suite.estimate import COSTS, Estimate, modelled
from accelbench.suite.suites import make_entry

CPU = COSTS["cpu"]  # process start 0.15, ranks' start 2.4, setup 0.1, build 0.8 (an LLM's 1.0), floors 0.01/0.0025


@dataclass(frozen=True)
class Fixed:
    """A target of fixed peaks (None: unknown, so only the floors count)."""

    peak: float | None = None
    bw: float | None = None
    accelerator: bool = False
    devices: int = 1
    costs: Costs = CPU
    device: torch.device = torch.device("cpu")

    def flops(self, precision: str) -> float | None:
        return self.peak

    def bandwidth(self) -> float | None:
        return self.bw

    def unsupported(self, precision: str) -> str | None:
        return None


def _est(benchmark: str, params: dict[str, Any], target: Fixed, first: bool = False) -> Estimate:
    return modelled(make_entry(benchmark, params), target, starts_process=first)  # type: ignore[arg-type]


def test_a_kernel_is_its_setup_warm_up_and_timing_budget() -> None:
    # 2e9 FLOPs a call at 0.7 of 1e12/0.7 FLOP/s: 2 ms; setup 0.1 + 2 calls; warm-up max(0.1, 2 calls); timing
    # max(min-time 0.5, 1000 reps x 2 ms) = 2 s
    est = _est("kernels/gemm", {"m": 1000, "n": 1000, "k": 1000, "min_reps": 1000}, Fixed(peak=1e12 / 0.7), True)
    assert est.seconds == pytest.approx(0.15 + 0.104 + 0.1 + 2.0)
    assert est.how == "start 0.15 s + setup 0.1 s + warm-up 0.1 s + timing 2 s"


def test_allreduce_starts_its_ranks_and_is_skipped_with_too_few_devices() -> None:
    # no bandwidth: each of the 4 sizes is its warm-up 0.1 + min-time 0.5
    est = _est("kernels/allreduce", {}, Fixed())
    assert est.seconds == pytest.approx(2.4 + 4 * 0.6)
    assert est.how == "ranks' start 2.4 s + 4 sizes timed 2.4 s"
    gpu = Fixed(accelerator=True, costs=COSTS["accelerator"])
    assert _est("kernels/allreduce", {}, gpu).how == "skipped at once (2 processes, 1 device(s))"


def test_training_is_its_build_and_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    # 10 warm-up + 100 measured + the FLOP-counting step, each at the floor where no peak is known
    est = _est("train/throughput", {"model": "resnet18", "scale": "tiny", "batch_size": "8", "nproc": 2}, Fixed())
    assert est.seconds == pytest.approx(0.8 + 2.4 + 111 * 0.01)
    assert est.how == "build 0.8 s + ranks' start 2.4 s + 111 steps of 0.01 s 1.1 s"
    # 1 GFLOP a sample x 8 over 1e12 FLOP/s at the CPU's vision efficiency 0.32: 25 ms a step
    monkeypatch.setattr("accelbench.train.estimate.vision_flops", lambda model, scale, train: 1e9)
    est = _est("train/throughput", {"model": "resnet18", "scale": "tiny", "batch_size": "8"}, Fixed(peak=1e12))
    assert est.seconds == pytest.approx(0.8 + 111 * 0.025)
    assert est.how == "build 0.8 s + 111 steps of 0.025 s 2.8 s"
    llm = _est("train/llm", {"model": "llama3.1-8b", "scale": "tiny"}, Fixed())
    assert llm.seconds == pytest.approx(0.8 + 110 * 0.01) and llm.how == "build 0.8 s + 110 steps of 0.01 s 1.1 s"


def test_an_image_models_loadgen_run_is_its_probe_and_its_plan() -> None:
    # a batch (8) and a single sample at the 10 ms floor: the probe warms 2 x (batch + single) = 0.04 s, then times
    # 5 batches (0.05 s) and 7 singles (0.07 s), each under its 1 s; the rate is 800 samples/s
    base = {"model": "resnet50", "scale": "tiny"}
    # Server at a quarter of it, 200 QPS: 662 queries take 3.31 s, over the 2 s minimum
    server = _est("infer/loadgen", base | {"scenario": "server"}, Fixed())
    assert server.seconds == pytest.approx(0.8 + 0.16 + 3.31)
    assert server.how == "build 0.8 s + probe 0.16 s + server run 3.3 s"
    # Offline: LoadGen's one query, 1.1 x 1.5 x 800/s x 2 s = 2,640 samples at 800/s
    offline = _est("infer/loadgen", base, Fixed())
    assert offline.seconds == pytest.approx(0.8 + 0.16 + 3.3)


def test_a_language_models_serving_run_is_its_probe_and_its_requests() -> None:
    # tiny: 128 prompt and 32 output tokens; no peak or bandwidth, so a request is its 32 decode steps at the
    # 2.5 ms floor: 0.08 s, alone or in a batch; the probe is 3 batches and one single: 0.32 s
    base = {"model": "llama3.1-8b", "scale": "tiny", "engine": "static"}
    # Server at half the probed 100 requests/s: the quick run's 662 requests at 50/s, and the last one's answer
    server = _est("infer/llm", base | {"scenario": "server"}, Fixed())
    assert server.seconds == pytest.approx(1.0 + 0.32 + 662 / 50 + 0.08)
    assert server.how == "build 1 s + probe 0.32 s + server 662 requests 13 s"
    # a closed loop of 4 users at 50 requests/s: 662 requests + a cool-down round, past the users' warm-up
    loop = _est("infer/llm", base | {"concurrency": "4"}, Fixed())
    assert loop.seconds == pytest.approx(1.0 + 0.32 + (662 + 4 + 4) / 50 + 0.08)
    assert loop.how == "build 1 s + probe 0.32 s + closed loop of 4 users 13 s"
    # Offline: LoadGen's one query of 1.1 x 1.5 x 100/s x 2 s = 330 requests, one more, in 42 batches of 8
    offline = _est("infer/llm", base, Fixed())
    assert offline.seconds == pytest.approx(1.0 + 0.32 + 42 * 0.08)
    assert offline.how == "build 1 s + probe 0.32 s + offline 331 requests 3.4 s"


def test_each_benchmarks_model_lives_beside_its_run() -> None:
    for info in registry.BENCHMARKS.values():
        if info.estimate:
            assert info.estimate.split(".")[1] == info.target.split(".")[1], info.name
            assert callable(load_object(info.estimate, "cost model"))


def test_a_model_or_a_benchmark_that_cannot_be_loaded_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^cannot load cost model 'accelbench\.nowhere:model': No module named"):
        load_object("accelbench.nowhere:model", "cost model")
    with pytest.raises(UsageError, match="cannot load benchmark 'accelbench.selftest:nothing'"):
        BenchmarkInfo("selftest/nothing", "", OkParams, "accelbench.selftest:nothing").load()
    # parameters of its own: registering names its class after it, and selftest/ok's must keep its name
    unmodelled = dataclass(frozen=True)(type("UnmodelledParams", (OkParams,), {}))
    registry.register(BenchmarkInfo("selftest/unmodelled", "", unmodelled, "", estimate="accelbench.selftest:nothing"))
    try:
        with pytest.raises(UsageError, match="cannot load cost model 'accelbench.selftest:nothing'"):
            _est("selftest/unmodelled", {}, Fixed())
    finally:
        registry.unregister("selftest/unmodelled")
