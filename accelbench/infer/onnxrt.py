"""ONNX Runtime as a serving backend: its CPU and CUDA providers, INT8 through static quantisation, and
TensorRT through its TensorRT provider.

On a GPU, ONNX Runtime silently falls back to its CPU provider when the GPU one is absent or fails to load,
so the provider that must run the model is asked for first and checked after the session starts: a GPU
figure is only taken from the provider it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from accelbench.devices.kind import kind_of
from accelbench.errors import BenchmarkSkipped
from accelbench.infer.backends import Backend, Predict
from accelbench.infer.export import export
from accelbench.params import NoOptions, opt

if TYPE_CHECKING:
    import torch

    from accelbench.infer.served import Inputs, Served

#: --ort-optimization -> ONNX Runtime's GraphOptimizationLevel member
OPTIMIZATION_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


@dataclass(frozen=True)
class OrtOptions(NoOptions):
    ort_optimization: str = opt(
        "all",
        "ONNX Runtime's graph optimisation level (all: its default); its intra-op threads follow --threads",
        choices=tuple(OPTIMIZATION_LEVELS),
    )

    def words(self) -> list[str]:
        return [f"ort-optimization {self.ort_optimization}"] if self.ort_optimization != "all" else []


#: What each device needs from ONNX Runtime: the provider that must run the session, and how to get it.
GPU_PROVIDER_HINT = "pip install 'accelbench[onnx-gpu]' (onnxruntime-gpu, in place of the CPU-only onnxruntime)"
TRT_HINT = "onnxruntime-gpu built with TensorRT, and TensorRT's libraries (pip install tensorrt) on the library path"


class OnnxRuntime(Backend):
    name, summary = "onnxruntime", "ONNX Runtime on the model exported by torch.onnx (pip extra: onnx)"
    needs = ("onnxruntime", "onnx")
    host_inputs = True
    exports_onnx = True
    Options = OrtOptions
    reads = ("batch_size",)
    #: the host, and the kinds whose devices ONNX Runtime has a provider for (DeviceKind.onnx_provider)
    devices: ClassVar[tuple[str, ...] | None] = ("cpu", "cuda")

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
        ort_optimization: str = "all",
        batch_size: int = 8,
    ) -> Predict:
        import onnxruntime as ort

        workdir = self.workdir("onnx")
        # a batch of two: torch.export specialises a dimension of size 1, which would fix the batch at 1
        example = served.collate(calibration[:2]) if len(calibration) > 1 else calibration[0]
        path = export(model.cpu(), example, workdir / "model.onnx", self.export_cache)
        model.to(device)
        shapes = [tuple(t.shape[1:]) for t in example]
        providers = self.providers(ort.get_available_providers(), device, precision, shapes, batch_size)
        self.facts |= {"graph_optimization": OPTIMIZATION_LEVELS[ort_optimization]}
        return _session_predict(self.finish(path, calibration), device, providers, ort_optimization, self.facts)

    def providers(
        self, available: list[str], device: "torch.device", precision: str, shapes: list[tuple[int, ...]], batch: int
    ) -> list[Any]:
        return session_providers(available, device, int8=False)

    def finish(self, path: Path, calibration: list["Inputs"]) -> Path:
        return path


class OnnxRuntimeInt8(OnnxRuntime):
    name = "int8"
    summary = "INT8: ONNX Runtime static QDQ quantization calibrated on the first samples (pip extra: onnx)"
    precisions = ("int8",)

    def providers(
        self, available: list[str], device: "torch.device", precision: str, shapes: list[tuple[int, ...]], batch: int
    ) -> list[Any]:
        if not kind_of(device).onnx_tensorrt:
            return session_providers(available, device, int8=True)
        return tensorrt_providers(available, device.index or 0, "int8", shapes, batch, self.cache_dir)

    def finish(self, path: Path, calibration: list["Inputs"]) -> Path:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        names = _input_names(path)

        # onnxruntime ships no types, so its base class is Any to a type checker: the one subclass of it here
        class Reader(CalibrationDataReader):  # type: ignore[misc]
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


class TensorRT(OnnxRuntime):
    name = "tensorrt"
    summary = (
        "TensorRT through ONNX Runtime's TensorRT provider, on NVIDIA GPUs (fp16: TensorRT may pick fp16 "
        "kernels; int8 is --backend int8); engines built in the calibration probe, not timed"
    )
    precisions = ("fp32", "fp16")
    devices = ("cuda",)

    def providers(
        self, available: list[str], device: "torch.device", precision: str, shapes: list[tuple[int, ...]], batch: int
    ) -> list[Any]:
        return tensorrt_providers(available, device.index or 0, precision, shapes, batch, self.cache_dir)


def _input_names(path: Path) -> list[str]:
    import onnx

    return [i.name for i in onnx.load(str(path), load_external_data=False).graph.input]


def session_providers(available: list[str], device: "torch.device", int8: bool) -> list[Any]:
    """The providers to ask for, first the one that must run the model; BenchmarkSkipped if it is missing.

    ONNX Runtime's CUDA provider runs a QDQ-quantised model with float kernels plus Q/DQ nodes: an INT8
    GPU figure is only taken from TensorRT's provider.
    """
    kind = kind_of(device)
    if not kind.accelerator:
        return ["CPUExecutionProvider"]
    provider = kind.onnx_provider
    if provider is None:
        raise BenchmarkSkipped(f"ONNX Runtime has no execution provider wired for {kind.name} devices here")
    index = device.index or 0
    if int8:
        if not kind.onnx_tensorrt:
            raise BenchmarkSkipped(f"INT8 through ONNX Runtime needs its TensorRT provider, which {kind.name} lacks")
        return tensorrt_providers(available, index, "int8", [], 0, None)
    if provider not in available:
        what = provider.removesuffix("ExecutionProvider")
        raise BenchmarkSkipped(
            f"ONNX Runtime has no {what} provider here ({', '.join(available)}): {GPU_PROVIDER_HINT}"
        )
    return [(provider, {"device_id": index})]


def tensorrt_providers(
    available: list[str],
    index: int,
    precision: str,
    shapes: list[tuple[int, ...]],
    batch: int,
    cache: Path | None,
) -> list[Any]:
    """TensorRT's provider first (CUDA's second, for the nodes TensorRT leaves out), with one shape profile.

    Without a profile TensorRT builds an engine for every new batch size the SUT forms, inside the timed
    run; with one (batch 1 to ``batch``, optimised for ``batch``) the engine is built once, in the probe.
    Engines and timing caches go to the run's cache, so a search's later trials reuse them.
    """
    if "TensorrtExecutionProvider" not in available:
        why = (
            "INT8 on a GPU needs ONNX Runtime's TensorRT provider (its CUDA provider has no int8 convolution "
            "kernels: the quantised model would run float kernels)"
            if precision == "int8"
            else "the tensorrt backend needs ONNX Runtime's TensorRT provider"
        )
        raise BenchmarkSkipped(f"{why}; this onnxruntime offers {', '.join(available)}: {TRT_HINT}")
    options: dict[str, Any] = {
        "device_id": index,
        "trt_fp16_enable": precision == "fp16",
        "trt_int8_enable": precision == "int8",
    }
    if shapes and batch:

        def profile(n: int) -> str:
            return ",".join(f"input_{i}:" + "x".join(str(d) for d in (n, *s)) for i, s in enumerate(shapes))

        options |= {
            "trt_profile_min_shapes": profile(1),
            "trt_profile_opt_shapes": profile(batch),
            "trt_profile_max_shapes": profile(batch),
        }
    if cache is not None:
        where = str(cache / "tensorrt")
        options |= {"trt_engine_cache_enable": True, "trt_engine_cache_path": where}
        options |= {"trt_timing_cache_enable": True, "trt_timing_cache_path": where}
    cuda = [("CUDAExecutionProvider", {"device_id": index})] if "CUDAExecutionProvider" in available else []
    return [("TensorrtExecutionProvider", options), *cuda]


def check_session_provider(session: Any, wanted: list[Any]) -> str:
    """The provider that runs ``session``; BenchmarkSkipped when ONNX Runtime fell back to another."""
    first = wanted[0] if isinstance(wanted[0], str) else wanted[0][0]
    running = session.get_providers()
    if not running or running[0] != first:
        hint = TRT_HINT if first == "TensorrtExecutionProvider" else GPU_PROVIDER_HINT
        raise BenchmarkSkipped(
            f"ONNX Runtime could not start {first} (it runs {', '.join(running) or 'nothing'}): "
            f"check the CUDA/cuDNN libraries onnxruntime-gpu needs; {hint}"
        )
    return first


def _session_predict(
    path: Path, device: "torch.device", providers: list[Any], optimization: str, facts: dict[str, Any]
) -> Predict:
    import onnxruntime as ort
    import torch

    if providers and isinstance(providers[0], tuple) and "trt_engine_cache_path" in providers[0][1]:
        Path(providers[0][1]["trt_engine_cache_path"]).mkdir(parents=True, exist_ok=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimization])
    session = ort.InferenceSession(str(path), options, providers=providers)
    facts["provider"] = check_session_provider(session, providers)
    facts["intra_op_threads"] = options.intra_op_num_threads
    names = [i.name for i in session.get_inputs()]

    def predict(inputs: "Inputs") -> Any:
        out = session.run(None, {n: t.cpu().numpy() for n, t in zip(names, inputs, strict=True)})
        return torch.from_numpy(out[0])

    return predict
