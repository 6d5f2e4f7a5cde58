"""The list of benchmarks: a name, a one-line description, a parameter class, and where the code is.

The implementation is named by a ``module:function`` string and imported only in
the process that runs it, so listing benchmarks or parsing a suite never imports
torch. A benchmark function takes its parameters and a :class:`RunContext` and
yields :class:`accelbench.results.record.Result` objects; it never prints results
or touches the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from accelbench.errors import UsageError
from accelbench.families import Family, family_of, name_params
from accelbench.infer.specs import InferParams
from accelbench.kernels.sets import ShapeSet, load_set
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
from accelbench.plugins import load_object
from accelbench.results.describe import plain
from accelbench.selftest import CrashParams, HangParams, OkParams, RaiseParams
from accelbench.serve.specs import LLMServeParams
from accelbench.train.llm.specs import LLMTrainParams
from accelbench.train.specs import TrainParams
from accelbench.tta.specs import TtaParams
from accelbench.tune.specs import TuneParams


@dataclass(frozen=True)
class Command:
    """How a benchmark is offered as ``accelbench NAME POSITIONAL [flags]``; the CLI builds it from this.

    Flags come from the parameter class's fields; ``positional`` is the field given first (a comma list
    sweeps it like any flag). ``scaling`` names the metric of the table over device counts printed after a
    run, ``note`` a line printed before it. ``implies`` are ``(given, field, value)``: a flag given sets
    another field left unset (a data directory means real data). ``data_table``: print the synthetic against
    real data table after a run.
    """

    name: str
    help: str
    description: str
    positional: str
    metavar: str
    note: str = ""
    scaling: str | None = None
    scaling_figure: str = "throughput"
    implies: tuple[tuple[str, str, Any], ...] = ()
    data_table: bool = False


@dataclass(frozen=True)
class BenchmarkInfo:
    """One benchmark: ``FAMILY/NAME``, described by its family (:mod:`accelbench.families`) for everything the
    generic layers show, and by the fields here for how it runs."""

    name: str
    description: str
    params: type[CommonParams]
    target: str  # "module:function"
    timeout: float = 600.0
    primary_metric: str | None = None
    hidden: bool = False
    command: Command | None = None
    #: the measured rate (or time) that per-dollar and per-joule figures derive from, the first present wins
    #: (kernels: none)
    efficiency_of: tuple[str, ...] = ()
    #: made by its own command, never a suite entry (a search runs other benchmarks as its trials)
    standalone: bool = False
    #: the models it measures, in words, where it shares its command with another benchmark ("language models"):
    #: what a flag of its own is said to apply to when given for a model another benchmark measures
    measures: str = ""
    #: consecutive entries of it run one after another in one worker process: a kernel's entry is a few seconds of
    #: timed calls on tensors it frees, so a process (a device context, a warm allocator) of its own buys nothing but
    #: its start-up; a model's entry keeps its own (its weights, compile caches and memory peak are the figure's)
    shares_process: bool = False
    #: its cost model for a plan ("module:function" taking its parameters and the target, returning the seconds
    #: and how they were found), beside its run in its family: "" gives the least its own settings ask for
    #: (:mod:`accelbench.suite.estimate`)
    estimate: str = ""

    @property
    def family(self) -> Family:
        """The family this benchmark belongs to (the part of its name before the ``/``)."""
        family = family_of(self.name)
        if family is None:
            raise LookupError(f"{self.name!r} names no known family: register its Family first")
        return family

    @property
    def offered_as(self) -> Command:
        """The command that offers it, for the code that builds or runs one (a kernel's benchmark and a search
        have none of their own)."""
        if self.command is None:
            raise LookupError(f"{self.name!r} is offered by no command of its own")
        return self.command

    def load(self) -> Callable[[Any, RunContext], Iterable[Any]]:
        run: Callable[[Any, RunContext], Iterable[Any]] = load_object(self.target, "benchmark")
        return run

    def make_params(self, values: dict[str, Any]) -> CommonParams:
        return build_params(self.params, values, self.name)


BENCHMARKS: dict[str, BenchmarkInfo] = {}


def register(info: BenchmarkInfo) -> BenchmarkInfo:
    """List a benchmark (its family must be known: :func:`accelbench.families.register`) and name its parameter
    class after it, so that its module reads its own name from here (:func:`accelbench.families.benchmark_of`)."""
    info.family  # noqa: B018  (raises for a benchmark of no known family)
    BENCHMARKS[info.name] = info
    name_params(info.params, info.name)
    return info


def unregister(name: str) -> None:
    """Take a benchmark registered for a while (a test's) off the list."""
    BENCHMARKS.pop(name, None)


for _info in (
    BenchmarkInfo(
        "kernels/gemm",
        "dense matrix multiply C = A @ B (batched with --batch): seconds, TFLOPS, % of peak",
        GemmParams,
        "accelbench.kernels.gemm:run",
        estimate="accelbench.kernels.estimate:gemm",
        shares_process=True,
        timeout=600,
        primary_metric="tflops",
    ),
    BenchmarkInfo(
        "kernels/conv",
        "2-D convolution, forward / backward-data / backward-filter, NCHW or NHWC: seconds, TFLOPS, % of peak",
        ConvParams,
        "accelbench.kernels.conv:run",
        estimate="accelbench.kernels.estimate:conv",
        shares_process=True,
        primary_metric="tflops",
    ),
    BenchmarkInfo(
        "kernels/rnn",
        "one vanilla RNN, LSTM or GRU layer over a sequence, inference or training: seconds, TFLOPS",
        RnnParams,
        "accelbench.kernels.rnn:run",
        estimate="accelbench.kernels.estimate:rnn",
        shares_process=True,
        primary_metric="tflops",
    ),
    BenchmarkInfo(
        "kernels/attention",
        "scaled dot-product attention, forward or forward+backward, causal or not: seconds, TFLOPS",
        AttentionParams,
        "accelbench.kernels.attention:run",
        estimate="accelbench.kernels.estimate:attention",
        shares_process=True,
        primary_metric="tflops",
    ),
    BenchmarkInfo(
        "kernels/sparse",
        "sparse x dense GEMM at a density (CSR), or 2:4 semi-structured on Ampere+: seconds, TFLOPS",
        SparseParams,
        "accelbench.kernels.sparse:run",
        estimate="accelbench.kernels.estimate:sparse",
        shares_process=True,
        primary_metric="tflops",
    ),
    BenchmarkInfo(
        "kernels/membw",
        "device memory bandwidth, STREAM copy or triad: seconds, GB/s, % of peak",
        MembwParams,
        "accelbench.kernels.membw:run",
        estimate="accelbench.kernels.estimate:membw",
        shares_process=True,
        primary_metric="gbps",
    ),
    BenchmarkInfo(
        "kernels/allreduce",
        "all-reduce over N processes under torchrun (NCCL on GPUs, gloo on CPUs): algorithm and bus GB/s",
        AllreduceParams,
        "accelbench.kernels.allreduce:run",
        estimate="accelbench.kernels.estimate:allreduce",
        timeout=1800,
        primary_metric="busbw_gbps",
    ),
    BenchmarkInfo(
        "train/throughput",
        "training samples/s of a model on synthetic data (per-device batch), any precision: tf_cnn_benchmarks",
        TrainParams,
        "accelbench.train.run:run",
        estimate="accelbench.train.estimate:train",
        timeout=3600,
        primary_metric="throughput",
        efficiency_of=("throughput",),
        command=Command(
            "train",
            "training throughput (samples/s) of a model on synthetic data, as tf_cnn_benchmarks measured it",
            "Train MODEL on synthetic batches generated on the device: --warmup steps, then --num-batches "
            "measured steps in windows of --display-every. Reports samples/s (median over windows, with a "
            "95% CI), seconds per step, peak memory, and TFLOPS and % of peak from the model's counted FLOPs. "
            "--batch-size is PER DEVICE. Size and option flags take comma lists to sweep (--batch-size "
            "32,64,128); a combination this machine cannot run is recorded as skipped.",
            positional="model",
            metavar="MODEL",
            note="batch sizes are per device: the global batch is the per-device batch x the number of devices",
            scaling="throughput",
            implies=(("data_dir", "data", ["real"]),),  # a data directory given means real data
            data_table=True,
        ),
        measures="models other than decoders",
    ),
    BenchmarkInfo(
        "train/llm",
        "training tokens/s and MFU of a decoder (llama, mixtral presets) on synthetic tokens: FSDP2, LoRA, "
        "torchtitan's convention",
        LLMTrainParams,
        "accelbench.train.llm.run:run",
        estimate="accelbench.train.estimate:train_llm",
        timeout=3600,
        primary_metric="throughput",
        efficiency_of=("throughput",),
        measures="decoder models",
        command=Command(
            "train",
            "training tokens/s and MFU of a decoder language model on synthetic tokens, as torchtitan counts them",
            "A decoder preset (llama3.1-8b, mixtral-8x7b, ...) trains on synthetic tokens: --batch-size sequences "
            "per device per forward pass (the micro-batch), --grad-accum micro-batches per optimizer step, "
            "--seq-len tokens each, sharded with FSDP2 over several ranks. Reports tokens/s (median over windows, "
            "with a 95% CI), tokens/s per device, MFU against the dense peak (torchtitan's convention and the "
            "causal one), seconds per step and peak memory.",
            positional="model",
            metavar="MODEL",
            note="a decoder's --batch-size is its micro-batch per device: the global batch is it x the number of "
            "devices x --grad-accum sequences",
            scaling="throughput",
        ),
    ),
    BenchmarkInfo(
        "infer/loadgen",
        "inference under the MLPerf LoadGen: Offline, Server, SingleStream or MultiStream, VALID or why not",
        InferParams,
        "accelbench.infer.run:run",
        estimate="accelbench.infer.estimate:loadgen",
        timeout=1800,
        primary_metric=None,
        efficiency_of=("throughput", "queries_per_second", "tokens_per_second"),
        command=Command(
            "infer",
            "inference under the real MLPerf LoadGen: offline, server, singlestream, multistream",
            "Serve MODEL to the MLPerf LoadGen (mlcommons-loadgen) in a scenario, through a batching system "
            "under test (one worker per device, a shared queue, --batch-size and --max-wait-ms). A short probe "
            "sets LoadGen's hints first. --mode performance records the scenario's metric (Offline samples/s, "
            "Server QPS, SingleStream p90 latency, MultiStream p99 query latency), latency percentiles and "
            "LoadGen's VALID/INVALID verdict with the reasons in plain words, read from mlperf_log_detail.txt. "
            "--mode accuracy scores the answers LoadGen logged (mlperf_log_accuracy.json) against an FP32 eager "
            "run of the same weights on the same samples (with --dataset DIR: against its labels) and applies "
            "MLPerf's 99%/99.9% gates. --mode find-peak bisects the highest valid Server QPS (2%) or the "
            "largest MultiStream query within --latency-bound-ms, then confirms it with a full run. Backends: "
            "torch, compile, onnxruntime and int8 (pip install 'accelbench[onnx]'), null and sleep (harness "
            "checks), or a user's package.module:Class. The quick profile takes seconds and is non-compliant; "
            "official loads LoadGen's mlperf.conf (600 s, official seeds).",
            positional="model",
            metavar="MODEL",
        ),
        measures="models served a batch at a time",
    ),
    BenchmarkInfo(
        "infer/llm",
        "a language model served token by token under the MLPerf LoadGen: TTFT, TPOT, tokens/s, VALID or why not",
        LLMServeParams,
        "accelbench.serve.run:run",
        estimate="accelbench.serve.estimate:llm_serve",
        timeout=1800,
        primary_metric=None,
        efficiency_of=("tokens_per_second",),
        command=Command(
            "infer",
            "inference under the real MLPerf LoadGen: offline, server, singlestream, multistream",
            "A language model (accelbench list --models) is streamed token by token by an engine (--engine, its "
            "choices and settings below: in this process, or endpoint, any OpenAI-compatible server at --url) "
            "in LoadGen's token mode: TTFT and TPOT against MLPerf's limits, tokens/s per device, the decode's "
            "share of the device's bandwidth; --mode sweep draws tokens/s per device against tokens/s per user.",
            positional="model",
            metavar="MODEL",
        ),
        measures="language models",
    ),
    BenchmarkInfo(
        "tta/time_to_target",
        "time (and cost) to a quality target on real data over seeds, olympic mean, MLPerf logs: MLPerf Training",
        TtaParams,
        "accelbench.tta.run:run",
        estimate="accelbench.tta.estimate:tta",
        timeout=7 * 24 * 3600,
        primary_metric="time_to_target_seconds",
        efficiency_of=("time_to_target_seconds",),
        command=Command(
            "tta",
            "time (and cost) to accuracy on real data over several seeds: MLPerf Training, DAWNBench",
            "Train WORKLOAD on its real dataset until the quality target, --seeds times, each seed with its "
            "own MLPerf-format log (mlperf-logging) in the run folder. The clock starts after model creation "
            "and data staging (MLPerf's run_start) and stops at the first evaluation that reaches the target. "
            "The score is the olympic mean (the fastest and the slowest runs dropped); a run that hits "
            "--max-epochs counts as the slowest, and more than one such run makes the result invalid. With a "
            "price (--price-per-hour, --instance, --purchase-price, or config.toml) the cost to accuracy is "
            "recorded too. digits needs no download (scikit-learn ships it).",
            positional="workload",
            metavar="WORKLOAD",
            scaling="time_to_target_seconds",
            scaling_figure="time to target",
        ),
    ),
    BenchmarkInfo(
        "tune/search",
        "the best settings of a model's serving or training within a time budget, and how it compares with "
        "the defaults (accelbench tune)",
        TuneParams,
        "accelbench.tune.search:Tuner",
        standalone=True,
    ),
    BenchmarkInfo(
        "selftest/ok",
        "harness check: times a tiny pure-Python loop and succeeds",
        OkParams,
        "accelbench.selftest:run_ok",
        timeout=60,
        primary_metric="seconds",
        hidden=True,
    ),
    BenchmarkInfo(
        "selftest/raise",
        "harness check: raises an exception (recorded as failed)",
        RaiseParams,
        "accelbench.selftest:run_raise",
        timeout=60,
        hidden=True,
    ),
    BenchmarkInfo(
        "selftest/crash",
        "harness check: kills its own process (segfault, abort, SIGKILL as from the OOM killer)",
        CrashParams,
        "accelbench.selftest:run_crash",
        timeout=60,
        hidden=True,
    ),
    BenchmarkInfo(
        "selftest/hang",
        "harness check: sleeps past its timeout (recorded as failed)",
        HangParams,
        "accelbench.selftest:run_hang",
        timeout=5,
        hidden=True,
    ),
):
    register(_info)


def get(name: str) -> BenchmarkInfo:
    info = BENCHMARKS.get(name)
    if info is None:
        import difflib

        close = difflib.get_close_matches(name, list(BENCHMARKS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; see 'accelbench list'"
        raise UsageError(f"unknown benchmark {name!r}{hint}")
    return info


def sharing_command(name: str) -> list[BenchmarkInfo]:
    """The benchmarks offered by the command ``accelbench NAME``, in the order they were listed (the first is the
    command's own: its help and its flags come first)."""
    return [info for info in BENCHMARKS.values() if info.command is not None and info.command.name == name]


def route(benchmark: str, params: Mapping[str, Any]) -> str:
    """The benchmark that measures ``params``' model: ``benchmark`` itself, or the one sharing its command whose
    parameters take the model (``train/throughput`` with a decoder is ``train/llm``). Suite files, stored entries
    and the command line name a benchmark by its command's first; the model chooses the one that runs."""
    info = BENCHMARKS.get(benchmark)
    if info is None or info.command is None:
        return benchmark
    model = params.get(info.command.positional)
    if not isinstance(model, str) or info.params.takes_model(model):
        return benchmark
    for other in sharing_command(info.command.name):
        if other.params.takes_model(model):
            return other.name
    return benchmark


def describe_params(benchmark: str, params: dict[str, Any]) -> str:
    """A short human description of a workload: the benchmark's own ``describe``, or ``k=v`` words."""
    info = BENCHMARKS.get(route(benchmark, params))
    if info is not None:
        return info.params.describe(info.params().to_dict() | params)
    return plain(benchmark, params)


def shape_set(benchmark: str, name: str) -> ShapeSet:
    """A named set of ``benchmark``'s shapes (a suite's ``set = "NAME"``), through here so that the suite
    reads a family's shape lists without importing the family; an unknown set (or a benchmark with none) is a
    UsageError naming the sets it has."""
    return load_set(benchmark, name)


def default_params(benchmark: str) -> dict[str, Any]:
    """A benchmark's parameters at their defaults ({} for an unknown name): what an older record, made before
    a setting existed, is compared as having used (the CLI passes this to ``compare``, ``histories`` and the
    report as their ``defaults``)."""
    info = BENCHMARKS.get(benchmark)
    return info.params().to_dict() if info is not None else {}
