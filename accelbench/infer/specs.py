"""Parameters of ``infer/loadgen``: a model served to LoadGen a batch at a time through a backend (torch-free).

Language models, served token by token through an engine, are ``infer/llm``
(:mod:`accelbench.serve.specs`); both share :class:`~accelbench.loadgen.params.LoadGenParams`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from accelbench.errors import UsageError
from accelbench.infer.catalog import BACKENDS, backend, backend_class, builtin_backends
from accelbench.loadgen.params import LoadGenParams
from accelbench.params import Parts, not_negative, opt, positive
from accelbench.workloads import is_decoder

SCENARIOS = ("offline", "server", "singlestream", "multistream")
MODES = ("performance", "accuracy", "find-peak")
#: the backends ``--backend`` chooses among, each owning its settings
BACKEND_PARTS = Parts("backend", "backend_options", "backend", lambda: dict(builtin_backends()), backend_class)
INFER_PRECISIONS = ("auto", "fp32", "amp_fp16", "amp_bf16", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class InferParams(LoadGenParams):
    """Serve ``model`` to LoadGen in one scenario, a batch at a time, and record LoadGen's own verdict and figures."""

    model: str = opt("resnet50", "model name (accelbench list --models) or package.module:Class", sweep=False)
    scenario: str = opt("offline", "LoadGen scenario", choices=SCENARIOS)
    mode: str = opt(
        "performance",
        "performance (LoadGen's figures), accuracy (quality vs the FP32 reference, 99%/99.9% gates), "
        "find-peak (highest valid Server QPS / MultiStream samples per query)",
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
    batch_size: int = opt(8, "largest batch the system under test forms from waiting samples")
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
    latency_bound_ms: float = opt(0.0, "Server/MultiStream latency bound (0: the model's MLPerf bound)", sweep=False)
    samples_per_query: int = opt(8, "MultiStream: samples per query", sweep=False)
    dataset: str = opt(
        "",
        "accuracy: directory of the model's dataset (empty: synthetic samples, FP32 answers as labels)",
        sweep=False,
        metavar="DIR",
    )
    checkpoint: str = opt(
        "", "a state_dict (.pt) to load into the model (empty: random weights)", sweep=False, metavar="PATH"
    )
    #: the backend's own settings (its ``Options``: --channels-last, --compile-mode, --ort-optimization,
    #: --service-ms), complete with the backend's defaults; a record states them beside the run's own
    backend_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def takes_model(cls, model: str) -> bool:
        return not is_decoder(model)

    @classmethod
    def flags(cls) -> list[tuple[dataclasses.Field[Any], Any]]:
        """The run's own settings, then every built-in backend's (each flag once): ``--channels-last`` is the torch
        and compile backends' setting, declared in their ``Options``, not here."""
        return BACKEND_PARTS.flags(super().flags())

    @classmethod
    def flag_parts(cls) -> tuple[Parts, ...]:
        return (BACKEND_PARTS,)

    @classmethod
    def gather(cls, values: dict[str, Any]) -> dict[str, Any]:
        return BACKEND_PARTS.gather(values, cls.backend)  # a dataclass's class attribute: the field's default

    def to_dict(self) -> dict[str, Any]:
        return BACKEND_PARTS.flat(super().to_dict())

    @property
    def effective_precision(self) -> str:
        if self.precision != "auto":
            return self.precision
        return "int8" if self.backend == "int8" else "fp32"

    def validate(self) -> None:
        if self.scenario == "interactive":  # said before the generic list of choices: where it belongs
            raise UsageError("--scenario interactive is MLPerf's category for language models; use server")
        super().validate()
        if not self.takes_model(self.model):  # the router sends a decoder to infer/llm; a stored entry may not
            raise UsageError(f"{self.model} is a language model, served token by token by infer/llm, not infer/loadgen")
        impl = backend(self.backend)
        positive("--batch-size", self.batch_size)
        positive("--samples-per-query", self.samples_per_query)
        positive("--nproc", self.nproc)
        positive("--streams", self.streams)
        not_negative(self, "latency_bound_ms", "target_qps", "expected_qps", "duration", "max_wait_ms")
        impl.Options(**self.backend_options).check()
        if self.mode == "find-peak" and self.scenario not in ("server", "multistream"):
            raise UsageError("--mode find-peak searches Server QPS or MultiStream samples per query: use one of those")
        if self.mode == "accuracy" and not impl.runs_model:
            raise UsageError(f"--mode accuracy needs a backend that runs the model, not {self.backend}")
        if self.checkpoint:
            from accelbench.infer.weights import read_state_dict

            read_state_dict(Path(self.checkpoint).expanduser())  # a wrong file is bad input, said before a build
        if self.dataset and self.mode != "accuracy" and not self.audit:
            raise UsageError(
                "--dataset is read in --mode accuracy and compliance runs (--audit) only (performance runs use "
                "synthetic samples)"
            )
        if impl.runs_model or self.mode == "accuracy":
            self._check_model()

    @property
    def devices_serving(self) -> int:
        """The devices the per-device figures divide by: ``--nproc``."""
        return self.nproc

    @property
    def workers(self) -> int:
        """SUT workers serving: ``streams`` on each of ``nproc`` devices (the run's worker count)."""
        return self.nproc * self.streams

    @property
    def latency_bound(self) -> float:
        return self.latency_bound_ms

    def _adapter(self) -> tuple[Any, str]:
        """The serving adapter of the model's domain (None: not servable) and the domain."""
        from accelbench.infer.served import ADAPTERS
        from accelbench.workloads import model_info

        domain = model_info(self.model).domain
        return ADAPTERS.get(domain), domain

    def model_bound_ms(self) -> float:
        """The model's MLPerf Server bound: mlperf.conf's (LoadGen's own copy) where it names the model, else its
        domain's serving adapter's (a harness-only backend has none)."""
        from accelbench.loadgen.mlcommons import CONF_NAMES
        from accelbench.loadgen.settings import conf_server_bound_ms

        try:
            adapter = self._adapter()[0]
        except Exception:  # noqa: BLE001 - a harness-only backend may name no servable model
            return 0.0
        own = adapter.server_bound_ms if adapter else None
        if own and self.model in CONF_NAMES:  # a model MLPerf serves in Server: mlperf.conf says its bound
            return conf_server_bound_ms(CONF_NAMES[self.model]) or own
        return own or 0.0

    @property
    def query_samples(self) -> int:
        return self.samples_per_query

    def check_environment(self, device_type: str) -> None:
        from accelbench.devices.kind import kind_of

        impl = backend(self.backend)
        kind = kind_of(device_type)
        why = impl.unsupported(self.effective_precision) or impl.unsupported_on(kind) or self.export_refusal()
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
        adapter = self._adapter()[0]
        return (
            f"--backend {self.backend} cannot serve {self.model}: {adapter.no_onnx}"
            if adapter and adapter.no_onnx
            else None
        )

    def _check_model(self) -> None:
        from accelbench.infer.served import ADAPTERS

        adapter, domain = self._adapter()
        if adapter is None:
            raise UsageError(f"serving {self.model} ({domain}) is not supported yet; served: {', '.join(ADAPTERS)}")
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
        name = str(p.get("backend", cls.__dataclass_fields__["backend"].default))
        impl = BACKENDS.get(name)
        runs = impl is None or impl.runs_model  # a user's class is named, as a built-in one other than the default
        words = [p["model"] if runs else f"{name} backend", p["scenario"]]
        if p.get("mode", "performance") != "performance":
            words.append(p["mode"])
        if runs and name != cls.__dataclass_fields__["backend"].default:
            words.append(name)
        words += [f"bs<={p['batch_size']}", p.get("precision", "fp32"), p["profile"]]
        if impl is not None:  # the backend's own settings, in its own words
            options = {f.name: p[f.name] for f in dataclasses.fields(impl.Options) if f.name in p}
            words += impl.Options(**options).words()
        if p.get("nproc", 1) > 1:
            words.append(f"x{p['nproc']} devices")
        if p.get("streams", 1) > 1:
            words.append(f"x{p['streams']} in flight")
        if p.get("checkpoint"):
            words.append(f"checkpoint {PurePath(p['checkpoint']).name}")
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
