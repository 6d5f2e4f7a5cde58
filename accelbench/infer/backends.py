"""How a served model runs: the backends the system under test can call.

A backend turns a built PyTorch model into ``predict(batch inputs) -> outputs``
(or ``None`` for the harness-only backends). Adding one is one small class and
one line in ``catalog.BACKENDS``::

    class MyBackend(Backend):
        name, summary = "mine", "my runtime"
        def load(self, served, model, device, precision, calibration):
            return lambda inputs: my_runtime(model, inputs)

Backends that need a package accelbench does not install by default name the
pip extra that brings it, and are refused at the command line when it is missing.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from accelbench.errors import BenchmarkSkipped, UsageError

if TYPE_CHECKING:
    import torch

    from accelbench.infer.served import Inputs, Served

Predict = Callable[["Inputs"], Any]


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
    #: the run's settings (InferParams fields) ``load`` takes as keyword arguments, e.g. ``channels_last``
    options: ClassVar[tuple[str, ...]] = ()
    #: where an export may be reused from and kept for the run's next entries (RunContext.cache_dir)
    cache_dir: Path | None = None
    #: what the runtime chose that the record should keep (e.g. OpenVINO's optimal requests), filled by load
    facts: dict[str, Any]

    def __init__(self) -> None:
        self.facts = {}

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
    options = ("channels_last",)

    def prepare_model(self, model: "torch.nn.Module") -> Any:
        return model

    def load(self, served, model, device, precision, calibration, channels_last=False):  # type: ignore[no-untyped-def]
        import torch

        dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(precision)
        weights = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        if weights is not None:
            model = model.to(weights)
        if dtype is not None:
            _precast(model, dtype)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        run = self.prepare_model(model)
        if device.type != "cuda":

            def predict(inputs: "Inputs") -> Any:
                with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    return served.forward(run, _as(inputs, weights, channels_last))

            return predict
        stream = torch.cuda.Stream(device)  # this worker's own: waiting for it never waits for another's work

        def predict_cuda(inputs: "Inputs") -> Any:
            stream.wait_stream(torch.cuda.current_stream(device))  # the batch was copied on the caller's stream
            with (
                torch.cuda.stream(stream),
                torch.inference_mode(),
                torch.autocast("cuda", dtype=dtype, enabled=dtype is not None),
            ):
                out = served.forward(run, _as(inputs, weights, channels_last))
            stream.synchronize()  # the answer is complete before LoadGen hears of it; inputs live until here
            return out

        return predict_cuda


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

    def prepare_model(self, model: "torch.nn.Module") -> Any:
        import torch

        return torch.compile(model, dynamic=True)


class OnnxRuntime(Backend):
    name, summary = "onnxruntime", "ONNX Runtime on the model exported by torch.onnx (pip extra: onnx)"
    needs = ("onnxruntime", "onnx")
    host_inputs = True
    exports_onnx = True

    def load(self, served, model, device, precision, calibration):  # type: ignore[no-untyped-def]

        workdir = Path(tempfile.mkdtemp(prefix="accelbench-onnx-"))
        # a batch of two: torch.export specialises a dimension of size 1, which would fix the batch at 1
        example = served.collate(calibration[:2]) if len(calibration) > 1 else calibration[0]
        path = export(model.cpu(), example, workdir / "model.onnx", self.cache_dir)
        model.to(device)
        return _session_predict(self.finish(path, calibration), device, int8=self.precisions == ("int8",))

    def finish(self, path: Path, calibration: list["Inputs"]) -> Path:
        return path


class OnnxRuntimeInt8(OnnxRuntime):
    name = "int8"
    summary = "INT8: ONNX Runtime static QDQ quantization calibrated on the first samples (pip extra: onnx)"
    precisions = ("int8",)

    def finish(self, path: Path, calibration: list["Inputs"]) -> Path:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        names = _input_names(path)

        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                self.items = iter([{n: t.cpu().numpy() for n, t in zip(names, x, strict=True)} for x in calibration])

            def get_next(self) -> dict[str, Any] | None:
                return next(self.items, None)

        out = path.with_name("model.int8.onnx")
        quantize_static(
            str(path),
            str(out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
        )
        return out


class Null(Backend):
    name, summary = "null", "answers at once without running a model: the harness's own ceiling"
    runs_model = False
    precisions = ("fp32", "amp_fp16", "amp_bf16", "int8")

    def load(self, served, model, device, precision, calibration):  # type: ignore[no-untyped-def]
        return None


class Sleep(Null):
    name, summary = "sleep", "sleeps --service-ms per batch: a system with a known capacity, to check the harness"

    def __init__(self, service_ms: float = 1.0) -> None:
        super().__init__()
        self.service_ms = service_ms

    def load(self, served, model, device, precision, calibration):  # type: ignore[no-untyped-def]
        seconds = self.service_ms / 1000

        def predict(inputs: "Inputs") -> None:
            end = time.perf_counter() + seconds
            time.sleep(seconds)
            while time.perf_counter() < end:  # sleep may return early on some systems
                pass

        return predict


def export(model: "torch.nn.Module", example: "Inputs", path: Path, cache_dir: Path | None = None) -> Path:
    """torch.onnx's exporter with a dynamic batch dimension, so any batch the SUT forms runs.

    With ``cache_dir``, an export of the same weights and input shapes made earlier in the run is reused: a
    search serves one model on several ONNX backends and batches, and each export of ResNet-50 takes 10 s.
    """
    cached = cache_dir / f"{_export_key(model, example)}.onnx" if cache_dir is not None else None
    if cached is not None and cached.is_file():
        shutil.copyfile(cached, path)
        return path
    _export(model, example, path)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        shutil.copyfile(path, partial)
        partial.replace(cached)  # atomic: a killed entry never leaves half a file under the final name
    return path


def _export_key(model: "torch.nn.Module", example: "Inputs") -> str:
    """Every weight and buffer, the inputs' shapes and dtypes, and the torch version: what the export depends on."""
    import hashlib

    import torch

    h = hashlib.blake2b(torch.__version__.encode(), digest_size=16)
    for name, t in model.state_dict().items():
        h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    for t in example:
        h.update(f"{tuple(t.shape[1:])}{t.dtype}".encode())
    return h.hexdigest()


def _export(model: "torch.nn.Module", example: "Inputs", path: Path) -> None:
    import torch

    batch = torch.export.Dim("batch", min=1, max=4096)
    example = tuple(t.cpu() for t in example)
    names = [f"input_{i}" for i in range(len(example))]
    try:
        torch.onnx.export(
            model.eval(),
            example,
            str(path),
            dynamo=True,
            input_names=names,
            dynamic_shapes=tuple({0: batch} for _ in example),
            external_data=False,
            verbose=False,
        )
    except Exception as exc:  # noqa: BLE001 - an exporter failure is a property of the model, said in one line
        raise UsageError(
            f"torch.onnx could not export this model for ONNX Runtime: {str(exc).splitlines()[0]}"
        ) from None


def _input_names(path: Path) -> list[str]:
    import onnx

    return [i.name for i in onnx.load(str(path), load_external_data=False).graph.input]


#: What each device needs from ONNX Runtime: the provider that must run the session, and how to get it.
GPU_PROVIDER_HINT = "pip install 'accelbench[onnx-gpu]' (onnxruntime-gpu, in place of the CPU-only onnxruntime)"


def session_providers(available: list[str], device: "torch.device", int8: bool) -> list[Any]:
    """The providers to ask for, first the one that must run the model; BenchmarkSkipped if it is missing.

    On a GPU, ONNX Runtime silently falls back to its CPU provider when the GPU one is absent or fails
    to load, and its CUDA provider runs a QDQ-quantised model with float kernels plus Q/DQ nodes: so a GPU
    figure is only taken from CUDA's provider, and an INT8 GPU figure only from TensorRT's.
    """
    if device.type != "cuda":
        return ["CPUExecutionProvider"]
    index = device.index or 0
    if int8:
        if "TensorrtExecutionProvider" not in available:
            raise BenchmarkSkipped(
                "INT8 on a GPU needs ONNX Runtime's TensorRT provider (its CUDA provider has no int8 "
                "convolution kernels: the quantised model would run float kernels); "
                f"this onnxruntime offers {', '.join(available)}"
            )
        return [("TensorrtExecutionProvider", {"device_id": index, "trt_int8_enable": True})]
    if "CUDAExecutionProvider" not in available:
        raise BenchmarkSkipped(f"ONNX Runtime has no CUDA provider here ({', '.join(available)}): {GPU_PROVIDER_HINT}")
    return [("CUDAExecutionProvider", {"device_id": index})]


def check_session_provider(session: Any, wanted: list[Any]) -> str:
    """The provider that runs ``session``; BenchmarkSkipped when ONNX Runtime fell back to another."""
    first = wanted[0] if isinstance(wanted[0], str) else wanted[0][0]
    running = session.get_providers()
    if not running or running[0] != first:
        raise BenchmarkSkipped(
            f"ONNX Runtime could not start {first} (it runs {', '.join(running) or 'nothing'}): "
            f"check the CUDA/cuDNN libraries onnxruntime-gpu needs; {GPU_PROVIDER_HINT}"
        )
    return first


def _session_predict(path: Path, device: "torch.device", int8: bool = False) -> Predict:
    import onnxruntime as ort
    import torch

    providers = session_providers(ort.get_available_providers(), device, int8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(str(path), options, providers=providers)
    check_session_provider(session, providers)
    names = [i.name for i in session.get_inputs()]

    def predict(inputs: "Inputs") -> Any:
        out = session.run(None, {n: t.cpu().numpy() for n, t in zip(names, inputs, strict=True)})
        return torch.from_numpy(out[0])

    return predict
