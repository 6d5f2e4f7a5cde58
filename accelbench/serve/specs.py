"""Parameters of language-model serving under LoadGen, ``infer/llm`` (torch-free).

A decoder is served token by token by an engine (:mod:`accelbench.serve.engines.base`): LoadGen's token
mode times the first token and each one after it, against MLPerf's TTFT/TPOT limits. What it shares with
serving a batch at a time (the scenario, the profile, LoadGen's hints) is :class:`LoadGenParams`; the rest is
its own: the engine, the prompt and output lengths, the KV cache, the prompt file, the sweep's points and the
endpoint's address.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from accelbench.errors import UsageError
from accelbench.loadgen.params import LoadGenParams
from accelbench.params import Parts, not_negative, opt, positive
from accelbench.results.details import source_named
from accelbench.serve.engines.base import engine_class, engine_names
from accelbench.serve.sources.base import builtin_sources, source_class, source_names
from accelbench.serve.sweep import SweepParams
from accelbench.workloads import is_decoder

SCENARIOS = ("offline", "server", "singlestream", "interactive", "concurrency")
MODES = ("performance", "accuracy", "find-peak", "sweep")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: the engines ``--engine`` chooses among, each owning its settings
ENGINE_PARTS = Parts(
    "engine", "engine_options", "engine", lambda: {n: engine_class(n) for n in engine_names()}, engine_class
)
#: the prompt sources ``--source`` chooses among (or the one whose settings are given), each owning its settings
SOURCE_PARTS = Parts(
    "source",
    "source_options",
    "prompt source",
    lambda: dict(builtin_sources()),
    source_class,
    inferred=True,
    fallback="random",
)


@dataclass(frozen=True)
class LLMServeParams(SweepParams, LoadGenParams):
    """Serve a language model to LoadGen token by token in one scenario, through an engine."""

    model: str = opt("llama3.1-8b", "model name (accelbench list --models)", sweep=False)
    scenario: str = opt(
        "offline",
        "LoadGen scenario (interactive: MLPerf's tighter TTFT/TPOT limits), or concurrency: a closed loop of "
        "--concurrency N users by accelbench's own driver (what --concurrency N alone gives)",
        choices=SCENARIOS,
    )
    mode: str = opt(
        "performance",
        "performance (LoadGen's figures), accuracy (greedy tokens against FP32's; --engine endpoint: ROUGE on "
        "--prompts' answers), find-peak (the highest Server request rate within the TTFT/TPOT limits), sweep (one "
        "closed loop per --concurrency point, or one Server run per --rates point: the curve of tokens/s per device "
        "against tokens/s per user)",
        choices=MODES,
    )
    precision: str = opt(
        "auto",
        "the weights' precision: auto (fp32; --engine endpoint: the server's own, recorded as unstated), fp32, bf16, "
        "fp16",
        choices=PRECISIONS,
    )
    batch_size: int = opt(
        8,
        "requests decoded together at most; --engine endpoint: requests in flight at most (Offline, SingleStream: "
        "a fixed concurrency; Server: at least 1024 connections, arrivals sent at once); --concurrency N: N unless "
        "given",
    )
    checkpoint: str = opt(
        "",
        "a Hugging Face folder (config.json, safetensors) made by save_pretrained: its weights and architecture, "
        "and its tokenizer for --prompts (empty: the preset's architecture with random weights)",
        sweep=False,
        metavar="PATH",
    )
    engine: str = opt("transformers", "the generating engine", metavar="ENGINE")  # the choices: ENGINE_PARTS
    input_tokens: int | None = opt(None, "prompt tokens; none: the scale's, 1024 (128 at --scale tiny)", sweep=False)
    output_tokens: int | None = opt(None, "tokens generated per request; none: the scale's, 1024 (32 at --scale tiny)")
    ttft_ms: float = opt(0.0, "server/interactive: p99 time-to-first-token limit (0: MLPerf's)")
    tpot_ms: float = opt(
        0.0,
        "server/interactive: p99 time-per-output-token limit (0: MLPerf's); offline: a fixed concurrency held to "
        "it (INVALID over it; none when 0)",
    )
    allow_eos: bool = opt(False, "stop a request at its end-of-sequence token (default: exactly --output-tokens)")
    source: str = opt("", "where the requests come from", sweep=False, metavar="SOURCE")  # the choices: SOURCE_PARTS
    #: the source's own settings (its ``Options``), complete with its defaults; a record states them flat
    source_options: dict[str, Any] = field(default_factory=dict)
    #: the engine's own settings (its ``Options``: the KV cache's pages, compilation, the endpoint's address),
    #: complete with the engine's defaults; a record states them beside the run's own
    engine_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The recorded labels read back as the settings a run resolves again (an endpoint's ``server at ...``
        device is ``auto``)."""
        try:
            impl = engine_class(self.engine)
        except UsageError:  # validate says which engine is unknown
            return
        own = {"device": self.device, "precision": self.precision}
        for key, value in impl.unlabel(own).items():
            object.__setattr__(self, key, value)

    @classmethod
    def flags(cls) -> list[tuple[dataclasses.Field[Any], Any]]:
        """The run's own settings, then every built-in engine's (each flag once)."""
        return SOURCE_PARTS.flags(ENGINE_PARTS.flags(super().flags()))

    @classmethod
    def flag_parts(cls) -> tuple[Parts, ...]:
        return ENGINE_PARTS, SOURCE_PARTS

    @classmethod
    def gather(cls, values: dict[str, Any]) -> dict[str, Any]:
        from accelbench.serve.sweep import closed_loop

        values = closed_loop(values)  # --concurrency N: a closed loop's scenario, and its batch
        gathered = ENGINE_PARTS.gather(values, cls.engine)  # a dataclass's class attribute: the field's default
        return SOURCE_PARTS.gather(gathered, SOURCE_PARTS.fallback)

    def to_dict(self) -> dict[str, Any]:
        """The run's settings and the engine's, side by side, as the engine's records label them."""
        d = SOURCE_PARTS.flat(ENGINE_PARTS.flat(super().to_dict()))
        try:
            return engine_class(self.engine).labels(d)
        except UsageError:
            return d

    @property
    def engine_opts(self) -> Any:
        """The engine's settings, typed (its ``Options``)."""
        return ENGINE_PARTS.options(self)

    @property
    def source_opts(self) -> Any:
        """The prompt source's settings, typed (its ``Options``)."""
        return SOURCE_PARTS.options(self)

    @property
    def prompts(self) -> str:
        """The prompt file a run reads answers from (``--prompts``; empty for any other source)."""
        return str(self.source_options.get("prompts") or "")

    @property
    def tokenizer_dir(self) -> str:
        """The folder whose tokenizer writes and reads prompts: the engine's (an endpoint's ``--tokenizer``), else
        the checkpoint's."""
        return str(self.engine_options.get("tokenizer") or self.checkpoint)

    @classmethod
    def takes_model(cls, model: str) -> bool:
        return is_decoder(model)

    @property
    def devices_serving(self) -> int:
        """The devices the per-device figures divide by: one here, or the server's (``--server-devices``)."""
        return engine_class(self.engine).devices(self.engine_opts)

    def validate(self) -> None:
        if self.scenario == "multistream":  # said before the generic list of choices, with the reason
            raise UsageError("language models are served in offline, server, interactive and singlestream")
        super().validate()
        from accelbench.serve.sweep import check

        if not is_decoder(self.model):
            raise UsageError(f"{self.model} is not a language model (accelbench list --models): serve it with infer")
        positive("--batch-size", self.batch_size)
        not_negative(self, "target_qps", "expected_qps", "duration", "max_wait_ms")
        check(self)  # a closed loop's flags (--concurrency N), and the sweep's (--mode sweep)
        impl = engine_class(self.engine)
        options = self.engine_opts
        options.check()
        impl.check_run(self, options)
        if self.mode == "find-peak" and self.scenario not in ("server", "interactive"):
            raise UsageError("--mode find-peak searches a Server request rate: give --scenario server or interactive")
        if self.mode == "accuracy" and impl.loads_weights and not self.checkpoint:
            raise UsageError(
                f"--mode accuracy with --engine {self.engine} needs --checkpoint DIR: its own random weights are not "
                "the FP32 reference's"
            )
        if self.mode == "accuracy" and not impl.runs_model and not impl.remote:
            raise UsageError(f"--mode accuracy needs an engine that runs the model, not {self.engine}")
        if self.output_tokens is not None and self.output_tokens < 2:
            raise UsageError(
                f"--output-tokens must be at least 2, got {self.output_tokens}: time per output token needs a second "
                "token (leave it out for the scale's default)"
            )
        if self.input_tokens is not None and self.input_tokens < 1:
            raise UsageError(
                f"--input-tokens must be at least 1, got {self.input_tokens} (leave it out for the scale's default)"
            )
        not_negative(self, "ttft_ms", "tpot_ms")
        from accelbench.serve.limits import limits_for, preset_of

        preset = preset_of(self.model)
        limits_for(self.model, preset.mlperf, preset.mlperf_own, self.scenario, self.ttft_ms, self.tpot_ms)
        if self.checkpoint and not impl.remote:  # a remote engine reads only its tokenizer
            from accelbench.workloads.decoder import check_checkpoint

            check_checkpoint(Path(self.checkpoint).expanduser())
            if self.scale != "full":
                raise UsageError(
                    f"--scale {self.scale} shrinks a preset; a --checkpoint folder is its own model: drop --scale"
                )
        self._check_source()

    def _check_source(self) -> None:
        source = source_class(self.source or SOURCE_PARTS.fallback)
        options = self.source_opts
        options.check()
        if source.replayed and self.scenario == "concurrency":
            raise UsageError(
                f"the {source.name} source sends requests on its own schedule; a closed loop (--concurrency) sends "
                "the prompts of random, file or mlperf as its users are freed: drop one"
            )
        if source.replayed:
            if self.scenario not in ("server", "interactive"):
                raise UsageError(
                    f"the {source.name} source sends requests on its own schedule, held to the server limits: give "
                    "--scenario server (or interactive)"
                )
            if self.mode != "performance":
                raise UsageError(f"the {source.name} source is replayed in performance mode, not {self.mode}")
        source.check_run(self, options)

    def check_environment(self, device_type: str) -> None:
        engine = engine_class(self.engine)(self.engine_opts)
        why = engine.unavailable()  # an engine whose library is missing: the pip extra that brings it
        if why:
            raise UsageError(why)
        engine.check(self)  # a server that does not answer: one line, before any load

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        from accelbench.serve.limits import DEFAULT_LENGTHS

        closed = p["scenario"] == "concurrency"  # a closed loop: its users say its load, not a batch
        users = p.get("concurrency") or "1,2,...,64"  # a sweep's failure record: the default points
        words = [p["model"], f"concurrency {users}" if closed else p["scenario"]]
        if p.get("mode", "performance") != "performance":
            words.append(p["mode"])
        default = DEFAULT_LENGTHS["tiny" if p.get("scale") == "tiny" else "full"]
        name = str(p.get("engine", cls.__dataclass_fields__["engine"].default))
        impl = engine_class(name) if name in engine_names() else None
        words.append(name)
        words += impl.describe_words(p) if impl else []
        src = source_named(p)
        words += source_class(src).describe_words(p) if src in source_names() else [src]
        words.append(f"{p.get('input_tokens') or default[0]}/{p.get('output_tokens') or default[1]} tokens")
        precision = (impl.labels(p) if impl else p).get("precision", "fp32")  # an older record's auto, labelled
        if closed and str(p.get("batch_size")) != str(p.get("concurrency")):
            words.append(f"bs<={p['batch_size']}")  # an engine batch other than the loop's users
        words += [] if closed else [f"bs<={p['batch_size']}"]
        words += [precision, p["profile"]]
        if p.get("checkpoint"):  # the weights served: a language model's folder is also its architecture
            words.append(f"checkpoint {PurePath(p['checkpoint']).name}")
        elif p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
