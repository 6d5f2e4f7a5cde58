"""User extensions named ``package.module:Class`` (a workload, a serving backend), loaded and type-checked."""

from __future__ import annotations

import importlib
from typing import TypeVar

from accelbench.errors import UsageError

T = TypeVar("T")


def load_class(path: str, base: type[T], kind: str) -> type[T]:
    module, _, name = path.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {kind} {path!r}: {exc}") from None
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise UsageError(f"{path!r} is not a subclass of {base.__module__}.{base.__qualname__}")
    return obj
