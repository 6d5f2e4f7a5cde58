"""A stored result beside the published rows of the same task and model, with what differs said in words.

No row is hidden for being different: the ratio is printed with a comparability note (TensorFlow + XLA
against PyTorch eager, fp16 against bf16, batch 1024 against 256, real against synthetic data, a tiny
model against the full one), so the reader judges; rows that differ in nothing but the machine say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.reference.table import TASKS, Reference, select
from accelbench.results import format as fmt
from accelbench.results.record import Result

#: a published precision and the accelbench precisions that run the same arithmetic
_SAME_PRECISION = {
    "fp32": {"fp32"},
    "fp32/tf32": {"fp32", "tf32"},
    "fp16": {"amp_fp16", "fp16"},  # TensorFlow's fp16 in these tables is mixed precision
    "amp_fp16": {"amp_fp16"},
    "bf16": {"amp_bf16", "bf16"},
    "mixed": {"amp_fp16", "amp_bf16"},
}


@dataclass(frozen=True)
class Match:
    result: Result
    reference: Reference
    #: this result's figure over the published one, for the whole system and per device
    ratio: float
    ratio_per_device: float | None
    #: each side's rate per USD/h, where both have a price
    per_usd_hour: float | None
    reference_per_usd_hour: float | None
    differences: tuple[str, ...]

    @property
    def per_dollar(self) -> str:
        """'4.15 vs 475.5' (rate per USD/h here and there), where the published row has a price."""
        if self.reference_per_usd_hour is None:
            return ""
        own = fmt.number(self.per_usd_hour) if self.per_usd_hour is not None else "no price here"
        return f"{own} vs {fmt.number(self.reference_per_usd_hour)}"

    @property
    def comparable(self) -> str:
        return "same setup" if not self.differences else "; ".join(self.differences)

    def to_dict(self) -> dict[str, Any]:
        return {
            "result_id": self.result.id,
            "reference": self.reference.to_dict(),
            "ratio": self.ratio,
            "ratio_per_device": self.ratio_per_device,
            "per_usd_hour": self.per_usd_hour,
            "reference_per_usd_hour": self.reference_per_usd_hour,
            "differences": list(self.differences),
        }


def _framework(r: Result) -> str:
    version = str(((r.system.get("profile") or {}).get("torch") or {}).get("version") or "").split("+")[0]
    if r.benchmark == "infer/loadgen":
        return f"accelbench's {r.params.get('backend', 'torch')} backend (PyTorch {version})"
    mode = "torch.compile" if r.params.get("compile") else "eager"
    return f"PyTorch {version} {mode}"


def differences(r: Result, ref: Reference) -> tuple[str, ...]:
    """What differs between how ``r`` was measured and how ``ref`` was, in the reader's words."""
    out: list[str] = []
    if r.params.get("scale", "full") != "full":
        out.append(f"accelbench's {r.params.get('scale')}-scale {r.params.get('model')}, not the full model")
    if not ref.framework.startswith("PyTorch") or r.benchmark == "infer/loadgen":
        out.append(f"{ref.framework} vs {_framework(r)}")
    precision = str(r.params.get("precision", ""))
    if ref.precision == "not stated":
        out.append(f"published precision not stated (here {precision})")
    elif precision not in _SAME_PRECISION.get(ref.precision, {ref.precision}):
        out.append(f"{ref.precision} vs {precision}")
    if r.benchmark == "infer/loadgen":
        if r.params.get("profile", "quick") != "official":
            out.append("accelbench's quick LoadGen profile (seconds), not MLPerf's 600 s official run")
        if r.valid is False:
            out.append("this run is INVALID by LoadGen's rules")
    batch = r.params.get("batch_size")
    if ref.batch_per_device and str(batch) != ref.batch_per_device:
        out.append(f"batch {ref.batch_per_device} vs {batch} per device")
    elif not ref.batch_per_device:
        out.append(f"published batch not stated (here {batch} per device)")
    data = _data(r)
    if not ref.data.startswith(data):
        out.append(f"{ref.data} vs {data} data")
    devices = _devices(r)
    if ref.devices is not None and ref.devices != devices:
        out.append(f"{ref.devices} vs {devices} device(s): compare per device")
    return tuple(out)


def _data(r: Result) -> str:
    """'real' or 'synthetic', as the reference rows' data column begins."""
    if r.benchmark == "tta/time_to_target" or r.params.get("dataset"):
        return "real"
    return str(r.params.get("data", "synthetic"))


def _devices(r: Result) -> int:
    return int(r.params.get("nproc", 1) or 1) * int(r.params.get("nnodes", 1) or 1)


#: the record's metric that a published metric is compared with
_METRIC = {
    "throughput": "throughput",
    "queries_per_second": "queries_per_second",
    "time_to_target": "time_to_target_seconds",
    "cost_to_target": "cost_to_target_usd",
}
#: published metrics where more is better (a rate); the others are times and costs
_RATES = {"throughput", "queries_per_second"}


def _figure(r: Result, ref: Reference) -> float | None:
    m = r.metrics.get(_METRIC.get(ref.metric, ""))
    return m.value if m is not None and m.value else None


def matches(result: Result) -> list[Match]:
    """The published rows of ``result``'s task and model (absolute figures only), each with its ratio."""
    task = next((t for t, bench in TASKS.items() if bench == result.benchmark), None)
    if result.benchmark == "infer/loadgen":
        task = f"inference_{result.params.get('scenario', '')}"
    model = result.params.get("model") or result.params.get("workload")
    if task is None or not model or result.status != "ok":
        return []
    out = []
    price = (result.system.get("price") or {}).get("usd_per_hour")
    for ref in select(model=str(model), task=task):
        if ref.is_ratio or ref.metric not in _METRIC:
            continue
        value = _figure(result, ref)
        if value is None:
            continue
        # a time is better when lower: the ratio is always "this machine's speed over the published one"
        rate = ref.metric in _RATES
        ratio = value / ref.value if rate else ref.value / value
        per_dev = (value / _devices(result)) / ref.per_device if rate and ref.per_device is not None else None
        own_per_usd = value / price if price and rate else None
        out.append(Match(result, ref, ratio, per_dev, own_per_usd, ref.per_usd_hour, differences(result, ref)))
    return out


def ratio_rows(accelerators: tuple[str, str]) -> list[Reference]:
    """Published ratios between two accelerators a user holds (seed 000's V100-PCIe over T4), either way round."""
    a, b = accelerators
    out = []
    for ref in select():
        if not ref.is_ratio or " vs " not in ref.accelerator:
            continue
        hi, lo = ref.accelerator.split(" vs ", 1)
        if {_short(hi), _short(lo)} == {_short(a), _short(b)}:
            out.append(ref)
    return out


def _short(name: str) -> str:
    """'Tesla V100-PCIe' and 'NVIDIA Tesla V100-PCIE-16GB' -> 'v100'; 'Tesla T4' -> 't4'."""
    for word in name.lower().replace("-", " ").split():
        if any(c.isdigit() for c in word) and any(c.isalpha() for c in word):
            return word
    return name.lower()
