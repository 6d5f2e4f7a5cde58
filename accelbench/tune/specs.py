"""Parameters of a best-configuration search (torch-free): what is tuned, for which figure, in what time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import CommonParams, EmulatedParams, ScaleParams, opt, parse_duration, positive
from accelbench.tune.candidate import split_list

TASKS = ("infer", "train", "serve")
#: the scenarios a search ranks by: Offline samples/s, Server peak QPS within the bound, SingleStream p90
TUNE_SCENARIOS = ("offline", "server", "singlestream")
#: the precisions a language model is served in (``infer``'s own check), which ``--task serve`` searches
SERVE_PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class TuneParams(EmulatedParams, ScaleParams, CommonParams):
    """Search the settings of one model's serving or training for its best figure within a time budget."""

    model: str = opt("resnet50", "model name (accelbench list --models)", sweep=False)
    task: str = opt(
        "infer",
        "infer (served under LoadGen), train (training throughput) or serve (a language model's engine settings: "
        "the most tokens/s per device within --tpot-ms)",
        choices=TASKS,
        sweep=False,
    )
    scenario: str = opt(
        "offline",
        "infer: the figure ranked: offline (samples/s), server (peak QPS within the latency bound, by find-peak), "
        "singlestream (p90 latency)",
        choices=TUNE_SCENARIOS,
        sweep=False,
    )
    budget: str = opt(
        "10m",
        "time for the whole search, e.g. 90s, 10m, 1h: no trial starts that is not expected to fit in it",
        metavar="TIME",
        sweep=False,
    )
    backends: str = opt(
        "", "infer: the backends tried, comma-separated (empty: every installed one)", metavar="LIST", sweep=False
    )
    precisions: str = opt(
        "",
        "the precisions tried, comma-separated (empty: every one this device runs natively)",
        metavar="LIST",
        sweep=False,
    )
    batch_sizes: str = opt(
        "",
        "batch sizes tried on the best runtimes, comma-separated (empty: a spread around the default)",
        metavar="LIST",
        sweep=False,
    )
    compile: bool = opt(
        True,
        "leave out torch.compile (the compile backend; --compile in training), which is tried by default: each "
        "compilation of a large model takes minutes",
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
    checkpoint: str = opt(
        "",
        "infer: a state_dict (.pt) to serve, which makes the accuracy gate meaningful; serve: a Hugging Face "
        "checkpoint folder",
        metavar="PATH",
        sweep=False,
    )
    engines: str = opt(
        "", "serve: the engines tried, comma-separated (empty: every local one installed)", metavar="LIST", sweep=False
    )
    tpot_ms: float = opt(
        0.0,
        "serve: the interactivity every trial is held to, p99 time per output token in ms (0: the model's MLPerf "
        "Server limit)",
        sweep=False,
    )
    prompts: str = opt(
        "",
        "serve: a prompt file with reference answers (JSONL or ShareGPT, read by --checkpoint's tokenizer): the "
        "accuracy gate scores ROUGE on it",
        metavar="FILE",
        sweep=False,
    )
    dataset: str = opt(
        "", "infer: the accuracy gate scores the model's dataset's labels (DIR)", metavar="DIR", sweep=False
    )

    @property
    def budget_seconds(self) -> float:
        return parse_duration(self.budget)

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
        if self.task != "serve":
            given = [f for f in ("engines", "prompts") if getattr(self, f)] + (["tpot-ms"] if self.tpot_ms else [])
            if given:
                raise UsageError(f"--{given[0]} applies to --task serve (a language model's serving)")
        if self.task == "serve":
            check_serve(self)
            self.trial_params().validate()  # the checkpoint and prompt file are read before any trial
            return
        if self.task == "train":
            given = [f for f in ("backends", "checkpoint", "dataset") if getattr(self, f)]
            if given or self.scenario != "offline":
                flag = "--" + (given[0] if given else "scenario")
                raise UsageError(f"{flag} applies to --task infer; training is tuned for its samples/s")
            from accelbench.train.llm.specs import LLMTrainParams

            if LLMTrainParams.takes_model(self.model):  # its space (sharding, micro-batch, checkpointing) is its own
                raise UsageError(
                    f"--task train searches train/throughput's settings; {self.model} trains as train/llm, whose "
                    f"settings are not searched yet: measure them with accelbench train {self.model} and compare"
                )
            from accelbench.train.specs import TRAIN_PRECISIONS

            allowed: tuple[str, ...] = TRAIN_PRECISIONS
        else:
            from accelbench.infer.catalog import BACKENDS
            from accelbench.infer.specs import INFER_PRECISIONS

            if not self.compile and "compile" in split_list(self.backends):
                raise UsageError("--no-compile leaves out the compile backend that --backends names: drop one")
            for b in split_list(self.backends):
                if b not in BACKENDS or not BACKENDS[b].runs_model:
                    serving = [n for n, c in BACKENDS.items() if c.runs_model]
                    raise UsageError(f"unknown backend {b!r} in --backends: choose among {', '.join(serving)}")
            allowed = tuple(p for p in INFER_PRECISIONS if p != "auto")
            # the gate's own checks: an unreadable checkpoint or dataset is bad input before any trial
            gate = {"mode": "accuracy", "dataset": self.dataset} if self.dataset else {}
            self.trial_params(**gate).validate()
        for p in split_list(self.precisions):
            if p not in allowed:
                raise UsageError(f"unknown precision {p!r} in --precisions: choose among {', '.join(allowed)}")

    def trial_params(self, **settings: Any) -> Any:
        """The family's parameters for one trial: this search's model and place, with ``settings``."""
        common: dict[str, Any] = {
            "model": self.model,
            "scale": self.scale,
            "emulated": self.emulated,
            "device": self.device,
        }
        common["threads"] = self.threads  # a candidate may set its own (the shape stage on many cores)
        if self.task == "train":
            from accelbench.train.specs import TrainParams

            return TrainParams(**(common | settings))
        if self.task == "serve":
            from accelbench.serve.specs import LLMServeParams

            return LLMServeParams.of(**(common | serve_trial_settings(self) | settings))
        from accelbench.infer.specs import InferParams

        # a candidate's settings are flat (channels_last beside batch_size): the backend's own go where it keeps them
        return InferParams.of(**(common | {"checkpoint": self.checkpoint} | settings))

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["model"], p["task"]]
        if p["task"] == "infer":
            words.append(p["scenario"])
        if p["task"] == "serve" and p.get("tpot_ms"):
            words.append(f"TPOT {p['tpot_ms']:g} ms")
        words.append(f"budget {p['budget']}")
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)


# -- --task serve: what its parameters must say, and what they make of every trial -------------------------------
# They live beside TuneParams, as the other tasks' checks do in ``validate``: the search stages
# (:mod:`accelbench.tune.serve`) read the parameters, never the other way round.


def check_serve(params: TuneParams) -> None:
    """What a serving search needs: a language model, local engines, the serve-only flags where they apply."""
    from accelbench.serve.engines.base import ENGINES, engine_class
    from accelbench.workloads import model_info

    if model_info(params.model).serving != "tokens":
        raise UsageError(f"--task serve tunes a language model's serving; {params.model} is not one: use --task infer")
    for flag, value in (("--backends", params.backends), ("--dataset", params.dataset)):
        if value:
            raise UsageError(f"{flag} applies to --task infer; a language model is served by engines (--engines)")
    if params.scenario != "offline":
        raise UsageError(
            "--task serve ranks tokens/s at a fixed concurrency within --tpot-ms (Offline runs); drop --scenario"
        )
    for name in split_list(params.engines):
        if name not in ENGINES:
            raise UsageError(f"unknown engine {name!r} in --engines: choose among {', '.join(local_engines())}")
        if name not in local_engines():
            raise UsageError(f"--engines {name}: a search changes an engine's settings, so only local ones: "
                             f"{', '.join(local_engines())}")  # fmt: skip
        engine_class(name)
    for p in split_list(params.precisions):
        if p not in SERVE_PRECISIONS:
            raise UsageError(f"unknown precision {p!r} in --precisions: choose among {', '.join(SERVE_PRECISIONS)}")
    if params.tpot_ms < 0:
        raise UsageError(f"--tpot-ms must not be negative, got {params.tpot_ms:g}")
    if params.prompts and not params.checkpoint:
        raise UsageError("--prompts needs --checkpoint DIR (the checkpoint's tokenizer reads the file)")


def local_engines() -> list[str]:
    """Engines that run the model in this process, whose settings a search can change."""
    from accelbench.serve.engines.base import ENGINES, engine_class

    return [n for n in ENGINES if engine_class(n).runs_model and not engine_class(n).remote]


def tpot_limit(params: TuneParams) -> tuple[float, str]:
    """The interactivity every trial is held to, and where it comes from."""
    from accelbench.serve.limits import limits_for, preset_of

    if params.tpot_ms:
        return params.tpot_ms, "--tpot-ms"
    preset = preset_of(params.model)
    try:
        limits = limits_for(params.model, preset.mlperf, preset.mlperf_own, "server", 0.0, 0.0)
    except UsageError:
        raise UsageError(f"{params.model} has no MLPerf Server limit to default to: give --tpot-ms") from None
    assert limits.tpot_ms is not None
    return limits.tpot_ms, limits.source


def serve_trial_settings(params: TuneParams) -> dict[str, Any]:
    """What every serving trial shares: Offline, held to the TPOT limit, the checkpoint and prompts given."""
    out: dict[str, Any] = {"scenario": "offline", "tpot_ms": tpot_limit(params)[0], "checkpoint": params.checkpoint}
    return out | ({"prompts": params.prompts} if params.prompts else {})
