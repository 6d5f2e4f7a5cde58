"""How long an entry will take, before it runs: the time it took here before, else a stated cost model.

A plan that says "no estimate" for most of a suite cannot tell a person whether it is minutes or hours, so every
entry gets one, saying where it came from: **measured here before** (:data:`MEASURED`, the store's latest run of the
same entry on this system) or **model** (:data:`MODEL`): the benchmark's own cost model, beside its run in its
family (``BenchmarkInfo.estimate``), asked about the :class:`Target` with the :data:`COSTS` of its class of device.
Those costs not measured in this repository are assumptions, said as such; ``accelbench run SUITE --sample N``
measures them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from accelbench import registry
from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason
from accelbench.kit.estimate import Costs, short
from accelbench.plugins import load_object
from accelbench.system.specs import bandwidth_peak_for, peak_for

if TYPE_CHECKING:
    import torch

    from accelbench.suite.suites import Entry

#: where an estimate came from
MEASURED, MODEL = "measured here before", "model"

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
    """What the entries run on: the device, how many of its kind this machine has, and its peaks (a family's model
    reads it as :class:`accelbench.kit.estimate.Target`)."""

    device: "torch.device"
    devices: int

    @classmethod
    def of(cls, name: str | None) -> "Target":
        """The device ``--device`` names (``auto``: the first accelerator, else the CPU)."""
        device = resolve_device(name or "auto")
        kind = kind_of(device)
        return cls(device, kind.count() if kind.accelerator else 1)

    @property
    def accelerator(self) -> bool:
        return kind_of(self.device).accelerator

    @property
    def costs(self) -> Costs:
        return COSTS["accelerator" if self.accelerator else "cpu"]

    def flops(self, precision: str) -> float | None:
        """FLOP/s at ``precision``'s peak (the datasheet's; a CPU's estimate), None where none is known."""
        peak = peak_for(self.device, precision)
        return peak.tflops * 1e12 if peak else None

    def bandwidth(self) -> float | None:
        """Bytes/s of memory bandwidth (the datasheet's), None on a CPU."""
        bw = bandwidth_peak_for(self.device)
        return bw[0] * 1e9 if bw else None

    def unsupported(self, precision: str) -> str | None:
        """Why the device cannot compute ``precision`` (the entry is skipped at once), or None."""
        return precision_reason(self.device, precision)


def _model_of(target: str) -> Callable[[Any, Target], tuple[float, str]]:
    """The cost model a registry entry names ("module:function"), or the generic one."""
    if not target:
        return _generic
    model: Callable[[Any, Target], tuple[float, str]] = load_object(target, "cost model")
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
        how = f"start {short(start)} + {how}"
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


def _generic(p: Any, target: Target) -> tuple[float, str]:
    """A benchmark with no model of its own (a plugin's, a self-test): the least its settings ask for."""
    floor = p.planned_seconds()
    return (floor or 0.0), (f"its own minimum {short(floor)}" if floor else "no model of its work: start-up only")
