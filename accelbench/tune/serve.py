"""``tune MODEL`` for a language model (``infer/llm``): the engine settings that serve it the most tokens/s per
device at a stated interactivity.

A candidate is an engine, a native precision, compilation, and the work's shape (requests in flight; continuous
batching's batch-token budget). Each trial is an Offline run held to ``--tpot-ms``, a run over it INVALID, so more
requests in flight win only while each user still reads at the stated pace. The KV cache follows the concurrency;
every finalist, FP32 engines too, passes the LLM accuracy gate (docs/tune.md, Serving a language model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from accelbench.devices.precision import precision_reason
from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt
from accelbench.serve.engines.base import engine_class, engine_names
from accelbench.serve.limits import limits_for, preset_of
from accelbench.serve.specs import LLMServeParams
from accelbench.tune.budget import LOADGEN_PACE
from accelbench.tune.candidate import Candidate, Space, split_list
from accelbench.tune.task import (
    CONFIRM_SECONDS,
    GATE_SCREENS,
    SCREEN_SECONDS,
    TuneTask,
    batch_class,
    checkpoint_option,
    device_of,
    ordered,
    trial_base,
    weights_words,
)

#: requests in flight tried around the best runtimes, by the device's batch class
SERVE_BATCHES = {"cpu": (4, 16, 32), "gpu": (32, 64, 128, 256)}
#: the precisions a language model is served in (``infer``'s own check), which its search tries
SERVE_PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class ServeOptions(NoOptions):
    """``tune``'s flags for a language model's serving."""

    engines: str = opt(
        "",
        "a language model's engines tried, comma-separated (empty: every local one installed)",
        metavar="LIST",
        sweep=False,
    )
    tpot_ms: float = opt(
        0.0,
        "a language model's interactivity every trial is held to, p99 time per output token in ms (0: the model's "
        "MLPerf Server limit)",
        sweep=False,
    )
    prompts: str = opt(
        "",
        "a language model's prompt file with reference answers (JSONL or ShareGPT, read by --checkpoint's "
        "tokenizer): the accuracy gate scores ROUGE on it",
        metavar="FILE",
        sweep=False,
    )
    checkpoint: str = checkpoint_option()

    def check(self) -> None:
        """Local engines only (a search changes an engine's settings), a TPOT limit not negative, a prompt file
        with the checkpoint whose tokenizer reads it."""
        for name in split_list(self.engines):
            if name not in engine_names():
                raise UsageError(f"unknown engine {name!r} in --engines: choose among {', '.join(local_engines())}")
            if name not in local_engines():
                raise UsageError(f"--engines {name}: a search changes an engine's settings, so only local ones: "
                                 f"{', '.join(local_engines())}")  # fmt: skip
            engine_class(name)
        if self.tpot_ms < 0:
            raise UsageError(f"--tpot-ms must not be negative, got {self.tpot_ms:g}")
        if self.prompts and not self.checkpoint:
            raise UsageError("--prompts needs --checkpoint DIR (the checkpoint's tokenizer reads the file)")


class ServeTask(TuneTask):
    """The search of ``infer/llm``'s settings: the most tokens/s per device within the TPOT limit."""

    name = "infer/llm"
    command = "infer"
    params = LLMServeParams
    Options = ServeOptions
    options: ServeOptions
    held_to_limit = True

    def check(self) -> None:
        self.trial().validate()  # the checkpoint and prompt file are read before any trial

    def precisions(self) -> tuple[str, ...]:
        return SERVE_PRECISIONS

    # -- the space ----------------------------------------------------------------------------------------------

    def default(self) -> Candidate:
        return Candidate(serve_default())

    def runtimes(self) -> Space:
        """Every local engine x precision x compilation at the default concurrency: what is not installed or not
        native here is left out with the reason its run would give."""
        tune, device = self.tune, device_of(self.tune)
        wanted = split_list(tune.precisions)
        space = Space([], [])
        for name in split_list(self.options.engines) or local_engines():
            impl = engine_class(name)
            missing = impl().unavailable()
            compiles = tune.compile and "engine_compile" in impl.Options.__dataclass_fields__
            for precision in SERVE_PRECISIONS:
                if wanted and precision not in wanted:
                    continue
                why = missing or (precision_reason(device, precision, tune.emulated) if precision != "fp32" else None)
                for compiled in (False, True) if compiles else (False,):
                    c = Candidate(serve_default() | {"engine": name, "precision": precision})
                    c = c.with_(engine_compile=True) if compiled else c
                    (space.left_out.append((c, why)) if why else space.candidates.append(c))
        return ordered(space, self.default(), lambda c: bool(c.settings.get("engine_compile")))

    def batches(self, device: Any) -> list[Any]:
        return [int(b) for b in split_list(self.tune.batch_sizes)] or list(
            SERVE_BATCHES.get(batch_class(device), SERVE_BATCHES["cpu"])
        )

    def shapes(self, best: list[Candidate]) -> list[Candidate]:
        return shapes(self.tune, best, batch_class(device_of(self.tune)))

    # -- the trials ---------------------------------------------------------------------------------------------

    def trial(self, **settings: Any) -> LLMServeParams:
        """Every serving trial is Offline, held to the TPOT limit, with the checkpoint and prompts given."""
        o = self.options
        common = trial_base(self.tune) | {"scenario": "offline", "tpot_ms": self.tpot_limit()[0]}
        common |= {"checkpoint": o.checkpoint} | ({"prompts": o.prompts} if o.prompts else {})
        return LLMServeParams.of(**(common | settings))

    def trial_of(self, phase: str, settings: dict[str, Any]) -> LLMServeParams:
        """Offline at the candidate's concurrency, held to the TPOT limit (the trial's params); a gate is the LLM
        accuracy mode."""
        if phase == "gate":
            return self.trial(**settings, mode="accuracy")
        return self.trial(**settings, duration=CONFIRM_SECONDS if phase == "confirm" else SCREEN_SECONDS)

    def first_expected(self, phase: str, per_sample: Callable[[], float | None]) -> tuple[float, float] | None:
        """A confirmation measures 4 s longer than a screening, paced as the LoadGen task's (the same LoadGen
        Offline trials: :data:`accelbench.tune.budget.LOADGEN_PACE`); the gate's FP32 reference generates the
        gate's prompts one at a time, briefly."""
        if phase == "confirm":
            return (1.0, LOADGEN_PACE * (CONFIRM_SECONDS - SCREEN_SECONDS))
        return (GATE_SCREENS, 0.0) if phase == "gate" else None

    def tpot_limit(self) -> tuple[float, str]:
        """The interactivity every trial is held to, and where it comes from."""
        if self.options.tpot_ms:
            return self.options.tpot_ms, "--tpot-ms"
        preset = preset_of(self.tune.model)
        try:
            limits = limits_for(self.tune.model, preset.mlperf, preset.mlperf_own, "server", 0.0, 0.0)
        except UsageError:
            raise UsageError(f"{self.tune.model} has no MLPerf Server limit to default to: give --tpot-ms") from None
        assert limits.tpot_p99_ms is not None
        return limits.tpot_p99_ms, limits.source

    # -- the outcome --------------------------------------------------------------------------------------------

    def _weights(self) -> str:
        return weights_words(self.options.checkpoint)

    def gate_words(self) -> str:
        if self.options.prompts:
            return f"ROUGE against {self.options.prompts}'s answers at 99% of FP32's, {self._weights()}"
        return (
            f"greedy tokens against the FP32 model's on {self._weights()}, at the positions rounding cannot flip (99% "
            "kept); every engine is gated, FP32 too"
        )

    def accuracy_words(self) -> str | None:
        if self.options.prompts:
            return f"accuracy verified: ROUGE on the answers of {self.options.prompts}"
        return f"accuracy not verified: FP32's tokens on {self._weights()} (--prompts FILE with answers verifies it)"

    @classmethod
    def describe_words(cls, p: dict[str, Any]) -> list[str]:
        return [f"TPOT {p['tpot_ms']:g} ms"] if p.get("tpot_ms") else []


def serve_default() -> dict[str, Any]:
    """The default settings (``accelbench infer MODEL``'s, fp32): the candidate every other is measured against."""
    defaults = LLMServeParams.__dataclass_fields__
    return {"engine": defaults["engine"].default, "precision": "fp32", "batch_size": defaults["batch_size"].default}


def local_engines() -> list[str]:
    """Engines that run the model in this process, whose settings a search can change."""
    return [n for n in engine_names() if engine_class(n).runs_model and not engine_class(n).remote]


class _Sizes(Protocol):
    """What the shape stage reads of a search: the requests in flight asked for."""

    @property
    def batch_sizes(self) -> str: ...


def shapes(params: _Sizes, best: list[Candidate], batch_class: str) -> list[Candidate]:
    """Requests in flight around the best runtimes, and what each engine's own declaration searches at the best
    one's concurrency (continuous batching: its batch-token budget)."""
    given = [int(b) for b in split_list(params.batch_sizes)]
    out: list[Candidate] = []
    for c in best:
        sizes = given or list(SERVE_BATCHES.get(batch_class, SERVE_BATCHES["cpu"]))
        out += [c.with_(batch_size=b) for b in sizes]
        out += [c.with_(**change) for change in engine_class(c.settings["engine"]).search(c.settings)]
    return out
