"""How a served model runs: a backend turns a built PyTorch model into ``predict(batch inputs) -> outputs`` (or
``None`` for the harness-only backends); one small class and one line in ``catalog.BACKENDS`` add one. A
backend whose package is not installed names the pip extra that brings it and is refused at the command line."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from accelbench.errors import UsageError
from accelbench.params import COMPILE_MODES, NoOptions, opt

if TYPE_CHECKING:
    import torch

    from accelbench.devices.kind import DeviceKind
    from accelbench.infer.served import Inputs, Served

Predict = Callable[["Inputs"], Any]


@dataclass(frozen=True)
class TorchOptions(NoOptions):
    channels_last: bool = opt(False, "the model and its 4-D inputs in channels_last memory format")

    def words(self) -> list[str]:
        return ["channels_last"] if self.channels_last else []


@dataclass(frozen=True)
class CompileOptions(TorchOptions):
    compile_mode: str = opt(
        "default",
        "torch.compile's mode (reduce-overhead: CUDA graphs, for small batches; max-autotune)",
        choices=COMPILE_MODES,
    )

    def words(self) -> list[str]:
        return super().words() + ([self.compile_mode] if self.compile_mode != "default" else [])


@dataclass(frozen=True)
class SleepOptions(NoOptions):
    service_ms: float = opt(1.0, "milliseconds each batch takes", sweep=False)

    def check(self) -> None:
        if self.service_ms <= 0:
            raise UsageError(f"--service-ms must be positive, got {self.service_ms}")


class Backend:
    name: ClassVar[str]
    summary: ClassVar[str]
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    #: (python module, pip extra) the backend needs beyond accelbench's own dependencies
    needs: ClassVar[tuple[str, str] | None] = None
    #: whether it runs the model (False: answers without computing, to measure the harness)
    runs_model: ClassVar[bool] = True
    #: whether it serves a torch.onnx export of the model (so a model that does not export cannot be served)
    exports_onnx: ClassVar[bool] = False
    #: whether it takes its inputs in host memory (ONNX Runtime copies them itself): the SUT then never
    #: moves a batch to the GPU only for the backend to copy it back
    host_inputs: ClassVar[bool] = False
    #: the backend's own settings (a frozen dataclass of ``opt`` fields): each is a flag of ``accelbench infer``,
    #: recorded with the run and searched by ``tune`` where it changes the figure; ``load`` takes them as keyword
    #: arguments, and a value given for a backend that does not declare it is refused
    Options: ClassVar[type[NoOptions]] = NoOptions
    #: the names of :attr:`Options`' fields (set for each subclass)
    options: ClassVar[tuple[str, ...]] = ()
    #: settings of the run itself (InferParams fields) ``load`` also takes as keyword arguments, e.g. ``batch_size``
    reads: ClassVar[tuple[str, ...]] = ()
    #: the device kinds it serves on (kind names, as ``--device`` spells them: "cpu", "cuda", ...); None: every
    #: kind (torch runs wherever its tensors live)
    devices: ClassVar[tuple[str, ...] | None] = None
    #: where an export may be reused from and kept for the run's next entries (RunContext.cache_dir)
    cache_dir: Path | None = None
    #: the export cache shared across runs (RunContext.export_cache): ONNX exports reused by later entries and runs
    export_cache: Path | None = None
    #: where this entry's working files go (RunContext.scratch_dir); None: a temporary folder removed with the
    #: backend object or at exit
    scratch_dir: Path | None = None
    #: what the runtime chose that the record should keep (e.g. OpenVINO's optimal requests), filled by load
    facts: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.options = tuple(f.name for f in fields(cls.Options))

    def __init__(self) -> None:
        self.facts = {}

    def workdir(self, prefix: str) -> Path:
        """A fresh folder for this load's files (an ONNX export, a quantized copy), owned by the run: in the
        entry's scratch folder, which the worker and the runner remove, never left in the system's temporary
        folder (one afternoon of runs once left 2.4 GB of exports there)."""
        if self.scratch_dir is not None:
            self.scratch_dir.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=self.scratch_dir))
        path = Path(tempfile.mkdtemp(prefix=f"accelbench-{prefix}-"))
        weakref.finalize(self, shutil.rmtree, path, True)  # with the backend, or at exit
        return path

    def unsupported(self, precision: str) -> str | None:
        """Why this backend cannot serve at ``precision`` here, or None: a skip in a sweep, bad input alone."""
        if precision not in self.precisions:
            return (
                f"backend {self.name} runs {', '.join(self.precisions)}, not {precision}: pick one of those "
                "or another --backend"
            )
        if self.needs and importlib.util.find_spec(self.needs[0]) is None:
            return f"backend {self.name} needs the {self.needs[0]} package: pip install 'accelbench[{self.needs[1]}]'"
        return None

    def unsupported_on(self, kind: "DeviceKind | torch.device | str") -> str | None:
        """Why this backend cannot serve on devices of ``kind`` (a kind, a device, or a device's type), or None."""
        from accelbench.devices.kind import DeviceKind, kind_of

        name = (kind if isinstance(kind, DeviceKind) else kind_of(kind)).name
        if self.devices is None or name in self.devices:
            return None
        return f"backend {self.name} serves on {' or '.join(self.devices)}, not {name}: pick another --backend"

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
    ) -> Predict | None:
        raise NotImplementedError


class TorchEager(Backend):
    name, summary = (
        "torch",
        "PyTorch eager; amp_fp16/amp_bf16 through torch.autocast, bf16/fp16 weights, --channels-last",
    )
    precisions = ("fp32", "amp_fp16", "amp_bf16", "bf16", "fp16")
    Options = TorchOptions

    #: torch.compile's mode for the compile backend (--compile-mode), set by ``load``
    compile_mode: str = "default"

    def prepare_model(self, model: "torch.nn.Module") -> Any:
        """The module ``predict`` calls: the model itself, or a compiled wrapper (a subclass's hook)."""
        return model

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
        channels_last: bool = False,
        compile_mode: str = "default",
    ) -> Predict:
        import torch

        from accelbench.devices.kind import kind_of
        from accelbench.devices.precision import autocast_dtype, model_dtype

        dtype = autocast_dtype(precision)
        weights = model_dtype(precision)
        if weights is not None:
            model = model.to(weights)
        if dtype is not None:
            _precast(model, dtype)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.compile_mode = compile_mode
        run = self.prepare_model(model)
        kind = kind_of(device)
        stream = kind.serving_stream(device)  # this worker's own queue, where the device has several
        if stream is None:

            def predict(inputs: "Inputs") -> Any:
                with kind.no_grad(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    return served.forward(run, _as(inputs, weights, channels_last))

            return predict

        def predict_on_stream(inputs: "Inputs") -> Any:
            # the kind waits for the caller's queue first, and for the batch when the block exits: the answer is
            # complete before LoadGen hears of it
            with (
                kind.serving_batch(device, stream),
                kind.no_grad(),
                torch.autocast(device.type, dtype=dtype, enabled=dtype is not None),
            ):
                return served.forward(run, _as(inputs, weights, channels_last))

        return predict_on_stream


def _precast(model: "torch.nn.Module", dtype: Any) -> None:
    """Store in ``dtype`` the weights autocast would cast to it on every call (convolutions, linear layers).

    Autocast caches a weight's cast only inside one ``with`` block, and serving opens one per batch: each
    batch re-cast every weight (measured: 0.72x a bare loop holding one block, bench/infer_overhead.py).
    Stored once in the autocast dtype, the cast is a no-op and the arithmetic is what autocast runs.
    """
    import torch.nn as nn

    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Linear)
    for m in model.modules():
        if isinstance(m, kinds):
            m.to(dtype)


def _as(inputs: "Inputs", dtype: Any, channels_last: bool) -> "Inputs":
    """The batch in the model's dtype and memory format (floating tensors only: token ids stay integers)."""
    if dtype is None and not channels_last:
        return inputs
    import torch

    def one(x: Any) -> Any:
        if not (torch.is_tensor(x) and x.is_floating_point()):
            return x
        if dtype is not None:
            x = x.to(dtype)
        return x.contiguous(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x

    return tuple(one(x) for x in inputs)


class TorchCompiled(TorchEager):
    name, summary = "compile", "PyTorch with torch.compile (compiled during the calibration probe, not timed)"
    Options = CompileOptions

    def prepare_model(self, model: "torch.nn.Module") -> Any:
        import torch

        from accelbench.params import compile_mode_arg

        return torch.compile(model, dynamic=True, mode=compile_mode_arg(self.compile_mode))


class Null(Backend):
    name, summary = "null", "answers at once without running a model: the harness's own ceiling"
    runs_model = False
    precisions = ("fp32", "amp_fp16", "amp_bf16", "int8")

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
    ) -> Predict | None:
        return None


class Sleep(Null):
    name, summary = "sleep", "sleeps --service-ms per batch: a system with a known capacity, to check the harness"
    Options = SleepOptions

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
        service_ms: float = 1.0,
    ) -> Predict:
        seconds = service_ms / 1000

        def predict(inputs: "Inputs") -> None:
            end = time.perf_counter() + seconds
            time.sleep(seconds)
            while time.perf_counter() < end:  # sleep may return early on some systems
                pass

        return predict
