"""Parameters of the LoadGen inference benchmark (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from accelbench.errors import UsageError
from accelbench.infer.catalog import BACKENDS, backend
from accelbench.infer.tokens.endpoint.params import ENDPOINT_KNOBS, EndpointParams
from accelbench.infer.tokens.sweep import SweepParams
from accelbench.params import COMPILE_MODES, CommonParams, EmulatedParams, ScaleParams, not_negative, opt, positive
from accelbench.workloads import DECODERS

SCENARIOS = ("offline", "server", "singlestream", "multistream", "interactive")
#: settings only a decoder (a model served token by token) takes, with their defaults
TOKEN_KNOBS = (
    "engine",
    "input_tokens",
    "output_tokens",
    "input_jitter",
    "ttft_ms",
    "tpot_ms",
    "page_size",
    "kv_blocks",
    "max_batch_tokens",
    "prompts",
    "chat_template",
    "allow_eos",
    "engine_compile",
    *ENDPOINT_KNOBS,
)
#: settings only some backends take (Backend.options)
BACKEND_KNOBS = ("channels_last", "compile_mode", "ort_optimization")
MODES = ("performance", "accuracy", "find-peak", "sweep")
PROFILES = ("quick", "official")
#: samples LoadGen's library holds, by profile
QSL_SAMPLES = {"quick": 64, "official": 1024}
INFER_PRECISIONS = ("auto", "fp32", "amp_fp16", "amp_bf16", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class InferParams(SweepParams, EndpointParams, EmulatedParams, ScaleParams, CommonParams):
    """Serve ``model`` to LoadGen in one scenario and record LoadGen's own verdict and figures."""

    model: str = opt("resnet50", "model name (accelbench list --models)", sweep=False)
    scenario: str = opt("offline", "LoadGen scenario", choices=SCENARIOS)
    mode: str = opt(
        "performance",
        "performance (LoadGen's figures), accuracy (quality vs the FP32 reference, 99%/99.9% gates), "
        "find-peak (highest valid Server QPS / MultiStream samples per query), sweep (language models: one Offline "
        "run per --concurrency point, or one Server run per --rates point: the curve of tokens/s per device "
        "against tokens/s per user)",
        choices=MODES,
    )
    backend: str = opt(
        "torch", "how the model runs: " + ", ".join(BACKENDS) + ", or package.module:Class", metavar="BACKEND"
    )
    precision: str = opt(
        "auto",
        "auto (the backend's own: fp32, int8 for --backend int8), fp32, amp_fp16/amp_bf16 (torch.autocast), "
        "bf16/fp16 (the model's weights and inputs converted: torch and compile backends)",
        choices=INFER_PRECISIONS,
    )
    batch_size: int = opt(
        8,
        "largest batch the system under test forms from waiting samples; --engine endpoint: requests in flight at "
        "most (Offline, SingleStream: a fixed concurrency; Server: at least 1024 connections, arrivals sent at once)",
    )
    channels_last: bool = opt(
        False, "torch and compile backends: the model and its 4-D inputs in channels_last memory format"
    )
    compile_mode: str = opt(
        "default",
        "compile backend: torch.compile's mode (reduce-overhead: CUDA graphs, for small batches; max-autotune)",
        choices=COMPILE_MODES,
    )
    ort_optimization: str = opt(
        "all",
        "onnxruntime, int8 and tensorrt backends: ONNX Runtime's graph optimisation level (all: its default); "
        "its intra-op threads follow --threads",
        choices=("disable", "basic", "extended", "all"),
    )
    max_wait_ms: float = opt(2.0, "Server: longest a sample waits for a batch to fill", sweep=False)
    nproc: int = opt(
        1,
        "devices serving, as --nproc counts devices in train and tta (one SUT worker per device in LoadGen's "
        "one process: cuda:0..N-1); a CPU is one device: requests in flight on it are --streams",
    )
    streams: int = opt(
        1,
        "requests in flight on each device: N SUT workers share it (OpenVINO's infer requests on its streams, "
        "N instances on a CPU); recorded as streams, never as devices, so per-device figures stay per device",
    )
    profile: str = opt(
        "quick", "quick (seconds; non-compliant) or official (LoadGen's mlperf.conf rules)", choices=PROFILES
    )
    target_qps: float = opt(0.0, "Server: target queries/s (0: measured by a calibration probe)", sweep=False)
    expected_qps: float = opt(0.0, "Offline: LoadGen's expected throughput (0: measured by the probe)", sweep=False)
    latency_bound_ms: float = opt(0.0, "Server/MultiStream latency bound (0: the model's MLPerf bound)", sweep=False)
    samples_per_query: int = opt(8, "MultiStream: samples per query", sweep=False)
    duration: float = opt(0.0, "minimum run seconds (0: the profile's: 2 s quick, 600 s official)", sweep=False)
    dataset: str = opt(
        "",
        "accuracy: directory of the model's dataset (empty: synthetic samples, FP32 answers as labels)",
        sweep=False,
        metavar="DIR",
    )
    checkpoint: str = opt(
        "",
        "a state_dict (.pt) to load into the model; for a language model a Hugging Face folder (config.json, "
        "safetensors) made by save_pretrained (empty: random weights)",
        sweep=False,
        metavar="PATH",
    )
    trace: bool = opt(
        False, "keep LoadGen's trace log (mlperf_log_trace.json, hundreds of MB on a fast run)", sweep=False
    )
    service_ms: float = opt(1.0, "--backend sleep: milliseconds each batch takes", sweep=False)
    engine: str = opt(
        "transformers",
        "language models: the generating engine: transformers (its continuous batching, paged KV cache), "
        "static (batched generate, static KV cache), vllm (where installed), endpoint (an OpenAI-compatible "
        "server at --url), null (the harness alone), or package.module:Class",
        metavar="ENGINE",
    )
    input_tokens: int | None = opt(
        None, "language models: prompt tokens; none: the scale's, 1024 (128 at --scale tiny)", sweep=False
    )
    output_tokens: int | None = opt(
        None, "language models: tokens generated per request; none: the scale's, 1024 (32 at --scale tiny)"
    )
    input_jitter: float = opt(
        0.8, "language models: prompts are drawn from JITTER..1 x --input-tokens long (1: all the same)", sweep=False
    )
    ttft_ms: float = opt(0.0, "language models, server/interactive: p99 time-to-first-token limit (0: MLPerf's)")
    tpot_ms: float = opt(
        0.0,
        "language models, server/interactive: p99 time-per-output-token limit (0: MLPerf's); offline: a fixed "
        "concurrency held to it (INVALID over it; none when 0)",
    )
    page_size: int = opt(16, "language models, transformers engine: KV-cache page size in tokens")
    kv_blocks: int = opt(0, "language models, transformers engine: KV-cache pages (0: --batch-size longest requests)")
    max_batch_tokens: int = opt(
        0, "language models, transformers engine: tokens in one forward step (0: 2 x --batch-size x --page-size)"
    )

    prompts: str = opt(
        "",
        'language models: a JSONL ({"prompt": ..., "output": ...} a line) or ShareGPT file, tokenized by '
        "--checkpoint's tokenizer; a sample with a reference answer generates its length (empty: random tokens)",
        sweep=False,
        metavar="FILE",
    )
    chat_template: str = opt(
        "auto", "language models, --prompts: wrap each prompt in the tokenizer's chat template: auto, on, off"
    )
    engine_compile: bool = opt(
        False,
        "language models, static and transformers engines: torch.compile the forward step (compiled in the probe's "
        "warm-up, whose first batch's seconds the record keeps)",
    )
    allow_eos: bool = opt(
        False, "language models: stop a request at its end-of-sequence token (default: exactly --output-tokens)"
    )

    @property
    def effective_precision(self) -> str:
        if self.precision != "auto":
            return self.precision
        return "int8" if self.backend == "int8" else "fp32"

    def validate(self) -> None:
        super().validate()
        impl = backend(self.backend)
        positive("--batch-size", self.batch_size)
        positive("--samples-per-query", self.samples_per_query)
        positive("--nproc", self.nproc)
        positive("--streams", self.streams)
        not_negative(self, "latency_bound_ms", "target_qps", "expected_qps", "duration", "max_wait_ms")
        if self.service_ms <= 0:
            raise UsageError(f"--service-ms must be positive, got {self.service_ms}")
        for knob in BACKEND_KNOBS:  # a setting the backend does not take is refused, never silently ignored
            if getattr(self, knob) != self.__dataclass_fields__[knob].default and knob not in impl.options:
                takes = [n for n, c in BACKENDS.items() if knob in c.options]
                flag = "--" + knob.replace("_", "-")
                raise UsageError(f"{flag} applies to the {', '.join(takes)} backends, not {self.backend}")
        from accelbench.infer.tokens.sweep import check

        check(self)  # the sweep's flags, only with --mode sweep
        if self.mode == "find-peak" and self.scenario not in ("server", "multistream") and not self.generates:
            raise UsageError("--mode find-peak searches Server QPS or MultiStream samples per query: use one of those")
        if self.mode == "accuracy" and not impl.runs_model:
            raise UsageError(f"--mode accuracy needs a backend that runs the model, not {self.backend}")
        if self.checkpoint and not self.generates:
            from accelbench.infer.weights import read_state_dict

            read_state_dict(Path(self.checkpoint).expanduser())  # a wrong file is bad input, said before a build
        if self.dataset and self.mode != "accuracy":
            raise UsageError("--dataset is read in --mode accuracy only (performance runs use synthetic samples)")
        if self.generates:
            self._check_tokens()
            return
        for knob in TOKEN_KNOBS:
            if getattr(self, knob) != self.__dataclass_fields__[knob].default:
                flag = "--" + knob.replace("_", "-")
                raise UsageError(f"{flag} applies to language models (accelbench list --models), not {self.model}")
        if self.scenario == "interactive":
            raise UsageError("--scenario interactive is MLPerf's category for language models; use server")
        if impl.runs_model or self.mode == "accuracy":
            self._check_model()

    @property
    def generates(self) -> bool:
        """Whether the model is served token by token (a decoder), not a batch in and outputs out."""
        from accelbench.workloads import model_info

        return ":" not in self.model and model_info(self.model).serving == "tokens"

    def _check_tokens(self) -> None:
        from accelbench.infer.tokens.engines import engine_class

        impl = engine_class(self.engine)
        self._check_endpoint(self.engine)
        if self.backend != "torch":
            raise UsageError(f"{self.model} is served by an engine (--engine), not --backend {self.backend}")
        if self.mode == "find-peak" and self.scenario not in ("server", "interactive"):
            raise UsageError("--mode find-peak searches a Server request rate: give --scenario server or interactive")
        if self.mode == "accuracy" and self.dataset:
            raise UsageError("--dataset is not read for language models yet: accuracy compares with FP32's tokens")
        if self.mode == "accuracy" and engine_class(self.engine).loads_weights and not self.checkpoint:
            raise UsageError(
                f"--mode accuracy with --engine {self.engine} needs --checkpoint DIR: its own random weights are not "
                "the FP32 reference's"
            )
        if self.engine_compile and not engine_class(self.engine).runs_model:
            raise UsageError(f"--engine-compile compiles a model, and the {self.engine} engine runs none")
        if self.mode == "accuracy" and not engine_class(self.engine).runs_model and not impl.remote:
            raise UsageError(f"--mode accuracy needs an engine that runs the model, not {self.engine}")
        if self.scenario == "multistream":
            raise UsageError("language models are served in offline, server, interactive and singlestream")
        if self.effective_precision not in ("fp32", "bf16", "fp16") and not impl.remote:
            raise UsageError(f"language models are served in fp32, bf16 or fp16 weights, not {self.precision}")
        if self.output_tokens is not None and self.output_tokens < 2:
            raise UsageError(
                f"--output-tokens must be at least 2, got {self.output_tokens}: time per output token needs a second "
                "token (leave it out for the scale's default)"
            )
        if self.input_tokens is not None and self.input_tokens < 1:
            raise UsageError(
                f"--input-tokens must be at least 1, got {self.input_tokens} (leave it out for the scale's default)"
            )
        not_negative(self, "kv_blocks", "max_batch_tokens", "ttft_ms", "tpot_ms")
        positive("--page-size", self.page_size)
        if not 0 < self.input_jitter <= 1:
            raise UsageError(f"--input-jitter must be in (0, 1], got {self.input_jitter:g}")
        if self.nproc > 1 or self.streams > 1:
            raise UsageError("language models are served on one device by one engine: --nproc 1, --streams 1")
        from accelbench.infer.tokens.limits import limits_for
        from accelbench.workloads import workload_class

        preset = workload_class(self.model).preset  # type: ignore[attr-defined]
        limits_for(self.model, preset.mlperf, preset.mlperf_own, self.scenario, self.ttft_ms, self.tpot_ms)
        if self.checkpoint and not impl.remote:  # a remote engine reads only its tokenizer
            from accelbench.workloads.decoder import check_checkpoint

            check_checkpoint(Path(self.checkpoint).expanduser())
            if self.scale != "full":
                raise UsageError(
                    f"--scale {self.scale} shrinks a preset; a --checkpoint folder is its own model: drop --scale"
                )
        if self.chat_template not in ("auto", "on", "off"):
            raise UsageError(f"--chat-template is auto, on or off, not {self.chat_template!r}")
        if self.prompts and not (self.checkpoint or self.tokenizer):
            raise UsageError("--prompts needs --checkpoint DIR: its tokenizer turns the prompts into tokens")
        if self.prompts and not Path(self.prompts).expanduser().is_file():
            what = "is a folder" if Path(self.prompts).expanduser().is_dir() else "does not exist"
            raise UsageError(f"prompt file {self.prompts} {what}: give a JSONL or ShareGPT JSON file")
        if self.prompts:  # read as the run will (a bad file is one line here, not a failed record after a build)
            from accelbench.infer.tokens.limits import DEFAULT_LENGTHS
            from accelbench.infer.tokens.prompts import from_params

            default_out = DEFAULT_LENGTHS["tiny" if self.scale == "tiny" else "full"][1]
            from_params(self, self.output_tokens or default_out, QSL_SAMPLES[self.profile])
        if self.chat_template != "auto" and not self.prompts:
            raise UsageError("--chat-template applies to --prompts files (random prompts are token ids already)")

    @property
    def devices_serving(self) -> int:
        """The devices the per-device figures divide by: ``--nproc`` here, or the server's (``--server-devices``)."""
        if self.generates:
            from accelbench.infer.tokens.engines import engine_class

            if engine_class(self.engine).remote:
                return self.server_devices
        return self.nproc

    @property
    def workers(self) -> int:
        """SUT workers serving: ``streams`` on each of ``nproc`` devices (the run's worker count)."""
        return self.nproc * self.streams

    def planned_seconds(self) -> float | None:
        if self.mode != "performance":
            return None  # accuracy runs the data set once; find-peak's trials are counted by the search
        return self.duration or (600.0 if self.profile == "official" else 2.0)

    def check_environment(self, device_type: str) -> None:
        from accelbench.devices.kind import kind_of

        impl = backend(self.backend)
        kind = kind_of(device_type)
        why = impl.unsupported(self.effective_precision) or impl.unsupported_on(kind) or self.export_refusal()
        if self.generates and not why:  # an engine whose library is missing: the pip extra that brings it
            from accelbench.infer.tokens.engines import engine_class

            engine = engine_class(self.engine)()
            why = engine.unavailable()
            if not why:
                engine.check(self)  # a server that does not answer: one line, before any load
        if why:
            raise UsageError(why)
        if not kind.accelerator and self.nproc > 1:  # one CPU is one device, whatever runs on it at once
            raise UsageError(
                f"--nproc counts devices and a {kind.name.upper()} is one: --nproc {self.nproc} would record "
                f"{self.nproc} devices and divide the per-device figures by {self.nproc}; for {self.nproc} "
                f"requests in flight on it give --streams {self.nproc}"
            )
        if kind.accelerator and self.nproc > 1:
            have = kind.count()
            if self.nproc > have:
                raise UsageError(f"--nproc {self.nproc} needs {self.nproc} GPUs; this machine has {have}")

    def export_refusal(self) -> str | None:
        """Why a backend that serves a torch.onnx export cannot serve this model, or None."""
        impl = backend(self.backend)
        if not (impl.exports_onnx and impl.runs_model):
            return None
        from accelbench.infer.served import ADAPTERS
        from accelbench.workloads import model_info

        adapter = ADAPTERS.get(model_info(self.model).domain)
        return (
            f"--backend {self.backend} cannot serve {self.model}: {adapter.no_onnx}"
            if adapter and adapter.no_onnx
            else None
        )

    def _check_model(self) -> None:
        from accelbench.infer.served import ADAPTERS
        from accelbench.workloads import model_info

        info = model_info(self.model)
        adapter = ADAPTERS.get(info.domain)
        if adapter is None:
            raise UsageError(
                f"serving {self.model} ({info.domain}) is not supported yet; served: {', '.join(ADAPTERS)}"
            )
        if self.dataset:
            if adapter.check_dataset is None:
                raise UsageError(
                    f"no dataset loader for {self.model} yet: --dataset reads image classifiers (ImageFolder), "
                    "unet3d (.npy cases) and dlrm (Criteo logs); without it accuracy mode scores agreement with FP32"
                )
            adapter.check_dataset(Path(self.dataset).expanduser())
        if adapter.server_bound_ms is None and self.scenario in ("server", "multistream"):
            raise UsageError(f"{self.model} is served in offline and singlestream only, as in MLPerf Inference")

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["model"] if p.get("backend") not in ("null", "sleep") else f"{p['backend']} backend", p["scenario"]]
        if p.get("mode", "performance") != "performance":
            words.append(p["mode"])
        if p.get("backend") not in ("torch", "null", "sleep"):  # a named backend, or a user's class
            words.append(p["backend"])
        if p.get("model") in DECODERS:  # a language model: its engine and the prompt/output lengths served
            from accelbench.infer.tokens.limits import DEFAULT_LENGTHS

            default = DEFAULT_LENGTHS["tiny" if p.get("scale") == "tiny" else "full"]
            served = f"{p.get('input_tokens') or default[0]}/{p.get('output_tokens') or default[1]} tokens"
            words.append(p.get("engine", "transformers"))
            if p.get("engine") == "endpoint" and p.get("served_model"):  # the server's model, not the preset's
                words.append(f"serving {p['served_model']}")
            words.append(served)
        precision = p.get("precision", "fp32")
        if p.get("engine") == "endpoint" and precision == "auto":  # the server's own: an older record's auto
            precision = "unstated"
        words += [f"bs<={p['batch_size']}", precision, p["profile"]]
        if p.get("channels_last"):
            words.append("channels_last")
        if p.get("compile_mode", "default") != "default":
            words.append(p["compile_mode"])
        if p.get("ort_optimization", "all") != "all":
            words.append(f"ort-optimization {p['ort_optimization']}")
        if p.get("nproc", 1) > 1:
            words.append(f"x{p['nproc']} devices")
        if p.get("streams", 1) > 1:
            words.append(f"x{p['streams']} in flight")
        if p.get("checkpoint"):  # the weights served: a language model's folder is also its architecture
            words.append(f"checkpoint {PurePath(p['checkpoint']).name}")
        if p.get("scale", "full") != "full" and not (p.get("checkpoint") and p.get("model") in DECODERS):
            words.append(p["scale"])
        return " ".join(words)
