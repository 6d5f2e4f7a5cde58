"""Published results shipped with the package, each with the place a reader can open to check it.

``data/reference_results.csv`` holds the rows (``data/README.md`` names the columns; a row names its source by
title, publisher and date, never a local file). Rows are facts as published: a figure that is a ratio between two
accelerators (Dell's V100-PCIe over T4) is kept and flagged by its unit (``x ...``), never turned absolute."""

from __future__ import annotations

import csv
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from accelbench.families import families, family_of

#: the accelbench family a reference task is the work of, as the families' descriptions say (their
#: ``published.tasks``)
TASKS = {task: f.name for f in families() if f.published is not None for task in f.published.tasks}


@dataclass(frozen=True)
class Reference:
    source: str
    source_ref: str
    published: str
    accelerator: str
    count: str  # "4", or "1-4" for a ratio over counts
    framework: str
    task: str
    model: str
    precision: str
    batch_per_device: str
    data: str
    metric: str
    value: float
    unit: str
    price_usd_per_hour: float | None
    #: the Server scenario's latency constraint the figure was measured under (MLPerf's p99 bound), if any:
    #: a served rate is a figure of its bound, so a run under another bound is not like this row
    latency_bound_ms: float | None
    notes: str
    #: the benchmark's own name in its source (MLPerf's ``llama2-70b-99``: the model and its accuracy target), where
    #: it differs from what ``model`` can say
    benchmark: str = ""
    #: MLPerf's samples/s beside a tokens/s figure, from the same summary: their quotient is the output tokens per
    #: sample that run produced, the one length fact a summary gives
    samples_per_second: float | None = None
    #: the p99 time-to-first-token and time-per-output-token limits a served language model's figure was measured
    #: under (MLPerf's Server and Interactive); a rate under other limits is another figure
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    #: tokens per sequence of a language model's training step: tokens/s and the attention's share of the work
    #: depend on it, so a run at another length did other work
    seq_len: int | None = None
    #: how the published run spread the model over its devices ("FSDP 8", "FSDP 32, TP 8"), and its activation
    #: checkpointing ("selective", "full"): both change the speed, not the work, and are said beside a ratio
    parallelism: str = ""
    activation_checkpointing: str = ""
    #: each request's prompt and answer length in tokens, where the source fixed them for every request
    #: (TensorRT-LLM's ISL/OSL): a served rate depends on both, so a run at other lengths did other work; None for a
    #: data set's own, varying lengths (MLPerf's CNN/DailyMail, OpenOrca), which ``samples_per_second`` speaks to
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def is_ratio(self) -> bool:
        """A ratio between two accelerators, not a figure of one machine."""
        return self.unit.startswith("x ")

    @property
    def devices(self) -> int | None:
        return int(self.count) if self.count.isdigit() else None

    @property
    def is_per_device(self) -> bool:
        """A figure per device as its source printed it (torchtitan's "TPS/GPU", NeMo's "Tokens / sec / GPU"),
        kept as published rather than multiplied into a whole system's."""
        return self.metric.endswith("_per_device")

    @property
    def per_device(self) -> float | None:
        if self.is_per_device:
            return self.value
        return self.value / self.devices if self.devices and not self.is_ratio else None

    @property
    def figure(self) -> str:
        """The figure with the digits its source gave (274, 379.06, 20,730), and its unit."""
        return f"{self.value:,.6g} {self.unit}"

    @property
    def output_tokens_per_sample(self) -> float | None:
        """Output tokens per sample of the published run (tokens/s over samples/s of one summary), where both
        were given, or the answer length the source fixed for every request: how long the answers were, which a
        tokens/s figure depends on."""
        if self.samples_per_second and self.unit == "tokens/s":
            return self.value / self.samples_per_second
        if self.output_tokens and self.unit == "tokens/s":
            return float(self.output_tokens)
        return None

    @property
    def lengths(self) -> tuple[int, int] | None:
        """(prompt, answer) tokens of every request where the source fixed both; None for a data set's lengths."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return (self.input_tokens, self.output_tokens)

    @property
    def per_usd_hour(self) -> float | None:
        """The TPUv2 vs V100 study's figure: the rate per USD/h of the machine, where the source gave its price."""
        if self.price_usd_per_hour and self.unit.endswith("/s"):
            return self.value / self.price_usd_per_hour
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "per_device": self.per_device,
            "per_usd_hour": self.per_usd_hour,
            "output_tokens_per_sample": self.output_tokens_per_sample,
        }


@lru_cache(maxsize=1)
def references() -> tuple[Reference, ...]:
    """Every shipped row, read once: the table is package data, never changed while a program runs."""
    text = resources.files("accelbench.reference").joinpath("data/reference_results.csv").read_text(encoding="utf-8")
    rows = []
    for r in csv.DictReader(text.splitlines()):
        rows.append(
            Reference(
                source=r["source"],
                source_ref=r["source_ref"],
                published=r["published"],
                accelerator=r["accelerator"],
                count=r["count"],
                framework=r["framework"],
                task=r["task"],
                model=r["model"],
                precision=r["precision"],
                batch_per_device=r["batch_per_device"],
                data=r["data"],
                metric=r["metric"],
                value=float(r["value"]),
                unit=r["unit"],
                price_usd_per_hour=_number(r, "price_usd_per_hour"),
                latency_bound_ms=_number(r, "latency_bound_ms"),
                notes=r["notes"],
                benchmark=r.get("benchmark") or "",
                samples_per_second=_number(r, "samples_per_second"),
                ttft_p99_ms=_number(r, "ttft_p99_ms"),
                tpot_p99_ms=_number(r, "tpot_p99_ms"),
                seq_len=_integer(r, "seq_len"),
                parallelism=r.get("parallelism") or "",
                activation_checkpointing=r.get("activation_checkpointing") or "",
                input_tokens=_integer(r, "input_tokens"),
                output_tokens=_integer(r, "output_tokens"),
            )
        )
    return tuple(rows)


def _number(row: dict[str, str], column: str) -> float | None:
    """A column's figure, None where the row leaves it empty (or the column is absent)."""
    text = row.get(column) or ""
    return float(text) if text else None


def _integer(row: dict[str, str], column: str) -> int | None:
    """A count (a sequence length): compared exactly with a record's, so never left a float."""
    value = _number(row, column)
    return int(value) if value is not None else None


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if w}


def accelerator_matches(query: str, accelerator: str) -> bool:
    """'h100' finds 'H100 80GB SXM5'; 'rtx 8000' finds 'Quadro RTX 8000': every word of the query is in it."""
    return _words(query) <= _words(accelerator)


def select(*, model: str | None = None, accelerator: str | None = None, task: str | None = None) -> list[Reference]:
    """The rows for a model, an accelerator (every word of it), a task (a row's, or a benchmark's name), in the
    table's order."""
    return [
        r
        for r in references()
        if (model is None or r.model == model)
        and (accelerator is None or accelerator_matches(accelerator, r.accelerator))
        and (task is None or r.task == task or _of_benchmark(r.task, task))
    ]


def _of_benchmark(row_task: str, benchmark: str) -> bool:
    """Whether a row's task is the work of ``benchmark`` (a benchmark's name given as the task): one of its
    family's published tasks."""
    family = family_of(benchmark) if "/" in benchmark else None
    return family is not None and family.published is not None and row_task in family.published.tasks
