"""The serving backends by name: the built-in ones, and a user's ``package.module:Class``."""

from __future__ import annotations

from accelbench.errors import UsageError
from accelbench.infer.backends import Backend, Null, Sleep, TorchCompiled, TorchEager
from accelbench.infer.onnxrt import OnnxRuntime, OnnxRuntimeInt8, TensorRT
from accelbench.infer.openvino import OpenVino
from accelbench.plugins import load_class, with_installed

BACKENDS: dict[str, type[Backend]] = {
    b.name: b for b in (TorchEager, TorchCompiled, OnnxRuntime, OnnxRuntimeInt8, TensorRT, OpenVino, Null, Sleep)
}


def backend_class(name: str) -> type[Backend]:
    """A built-in backend by name, one an installed package declares (:mod:`accelbench.plugins`), or a user's
    ``package.module:Class`` (a :class:`Backend` subclass)."""
    if ":" in name:
        return load_class(name, Backend, "backend")
    known = with_installed("backend", BACKENDS)
    if name not in known:
        raise UsageError(f"unknown backend {name!r}: choose one of {', '.join(known)}, or package.module:Class")
    found = known[name]
    return load_class(found, Backend, "backend") if isinstance(found, str) else found


def builtin_backends() -> dict[str, type[Backend]]:
    """The backends by name, built-in and installed (their options are flags of ``accelbench infer``)."""
    return {name: backend_class(name) for name in with_installed("backend", BACKENDS)}


def backend(name: str) -> Backend:
    """A backend to load a model with (see :func:`backend_class`)."""
    return backend_class(name)()
