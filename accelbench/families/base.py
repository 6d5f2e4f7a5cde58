"""What a benchmark family is, described once, so that the layers that show records need not know any family.

A record names only its benchmark; the part before the ``/`` names its family, whose :class:`Family` says what a
generic layer needs: how its metrics read (:class:`Label`), its report section and summary lines, how its records
meet published results (:class:`Published`). The results table, the report, reference matching and the runner
never branch on a family's name. This module imports no family, so the report, which reads records only, can
read the descriptions too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from accelbench.results import format as fmt
from accelbench.results.details import typed
from accelbench.results.record import Metric, Result


@dataclass(frozen=True)
class Label:
    """How one metric reads in a table's details: its figure with words around it.

    ``text`` is a template: ``{metric}`` is the figure with the digits its interval supports and its unit,
    ``{value}`` the bare value (any Python format spec, plus ``sig3``/``sig4`` for significant digits and
    ``bytes`` for a size), ``{stem}`` the part of the name a ``prefix_*`` pattern matched (less ``_seconds``),
    ``{est}`` " (est.)" where the record's peak is an estimate. A callable ``(name, metric) -> str`` is the
    way out when a template cannot say it.
    """

    text: str | Callable[[str, Metric], str] = "{metric}"
    #: shown before the other metrics (the time a kernel call or a training step takes)
    first: bool = False
    #: left out where its value is the primary figure's (the per-device rate on one device)
    unless_primary: bool = False


#: a metric's entry in a family's table: a template (a :class:`Label`'s text), a Label, or None (not shown:
#: the record keeps it, the table does not)
LabelSpec = str | Label | None


#: how a record's framework reads where its family says nothing else
PYTORCH = "PyTorch {torch} {mode}"


@dataclass(frozen=True)
class Published:
    """How a family's records meet the published results shipped in ``accelbench/reference/data``.

    ``tasks`` are the reference table's tasks that are this family's work; ``task`` is the task of one record,
    a template over its parameters (``inference_{scenario}``). The other fields say how the family's way of
    measuring differs from a published one, in the reader's words.
    """

    tasks: tuple[str, ...]
    task: str
    #: how the record's framework reads: a template of {torch} (its version) and {mode} (eager or
    #: torch.compile), or a callable ``(record, torch_version) -> str``
    framework: str | Callable[[Result, str], str] = PYTORCH
    #: the framework always differs from a published one (accelbench's own serving harness), not only where the
    #: published row is not PyTorch
    own_harness: bool = False
    #: the data every record of the family reads ("real"); None: the record's own ``data`` parameter
    data: str | None = None
    #: more differences between a record of the family and a published row (each a phrase): a callable
    #: ``(record, reference) -> list[str]`` (a short profile, a latency bound not recorded)
    caveats: Callable[[Result, Any], list[str]] | None = None


@dataclass(frozen=True)
class Family:
    """One benchmark family: every benchmark named ``NAME/...`` belongs to it.

    ``report`` and ``headline`` name functions as ``module:function`` (imported when a report is built, so
    this module imports no report code): ``report(inp, family) -> Section | None`` builds the family's section
    (the generic one lists each record's figures with the labels below), ``headline(inp, records) -> list[str]``
    the family's lines of the report's summary.
    """

    name: str
    #: how the report's summary names the family ("training throughput")
    title: str
    #: the command that measures one, said in the summary of a report that has none (None: not said)
    hint: str | None = None
    #: its metrics' labels by name; a key ending in ``*`` is a prefix (``latency_*``); exact names first
    metrics: Mapping[str, LabelSpec] = field(default_factory=dict)
    #: the function that builds its report section; None: no section (its records are in the summary only)
    report: str | None = "accelbench.report.generic:section"
    #: the note that opens the generic section (how the family measures)
    report_note: str = ""
    headline: str | None = None
    published: Published | None = None
    #: the option that measures one longer, said to a reader of a noisy result ("--num-batches")
    longer: str | None = None
    #: harness checks (the selftests): a suite of only these measures no idle power first
    harness: bool = False
    #: offered as ``accelbench FAMILY BENCHMARK`` (one subcommand per benchmark, the kernels)
    grouped: bool = False
    #: why two of its records do not measure the same thing although their settings pair (a serving rate held to
    #: other latency limits): the one judge asks it, beside the model's identity; None: nothing of its own
    unlike: Callable[[Result, Result], list[str]] | None = None
    #: benchmarks it owns by their whole name, though named under another family's word (``infer/llm``: a
    #: language model served by ``accelbench infer`` beside the image models, read as a family of its own); they
    #: are its, not that family's (:func:`accelbench.families.family_of`)
    benchmarks: tuple[str, ...] = ()

    def short(self, benchmark: str) -> str:
        """The benchmark's name within its family (``gemm`` for ``kernels/gemm``)."""
        return benchmark.partition("/")[2] or benchmark


#: metrics every family may carry (times, the model's FLOP rate, cost): read where a family's table has none
COMMON_METRICS: dict[str, LabelSpec] = {
    "seconds": Label("{metric}", first=True),
    "step_seconds": Label("{metric}/step", first=True),
    "tflops": "{metric}",
    "pct_of_peak": "{value:sig3}% of peak{est}",
    "arithmetic_intensity": None,  # the roofline's x axis, not a figure to read
    "peak_memory_bytes": "{value:bytes} peak memory",
    "throughput_per_device": Label("throughput per device {metric}", unless_primary=True),
    "cost_to_target_usd": "${value:.4g}",
    # "$5.92 per 1M images", "$0.41 per 1M output tokens": the unit says what a million counts
    "usd_per_million": Label(lambda _name, m: f"${fmt.number(m.value, 3)} {m.unit.removeprefix('USD ')}"),
    "per_usd": None,  # the same price as USD per million, which the table shows
    "per_usd_hour": None,
}


class _Value(float):
    """A metric's value in a label's template: Python's format specs, plus ``sigN`` and ``bytes``."""

    def __format__(self, spec: str) -> str:
        if spec.startswith("sig"):
            return fmt.number(float(self), int(spec[3:]))
        if spec == "bytes":
            return fmt.bytes_(float(self))
        return format(float(self), spec)


def metric_text(r: Result, name: str, m: Metric, label: Label, stem: str = "") -> str:
    """One metric of ``r`` in words, as ``label`` says."""
    if callable(label.text):
        return label.text(name, m)
    estimated = bool((typed(r).get("peak") or {}).get("estimated"))
    return label.text.format(
        metric=fmt.metric(m),
        value=_Value(m.value),
        stem=(stem or name).removesuffix("_seconds"),
        est=" (est.)" if estimated else "",
    )


_PARAMS: dict[type, str] = {}


def name_params(params: type, benchmark: str) -> None:
    """Say which benchmark a parameter class is (the registry does, for each benchmark it lists)."""
    _PARAMS[params] = benchmark


def benchmark_of(params: object) -> str:
    """The registry's name of the benchmark whose parameters ``params`` (an instance or the class) are: what
    its records are called, so that the name is written once, in the registry (:mod:`accelbench.registry`, the
    composition root that lists every benchmark and names its parameter class here), and a benchmark's module
    holds no copy of it."""
    cls = params if isinstance(params, type) else type(params)
    for c in cls.__mro__:
        if c in _PARAMS:
            return _PARAMS[c]
    raise LookupError(f"{cls.__name__} is no registered benchmark's parameters (import accelbench.registry first)")
