"""The list of benchmarks: a name, a one-line description, a parameter class, and where the code is.

The implementation is named by a ``module:function`` string and imported only in
the process that runs it, so listing benchmarks or parsing a suite never imports
torch. A benchmark function takes its parameters and a :class:`RunContext` and
yields :class:`accelbench.results.record.Result` objects; it never prints results
or touches the store.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from accelbench.errors import UsageError
from accelbench.infer.specs import InferParams
from accelbench.kernels.specs import (
    AllreduceParams,
    AttentionParams,
    ConvParams,
    GemmParams,
    MembwParams,
    RnnParams,
    SparseParams,
)
from accelbench.kit.context import RunContext
from accelbench.params import CommonParams, build_params
from accelbench.results.describe import plain
from accelbench.suite.selftest import CrashParams, HangParams, OkParams, RaiseParams
from accelbench.train.specs import TrainParams
from accelbench.tta.specs import TtaParams


@dataclass(frozen=True)
class BenchmarkInfo:
    name: str
    description: str
    params: type[CommonParams]
    target: str  # "module:function"
    timeout: float = 600.0
    primary_metric: str | None = None
    hidden: bool = False

    def load(self) -> Callable[[Any, RunContext], Iterable[Any]]:
        module, _, func = self.target.partition(":")
        return getattr(importlib.import_module(module), func)

    def make_params(self, values: dict[str, Any]) -> CommonParams:
        return build_params(self.params, values, self.name)


BENCHMARKS: dict[str, BenchmarkInfo] = {
    info.name: info
    for info in (
        BenchmarkInfo(
            "kernels/gemm",
            "dense matrix multiply C = A @ B (batched with --batch): seconds, TFLOPS, % of peak",
            GemmParams,
            "accelbench.kernels.gemm:run",
            timeout=600,
            primary_metric="tflops",
        ),
        BenchmarkInfo(
            "kernels/conv",
            "2-D convolution, forward / backward-data / backward-filter, NCHW or NHWC: seconds, TFLOPS, % of peak",
            ConvParams,
            "accelbench.kernels.conv:run",
            primary_metric="tflops",
        ),
        BenchmarkInfo(
            "kernels/rnn",
            "one vanilla RNN, LSTM or GRU layer over a sequence, inference or training: seconds, TFLOPS",
            RnnParams,
            "accelbench.kernels.rnn:run",
            primary_metric="tflops",
        ),
        BenchmarkInfo(
            "kernels/attention",
            "scaled dot-product attention, forward or forward+backward, causal or not: seconds, TFLOPS",
            AttentionParams,
            "accelbench.kernels.attention:run",
            primary_metric="tflops",
        ),
        BenchmarkInfo(
            "kernels/sparse",
            "sparse x dense GEMM at a density (CSR), or 2:4 semi-structured on Ampere+: seconds, TFLOPS",
            SparseParams,
            "accelbench.kernels.sparse:run",
            primary_metric="tflops",
        ),
        BenchmarkInfo(
            "kernels/membw",
            "device memory bandwidth, STREAM copy or triad: seconds, GB/s, % of peak",
            MembwParams,
            "accelbench.kernels.membw:run",
            primary_metric="gbps",
        ),
        BenchmarkInfo(
            "kernels/allreduce",
            "all-reduce over N processes under torchrun (NCCL on GPUs, gloo on CPUs): algorithm and bus GB/s",
            AllreduceParams,
            "accelbench.kernels.allreduce:run",
            timeout=1800,
            primary_metric="busbw_gbps",
        ),
        BenchmarkInfo(
            "train/throughput",
            "training samples/s of a model on synthetic data (per-device batch), any precision: tf_cnn_benchmarks",
            TrainParams,
            "accelbench.train.run:run",
            timeout=3600,
            primary_metric="throughput",
        ),
        BenchmarkInfo(
            "infer/loadgen",
            "inference under the MLPerf LoadGen: Offline, Server, SingleStream or MultiStream, VALID or why not",
            InferParams,
            "accelbench.infer.run:run",
            timeout=1800,
            primary_metric=None,
        ),
        BenchmarkInfo(
            "tta/time_to_target",
            "time (and cost) to a quality target on real data over seeds, olympic mean, MLPerf logs: MLPerf Training",
            TtaParams,
            "accelbench.tta.run:run",
            timeout=7 * 24 * 3600,
            primary_metric="time_to_target_seconds",
        ),
        BenchmarkInfo(
            "selftest/ok",
            "harness check: times a tiny pure-Python loop and succeeds",
            OkParams,
            "accelbench.suite.selftest:run_ok",
            timeout=60,
            primary_metric="seconds",
            hidden=True,
        ),
        BenchmarkInfo(
            "selftest/raise",
            "harness check: raises an exception (recorded as failed)",
            RaiseParams,
            "accelbench.suite.selftest:run_raise",
            timeout=60,
            hidden=True,
        ),
        BenchmarkInfo(
            "selftest/crash",
            "harness check: kills its own process (segfault, abort, SIGKILL as from the OOM killer)",
            CrashParams,
            "accelbench.suite.selftest:run_crash",
            timeout=60,
            hidden=True,
        ),
        BenchmarkInfo(
            "selftest/hang",
            "harness check: sleeps past its timeout (recorded as failed)",
            HangParams,
            "accelbench.suite.selftest:run_hang",
            timeout=5,
            hidden=True,
        ),
    )
}


def get(name: str) -> BenchmarkInfo:
    info = BENCHMARKS.get(name)
    if info is None:
        import difflib

        close = difflib.get_close_matches(name, list(BENCHMARKS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; see 'accelbench list'"
        raise UsageError(f"unknown benchmark {name!r}{hint}")
    return info


def describe_params(benchmark: str, params: dict[str, Any]) -> str:
    """A short human description of a workload: the benchmark's own ``describe``, or ``k=v`` words."""
    info = BENCHMARKS.get(benchmark)
    if info is not None:
        return info.params.describe(info.params().to_dict() | params)
    return plain(benchmark, params)
