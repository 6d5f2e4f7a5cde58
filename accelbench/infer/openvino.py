"""OpenVINO as a serving backend on the shared ONNX export. Its precision hint is always set from ``--precision``
(its own default on an AMX CPU is bf16, which would make an "fp32" figure a bf16 one); its performance hint
follows the scenario; ``--streams N`` puts N infer requests in flight on one device, counted as streams, never
as devices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.errors import BenchmarkSkipped
from accelbench.infer.backends import Backend, Predict
from accelbench.infer.export import export

if TYPE_CHECKING:
    import torch

    from accelbench.infer.served import Inputs, Served

#: accelbench's precision -> OpenVINO's INFERENCE_PRECISION_HINT and the capability that must be listed
_HINTS = {"fp32": ("f32", "FP32"), "bf16": ("bf16", "BF16"), "fp16": ("f16", "FP16")}


class OpenVino(Backend):
    name = "openvino"
    summary = "OpenVINO on the model exported by torch.onnx, precision hint set explicitly (pip extra: openvino)"
    needs = ("openvino", "openvino")
    host_inputs = True
    exports_onnx = True
    precisions = ("fp32", "bf16", "fp16")
    reads = ("scenario",)
    devices = ("cpu",)

    def __init__(self) -> None:
        super().__init__()
        self._compiled: Any = None

    def unsupported(self, precision: str) -> str | None:
        why = super().unsupported(precision)
        if why or precision == "fp32":
            return why
        import openvino as ov

        capabilities = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        if _HINTS[precision][1] not in capabilities:
            return (
                f"OpenVINO's CPU plugin has no {precision} arithmetic here (it lists {', '.join(capabilities)}): "
                "use --precision fp32"
            )
        return None

    def load(
        self,
        served: "Served",
        model: "torch.nn.Module",
        device: "torch.device",
        precision: str,
        calibration: list["Inputs"],
        scenario: str = "offline",
    ) -> Predict:
        if device.type != "cpu":
            raise BenchmarkSkipped("the openvino backend serves on the CPU here (its GPU plugin is not wired)")
        if self._compiled is None:
            self._compiled = self._compile(served, model, calibration, precision, scenario)
        request = self._compiled.create_infer_request()
        self.facts["requests_in_flight"] = self.facts.get("requests_in_flight", 0) + 1  # one per worker

        def predict(inputs: "Inputs") -> Any:
            import torch

            request.infer([x.numpy() for x in inputs])
            return torch.from_numpy(request.get_output_tensor(0).data.copy())

        return predict

    def _compile(self, served: Any, model: Any, calibration: list["Inputs"], precision: str, scenario: str) -> Any:
        import openvino as ov

        workdir = self.workdir("openvino")
        # a batch of two, as for ONNX Runtime: torch.export would specialise a batch of 1
        example = served.collate(calibration[:2]) if len(calibration) > 1 else calibration[0]
        path = export(model.cpu(), example, workdir / "model.onnx", self.export_cache)
        hint = "THROUGHPUT" if scenario in ("offline", "server") else "LATENCY"
        config = {"PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": _HINTS[precision][0]}
        compiled = ov.Core().compile_model(str(path), "CPU", config)
        self.facts |= {
            "performance_hint": hint,
            "inference_precision": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
            "streams": int(compiled.get_property("NUM_STREAMS")),
            # as many requests in flight as this keeps every stream busy (--streams N puts N in flight)
            "optimal_requests": int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")),
        }
        return compiled


def optimal_requests() -> int:
    """The requests in flight OpenVINO's throughput hint wants on this CPU, from a one-layer model.

    The number follows the streams the plugin makes for this machine's cores; a search starts OpenVINO
    there rather than at one request, which would leave all but one stream idle.
    """
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([1, 8], np.float32)
    compiled = ov.Core().compile_model(ov.Model([ops.relu(x)], [x]), "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    return int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
