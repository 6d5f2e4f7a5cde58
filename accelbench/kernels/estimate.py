"""How long a kernel's entry takes, from its own timing budget: the setup and the check against the fp64 reference,
the warm-up (``--warmup-time``) and at least ``--min-time`` and ``--min-reps`` calls, at most ``--max-time``; a call
lasts its FLOPs (bytes) over the target's peak (bandwidth) at a stated efficiency."""

from __future__ import annotations

from typing import Callable, TypeVar

from accelbench.kernels.attention import attention_flops
from accelbench.kernels.conv import conv_flops
from accelbench.kernels.gemm import gemm_flops
from accelbench.kernels.membw import membw_bytes
from accelbench.kernels.rnn import rnn_flops
from accelbench.kernels.sparse import sparse_flops
from accelbench.kernels.specs import (
    AllreduceParams,
    AttentionParams,
    ConvParams,
    GemmParams,
    MembwParams,
    RnnParams,
    SparseParams,
)
from accelbench.kit.estimate import Model, Target, summed
from accelbench.measure.timer import TimerConfig
from accelbench.params import KernelParams, TimingParams, parse_size

#: a large kernel's share of the datasheet peak: cuBLAS reaches 70-80% of dense peak on 8192^3 GEMMs; only the
#: call's length depends on it, which counts where min-reps calls outlast min-time (a long call)
KERNEL_EFFICIENCY = 0.7
#: a streaming copy's share of the datasheet bandwidth (STREAM-like kernels reach 80-90% of HBM's figure)
BANDWIDTH_EFFICIENCY = 0.8
#: calls besides the timed ones: the check runs the kernel once beside its reference
CHECK_CALLS = 2

K = TypeVar("K", bound=KernelParams)


def _timing(p: TimingParams, call: float) -> list[tuple[str, float]]:
    """The timer's budget around calls of ``call`` seconds (:class:`accelbench.measure.timer.TimerConfig`)."""
    warm = max(p.warmup_time, TimerConfig.min_warmup_calls * call)
    timed = min(p.max_time, max(p.min_time, p.min_reps * call))
    return [("warm-up", warm), ("timing", timed)]


def _kernel(work: Callable[[K], float], unit: str = "flops") -> Model[K]:
    def model(p: K, target: Target) -> tuple[float, str]:
        precision = getattr(p, "precision", "fp32")
        rate = target.bandwidth() if unit == "bytes" else target.flops(precision)
        eff = BANDWIDTH_EFFICIENCY if unit == "bytes" else KERNEL_EFFICIENCY
        call = work(p) / (rate * eff) if rate else 0.0
        return summed([("setup", target.costs.kernel_setup + CHECK_CALLS * call), *_timing(p, call)])

    return model


def _sparse(p: SparseParams) -> float:
    nnz = p.m * p.k // 2 if p.format == "semi24" else int(p.density * p.m * p.k)
    return float(sparse_flops(nnz, p.n))


def allreduce(p: AllreduceParams, target: Target) -> tuple[float, str]:
    """The ranks' fresh interpreters, then each size's timing budget at twice its bytes over the bandwidth."""
    if target.accelerator and p.nproc > target.devices:
        return 0.0, f"skipped at once ({p.nproc} processes, {target.devices} device(s))"
    sizes = [parse_size(s) for s in str(p.sizes).split(",") if s.strip()]
    bw = target.bandwidth()
    per_size = [_timing(p, 2.0 * n / (bw * BANDWIDTH_EFFICIENCY) if bw else 0.0) for n in sizes]
    timed = sum(s for timing in per_size for _, s in timing)
    return summed([("ranks' start", target.costs.interpreter_start), (f"{len(sizes)} sizes timed", timed)])


gemm: Model[GemmParams] = _kernel(lambda p: float(gemm_flops(p.m, p.n, p.k, p.batch)))
conv: Model[ConvParams] = _kernel(lambda p: float(conv_flops(p)))
rnn: Model[RnnParams] = _kernel(lambda p: float(rnn_flops(p)))
attention: Model[AttentionParams] = _kernel(lambda p: float(attention_flops(p)))
sparse: Model[SparseParams] = _kernel(_sparse)
membw: Model[MembwParams] = _kernel(lambda p: float(membw_bytes(p.op, parse_size(p.size))), "bytes")
