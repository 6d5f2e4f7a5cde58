"""How long an entry will take, before it runs: the time it took here before, else a stated cost model.

A plan that says "no estimate" for most of a suite cannot tell a person whether the suite is minutes or hours,
so every entry gets one, and says where it came from:

- **measured here before** (:data:`MEASURED`): the same entry's duration on this system in the store's latest
  run of it (the plan reads it; nothing here guesses it);
- **model** (:data:`MODEL`): the cost model below, from the entry's own settings, the work it does (FLOPs and
  bytes counted from its shapes and the model it builds, on the meta device) and the device's datasheet peak
  (:mod:`accelbench.system.specs`, a CPU's estimated peak) at a stated efficiency.

The model, by family:

- kernels: the worker process's start (once per shared process), the setup and the check against the fp64
  reference, the warm-up (``--warmup-time``) and the timing budget: at least ``--min-time`` and ``--min-reps``
  calls, at most ``--max-time``; a call lasts its FLOPs (bytes) over the peak (bandwidth) at
  :data:`KERNEL_EFFICIENCY` (:data:`BANDWIDTH_EFFICIENCY`);
- models (``train/*``, ``tta/*``): the start, the build, ``--batch-size auto``'s trials, then warm-up and
  measured steps, each step its FLOPs (counted as the run counts them) over the peak at the family's efficiency,
  never under a step's launch floor;
- LoadGen (``infer/*``): the start, the build, the calibration probe, then what LoadGen's own plan for the
  profile lasts at the modelled rate (never under the profile's minimum duration).

Every constant is named here with its reason. Those not derived from a published row or a figure measured in
this repository are assumptions, said as such: ``accelbench run SUITE --sample N`` measures them, printing each
entry's estimate beside its time and the error over the sample.
"""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from accelbench import registry

if TYPE_CHECKING:
    import torch

    from accelbench.suite.suites import Entry

#: where an estimate came from
MEASURED, MODEL = "measured here before", "model"


@dataclass(frozen=True)
class Costs:
    """The fixed costs of one class of device (a CPU, an accelerator), in seconds."""

    #: a worker process's start: fork from the warm worker server, open the device
    process_start: float
    #: a fresh interpreter under torchrun (allreduce's ranks, a multi-process training run): Python, torch, device
    interpreter_start: float
    #: a kernel's inputs made and checked once against its fp64 reference
    kernel_setup: float
    #: a model built, moved to the device and its optimizer made
    model_build: float
    #: a language model's weights drawn on the device at full size (8B parameters: 16 GB in bf16)
    llm_build: float
    #: the least a training step lasts, whatever its FLOPs: launching its kernels from Python
    step_floor: float
    #: the least a language model's decode step lasts: transformers' continuous batching, eager, from Python
    decode_floor: float
    #: a vision model's step (training or serving) in PyTorch eager, as a share of the device's peak at its
    #: precision: in a 16-bit or TF32 precision (tensor cores), and in FP32 (an accelerator's plain FP32 units,
    #: whose lower peak a convolution fills far better)
    vision_efficiency: float
    vision_fp32_efficiency: float

    def vision(self, precision: str) -> float:
        """The vision efficiency of ``precision``'s arithmetic."""
        from accelbench.devices.precision import peak_key

        return self.vision_fp32_efficiency if peak_key(precision) == "fp32" else self.vision_efficiency


#: CPU figures are those of the README's quick run on a 2-core AMD EPYC (Zen 5): a 1024^3 GEMM, warm-up 0.1 s and
#: min-time 0.5 s, took 0.7-0.8 s an entry (start and setup 0.1-0.2 s); the two-rank all-reduce took 3.6 s for two
#: sizes of 0.6 s each (2.4 s: the two ranks' fresh interpreters, started side by side); NCF tiny, 34 tiny steps,
#: took 1.0 s (build and start); BERT tiny took 1.1 s for its 34 steps (about 10 ms a step over the start);
#: ResNet-18 tiny took 3.7 s, 34 steps of about 80 ms after that second, which is 32% of the 2-core estimated
#: peak at the 0.87 GFLOP a sample the counter finds; serving llama3.1-8b tiny Server took 7.9 s, 662 requests of
#: 16 tokens at half the rate: about 2.5 ms a decode step. Accelerator figures are assumptions (no run of this
#: suite on a GPU is stored yet), except the vision efficiency: a CUDA context, cuBLAS/cuDNN handles and the
#: allocator's first blocks in each new process; a ResNet-sized step launches hundreds of kernels from Python
#: (about 5 ms); an 8B decoder's eager decode step launches about 32 layers x 20 kernels (about 25 ms); drawing
#: 8B random weights and transformers' model build. The accelerator's vision efficiencies are Lambda's published
#: PyTorch ResNet-50 rows (reference_results.csv) x 24.3 GFLOP an image (counted forward + backward as the run
#: counts it) over the datasheet peak: amp_fp16 on one H100 80GB SXM5, 2,616 images/s over 989.4 TFLOPS: 6.4%;
#: FP32 on one Quadro RTX 8000 (Turing: no TF32, so plain FP32), 274 images/s over 16.3 TFLOPS: 41%.
#: ``--sample`` on a GPU measures them all.
COSTS = {
    "cpu": Costs(
        process_start=0.15,
        interpreter_start=2.4,
        kernel_setup=0.1,
        model_build=0.8,
        llm_build=1.0,
        step_floor=0.01,
        decode_floor=0.0025,
        vision_efficiency=0.32,
        vision_fp32_efficiency=0.32,
    ),
    "accelerator": Costs(
        process_start=3.0,
        interpreter_start=6.0,
        kernel_setup=0.3,
        model_build=3.0,
        llm_build=20.0,
        step_floor=0.005,
        decode_floor=0.025,
        vision_efficiency=0.064,
        vision_fp32_efficiency=0.41,
    ),
}

#: a large kernel's share of the datasheet peak: cuBLAS reaches 70-80% of dense peak on 8192^3 GEMMs; only the
#: call's length depends on it, which counts where min-reps calls outlast min-time (a long call)
KERNEL_EFFICIENCY = 0.7
#: a streaming copy's share of the datasheet bandwidth (STREAM-like kernels reach 80-90% of HBM's figure)
BANDWIDTH_EFFICIENCY = 0.8
#: calls besides the timed ones: the check runs the kernel once beside its reference
CHECK_CALLS = 2
#: a language model's training step, MFU: torchtitan's published llama3.1-8b eager FSDP row (5,762 tokens/s per
#: H100, reference_results.csv) x about 55 GFLOP a token at 8,192 tokens over 989.4 TFLOPS bf16: about 32%
LLM_TRAIN_MFU = 0.32
#: a decoder's prefill, share of the peak: batched prompt tokens are large GEMMs (assumed half of the peak)
PREFILL_EFFICIENCY = 0.5
#: a decode step's share of the memory bandwidth (weights and KV cache read once a step; assumed: continuous
#: batching's gather and Python bookkeeping halve what a fused server reaches)
DECODE_BANDWIDTH_EFFICIENCY = 0.5


def _inferred(seconds: float, parts: list[tuple[str, float]]) -> tuple[float, str]:
    return seconds, " + ".join(f"{name} {_short(s)}" for name, s in parts if s > 0) or "no work"


def _short(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


@dataclass(frozen=True)
class Estimate:
    """An entry's seconds, where they came from (:data:`MEASURED` or :data:`MODEL`) and what they add up."""

    seconds: float
    source: str
    how: str

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "source": self.source, "how": self.how}


@dataclass(frozen=True)
class Target:
    """What the entries run on: the device, how many of its kind this machine has, and its peaks."""

    device: "torch.device"
    devices: int

    @classmethod
    def of(cls, name: str | None) -> "Target":
        """The device ``--device`` names (``auto``: the first accelerator, else the CPU)."""
        from accelbench.devices import resolve_device
        from accelbench.devices.kind import kind_of

        device = resolve_device(name or "auto")
        kind = kind_of(device)
        return cls(device, kind.count() if kind.accelerator else 1)

    @property
    def costs(self) -> Costs:
        from accelbench.devices.kind import kind_of

        return COSTS["accelerator" if kind_of(self.device).accelerator else "cpu"]

    def flops(self, precision: str) -> float | None:
        """FLOP/s at ``precision``'s peak (the datasheet's; a CPU's estimate), None where none is known."""
        from accelbench.system.specs import peak_for

        peak = peak_for(self.device, precision)
        return peak.tflops * 1e12 if peak else None

    def bandwidth(self) -> float | None:
        """Bytes/s of memory bandwidth (the datasheet's), None on a CPU."""
        from accelbench.system.specs import bandwidth_peak_for

        bw = bandwidth_peak_for(self.device)
        return bw[0] * 1e9 if bw else None

    def unsupported(self, precision: str) -> str | None:
        """Why the device cannot compute ``precision`` (the entry is skipped at once), or None."""
        from accelbench.devices.precision import precision_reason

        return precision_reason(self.device, precision)


def _model_of(target: str) -> Callable[[Any, Target], tuple[float, str]]:
    """The cost model a registry entry names ("module:function"), or the generic one."""
    if not target:
        return _generic
    module, _, name = target.partition(":")
    model: Callable[[Any, Target], tuple[float, str]] = getattr(importlib.import_module(module), name)
    return model


def modelled(entry: "Entry", target: Target, starts_process: bool = True) -> Estimate:
    """The cost model's seconds for ``entry`` on ``target``; ``starts_process``: it is the first in its worker
    process (a shared kernel process starts once)."""
    info = registry.get(entry.benchmark)
    params = info.make_params(entry.params)
    model = _model_of(info.estimate)
    start = target.costs.process_start if starts_process else 0.0
    try:
        why = _skipped(params, target)
        seconds, how = (0.0, f"skipped at once ({why})") if why else model(params, target)
    except Exception as exc:  # noqa: BLE001 - a model that cannot be counted here: the start-up, and why
        seconds, how = 0.0, f"its work could not be modelled ({type(exc).__name__})"
    if start:
        how = f"start {_short(start)} + {how}"
    return Estimate(start + seconds, MODEL, how)


def _skipped(params: Any, target: Target) -> str | None:
    """Why the entry will be skipped at once for its precision (the device lacks it), or None."""
    precision = getattr(params, "effective_precision", None) or getattr(params, "precision", None)
    if not isinstance(precision, str) or precision == "auto":
        return None
    try:
        return target.unsupported(precision)
    except Exception:  # noqa: BLE001 - a precision the table does not know: the benchmark itself says
        return None


# -- kernels -----------------------------------------------------------------------------------------------------


def _timing(p: Any, call: float) -> list[tuple[str, float]]:
    """The timer's budget around calls of ``call`` seconds (:class:`accelbench.measure.timer.TimerConfig`)."""
    from accelbench.measure.timer import TimerConfig

    warm = max(p.warmup_time, TimerConfig.min_warmup_calls * call)
    timed = min(p.max_time, max(p.min_time, p.min_reps * call))
    return [("warm-up", warm), ("timing", timed)]


def _kernel(work: Callable[[Any], float], unit: str = "flops") -> Callable[[Any, Target], tuple[float, str]]:
    def model(p: Any, target: Target) -> tuple[float, str]:
        precision = getattr(p, "precision", "fp32")
        rate = target.bandwidth() if unit == "bytes" else target.flops(precision)
        eff = BANDWIDTH_EFFICIENCY if unit == "bytes" else KERNEL_EFFICIENCY
        call = work(p) / (rate * eff) if rate else 0.0
        parts = [("setup", target.costs.kernel_setup + CHECK_CALLS * call), *_timing(p, call)]
        return _inferred(sum(s for _, s in parts), parts)

    return model


def _gemm(p: Any) -> float:
    from accelbench.kernels.gemm import gemm_flops

    return float(gemm_flops(p.m, p.n, p.k, p.batch))


def _conv(p: Any) -> float:
    from accelbench.kernels.conv import conv_flops

    return float(conv_flops(p))


def _rnn(p: Any) -> float:
    from accelbench.kernels.rnn import rnn_flops

    return float(rnn_flops(p))


def _attention(p: Any) -> float:
    from accelbench.kernels.attention import attention_flops

    return float(attention_flops(p))


def _sparse(p: Any) -> float:
    from accelbench.kernels.sparse import sparse_flops

    nnz = p.m * p.k // 2 if p.format == "semi24" else int(p.density * p.m * p.k)
    return float(sparse_flops(nnz, p.n))


def _membw(p: Any) -> float:
    from accelbench.kernels.membw import membw_bytes
    from accelbench.params import parse_size

    return float(membw_bytes(p.op, parse_size(p.size)))


def _allreduce(p: Any, target: Target) -> tuple[float, str]:
    from accelbench.params import parse_size

    accelerator = target.costs is COSTS["accelerator"]
    if accelerator and p.nproc > target.devices:
        return 0.0, f"skipped at once ({p.nproc} processes, {target.devices} device(s))"
    sizes = [parse_size(s) for s in str(p.sizes).split(",") if s.strip()]
    bw = target.bandwidth()
    per_size = [_timing(p, 2.0 * n / (bw * BANDWIDTH_EFFICIENCY) if bw else 0.0) for n in sizes]
    parts = [("ranks' start", target.costs.interpreter_start)]
    parts.append((f"{len(sizes)} sizes timed", sum(s for timing in per_size for _, s in timing)))
    return _inferred(sum(s for _, s in parts), parts)


# -- models ------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def vision_flops(model: str, scale: str, train: bool) -> float | None:
    """FLOPs of one sample (forward, + backward when ``train``), counted by torch's FlopCounterMode as the
    training record counts them, on the meta device (no memory, no time); None where the model cannot be
    followed there."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from accelbench.workloads import workload_class

    workload = workload_class(model)()
    batch = 2  # batch norm needs more than one sample in training
    try:
        with torch.device("meta"):
            net = workload.build(scale)
        data = workload.synthetic_batch(batch, torch.device("meta"), scale)
        with FlopCounterMode(display=False) as counter:
            if train:
                workload.loss(net, data).backward()
            else:
                with torch.no_grad():
                    workload.loss(net, data)
    except Exception:  # noqa: BLE001 - an op the meta device cannot run (a .item()): no count
        return None
    total = counter.get_total_flops()
    return total / batch if total else None


def _default_batch(model: str, target: Target) -> int:
    """The model's published per-device batch for the device's class (:class:`accelbench.workloads.base.ModelInfo`)."""
    from accelbench.workloads import model_info
    from accelbench.workloads.base import batch_class, by_batch_class

    table = by_batch_class(model_info(model).default_batch)
    return table.get(batch_class(target.device)) or max(table.values())


def _train(p: Any, target: Target) -> tuple[float, str]:
    costs = target.costs
    default = _default_batch(p.model, target)
    auto = p.batch_size == "auto"
    batch = (p.max_batch_size or default) if auto else default if p.batch_size == "default" else int(p.batch_size)
    flops = vision_flops(p.model, p.scale, True)
    peak = target.flops(p.precision)

    def step(b: int) -> float:
        compute = flops * b / (peak * costs.vision(p.precision)) if flops and peak else 0.0
        return max(costs.step_floor, compute)

    parts = [("build", costs.model_build)]
    if p.nproc > 1:
        parts.append(("ranks' start", costs.interpreter_start))
    if auto:  # doubling from the model's default to the cap, two steps a trial (the cap assumed to fit)
        start = min(default, batch)
        trials = [start * 2**i for i in range(max(0, math.ceil(math.log2(batch / max(start, 1)))) + 1)]
        parts.append((f"{len(trials)} batch trials", sum(2 * step(min(b, batch)) for b in trials)))
    steps = p.warmup + p.num_batches + 1  # the FLOP-counting step too
    parts.append((f"{steps} steps of {_short(step(batch))}", steps * step(batch)))
    return _inferred(sum(s for _, s in parts), parts)


@functools.lru_cache(maxsize=16)
def _llm_train_flops(model: str, scale: str, layers: int, seq_len: int) -> float:
    """FLOPs per trained token by torchtitan's convention (:mod:`accelbench.train.llm.flops`), on the meta device."""
    from types import SimpleNamespace

    from accelbench.train.llm import flops as llm_flops
    from accelbench.train.llm import model as llm_model

    config = llm_model.config_for(SimpleNamespace(model=model, scale=scale, layers=layers))
    return llm_flops.of_config(config, seq_len).per_token()


def _train_llm(p: Any, target: Target) -> tuple[float, str]:
    from accelbench.train.llm.model import step_precision
    from accelbench.train.llm.specs import micro_batch, seq_len_of

    costs = target.costs
    seq = seq_len_of(p)
    tokens = micro_batch(p) * seq * p.grad_accum
    peak = target.flops(step_precision(p.precision))
    per_token = _llm_train_flops(p.model, p.scale, p.layers, seq)
    step = max(costs.step_floor, tokens * per_token / (peak * LLM_TRAIN_MFU) if peak else 0.0)
    parts = [("build", costs.model_build)]
    if p.nproc > 1:
        parts.append(("ranks' start", costs.interpreter_start))
    steps = p.warmup + p.num_batches
    parts.append((f"{steps} steps of {_short(step)}", steps * step))
    return _inferred(sum(s for _, s in parts), parts)


def _tta(p: Any, target: Target) -> tuple[float, str]:
    """A bound: every seed to its epoch cap (a run that reaches its target sooner ends sooner)."""
    from accelbench.tta.recipes import recipe

    costs = target.costs
    r = recipe(p.workload)
    epochs = p.max_epochs or r.max_epochs
    if r.needs_data_dir:
        build = costs.model_build
        return build, f"build {_short(build)}; its epochs' length is unknown before it reads its data"
    train, _ = r.load(None, p.scale)
    from accelbench.workloads.base import batch_class

    batch = p.batch_size or r.batch_size[batch_class(target.device)]
    steps = epochs * r.steps_per_epoch(train, batch)
    runs = p.seeds
    bound = f"{runs} x {epochs} epochs ({steps} steps, a bound)"
    parts = [("build", costs.model_build), (bound, runs * steps * costs.step_floor)]
    return _inferred(sum(s for _, s in parts), parts)


# -- LoadGen -----------------------------------------------------------------------------------------------------


def _loadgen(p: Any, target: Target) -> tuple[float, str]:
    from accelbench.infer import settings as lg
    from accelbench.loadgen.params import QSL_SAMPLES

    costs = target.costs
    flops = vision_flops(p.model, p.scale, False)
    peak = target.flops(p.effective_precision)
    batch_seconds = max(
        costs.step_floor, flops * p.batch_size / (peak * costs.vision_efficiency) if flops and peak else 0.0
    )
    single = max(costs.step_floor, flops / (peak * costs.vision_efficiency) if flops and peak else 0.0)
    rate = p.batch_size / batch_seconds
    probe = 2 * (batch_seconds + single) + _probed(batch_seconds, lg.PROBE_BATCHES) + _probed(single, lg.PROBE_SINGLES)
    duration = p.duration or (600.0 if p.profile == "official" else 2.0)
    if p.mode == "accuracy":
        run, what = QSL_SAMPLES[p.profile] / rate, "accuracy pass"
    elif p.mode == "find-peak":
        from accelbench.loadgen import search

        trials = math.ceil(math.log2(1 / search.PRECISION)) + search.CONFIRMATIONS
        run, what = trials * (duration + search.TRIAL_OVERHEAD), f"{trials} trials"
    else:
        run, what = _loadgen_run(p, rate, single, duration), f"{p.scenario} run"
    parts = [("build", costs.model_build), ("probe", probe), (what, run)]
    return _inferred(sum(s for _, s in parts), parts)


def _probed(call: float, most: int) -> float:
    """:func:`accelbench.infer.settings.median_seconds`'s length: until ``PROBE_SECONDS`` and ``PROBE_MIN_CALLS``."""
    from accelbench.infer import settings as lg

    return min(most * call, max(lg.PROBE_SECONDS, lg.PROBE_MIN_CALLS * call))


def _loadgen_run(p: Any, rate: float, single: float, duration: float) -> float:
    """What LoadGen's plan lasts at ``rate`` (:mod:`accelbench.infer.settings`): the profile's minimum duration,
    or longer where its minimum query count at the planned rate says so."""
    from accelbench.infer import settings as lg
    from accelbench.loadgen import settings as lgf

    quick = p.profile == "quick"
    if p.scenario == "offline":
        return lgf.loadgen_offline_size(rate * lgf.OFFLINE_HEADROOM, int(duration * 1000), 1) / rate
    if p.scenario == "server":
        target_qps = p.target_qps or max(1.0, min(rate * lg.SERVER_FRACTION, lg.SERVER_DEFAULT_MAX))
        return max(duration, lgf.QUICK_TAIL_QUERIES / target_qps if quick else 0.0)
    if p.scenario == "singlestream":
        return max(duration, 64 * single if quick else 0.0)
    return max(duration, lgf.QUICK_TAIL_QUERIES * p.samples_per_query / rate if quick else 0.0)


@functools.lru_cache(maxsize=16)
def _decoder(model: str, scale: str, element: int) -> Any:
    """The served decoder's parameters, KV bytes and FLOPs per token (:func:`accelbench.workloads.decoder.figures`)."""
    from accelbench.workloads import workload_class
    from accelbench.workloads.decoder import Decoder, config_of, figures

    decoder = workload_class(model)
    assert issubclass(decoder, Decoder)  # infer/llm serves language models only (its params validate so)
    return figures(config_of(decoder.preset, scale), element)


def _llm_serve(p: Any, target: Target) -> tuple[float, str]:
    from accelbench.loadgen import settings as lg
    from accelbench.serve import loadgen as token_loadgen
    from accelbench.serve import probe as token_probe
    from accelbench.serve.engines.base import engine_class
    from accelbench.serve.limits import lengths

    costs = target.costs
    element = 4 if p.effective_precision == "fp32" else 2
    figs = _decoder(p.model, p.scale, element)
    prompt, out = lengths(p)
    peak, bw = target.flops(p.effective_precision), target.bandwidth()
    prefill = prompt * figs.flops_per_token / (peak * PREFILL_EFFICIENCY) if peak else 0.0

    def step(b: int) -> float:
        read = figs.params * element + b * (prompt + out / 2) * figs.kv_bytes_per_token
        compute = b * figs.flops_per_token / (peak * PREFILL_EFFICIENCY) if peak else 0.0
        return max(costs.decode_floor, read / (bw * DECODE_BANDWIDTH_EFFICIENCY) if bw else 0.0, compute)

    batch = p.batch_size
    batch_seconds = batch * prefill + out * step(batch)
    single = prefill + out * step(1)
    rate = batch / batch_seconds  # requests/s
    warmups = 2  # the probe's batches until two agree (PROBE_WARMUPS at most): assumed the second agrees
    probe = (1 + warmups) * batch_seconds + single
    duration = p.duration or (600.0 if p.profile == "official" else 2.0)

    def closed(users: int) -> float:  # a closed loop of ``users`` (drive.closed_plan): rounds enough, at their rate
        at = users / (users * prefill + out * step(users))
        if p.num_requests:  # --num-requests N: those past the warm-up, no minimum duration
            return float((p.num_requests + users) / at + single)
        least = token_loadgen.quick_requests(at, lg.QUICK_TAIL_QUERIES) if p.profile == "quick" else 0
        return max(duration, (max(least, 3 * users) + 2 * users) / at) + single

    if p.mode == "sweep" and not p.rates:
        from accelbench.serve.sweep import points

        users = [int(c) for c in points(p)]
        run, what = sum(closed(c) + (1 + warmups) * batch_seconds for c in users), f"{len(users)} closed loops"
    elif p.mode != "performance":
        bound = token_probe.PROBE_WARMUPS
        run, what = bound * batch_seconds, f"{p.mode} (a bound of {bound} batches)"
    elif p.scenario == "offline":
        planned = lg.loadgen_offline_size(rate * lg.OFFLINE_HEADROOM, int(duration * 1000), 1) + 1
        requests = max(planned, engine_class(p.engine).min_requests(p))
        run, what = math.ceil(requests / batch) * batch_seconds, f"offline {requests} requests"
    elif p.scenario == "singlestream":
        run, what = max(duration, 64 * single), "singlestream run"
    elif p.scenario == "concurrency":
        run, what = closed(int(p.concurrency)), f"closed loop of {p.concurrency} users"
    else:  # server, interactive: the quick minute's requests at half the probed rate, and the last one's answer
        qps = p.target_qps or max(rate * token_loadgen.SERVER_FRACTION, 0.1)
        requests = token_loadgen.quick_requests(qps, lg.QUICK_TAIL_QUERIES) if p.profile == "quick" else 0
        run, what = max(duration, requests / qps) + single, f"{p.scenario} {requests} requests"
    parts = [("build", costs.llm_build), ("probe", probe), (what, run)]
    return _inferred(sum(s for _, s in parts), parts)


def _generic(p: Any, target: Target) -> tuple[float, str]:
    """A benchmark with no model of its own (a plugin's, a self-test): the least its settings ask for."""
    floor = p.planned_seconds()
    return (floor or 0.0), (f"its own minimum {_short(floor)}" if floor else "no model of its work: start-up only")


# each benchmark's cost model, named by its registry entry (``BenchmarkInfo.estimate``)
gemm = _kernel(_gemm)
conv = _kernel(_conv)
rnn = _kernel(_rnn)
attention = _kernel(_attention)
sparse = _kernel(_sparse)
membw = _kernel(_membw, "bytes")
allreduce = _allreduce
train = _train
train_llm = _train_llm
tta = _tta
loadgen = _loadgen
llm_serve = _llm_serve
