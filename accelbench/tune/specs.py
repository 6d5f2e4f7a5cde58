"""Parameters of a best-configuration search (torch-free): what is tuned, for which figure, in what time.

The search's own settings are here; a benchmark's own (image serving's scenario and backends, a language model's
engines and TPOT limit) are its task's (:mod:`accelbench.tune.task`), held in ``task_options`` and stated flat in a
record, as a backend's settings are in ``accelbench infer``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import (
    CommonParams,
    EmulatedParams,
    Parts,
    ScaleParams,
    opt,
    parse_duration,
    positive,
)
from accelbench.tune.candidate import split_list
from accelbench.tune.task import TuneTask, route, task_class, task_names

#: the benchmarks searched, each owning its flags: the one the model and ``--task`` route to is chosen
TASK_PARTS = Parts("tunes", "task_options", "benchmark", lambda: dict(task_names()), task_class)
#: the search's defaults the routing reads where a value is not given
_DEFAULT_MODEL, _DEFAULT_TASK = "resnet50", "infer"


@dataclass(frozen=True)
class TuneParams(EmulatedParams, ScaleParams, CommonParams):
    """Search the settings of one model's serving or training for its best figure within a time budget."""

    model: str = opt(_DEFAULT_MODEL, "model name (accelbench list --models)", sweep=False)
    task: str = opt(
        _DEFAULT_TASK,
        "infer (the model's serving: an image model under LoadGen, a language model's engine settings for the most "
        "tokens/s within --tpot-ms) or train (training throughput)",
        metavar="infer|train",
        sweep=False,
    )
    budget: str = opt(
        "10m",
        "time for the whole search, e.g. 90s, 10m, 1h: no trial starts that is not expected to fit in it",
        metavar="TIME",
        sweep=False,
    )
    precisions: str = opt(
        "",
        "the precisions tried, comma-separated (empty: every one this device runs natively)",
        metavar="LIST",
        sweep=False,
    )
    batch_sizes: str = opt(
        "",
        "batch sizes (a language model's: requests in flight) tried on the best runtimes, comma-separated (empty: "
        "a spread around the default)",
        metavar="LIST",
        sweep=False,
    )
    compile: bool = opt(
        True,
        "leave out torch.compile (the compile backend; --compile in training; an engine's compilation), which is "
        "tried by default: each compilation of a large model takes minutes",
        flag="--no-compile",
        sweep=False,
    )
    finalists: int = opt(
        3, "candidates confirmed with longer runs (the default settings are confirmed too)", metavar="N", sweep=False
    )
    repeats: int = opt(
        3,
        "confirmation rounds of every finalist, interleaved, before the search may stop; more rounds follow, of "
        "the candidates the best is not yet separated from, until it is; the figure is their median",
        metavar="N",
        sweep=False,
    )
    #: the searched benchmark's own settings (its task's ``Options``), complete with their defaults; a record
    #: states them flat beside the search's own
    task_options: dict[str, Any] = field(default_factory=dict)

    @property
    def tunes(self) -> str:
        """The benchmark searched: the one of ``--task``'s command that measures the model."""
        return route(self.task, self.model).name

    def tuned(self) -> TuneTask:
        """The search of the benchmark tuned, with its own settings."""
        return route(self.task, self.model)(self)

    @property
    def budget_seconds(self) -> float:
        return parse_duration(self.budget)

    @classmethod
    def flags(cls) -> list[tuple[dataclasses.Field[Any], Any]]:
        """The search's own settings, then every task's (each flag once)."""
        return TASK_PARTS.flags(super().flags())

    @classmethod
    def gather(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The routed task's settings into ``task_options``; another task's, given, is refused in one line."""
        tunes = route(str(values.get("task") or _DEFAULT_TASK), str(values.get("model") or _DEFAULT_MODEL)).name
        gathered = TASK_PARTS.gather(values | {TASK_PARTS.selector: tunes}, tunes)
        gathered.pop(TASK_PARTS.selector)
        return gathered

    def to_dict(self) -> dict[str, Any]:
        """The search's settings and its task's, side by side."""
        d = TASK_PARTS.flat(super().to_dict() | {TASK_PARTS.selector: self.tunes})
        d.pop(TASK_PARTS.selector)
        return d

    def validate(self) -> None:
        from accelbench.workloads import model_info

        super().validate()
        model_info(self.model)
        if self.budget_seconds < 10:
            raise UsageError(f"--budget {self.budget} is too short for even one trial: give at least 10s")
        positive("--finalists", self.finalists)
        positive("--repeats", self.repeats)
        for b in split_list(self.batch_sizes):
            try:
                positive("--batch-sizes", int(b))
            except ValueError:
                raise UsageError(f"--batch-sizes takes whole numbers separated by commas, got {b!r}") from None
        task = self.tuned()
        task.options.check()
        allowed = task.precisions()
        for p in split_list(self.precisions):
            if p not in allowed:
                raise UsageError(f"unknown precision {p!r} in --precisions: choose among {', '.join(allowed)}")
        task.check()

    def trial_params(self, **settings: Any) -> Any:
        """The benchmark's parameters for one trial: this search's model and place, with ``settings``."""
        return self.tuned().trial(**settings)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["model"], p["task"]]
        try:
            words += route(p["task"], p["model"]).describe_words(p)
        except UsageError:  # a task this version does not search: the record's own words
            pass
        words.append(f"budget {p['budget']}")
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
