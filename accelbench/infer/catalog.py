"""The serving backends by name: the built-in ones, and a user's ``package.module:Class``."""

from __future__ import annotations

from accelbench.errors import UsageError
from accelbench.infer.backends import Backend, Null, Sleep, TorchCompiled, TorchEager
from accelbench.infer.onnxrt import OnnxRuntime, OnnxRuntimeInt8, TensorRT
from accelbench.infer.openvino import OpenVino

BACKENDS: dict[str, type[Backend]] = {
    b.name: b for b in (TorchEager, TorchCompiled, OnnxRuntime, OnnxRuntimeInt8, TensorRT, OpenVino, Null, Sleep)
}


def backend_class(name: str) -> type[Backend]:
    """A built-in backend by name, or a user's ``package.module:Class`` (a :class:`Backend` subclass)."""
    if ":" in name:
        from accelbench.plugins import load_class

        return load_class(name, Backend, "backend")
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}, or package.module:Class")
    return BACKENDS[name]


def backend(name: str) -> Backend:
    """A backend to load a model with (see :func:`backend_class`)."""
    return backend_class(name)()
