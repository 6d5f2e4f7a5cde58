"""A stored result beside the published rows of the same task and model, with what differs said in words.

No row is hidden, but a ratio is printed only between like and like: where the scale, model, precision, scenario
or the run's fitness (:func:`~accelbench.results.judge.set_aside_by`) differ, the row reads "n/a: REASON" with no
ratio or bar, since such a ratio measures the work, not the machines. Differences that leave the work the same are
said beside the ratio; tokens' own rules are :mod:`.tokens`'s, LLM training's :mod:`.llm_train`'s."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from accelbench.families import PYTORCH, Published, family_of
from accelbench.reference import llm_train, tokens
from accelbench.reference.table import Reference, select
from accelbench.results import format as fmt
from accelbench.results.details import accuracy_gates, latency_bound_ms
from accelbench.results.judge import set_aside_by
from accelbench.results.record import Result

#: a published precision and the accelbench precisions that run the same arithmetic
_SAME_PRECISION = {
    "fp32": {"fp32"},
    "fp32/tf32": {"fp32", "tf32"},
    "fp16": {"amp_fp16", "fp16"},  # TensorFlow's fp16 in these tables is mixed precision
    "amp_fp16": {"amp_fp16"},
    "bf16": {"amp_bf16", "bf16"},
    "mixed": {"amp_fp16", "amp_bf16"},
    "int8": {"int8"},
}
#: a published precision the source does not give: nothing can be shown to match it
NOT_STATED = "not stated"


@dataclass(frozen=True)
class Match:
    result: Result
    reference: Reference
    #: this result's figure over the published one, for the whole system and per device; None where the two
    #: sides are not like with like (``unlike`` says why)
    ratio: float | None
    ratio_per_device: float | None
    #: each side's rate per USD/h, where both have a price
    per_usd_hour: float | None
    reference_per_usd_hour: float | None
    #: differences that leave the work the same: said beside the ratio
    differences: tuple[str, ...]
    #: differences in the work itself ("tiny model", "INVALID run"): no ratio is given
    unlike: tuple[str, ...] = ()

    @property
    def like(self) -> bool:
        """Both sides did the same work under the same rules, so the ratio is about the machines."""
        return not self.unlike

    @property
    def ratio_text(self) -> str:
        """'0.52x', or 'n/a: tiny model; INVALID run' where no ratio is given."""
        if self.ratio is None:
            return "n/a: " + "; ".join(self.unlike)
        return f"{self.ratio:.3g}x"

    @property
    def per_device_text(self) -> str:
        if self.ratio is None:
            return "n/a"
        return f"{self.ratio_per_device:.3g}x" if self.ratio_per_device is not None else ""

    @property
    def per_dollar(self) -> str:
        """'4.15 vs 475.5' (rate per USD/h here and there), where the published row has a price."""
        if self.reference_per_usd_hour is None:
            return ""
        if not self.like:
            return "n/a"
        own = fmt.number(self.per_usd_hour) if self.per_usd_hour is not None else "no price here"
        return f"{own} vs {fmt.number(self.reference_per_usd_hour)}"

    @property
    def comparable(self) -> str:
        """The differences beside the ratio, in words (those in the work are :attr:`ratio_text`'s)."""
        if self.differences:
            return "; ".join(self.differences)
        return "same setup" if self.like else "nothing else"

    @property
    def closeness(self) -> tuple[int, int]:
        """Sort key: like rows first, then the fewest differences."""
        return (len(self.unlike), len(self.differences))

    def to_dict(self) -> dict[str, Any]:
        return {
            "result_id": self.result.id,
            "reference": self.reference.to_dict(),
            "ratio": self.ratio,
            "ratio_per_device": self.ratio_per_device,
            "per_usd_hour": self.per_usd_hour,
            "reference_per_usd_hour": self.reference_per_usd_hour,
            "like": self.like,
            "unlike": list(self.unlike),
            "differences": list(self.differences),
        }


def _published(r: Result) -> Published | None:
    """How ``r``'s family meets published rows (its description's ``published``); None: it meets none."""
    family = family_of(r.benchmark)
    return family.published if family is not None else None


def _framework(r: Result) -> str:
    version = str(((r.system.get("profile") or {}).get("torch") or {}).get("version") or "").split("+")[0]
    pub = _published(r)
    framework = pub.framework if pub is not None else PYTORCH
    if callable(framework):
        return framework(r, version)
    mode = "torch.compile" if r.params.get("compile") else "eager"
    return framework.format(torch=version, mode=mode)


def _model(r: Result) -> str:
    return str(r.params.get("model") or r.params.get("workload") or "")


def _scenario(ref: Reference) -> str | None:
    """'offline' for an inference_offline row; None for a row of another task."""
    return ref.task.removeprefix("inference_") if ref.task.startswith("inference_") else None


def unlike(r: Result, ref: Reference) -> tuple[str, ...]:
    """Why ``r`` and ``ref`` did different work, or under different rules, in a few words each ("tiny
    model", "INVALID run"); empty where a ratio between them says something about the machines."""
    out: list[str] = []
    scale = str(r.params.get("scale", "full") or "full")
    if scale != "full":
        out.append(f"{scale} model")  # the published systems ran the full model
    model = _model(r)
    if model and ref.model != model:
        out.append(f"model differs ({ref.model} published, {model} here)")
    precision = str(r.params.get("precision", ""))
    if ref.precision == NOT_STATED:
        out.append(f"published precision not stated (here {precision})")
    elif precision not in _SAME_PRECISION.get(ref.precision, {ref.precision}):
        out.append(f"precision differs ({ref.precision} published, {precision} here)")
    scenario = _scenario(ref)
    if scenario is not None and r.params.get("scenario") != scenario:
        out.append(f"scenario differs ({scenario} published, {r.params.get('scenario') or 'none'} here)")
    elif ref.latency_bound_ms is not None:
        bound = latency_bound_ms(r)
        if bound is not None and bound != ref.latency_bound_ms:
            out.append(f"latency bound differs ({ref.latency_bound_ms:g} ms published, {bound:g} ms here)")
    # the one judge's set-aside policy, for a ratio to a figure with no interval: what biased this figure (its own
    # INVALID verdict, a neighbour's load, its own client, a recompile), not what merely made it imprecise
    reasons = set_aside_by(r, imprecise=False)
    if any(c.kind == "invalid" for c in reasons):
        gates = accuracy_gates(r)
        out.append("failed accuracy gate" if gates and not all(gates.values()) else "INVALID run")
    out += sorted({f"{c.kind} run" for c in reasons if c.kind != "invalid"})
    if tokens.is_tokens(ref):
        out += tokens.unlike(r, ref)
    if llm_train.is_llm_train(ref):
        out += llm_train.unlike(r, ref)
    return tuple(out)


def differences(r: Result, ref: Reference) -> tuple[str, ...]:
    """What differs between how ``r`` was measured and how ``ref`` was without changing the work, in the
    reader's words (the differences in the work are :func:`unlike`'s)."""
    pub = _published(r)
    if tokens.is_tokens(ref) or llm_train.is_llm_train(ref):
        caveats = pub.caveats(r, ref) if pub is not None and pub.caveats is not None else []
        if tokens.is_tokens(ref):
            return tokens.differences(r, ref, _framework(r), caveats)
        return llm_train.differences(r, ref, _framework(r), caveats)
    out: list[str] = []
    if not ref.framework.startswith("PyTorch") or (pub is not None and pub.own_harness):
        out.append(f"{ref.framework} vs {_framework(r)}")
    if pub is not None and pub.caveats is not None:
        out += pub.caveats(r, ref)
    batch = r.params.get("batch_size")
    if ref.batch_per_device and str(batch) != ref.batch_per_device:
        out.append(f"batch {ref.batch_per_device} vs {batch} per device")
    elif not ref.batch_per_device:
        out.append(f"published batch not stated (here {batch} per device)")
    data = _data(r)
    if not ref.data.startswith(data):
        out.append(f"{ref.data} vs {data} data")
    devices = _devices(r)
    split = _devices_per_chip(r)
    if split > 1:
        out.append(
            f"a device here is 1/{split} of a chip (a TensorCore) and the published rows count chips: "
            "no ratio per device"
        )
    elif ref.devices is not None and ref.devices != devices:
        out.append(f"{ref.devices} vs {devices} device(s): compare per device")
    return tuple(out)


def _devices_per_chip(r: Result) -> int:
    """How many of the record's devices make one chip (2 on TPU v2/v3, whose TensorCores are devices), from the
    device kind's facts in the record's profile; 1 where they do not say."""
    accs = (r.system.get("profile") or {}).get("accelerators") or []
    return max([int(a.get("devices_per_chip") or 1) for a in accs] or [1])


def _data(r: Result) -> str:
    """'real' or 'synthetic', as the reference rows' data column begins."""
    pub = _published(r)
    if pub is not None and pub.data:
        return pub.data
    if r.params.get("dataset"):
        return "real"
    return str(r.params.get("data", "synthetic"))


def _devices(r: Result) -> int:
    return int(r.params.get("nproc", 1) or 1) * int(r.params.get("nnodes", 1) or 1)


#: the record's metric that a published metric is compared with
_METRIC = {
    "throughput": "throughput",
    "throughput_per_device": "throughput_per_device",  # a figure per GPU as published (torchtitan's TPS/GPU)
    "queries_per_second": "queries_per_second",
    "time_to_target": "time_to_target_seconds",
    "cost_to_target": "cost_to_target_usd",
    # output tokens/s: MLPerf's "Tokens per second" and TensorRT-LLM's "Total Output Throughput" count the answers'
    **{metric: tokens.METRIC for metric in tokens.PUBLISHED},
}
#: published metrics where more is better (a rate); the others are times and costs
_RATES = {"throughput", "throughput_per_device", "queries_per_second", *tokens.PUBLISHED}


def _figure(r: Result, ref: Reference) -> float | None:
    m = r.metrics.get(_METRIC.get(ref.metric, ""))
    return m.value if m is not None and m.value else None


def beside(result: Result, ref: Reference) -> Match | None:
    """``result`` beside one published row: its ratio where the two are like with like, else the reasons
    not; None where the record has no figure of the row's metric."""
    value = _figure(result, ref)
    if value is None or ref.is_ratio:
        return None
    blocked = unlike(result, ref)
    # a time is better when lower: the ratio is always "this machine's speed over the published one"
    rate = ref.metric in _RATES
    ratio = per_dev = None
    if not blocked:
        ratio = value / ref.value if rate else ref.value / value
        own = _own_per_device(result, ref, value)
        per_dev = own / ref.per_device if rate and own and ref.per_device is not None else None
        if _devices_per_chip(result) > 1:  # a TensorCore against a chip: unlike units, the reason in differences
            per_dev = None
    price = (result.system.get("price") or {}).get("usd_per_hour")
    own_per_usd = value / price if price and rate else None
    return Match(result, ref, ratio, per_dev, own_per_usd, ref.per_usd_hour, differences(result, ref), blocked)


def _own_per_device(result: Result, ref: Reference, value: float) -> float | None:
    """The record's figure per device, as the row's per-device figure is counted: already per device for a row
    published per GPU, the record's own tokens/s per device for a token row, else over the record's devices."""
    if ref.is_per_device:
        return value
    if tokens.is_tokens(ref):
        return tokens.per_device(result)
    return value / _devices(result)


def matches(result: Result) -> list[Match]:
    """The published rows of ``result``'s task and model (absolute figures only), each with its ratio or
    the reasons it has none."""
    pub = _published(result)
    task = pub.task.format_map(defaultdict(str, result.params)) if pub is not None else None
    model = _model(result)
    if task is None or not model or result.status != "ok":
        return []
    out = []
    for ref in select(model=model, task=task):
        if ref.metric not in _METRIC:
            continue
        m = beside(result, ref)
        if m is not None:
            out.append(m)
    return out


def closest(ms: list[Match], n: int | None = None) -> list[Match]:
    """Like rows first, then the fewest differences: the order a reader should meet them in."""
    return sorted(ms, key=lambda m: m.closeness)[:n]


def ratio_rows(accelerators: tuple[str, str]) -> list[Reference]:
    """Published ratios between two accelerators a user holds (MLPerf Training v0.5's V100-PCIe over T4), either
    way round."""
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
